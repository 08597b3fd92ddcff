// Primitive kinds (operator fission, Korch paper section 3).
//
// Primitives are ONNX operators with one parallelism and access pattern each, living in the same
// Graph IR as operators (as in the paper): the interpreter, the text form, the verifier and the
// ONNX writer work on primitive graphs unchanged, and onnxruntime can run a primitive graph.
// What makes a node a primitive is its op type plus a shape condition:
//
//   elementwise  unary/binary/ternary math whose non-scalar operands all have the output shape
//                (scalar constants are part of the expression, not operands to broadcast);
//                activations (Gelu, HardSwish, Mish, ...) stay single elementwise expressions
//   broadcast    Expand
//   reduce       ReduceSum/Mean/Max/Min/Prod along axes; ArgMax/ArgMin. Windowed reductions
//                (MaxPool, AveragePool, LpPool) are reduce primitives with a window: their
//                parallelism (one output per window) and access pattern (a strided window) are
//                those of a reduction, and splitting them into window-gather + reduce would
//                materialise k^2 copies of the input for no kernel that could use it. A 2-D
//                MaxPool whose window is large against its stride (separable_max_pool) is an
//                operator: fission splits it into a column pool and a row pool (the max over a
//                rectangle is the max over its columns of the max over its rows), kh + kw
//                comparisons per output instead of kh * kw
//   layout       index remapping only: Reshape, Transpose, Slice, Concat, Split, Pad, Gather with
//                constant indices, DepthToSpace, SpaceToDepth, Tile, Identity, ...
//   linear       MatMul, Conv and ConvTranspose without a bias, Einsum: linear in each input, go
//                to a library (a Conv with a bias is affine: fission splits off the bias Add).
//                A ConvTranspose whose windows do not overlap (patch_conv_transpose: stride =
//                kernel, no padding) is an operator: fission writes it as one MatMul of each
//                input pixel with the weights and a layout step that places the patches
//                ConvInteger and MatMulInteger (int8 operands, int32 result) without a weight zero
//                point: linear in (x - x_zero_point) and w. QuantizeLinear / DequantizeLinear per
//                tensor (constant scalar scale and zero point) are elementwise; the other
//                quantized operators (per-axis or computed scales, DynamicQuantizeLinear,
//                QLinearConv, QLinearMatMul) are split by fission into these plus elementwise
//                scaling (fission/quant.cc)
//   opaque       everything else (TopK, NonMaxSuppression, LSTM, GridSample...): kept whole
//
// A node that is none of these (Softmax, LayerNormalization, Gemm, an Add with implicit
// broadcasting...) is an operator that fission must split.
#pragma once

#include <map>
#include <set>
#include <string>

#include "ir/graph.h"

namespace korch {

enum class PrimitiveKind { kElementwise, kBroadcast, kReduce, kLayout, kLinear, kOpaque, kOperator };

const char* primitive_kind_name(PrimitiveKind k);
// A MaxPool over 2 spatial dims (one output, explicit or VALID padding) whose two 1-D passes do at
// most half the comparisons of the 2-D window: kh*OH*W + kw*OH*OW <= kh*kw*OH*OW / 2 (so 5x5 and
// larger at stride 1, not 3x3).
bool separable_max_pool(const Graph& g, const Node& n);
// A ConvTranspose (group 1, static rank >= 3) whose output windows tile the output exactly: strides
// equal to the kernel, dilations 1, no pads, output_padding or output_shape beyond that tiling.
// Every output pixel is then one input pixel times one weight column (a MatMul), where a library
// deconvolution pays for generality (oneDNN 2.7's direct deconvolution took 273 ms for a 24-channel
// 2x2 one on a 160x160 input, a 15 MFLOP product).
bool patch_conv_transpose(const Graph& g, const Node& n);
bool patch_conv_transpose(const Attributes& attrs, const TensorType& x, const Shape& w);
PrimitiveKind primitive_kind(const Graph& g, const Node& n);
// ConvInteger / MatMulInteger (inputs x, w, x_zero_point, w_zero_point): whether the weight zero
// point is absent or a constant of zeros (then the node is a linear primitive).
bool weight_zero_point_is_zero(const Graph& g, const Node& n);
// The operators counted as elementwise primitives: every backend's loop kernels must cover them
// or state why not (tests/codegen/loop_ops_test.cc checks it).
const std::set<std::string>& elementwise_primitive_ops();
// Counts by kind name over all nodes.
std::map<std::string, int> primitive_counts(const Graph& g);

}  // namespace korch
