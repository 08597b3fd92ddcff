// Small helpers shared by the operator families in src/ir/ops/.
#pragma once

#include <cmath>
#include <string_view>
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

// f16/bf16: storage-only types, converted through float.
template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

inline bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

// Element value as double (f16/bf16 through float) and back (one rounding for f16/bf16).
template <typename T>
inline double to_double(T v) {
  if constexpr (kIsHalf<T>) return static_cast<double>(static_cast<float>(v));
  else return static_cast<double>(v);
}
template <typename T>
inline T from_double(double v) {
  if constexpr (kIsHalf<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// Type elementwise math runs in: float for f16/bf16, the type itself otherwise.
template <typename T>
using compute_t = std::conditional_t<kIsHalf<T>, float, T>;
// Loads an element into compute_t<T>; stores any compute value into element type R.
template <typename T>
inline compute_t<T> ld(T v) {
  if constexpr (kIsHalf<T>) return static_cast<float>(v);
  else return v;
}
template <typename R, typename V>
inline R st(V v) {
  if constexpr (kIsHalf<R>) return R(static_cast<float>(v));
  else return static_cast<R>(v);
}

// Throws kUnsupported "<op>: element type <t> is not supported" (the message every op uses).
[[noreturn]] void fail_element_type(std::string_view op, DType t);
// Fails (as above) unless `t` is f16, bf16, f32 or f64.
inline void check_float_type(std::string_view op, DType t) {
  if (!is_float(t)) fail_element_type(op, t);
}

// Per-spatial-dim int attribute of a Conv/Pool-like op: `n` values (default `def` each), each
// >= min_value; fails otherwise.
std::vector<int64_t> spatial_ints(const Attributes& attrs, const char* name, size_t n, int64_t def, int64_t min_value);

// An OpDef from its name, opset range and functions (the common case: foldable, no type folding).
OpDef make_op(const char* name, int min_opset, InferFn infer, EvalFn eval, int max_opset = kMaxOpset);

// Shorthand for a single-output type.
inline std::vector<TensorType> one(DType t, Shape s) { return {TensorType{t, std::move(s)}}; }

// Reads an "axes"-like int list from attribute `attr` (older opsets) or from constant input
// `input_index` (newer opsets); returns nullopt when neither is given.
std::optional<std::vector<int64_t>> axes_from_attr_or_input(const OpInferContext& ctx, const char* attr,
                                                            int input_index);
std::optional<std::vector<int64_t>> axes_from_attr_or_input(const OpEvalContext& ctx, const char* attr,
                                                            int input_index);

}  // namespace korch::ops
