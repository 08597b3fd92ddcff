// Private to linear_match.cc / linear_geometry.cc: how one linear node maps onto a oneDNN primitive.
//
// linear_geometry() turns a Conv / ConvTranspose / MatMul / Einsum node into oneDNN dims (and
// strides where the user memory is not row-major in oneDNN's dim order, e.g. ConvTranspose
// weights [C, M, k..] read as [M, C, k..]) plus the facts match_linear needs to place epilogue
// operands. After a successful call, `fields` holds the description fields of the primitive:
//   op, src_dims, weights_dims, dst_dims, [src_strides], [weights_strides], [dst_strides], [conv]
// where conv = {strides, dilations (oneDNN: d-1), pads_begin, pads_end, group}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace korch::linear_detail {

struct LinearGeometry {
  std::string reason;        // non-empty: the node is not supported (and why)
  nlohmann::json fields;
  Shape src_dims, weights_dims;
  Shape onnx_out;            // the node's ONNX output shape
  Shape dnnl_dst;            // the same memory as oneDNN dst dims
  bool channel_first = false;  // Conv-like: channels are dim 1 (else MatMul-like: the last dim)
  bool channels_last = false;  // a channels-last Conv: the ONNX shapes are [N, spatial.., C], the
                               // oneDNN dims NCHW over the same memory (dst_strides given)
  bool rows_collapsed = false; // MatMul [b..,M,K] x [K,N] run as [b..*M, K] x [K, N]
  bool unit_dims_dropped = false;  // the ONNX output lacks unit dims the oneDNN dst has
};

LinearGeometry linear_geometry(const Graph& g, const Node& n);

}  // namespace korch::linear_detail
