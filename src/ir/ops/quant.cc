// Quantization family: QuantizeLinear and DequantizeLinear (opsets 10, 13, 19, 21..22) and
// DynamicQuantizeLinear (11..22).
//
// Scale / zero point layouts: per tensor (scalar or one element), per axis (1-D of x.shape[axis],
// opset 13+) and blocked (opset 21+, block_size > 0: same rank as x, ceil(x.shape[axis]/block_size)
// along axis). Quantization divides in float (in double for int32 x), rounds half to even, adds the
// zero point and saturates to the output type's range; NaN quantizes to the zero point.
// Dequantization computes (x - zero_point) exactly in integers, then multiplies by the scale in
// float, rounding to the scale's type. float8 / int4 / uint4 / int2 element types are not
// loadable by Korch, so they never reach these ops; output_dtype codes naming them are rejected.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/ops/op_util.h"

namespace korch {
namespace {

using ops::kIsHalf;

enum class Layout { kPerTensor, kPerAxis, kBlocked };

// How the scale (and zero point) map onto x: x is viewed as (outer, A, inner) around `axis`.
struct QuantLayout {
  Layout kind = Layout::kPerTensor;
  int64_t outer = 1, A = 1, inner = 1;
  int64_t block = 0, SA = 1;  // blocked: block size and scale extent along axis
};

QuantLayout quant_layout(const char* op, const Attributes& a, int opset, const Shape& x, const Shape& scale,
                         const Shape* zp) {
  QuantLayout l;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = opset >= 13 ? a.get_int("axis", 1) : 1;
  const int64_t block = opset >= 21 ? a.get_int("block_size", 0) : 0;
  if (block < 0) fail("{}: block_size must be >= 0, got {}", op, block);
  auto per_tensor_shape = [](const Shape& s) { return s.empty() || (s.size() == 1 && s[0] == 1); };
  if (block == 0 && per_tensor_shape(scale)) {
    if (zp && !per_tensor_shape(*zp))
      fail("{}: zero point shape {} does not match the per-tensor scale", op, shape_str(*zp));
    l.A = shape_numel(x);
    return l;  // per tensor
  }
  if (zp && *zp != scale)
    fail("{}: zero point shape {} differs from scale shape {}", op, shape_str(*zp), shape_str(scale));
  if (opset < 13) fail("{}-{}: scale must be a scalar, got shape {}", op, opset, shape_str(scale));
  if (axis < -rank || axis >= rank) fail("{}: axis {} is out of range for rank {}", op, axis, rank);
  if (axis < 0) axis += rank;
  for (int64_t i = 0; i < axis; ++i) l.outer *= x[static_cast<size_t>(i)];
  l.A = x[static_cast<size_t>(axis)];
  for (int64_t i = axis + 1; i < rank; ++i) l.inner *= x[static_cast<size_t>(i)];
  if (block == 0) {
    if (scale.size() != 1 || scale[0] != l.A)
      fail("{}: per-axis scale must have shape ({}) for axis {} of {}, got {}", op, l.A, axis, shape_str(x),
           shape_str(scale));
    l.kind = Layout::kPerAxis;
    return l;
  }
  l.kind = Layout::kBlocked;
  l.block = block;
  l.SA = (l.A + block - 1) / block;
  bool ok = static_cast<int64_t>(scale.size()) == rank;
  for (int64_t i = 0; ok && i < rank; ++i)
    ok = scale[static_cast<size_t>(i)] == (i == axis ? l.SA : x[static_cast<size_t>(i)]);
  if (!ok)
    fail("{}: blocked scale shape {} does not match x {} with block_size {} along axis {}", op, shape_str(scale),
         shape_str(x), block, axis);
  return l;
}

// Calls f(element index, scale index) for every element of x.
template <typename F>
void for_each_quant(const QuantLayout& l, F&& f) {
  int64_t e = 0;
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t a = 0; a < l.A; ++a) {
      switch (l.kind) {
        case Layout::kPerTensor:
          for (int64_t i = 0; i < l.inner; ++i) f(e++, int64_t{0});
          break;
        case Layout::kPerAxis:
          for (int64_t i = 0; i < l.inner; ++i) f(e++, a);
          break;
        case Layout::kBlocked: {
          const int64_t base = (o * l.SA + a / l.block) * l.inner;
          for (int64_t i = 0; i < l.inner; ++i) f(e++, base + i);
          break;
        }
      }
    }
}

bool is_quant_int(DType t) {
  return t == DType::kInt8 || t == DType::kUInt8 || t == DType::kInt16 || t == DType::kUInt16;
}

std::string onnx_type_name(int64_t code) {
  switch (code) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    case 24: return "float8e8m0";
    case 25: return "uint2";
    case 26: return "int2";
    default: break;
  }
  if (auto t = dtype_from_onnx(static_cast<int>(code))) return std::string(dtype_name(*t));
  return fmt::format("code {}", code);
}

// ------------------------------------------------------------------------------------------------
// QuantizeLinear

DType quantize_output_type(const OpInferContext& ctx) {
  const int64_t od = ctx.opset >= 21 ? ctx.attrs().get_int("output_dtype", 0) : 0;
  std::optional<DType> want;
  if (od != 0) {
    auto t = dtype_from_onnx(static_cast<int>(od));
    if (!t || !is_quant_int(*t)) {
      if (od >= 17 && od <= 26) fail_unsupported("QuantizeLinear: output_dtype {} is not supported", onnx_type_name(od));
      fail("QuantizeLinear: output_dtype {} is not a quantized type", onnx_type_name(od));
    }
    want = *t;
  }
  if (ctx.has_input(2)) {
    const DType zt = ctx.input(2).dtype;
    if (!is_quant_int(zt)) fail_unsupported("QuantizeLinear: zero point type {} is not supported", dtype_name(zt));
    if (want && *want != zt)
      fail("QuantizeLinear: output_dtype {} differs from the zero point type {}", dtype_name(*want), dtype_name(zt));
    return zt;
  }
  return want.value_or(DType::kUInt8);
}

template <typename X, typename Q>
Tensor run_quantize(const Tensor& x, const Tensor& scale, const Tensor* zp, const QuantLayout& l, DType out) {
  Tensor y(out, x.shape());
  const X* xd = x.data<X>();
  Q* yd = y.data<Q>();
  std::vector<float> sc = scale.to_float_vector();
  std::vector<int64_t> z = zp ? zp->to_int_vector() : std::vector<int64_t>(sc.size(), 0);
  constexpr double lo = static_cast<double>(std::numeric_limits<Q>::min());
  constexpr double hi = static_cast<double>(std::numeric_limits<Q>::max());
  for_each_quant(l, [&](int64_t e, int64_t s) {
    double q;
    if constexpr (std::is_same_v<X, int32_t>) q = static_cast<double>(xd[e]) / static_cast<double>(sc[static_cast<size_t>(s)]);
    else q = static_cast<double>(ops::to_f32(xd[e]) / sc[static_cast<size_t>(s)]);
    q = std::isnan(q) ? 0.0 : std::nearbyint(q);
    q += static_cast<double>(z[static_cast<size_t>(s)]);
    yd[e] = static_cast<Q>(std::clamp(q, lo, hi));
  });
  return y;
}

OpDef quantize_op() {
  OpDef d;
  d.op_type = "QuantizeLinear";
  d.min_opset = 10;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    const TensorType& scale = ctx.input(1);
    if (x.dtype != DType::kFloat32 && x.dtype != DType::kInt32 && x.dtype != DType::kFloat16 && x.dtype != DType::kBFloat16)
      fail_unsupported("QuantizeLinear: element type {} of x is not supported", dtype_name(x.dtype));
    if (!is_float(scale.dtype) && scale.dtype != DType::kInt32)
      fail("QuantizeLinear: y_scale must be a float tensor, got {}", dtype_name(scale.dtype));
    const DType out = quantize_output_type(ctx);
    const Shape* zs = ctx.has_input(2) ? &ctx.input(2).shape : nullptr;
    quant_layout("QuantizeLinear", ctx.attrs(), ctx.opset, x.shape, scale.shape, zs);
    return ops::one(out, x.shape);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    QuantLayout l = quant_layout("QuantizeLinear", ctx.attrs(), ctx.opset, x.shape(), scale.shape(),
                                 zp ? &zp->shape() : nullptr);
    const DType out = ctx.output_type(0).dtype;
    return dispatch_dtype<float, Float16, BFloat16, int32_t>(x.dtype(), "QuantizeLinear", [&](auto xt) {
      using X = decltype(xt);
      return dispatch_dtype<uint8_t, int8_t, uint16_t, int16_t>(out, "QuantizeLinear", [&](auto qt) {
        using Q = decltype(qt);
        return std::vector<Tensor>{run_quantize<X, Q>(x, scale, zp, l, out)};
      });
    });
  };
  return d;
}

// ------------------------------------------------------------------------------------------------
// DequantizeLinear

template <typename Q, typename S>
Tensor run_dequantize(const Tensor& x, const Tensor& scale, const Tensor* zp, const QuantLayout& l) {
  Tensor y(scale.dtype(), x.shape());
  const Q* xd = x.data<Q>();
  const S* sd = scale.data<S>();
  const Q* zd = zp ? zp->data<Q>() : nullptr;
  S* yd = y.data<S>();
  for_each_quant(l, [&](int64_t e, int64_t s) {
    const int64_t v = static_cast<int64_t>(xd[e]) - (zd ? static_cast<int64_t>(zd[s]) : 0);
    const float r = static_cast<float>(v) * ops::to_f32(sd[s]);
    yd[e] = S(r);
  });
  return y;
}

OpDef dequantize_op() {
  OpDef d;
  d.op_type = "DequantizeLinear";
  d.min_opset = 10;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    const TensorType& scale = ctx.input(1);
    if (!is_quant_int(x.dtype) && x.dtype != DType::kInt32)
      fail_unsupported("DequantizeLinear: element type {} of x is not supported", dtype_name(x.dtype));
    if (scale.dtype != DType::kFloat32 && scale.dtype != DType::kFloat16 && scale.dtype != DType::kBFloat16)
      fail_unsupported("DequantizeLinear: x_scale element type {} is not supported", dtype_name(scale.dtype));
    if (ctx.opset >= 21 && ctx.attrs().has("output_dtype") && ctx.attrs().get_int("output_dtype") != 0) {
      const int64_t od = ctx.attrs().get_int("output_dtype");
      auto t = dtype_from_onnx(static_cast<int>(od));
      if (!t || *t != scale.dtype)
        fail("DequantizeLinear: output_dtype {} differs from the scale type {}", onnx_type_name(od), dtype_name(scale.dtype));
    }
    const Shape* zs = nullptr;
    if (ctx.has_input(2)) {
      const TensorType& z = ctx.input(2);
      if (z.dtype != x.dtype)
        fail("DequantizeLinear: zero point type {} differs from x type {}", dtype_name(z.dtype), dtype_name(x.dtype));
      zs = &z.shape;
    }
    quant_layout("DequantizeLinear", ctx.attrs(), ctx.opset, x.shape, scale.shape, zs);
    return ops::one(scale.dtype, x.shape);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& scale = ctx.input(1);
    const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    QuantLayout l = quant_layout("DequantizeLinear", ctx.attrs(), ctx.opset, x.shape(), scale.shape(),
                                 zp ? &zp->shape() : nullptr);
    return dispatch_dtype<uint8_t, int8_t, uint16_t, int16_t, int32_t>(x.dtype(), "DequantizeLinear", [&](auto qt) {
      using Q = decltype(qt);
      return dispatch_dtype<float, Float16, BFloat16>(scale.dtype(), "DequantizeLinear", [&](auto st) {
        using S = decltype(st);
        return std::vector<Tensor>{run_dequantize<Q, S>(x, scale, zp, l)};
      });
    });
  };
  return d;
}

// ------------------------------------------------------------------------------------------------
// DynamicQuantizeLinear

OpDef dynamic_quantize_op() {
  OpDef d;
  d.op_type = "DynamicQuantizeLinear";
  d.min_opset = 11;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    if (x.dtype != DType::kFloat32)
      fail_unsupported("DynamicQuantizeLinear: element type {} is not supported (float32 only)", dtype_name(x.dtype));
    return std::vector<TensorType>{{DType::kUInt8, x.shape}, {DType::kFloat32, {}}, {DType::kUInt8, {}}};
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    const float* xd = x.data<float>();
    const int64_t n = x.numel();
    float mx = 0.f, mn = 0.f;  // the range always includes 0
    for (int64_t i = 0; i < n; ++i) {
      mx = std::max(mx, xd[i]);
      mn = std::min(mn, xd[i]);
    }
    const float scale = (mx == mn ? 1.f : mx - mn) / 255.f;
    float zp_f = 0.f - mn / scale;
    zp_f = std::isnan(zp_f) ? 0.f : std::nearbyint(std::clamp(zp_f, 0.f, 255.f));
    Tensor y(DType::kUInt8, x.shape());
    uint8_t* yd = y.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      float q = xd[i] / scale;
      q = std::isnan(q) ? 0.f : std::nearbyint(q);
      yd[i] = static_cast<uint8_t>(std::clamp(q + zp_f, 0.f, 255.f));
    }
    return std::vector<Tensor>{y, Tensor::scalar<float>(scale), Tensor::scalar<uint8_t>(static_cast<uint8_t>(zp_f))};
  };
  return d;
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  r.add(quantize_op());
  r.add(dequantize_op());
  r.add(dynamic_quantize_op());
}

}  // namespace korch
