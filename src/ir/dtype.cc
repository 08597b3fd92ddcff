#include "ir/dtype.h"

#include <cmath>

namespace korch {

int dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kInt32: case DType::kUInt32: return 4;
    case DType::kFloat64: case DType::kInt64: case DType::kUInt64: return 8;
    case DType::kFloat16: case DType::kBFloat16: case DType::kInt16: case DType::kUInt16: return 2;
    case DType::kInt8: case DType::kUInt8: case DType::kBool: return 1;
    case DType::kUndefined: case DType::kString: return 0;
  }
  return 0;
}

namespace {
struct NameEntry { DType t; std::string_view name; };
constexpr NameEntry kNames[] = {
    {DType::kFloat32, "f32"}, {DType::kFloat16, "f16"}, {DType::kBFloat16, "bf16"},
    {DType::kFloat64, "f64"}, {DType::kInt8, "i8"},     {DType::kInt16, "i16"},
    {DType::kInt32, "i32"},   {DType::kInt64, "i64"},   {DType::kUInt8, "u8"},
    {DType::kUInt16, "u16"},  {DType::kUInt32, "u32"},  {DType::kUInt64, "u64"},
    {DType::kBool, "bool"},   {DType::kString, "string"}, {DType::kUndefined, "undef"},
};
}  // namespace

std::string_view dtype_name(DType t) {
  for (const auto& e : kNames) if (e.t == t) return e.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& e : kNames) if (e.name == name) return e.t;
  return std::nullopt;
}

std::optional<DType> dtype_from_onnx(int code) {
  switch (code) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 9: case 10: case 11: case 12:
    case 13: case 16:
      return static_cast<DType>(code);
    default: return std::nullopt;
  }
}

bool is_float(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kFloat16 || t == DType::kBFloat16;
}
bool is_signed_integer(DType t) {
  return t == DType::kInt8 || t == DType::kInt16 || t == DType::kInt32 || t == DType::kInt64;
}
std::optional<IntRange> quantized_range(DType t) {
  switch (t) {
    case DType::kUInt8: return IntRange{0, 255};
    case DType::kInt8: return IntRange{-128, 127};
    case DType::kUInt16: return IntRange{0, 65535};
    case DType::kInt16: return IntRange{-32768, 32767};
    default: return std::nullopt;
  }
}
bool is_integer(DType t) {
  return is_signed_integer(t) || t == DType::kUInt8 || t == DType::kUInt16 || t == DType::kUInt32 ||
         t == DType::kUInt64;
}

static uint32_t float_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static float bits_float(uint32_t u) { float f; std::memcpy(&f, &u, 4); return f; }

Float16::Float16(float f) {
  // Round-to-nearest-even conversion handling subnormals, inf and nan.
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) {  // inf / nan
    bits = static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
    return;
  }
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) { bits = static_cast<uint16_t>(sign | 0x7c00u); return; }
  if (e <= 0) {
    if (e < -10) { bits = static_cast<uint16_t>(sign); return; }
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    bits = static_cast<uint16_t>(sign | half);
    return;
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1))) ++half;  // may carry into exponent: correct
  bits = static_cast<uint16_t>(half);
}

Float16::operator float() const {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exp = (bits >> 10) & 0x1fu;
  uint32_t mant = bits & 0x3ffu;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

BFloat16::BFloat16(float f) {
  uint32_t x = float_bits(f);
  if (std::isnan(f)) { bits = static_cast<uint16_t>((x >> 16) | 0x40u); return; }
  uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  bits = static_cast<uint16_t>(x >> 16);
}

BFloat16::operator float() const { return bits_float(static_cast<uint32_t>(bits) << 16); }

}  // namespace korch
