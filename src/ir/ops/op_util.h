// Small helpers shared by the operator families in src/ir/ops/.
#pragma once

#include <cmath>
#include <type_traits>

#include "ir/op_registry.h"

namespace korch::ops {

// Strides of `in` (row-major) laid over the broadcast result `out`: 0 along broadcast dims.
// `in` is right-aligned against `out` (numpy rules).
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out);

// Calls f(out_index, in_offsets...) for every element of `out` in row-major order, where each
// in_offset is the element offset into the corresponding (broadcast) input.
template <typename F>
void for_each_broadcast(const Shape& out, const std::vector<std::vector<int64_t>>& in_strides, F&& f) {
  const int64_t rank = static_cast<int64_t>(out.size());
  const int64_t n = shape_numel(out);
  const size_t k = in_strides.size();
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  std::vector<int64_t> off(k, 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, off);
    for (int64_t d = rank - 1; d >= 0; --d) {
      size_t du = static_cast<size_t>(d);
      if (++idx[du] < out[du]) {
        for (size_t j = 0; j < k; ++j) off[j] += in_strides[j][du];
        break;
      }
      for (size_t j = 0; j < k; ++j) off[j] -= in_strides[j][du] * (out[du] - 1);
      idx[du] = 0;
    }
  }
}

// Float conversions that also work for Float16/BFloat16.
template <typename T>
inline float to_f32(T v) { return static_cast<float>(v); }
template <typename T>
inline T from_f32(float v) { return static_cast<T>(v); }

// Shorthand for a single-output type.
inline std::vector<TensorType> one(DType t, Shape s) { return {TensorType{t, std::move(s)}}; }

// Reads an "axes"-like int list from attribute `attr` (older opsets) or from constant input
// `input_index` (newer opsets); returns nullopt when neither is given.
std::optional<std::vector<int64_t>> axes_from_attr_or_input(const OpInferContext& ctx, const char* attr,
                                                            int input_index);
std::optional<std::vector<int64_t>> axes_from_attr_or_input(const OpEvalContext& ctx, const char* attr,
                                                            int input_index);

}  // namespace korch::ops
