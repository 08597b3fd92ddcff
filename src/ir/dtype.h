// Element types. The numeric codes equal ONNX TensorProto.DataType so the frontend maps 1:1.
// fp32 is first-class; fp16/bf16 are storage types today (Cast reads and writes them);
// integer types exist for shape arithmetic, indices and the conformance suite.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace korch {

enum class DType : int {
  kUndefined = 0,
  kFloat32 = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,  // recognised only to be rejected with a clear message
  kBool = 9,
  kFloat16 = 10,
  kFloat64 = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

// Size in bytes of one element; 0 for kUndefined/kString.
int dtype_size(DType t);
// Short text name used by the IR text form: f32, f16, bf16, f64, i8..i64, u8..u64, bool.
std::string_view dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
// Maps an ONNX TensorProto data_type code; nullopt for codes Korch does not store.
std::optional<DType> dtype_from_onnx(int code);
bool is_float(DType t);    // f16, bf16, f32, f64
bool is_integer(DType t);  // signed or unsigned ints (not bool)
bool is_signed_integer(DType t);
// The range of a quantized element type (int8, uint8, int16, uint16) as doubles; nullopt for others.
struct IntRange {
  double lo, hi;
};
std::optional<IntRange> quantized_range(DType t);

// IEEE half and bfloat16 storage with conversions through float.
struct Float16 {
  uint16_t bits = 0;
  Float16() = default;
  explicit Float16(float f);
  explicit operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  explicit BFloat16(float f);  // round to nearest even
  explicit operator float() const;
};

// Compile-time mapping C++ type -> DType.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::kFloat32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::kFloat64; };
template <> struct dtype_of<Float16> { static constexpr DType value = DType::kFloat16; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::kBFloat16; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::kInt8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::kInt16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::kInt32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::kInt64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::kUInt8; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::kUInt16; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::kUInt32; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::kUInt64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::kBool; };

}  // namespace korch
