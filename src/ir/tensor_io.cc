#include "ir/tensor_io.h"

#include <cstring>

namespace korch {

namespace {
struct DescrEntry { const char* descr; DType dtype; };
constexpr DescrEntry kDescrs[] = {
    {"<f4", DType::kFloat32}, {"<f8", DType::kFloat64}, {"<f2", DType::kFloat16}, {"<i1", DType::kInt8},
    {"|i1", DType::kInt8},    {"<i2", DType::kInt16},   {"<i4", DType::kInt32},   {"<i8", DType::kInt64},
    {"|u1", DType::kUInt8},   {"<u1", DType::kUInt8},   {"<u2", DType::kUInt16},  {"<u4", DType::kUInt32},
    {"<u8", DType::kUInt64},  {"|b1", DType::kBool},
};
}  // namespace

Tensor tensor_from_npy(const NpyArray& a, const std::string& path) {
  for (const auto& e : kDescrs) {
    if (a.descr != e.descr) continue;
    Tensor t(e.dtype, a.shape);
    KORCH_CHECK(t.nbytes() == a.data.size());
    if (!a.data.empty()) std::memcpy(t.raw(), a.data.data(), a.data.size());
    return t;
  }
  fail_unsupported("{}: .npy dtype '{}' is not supported", path, a.descr);
}

NpyArray tensor_to_npy(const Tensor& t) {
  NpyArray a;
  for (const auto& e : kDescrs)
    if (e.dtype == t.dtype()) { a.descr = e.descr; break; }
  if (a.descr.empty()) fail_unsupported("cannot write a {} tensor as .npy", dtype_name(t.dtype()));
  a.shape = t.shape();
  a.data.resize(t.nbytes());
  if (t.nbytes()) std::memcpy(a.data.data(), t.raw(), t.nbytes());
  return a;
}

Tensor load_npy(const std::string& path) { return tensor_from_npy(read_npy(path), path); }
void save_npy(const std::string& path, const Tensor& t) { write_npy(path, tensor_to_npy(t)); }

}  // namespace korch
