// Elementwise family, part 3: Cast and CastLike between all numeric types, bool, f16 and bf16.
//
// Conversions follow numpy's astype on x86: float -> integer truncates toward zero, goes through
// int64 and wraps to narrower types (NaN -> 0, out-of-int64-range saturates); anything -> bool is
// "!= 0"; f64 -> f16/bf16 rounds through f32. Strings, float8, 4-bit and 2-bit types are not
// supported (the `saturate` attribute only affects float8, so it is ignored).
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ir/ops/elementwise_internal.h"

namespace korch::ops::ew {
namespace {

template <typename D, typename S>
D float_to_int(S v) {
  if (std::isnan(v)) return D(0);
  constexpr S k2p63 = static_cast<S>(9223372036854775808.0);
  if constexpr (std::is_same_v<D, uint64_t>) {
    constexpr S k2p64 = static_cast<S>(18446744073709551616.0);
    if (v >= k2p64) return std::numeric_limits<uint64_t>::max();
    if (v >= k2p63) return static_cast<uint64_t>(v);
  }
  if (v >= k2p63) return static_cast<D>(std::numeric_limits<int64_t>::max());
  if (v < -k2p63) return static_cast<D>(std::numeric_limits<int64_t>::min());
  return static_cast<D>(static_cast<int64_t>(v));
}

template <typename D, typename S>
inline D convert(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (kIsHalf<S>) {
    return convert<D>(static_cast<float>(v));
  } else if constexpr (kIsHalf<D>) {
    return D(convert<float>(v));
  } else if constexpr (std::is_same_v<D, bool>) {
    return v != S(0);
  } else if constexpr (std::is_same_v<S, bool>) {
    return static_cast<D>(v ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<S> && std::is_integral_v<D>) {
    return float_to_int<D>(v);
  } else {
    return static_cast<D>(v);
  }
}

#define EW_CAST_TYPES float, double, Float16, BFloat16, KORCH_INT_TYPES, bool

std::string onnx_type_name(int64_t code) {
  switch (code) {
    case 8: return "STRING";
    case 14: return "COMPLEX64";
    case 15: return "COMPLEX128";
    case 17: return "FLOAT8E4M3FN";
    case 18: return "FLOAT8E4M3FNUZ";
    case 19: return "FLOAT8E5M2";
    case 20: return "FLOAT8E5M2FNUZ";
    case 21: return "UINT4";
    case 22: return "INT4";
    case 23: return "FLOAT4E2M1";
    case 24: return "FLOAT8E8M0";
    case 25: return "UINT2";
    case 26: return "INT2";
    default: return fmt::format("code {}", code);
  }
}

void check_castable(DType t, const char* op, const char* what) {
  if (t == DType::kUndefined || t == DType::kString)
    fail_unsupported("{}: {} element type {} is not supported", op, what, dtype_name(t));
}

}  // namespace

Tensor cast_tensor(const Tensor& x, DType to) {
  if (x.dtype() == to) return x;
  Tensor out(to, x.shape());
  const int64_t n = x.numel();
  dispatch_dtype<EW_CAST_TYPES>(x.dtype(), "Cast", [&](auto stag) {
    using S = decltype(stag);
    dispatch_dtype<EW_CAST_TYPES>(to, "Cast", [&](auto dtag) {
      using D = decltype(dtag);
      const S* ps = x.data<S>();
      D* pd = out.data<D>();
#pragma omp parallel for if (n >= kParallelMin)
      for (int64_t i = 0; i < n; ++i) pd[i] = convert<D>(ps[i]);
    });
  });
  return out;
}

void register_cast_ops(OpRegistry& r) {
  {
    OpDef d;
    d.op_type = "Cast";
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& x = ctx.input(0);
      if (!ctx.attrs().has("to")) fail("attribute 'to' is required");
      const int64_t to = ctx.attrs().get_int("to");
      std::optional<DType> dt = to >= 0 && to <= 64 ? dtype_from_onnx(static_cast<int>(to)) : std::nullopt;
      if (!dt) {
        if (to <= 0 || to > 26) fail("attribute 'to' = {} is not an ONNX element type", to);
        fail_unsupported("Cast: target element type {} is not supported", onnx_type_name(to));
      }
      check_castable(x.dtype, "Cast", "input");
      check_castable(*dt, "Cast", "target");
      return one(*dt, x.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      return std::vector<Tensor>{cast_tensor(ctx.input(0), ctx.output_type(0).dtype)};
    };
    r.add(std::move(d));
  }
  {
    OpDef d;
    d.op_type = "CastLike";
    d.min_opset = 15;
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& x = ctx.input(0);
      const TensorType& like = ctx.input(1);
      check_castable(x.dtype, "CastLike", "input");
      check_castable(like.dtype, "CastLike", "target");
      return one(like.dtype, x.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      return std::vector<Tensor>{cast_tensor(ctx.input(0), ctx.output_type(0).dtype)};
    };
    r.add(std::move(d));
  }
}

}  // namespace korch::ops::ew
