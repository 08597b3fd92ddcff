// Internal to the layout family (layout*.cc): helpers defined in layout.cc and the parts' entry points.
#pragma once

#include "ir/ops/op_util.h"

namespace korch {

void register_layout_gather_ops(OpRegistry& r);  // layout_gather.cc
void register_layout_pad_ops(OpRegistry& r);     // layout_pad.cc

namespace layout_internal {  // layout.cc

// dtype_size(t); fails (kUnsupported) for types without a fixed element size.
int64_t elem_size(DType t);
// Fails unless `t` is int32 or int64 (`what` names the input).
void check_index_type(const TensorType& t, const char* what);
// All elements of an int32/int64 tensor as int64.
std::vector<int64_t> index_values(const Tensor& t);
// Normalises index `i` against an axis of size `n` (negative counts from the end); fails when
// out of range.
int64_t fix_index(int64_t i, int64_t n);
// N-d copy of `shape` elements of `es` bytes between arbitrary element strides.
void strided_copy(std::byte* dst, const std::vector<int64_t>& dst_strides, const std::byte* src,
                  const std::vector<int64_t>& src_strides, const Shape& shape, int64_t es);

}  // namespace layout_internal
}  // namespace korch
