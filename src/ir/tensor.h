// Shapes, tensor types and dense host tensors.
//
// Shapes are fully static (Korch compiles for fixed input shapes; symbolic dims are fixed by the
// user with --shape before anything else runs). A Tensor is a dtype + shape + a shared, 64-byte
// aligned buffer in row-major order. Copying a Tensor shares the buffer; treat a Tensor as
// immutable once it is shared (clone() before writing into one you did not create).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "support/error.h"

namespace korch {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[1,3,224,224]"
// Row-major strides in elements.
std::vector<int64_t> shape_strides(const Shape& s);
// Channels-last permutations of a rank-r tensor (r >= 3): channels_last_perm = [0, 2, .., r-1, 1]
// (NCHW -> NHWC as a Transpose perm), channels_first_perm = its inverse [0, r-1, 1, .., r-2].
std::vector<int64_t> channels_last_perm(int64_t rank);
std::vector<int64_t> channels_first_perm(int64_t rank);
// out[i] = s[perm[i]] (the output shape of Transpose(perm)).
Shape permute_shape(const Shape& s, const std::vector<int64_t>& perm);
// Numpy multidirectional broadcasting; throws korch::Error (kInvalid) when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);
// Normalises a possibly negative axis against `rank`; throws when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank);

struct TensorType {
  DType dtype = DType::kUndefined;
  Shape shape;
  int64_t numel() const { return shape_numel(shape); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t byte_size() const { return numel() * static_cast<int64_t>(dtype_size(dtype)); }
  bool operator==(const TensorType&) const = default;
};
std::string type_str(const TensorType& t);  // "f32[1,3,224,224]"

class Tensor {
 public:
  Tensor() = default;
  // Zero-initialised tensor.
  Tensor(DType dtype, Shape shape);
  explicit Tensor(const TensorType& type) : Tensor(type.dtype, type.shape) {}

  template <typename T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape);
  template <typename T>
  static Tensor scalar(T v) { return from_vector<T>({v}, {}); }

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  TensorType type() const { return {dtype_, shape_}; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_.at(static_cast<size_t>(i)); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * static_cast<size_t>(dtype_size(dtype_)); }
  bool defined() const { return dtype_ != DType::kUndefined; }

  std::byte* raw() { return data_.get(); }
  const std::byte* raw() const { return data_.get(); }

  // Typed access; KORCH_CHECKs that T matches the dtype.
  template <typename T> T* data() { check_type(dtype_of<T>::value); return reinterpret_cast<T*>(data_.get()); }
  template <typename T> const T* data() const { check_type(dtype_of<T>::value); return reinterpret_cast<const T*>(data_.get()); }
  template <typename T> std::span<T> span() { return {data<T>(), static_cast<size_t>(numel())}; }
  template <typename T> std::span<const T> span() const { return {data<T>(), static_cast<size_t>(numel())}; }

  // Same buffer, new shape (numel must match).
  Tensor reshaped(Shape shape) const;
  // A new buffer holding Transpose(perm) of this tensor.
  Tensor transposed(const std::vector<int64_t>& perm) const;
  Tensor clone() const;

  // Element i converted to double / int64 (any numeric dtype). For shape arithmetic and tests.
  double get_as_double(int64_t i) const;
  int64_t get_as_int(int64_t i) const;
  // All elements as int64 (any integer or float dtype); for shape-carrying tensors.
  std::vector<int64_t> to_int_vector() const;
  std::vector<float> to_float_vector() const;  // any numeric dtype

  bool bitwise_equal(const Tensor& other) const;
  friend bool operator==(const Tensor& a, const Tensor& b) { return a.bitwise_equal(b); }

 private:
  void check_type(DType t) const;
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<std::byte[]> data_;
};

template <typename T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  Tensor t(dtype_of<T>::value, std::move(shape));
  KORCH_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_vector: {} values for shape {}",
              values.size(), shape_str(t.shape()));
  T* d = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  return t;
}
template <>
Tensor Tensor::from_vector<bool>(const std::vector<bool>& values, Shape shape);

// Element-type dispatch: calls f(T{}) with T the C++ type of `t`. Types not in the list throw
// kUnsupported naming `what` (typically the op) and the dtype.
template <typename... Ts, typename F>
auto dispatch_dtype(DType t, const char* what, F&& f) {
  using R = decltype(f(std::tuple_element_t<0, std::tuple<Ts...>>{}));
  if constexpr (std::is_void_v<R>) {
    bool done = ((t == dtype_of<Ts>::value ? (f(Ts{}), true) : false) || ...);
    if (!done) fail_unsupported("{}: element type {} is not supported", what, dtype_name(t));
  } else {
    R out{};
    bool done = ((t == dtype_of<Ts>::value ? (out = f(Ts{}), true) : false) || ...);
    if (!done) fail_unsupported("{}: element type {} is not supported", what, dtype_name(t));
    return out;
  }
}

// Common dispatch sets.
#define KORCH_FLOAT_TYPES float, double
#define KORCH_INT_TYPES int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
#define KORCH_NUMERIC_TYPES KORCH_FLOAT_TYPES, KORCH_INT_TYPES
#define KORCH_ALL_TYPES KORCH_NUMERIC_TYPES, bool, Float16, BFloat16

}  // namespace korch
