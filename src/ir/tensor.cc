#include "ir/tensor.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "ir/ops/layout_internal.h"

namespace korch {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

std::string type_str(const TensorType& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

std::vector<int64_t> shape_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = static_cast<int64_t>(s.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

std::vector<int64_t> channels_last_perm(int64_t rank) {
  KORCH_CHECK(rank >= 3, "channels-last needs rank >= 3, got {}", rank);
  std::vector<int64_t> p{0};
  for (int64_t i = 2; i < rank; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}

std::vector<int64_t> channels_first_perm(int64_t rank) {
  KORCH_CHECK(rank >= 3, "channels-last needs rank >= 3, got {}", rank);
  std::vector<int64_t> p{0, rank - 1};
  for (int64_t i = 1; i < rank - 1; ++i) p.push_back(i);
  return p;
}

Shape permute_shape(const Shape& s, const std::vector<int64_t>& perm) {
  KORCH_CHECK(perm.size() == s.size(), "perm of {} values for shape {}", perm.size(), shape_str(s));
  Shape out;
  for (int64_t p : perm) out.push_back(s.at(static_cast<size_t>(p)));
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else fail("shapes {} and {} cannot be broadcast together", shape_str(a), shape_str(b));
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    fail("axis {} is out of range for rank {}", axis, rank);
  return axis < 0 ? axis + rank : axis;
}

namespace {
std::shared_ptr<std::byte[]> alloc_zeroed(size_t bytes) {
  size_t n = std::max<size_t>(bytes, 1);
  auto* p = static_cast<std::byte*>(::operator new[](n, std::align_val_t(64)));
  std::memset(p, 0, n);
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t(64)); });
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  KORCH_CHECK(dtype_size(dtype) > 0, "tensor of dtype {}", dtype_name(dtype));
  for (int64_t d : shape_) if (d < 0) fail("negative dimension in shape {}", shape_str(shape_));
  data_ = alloc_zeroed(nbytes());
}

template <>
Tensor Tensor::from_vector<bool>(const std::vector<bool>& values, Shape shape) {
  Tensor t(DType::kBool, std::move(shape));
  KORCH_CHECK(static_cast<int64_t>(values.size()) == t.numel());
  bool* d = t.data<bool>();
  for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  return t;
}

void Tensor::check_type(DType t) const {
  KORCH_CHECK(t == dtype_, "tensor accessed as {} but holds {}", dtype_name(t), dtype_name(dtype_));
}

Tensor Tensor::reshaped(Shape shape) const {
  KORCH_CHECK(shape_numel(shape) == numel(), "reshape {} -> {}", shape_str(shape_), shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::transposed(const std::vector<int64_t>& perm) const {
  Tensor out(dtype_, permute_shape(shape_, perm));
  const std::vector<int64_t> in_st = shape_strides(shape_);
  std::vector<int64_t> src;  // input stride of each output dim
  for (int64_t p : perm) src.push_back(in_st[static_cast<size_t>(p)]);
  layout_internal::strided_copy(out.raw(), shape_strides(out.shape_), raw(), src, out.shape_,
                                static_cast<int64_t>(dtype_size(dtype_)));
  return out;
}

Tensor Tensor::clone() const {
  if (!defined()) return {};
  Tensor t(dtype_, shape_);
  std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

double Tensor::get_as_double(int64_t i) const {
  KORCH_CHECK(i >= 0 && i < numel());
  return dispatch_dtype<KORCH_ALL_TYPES>(dtype_, "get_as_double", [&](auto tag) -> double {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
      return static_cast<double>(static_cast<float>(data<T>()[i]));
    else
      return static_cast<double>(data<T>()[i]);
  });
}

int64_t Tensor::get_as_int(int64_t i) const {
  KORCH_CHECK(i >= 0 && i < numel());
  return dispatch_dtype<KORCH_ALL_TYPES>(dtype_, "get_as_int", [&](auto tag) -> int64_t {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
      return static_cast<int64_t>(static_cast<float>(data<T>()[i]));
    else
      return static_cast<int64_t>(data<T>()[i]);
  });
}

std::vector<int64_t> Tensor::to_int_vector() const {
  std::vector<int64_t> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = get_as_int(i);
  return v;
}

std::vector<float> Tensor::to_float_vector() const {
  std::vector<float> v(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(get_as_double(i));
  return v;
}

bool Tensor::bitwise_equal(const Tensor& other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         (nbytes() == 0 || std::memcmp(raw(), other.raw(), nbytes()) == 0);
}

}  // namespace korch
