// Quantized linear operators: MatMulInteger and ConvInteger (opset 10, int32 output), QLinearMatMul
// (10, 21) and QLinearConv (10). What onnxruntime.quantization writes (quantize_dynamic:
// DynamicQuantizeLinear + ConvInteger/MatMulInteger; QOperator format: QLinearConv/QLinearMatMul).
//
// Every op is exact in integers: the int8/uint8 operands are widened to int32 with their zero points
// subtracted, then run through the linear family's int32 MatMul / Conv kernels (linear_internal.h:
// the Conv geometry and every Conv attribute are the float Conv's). Conv padding is zero after the
// subtraction, i.e. padding with the zero point, as ONNX specifies. Accumulation wraps around in 32
// bits (ONNX: "accumulation may overflow if and only if in 32 bits").
//
// The QLinear ops then requantize each int32 accumulator c as the spec says, "y = saturate((x /
// y_scale) + y_zero_point)" with x / y_scale rounded half to even:
//   y = saturate(round_half_even(c * m) + y_zero_point),  m = a_scale * b_scale / y_scale,
// m computed in the scales' type as ONNX's reference does (float32; float16/bfloat16 rounded after
// each operation, as numpy does), the product c * m in double; NaN maps to the zero point. (ONNX's
// Python reference rounds c * m + y_zero_point instead, which differs at exact ties when the zero
// point is odd; the spec text and onnxruntime round before adding.)
//
// Zero point / scale layouts. MatMulInteger and QLinearMatMul: per tensor (one element), per row of
// a ([M] for a 2-D a, or [..., M, 1]) and per column of b ([N], or [..., 1, N]); a scale and its zero
// point must have the same layout; y_scale / y_zero_point per tensor. ConvInteger and QLinearConv:
// x per tensor; w per tensor or per output channel ([M]); QLinearConv's y per tensor.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "ir/ops/linear_internal.h"
#include "ir/ops/op_util.h"

namespace korch {
namespace {

bool is_int8(DType t) { return t == DType::kInt8 || t == DType::kUInt8; }

void check_int8(const char* op, const char* what, DType t) {
  if (!is_int8(t)) fail_unsupported("{}: {} element type {} is not supported (int8 or uint8)", op, what, dtype_name(t));
}

// An int8/uint8 operand and its optional zero point of the same type.
void check_operand(const OpInferContext& ctx, const char* op, const char* what, int operand, int zp) {
  check_int8(op, what, ctx.input(operand).dtype);
  if (ctx.has_input(zp) && ctx.input(zp).dtype != ctx.input(operand).dtype)
    fail("{}: {} zero point type {} differs from the operand type {}", op, what, dtype_name(ctx.input(zp).dtype),
         dtype_name(ctx.input(operand).dtype));
}

bool per_tensor(const Shape& p) { return shape_numel(p) == 1 && p.size() <= 1; }

void check_per_tensor(const char* op, const char* what, const Shape& p) {
  if (!per_tensor(p)) fail("{}: {} must be a scalar or have one element, got shape {}", op, what, shape_str(p));
}

enum class Side { kRow, kColumn };  // a's parameters are per row, b's per column

// The shape, broadcastable to operand `x` and of extent 1 along K, that a zero point or scale of
// shape `p` stands for: {} per tensor, [M, 1] / [..., M, 1] per row, [N] / [..., 1, N] per column.
Shape side_shape(const char* op, const char* what, const Shape& p, const Shape& x, Side side) {
  if (shape_numel(p) == 1 && p.size() <= std::max<size_t>(x.size(), 1)) return {};
  const char* kind = side == Side::kRow ? "row" : "column";
  if (x.size() < 2 || p.empty() || p.size() > x.size())
    fail("{}: {} shape {} is neither per tensor nor per {} of {}", op, what, shape_str(p), kind, shape_str(x));
  Shape q = p;
  if (p.size() == 1 && side == Side::kRow) q = {p[0], 1};
  for (size_t i = 0; i < q.size(); ++i) {
    const int64_t d = q[q.size() - 1 - i], xd = x[x.size() - 1 - i];
    const bool k_dim = (side == Side::kRow) == (i == 0);
    if (k_dim ? d != 1 : (d != 1 && d != xd))
      fail("{}: {} shape {} is neither per tensor nor per {} of {}", op, what, shape_str(p), kind, shape_str(x));
  }
  return q;
}

// x widened to int32 minus its zero point, broadcast from `zp_shape` (zp's elements in that shape);
// zp may be null (zero point 0).
Tensor centered(const Tensor& x, const Tensor* zp, const Shape& zp_shape, const char* op) {
  Tensor out(DType::kInt32, x.shape());
  int32_t* o = out.data<int32_t>();
  dispatch_dtype<uint8_t, int8_t>(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* xd = x.data<T>();
    if (!zp) {
      for (int64_t i = 0; i < x.numel(); ++i) o[i] = xd[i];
      return;
    }
    const T* z = zp->data<T>();
    ops::for_each_broadcast(x.shape(), {ops::broadcast_strides(zp_shape, x.shape())},
                            [&](int64_t i, const std::vector<int64_t>& off) {
                              o[i] = static_cast<int32_t>(xd[i]) - static_cast<int32_t>(z[off[0]]);
                            });
  });
  return out;
}

// a_scale * b_scale / y_scale in the scales' type.
template <typename S>
double multiplier(S a, S b, S y) {
  if constexpr (ops::kIsHalf<S>) {
    const S p = S(static_cast<float>(a) * static_cast<float>(b));
    return static_cast<double>(static_cast<float>(S(static_cast<float>(p) / static_cast<float>(y))));
  } else {
    return static_cast<double>(a * b / y);
  }
}

// saturate(round_half_even(c * m) + zp) in Q.
template <typename Q>
Q requantize(int32_t c, double m, int64_t zp) {
  const double v = static_cast<double>(c) * m;
  if (std::isnan(v)) return static_cast<Q>(zp);
  constexpr double lo = std::numeric_limits<Q>::min(), hi = std::numeric_limits<Q>::max();
  return static_cast<Q>(std::clamp(std::nearbyint(v) + static_cast<double>(zp), lo, hi));
}

int64_t zero_point_value(const OpEvalContext& ctx, int i) { return ctx.has_input(i) ? ctx.input(i).to_int_vector()[0] : 0; }

// The quantized output type: y_zero_point's, else the first operand's (ONNX's reference).
DType qlinear_output_type(const OpInferContext& ctx, const char* op, int y_zp, int operand) {
  const DType t = ctx.has_input(y_zp) ? ctx.input(y_zp).dtype : ctx.input(operand).dtype;
  check_int8(op, "y_zero_point", t);
  return t;
}

// ------------------------------------------------------------------------------------------------
// MatMulInteger (A, B, a_zero_point?, b_zero_point?) and QLinearMatMul (a, a_scale, a_zero_point,
// b, b_scale, b_zero_point, y_scale, y_zero_point).

struct MatMulQuantInputs {
  int a, a_zp, b, b_zp, a_scale = -1, b_scale = -1;
};
constexpr MatMulQuantInputs kMatMulInteger{0, 2, 1, 3};
constexpr MatMulQuantInputs kQLinearMatMul{0, 2, 3, 5, 1, 4};

// Checks types and layouts; returns the parameter shapes {a side, b side} (side_shape) and the output shape.
struct MatMulQuantShapes {
  Shape a_side, b_side, out;
};

MatMulQuantShapes matmul_quant_shapes(const char* op, const MatMulQuantInputs& in, const std::vector<const Shape*>& s) {
  MatMulQuantShapes r;
  const Shape& a = *s[static_cast<size_t>(in.a)];
  const Shape& b = *s[static_cast<size_t>(in.b)];
  r.out = linear_detail::matmul_output_shape(a, b, op);
  auto side = [&](int zp, int scale, const Shape& x, Side sd, const char* zp_name, const char* scale_name) {
    const Shape* zs = s[static_cast<size_t>(zp)];
    const Shape* ss = scale >= 0 ? s[static_cast<size_t>(scale)] : nullptr;
    Shape z = zs ? side_shape(op, zp_name, *zs, x, sd) : Shape{};
    if (ss) {
      Shape q = side_shape(op, scale_name, *ss, x, sd);
      if (zs && q != z)
        fail("{}: {} shape {} and {} shape {} differ", op, scale_name, shape_str(*ss), zp_name, shape_str(*zs));
      return q;
    }
    return z;
  };
  r.a_side = side(in.a_zp, in.a_scale, a, Side::kRow, "a_zero_point", "a_scale");
  r.b_side = side(in.b_zp, in.b_scale, b, Side::kColumn, "b_zero_point", "b_scale");
  return r;
}

std::vector<const Shape*> input_shapes(const OpInferContext& ctx, int n) {
  std::vector<const Shape*> s(static_cast<size_t>(n), nullptr);
  for (int i = 0; i < n; ++i)
    if (ctx.has_input(i)) s[static_cast<size_t>(i)] = &ctx.input(i).shape;
  return s;
}
std::vector<const Shape*> input_shapes(const OpEvalContext& ctx, int n) {
  std::vector<const Shape*> s(static_cast<size_t>(n), nullptr);
  for (int i = 0; i < n; ++i)
    if (ctx.has_input(i)) s[static_cast<size_t>(i)] = &ctx.input(i).shape();
  return s;
}

void check_matmul_operand_types(const OpInferContext& ctx, const char* op, const MatMulQuantInputs& in) {
  check_operand(ctx, op, "a", in.a, in.a_zp);
  check_operand(ctx, op, "b", in.b, in.b_zp);
}

// The int32 product of the centered operands.
Tensor matmul_accumulate(const OpEvalContext& ctx, const char* op, const MatMulQuantInputs& in, const MatMulQuantShapes& s) {
  auto zp = [&](int i) { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  Tensor a = centered(ctx.input(in.a), zp(in.a_zp), s.a_side, op);
  Tensor b = centered(ctx.input(in.b), zp(in.b_zp), s.b_side, op);
  return linear_detail::matmul_int32(a, b, op);
}

OpDef matmul_integer_op() {
  return ops::make_op(
      "MatMulInteger", 10,
      [](const OpInferContext& ctx) {
        check_matmul_operand_types(ctx, "MatMulInteger", kMatMulInteger);
        return ops::one(DType::kInt32, matmul_quant_shapes("MatMulInteger", kMatMulInteger, input_shapes(ctx, 4)).out);
      },
      [](const OpEvalContext& ctx) {
        MatMulQuantShapes s = matmul_quant_shapes("MatMulInteger", kMatMulInteger, input_shapes(ctx, 4));
        return std::vector<Tensor>{matmul_accumulate(ctx, "MatMulInteger", kMatMulInteger, s)};
      });
}

// The scales' type: float32 (opset 10), float32/float16/bfloat16 (21); all scales alike.
void check_scale_types(const OpInferContext& ctx, const char* op, std::initializer_list<int> scales) {
  const DType t = ctx.input(*scales.begin()).dtype;
  const bool ok = t == DType::kFloat32 || (ctx.opset >= 21 && ops::is_half(t));
  if (!ok) fail_unsupported("{}-{}: scale element type {} is not supported", op, ctx.opset, dtype_name(t));
  for (int i : scales)
    if (ctx.input(i).dtype != t) fail("{}: scales have different types {} and {}", op, dtype_name(t), dtype_name(ctx.input(i).dtype));
}

constexpr const char* kQLinearMatMulName = "QLinearMatMul";

OpDef qlinear_matmul_op() {
  return ops::make_op(
      kQLinearMatMulName, 10,
      [](const OpInferContext& ctx) {
        check_matmul_operand_types(ctx, kQLinearMatMulName, kQLinearMatMul);
        check_scale_types(ctx, kQLinearMatMulName, {1, 4, 6});
        check_per_tensor(kQLinearMatMulName, "y_scale", ctx.input(6).shape);
        if (ctx.has_input(7)) check_per_tensor(kQLinearMatMulName, "y_zero_point", ctx.input(7).shape);
        const DType out = qlinear_output_type(ctx, kQLinearMatMulName, 7, 0);
        return ops::one(out, matmul_quant_shapes(kQLinearMatMulName, kQLinearMatMul, input_shapes(ctx, 8)).out);
      },
      [](const OpEvalContext& ctx) {
        MatMulQuantShapes s = matmul_quant_shapes(kQLinearMatMulName, kQLinearMatMul, input_shapes(ctx, 8));
        Tensor acc = matmul_accumulate(ctx, kQLinearMatMulName, kQLinearMatMul, s);
        // The multiplier per output element: a's row scale times b's column scale, over the output
        // with 1-D operands padded to matrices (same element order).
        Shape a2 = ctx.input(0).shape(), b2 = ctx.input(3).shape();
        if (a2.size() == 1) a2.insert(a2.begin(), 1);
        if (b2.size() == 1) b2.push_back(1);
        const Shape out2 = linear_detail::matmul_output_shape(a2, b2, kQLinearMatMulName);
        const int64_t yzp = zero_point_value(ctx, 7);
        Tensor y(ctx.output_type(0));
        const int32_t* c = acc.data<int32_t>();
        dispatch_dtype<float, Float16, BFloat16>(ctx.input(1).dtype(), kQLinearMatMulName, [&](auto stag) {
          using S = decltype(stag);
          const S* as = ctx.input(1).data<S>();
          const S* bs = ctx.input(4).data<S>();
          const S ys = ctx.input(6).data<S>()[0];
          dispatch_dtype<uint8_t, int8_t>(y.dtype(), kQLinearMatMulName, [&](auto qtag) {
            using Q = decltype(qtag);
            Q* yd = y.data<Q>();
            ops::for_each_broadcast(out2, {ops::broadcast_strides(s.a_side, out2), ops::broadcast_strides(s.b_side, out2)},
                                    [&](int64_t i, const std::vector<int64_t>& off) {
                                      yd[i] = requantize<Q>(c[i], multiplier<S>(as[off[0]], bs[off[1]], ys), yzp);
                                    });
          });
        });
        return std::vector<Tensor>{y};
      });
}

// ------------------------------------------------------------------------------------------------
// ConvInteger (x, w, x_zero_point?, w_zero_point?) and QLinearConv (x, x_scale, x_zero_point, w,
// w_scale, w_zero_point, y_scale, y_zero_point, B?).

struct ConvQuantInputs {
  int x, x_zp, w, w_zp, x_scale = -1, w_scale = -1;
};
constexpr ConvQuantInputs kConvInteger{0, 2, 1, 3};
constexpr ConvQuantInputs kQLinearConv{0, 2, 3, 5, 1, 4};

// Per-output-channel parameter (w's zero point or scale): {} per tensor, [M, 1, ...] per channel.
Shape channel_shape(const char* op, const char* what, const Shape& p, const Shape& w) {
  if (per_tensor(p)) return {};
  if (p.size() != 1 || w.empty() || p[0] != w[0])
    fail("{}: {} must be per tensor or per output channel ([{}]), got shape {}", op, what, w.empty() ? 0 : w[0],
         shape_str(p));
  Shape s(w.size(), 1);
  s[0] = w[0];
  return s;
}

Shape conv_quant_shape(const OpInferContext& ctx, const char* op, const ConvQuantInputs& in) {
  check_operand(ctx, op, "x", in.x, in.x_zp);
  check_operand(ctx, op, "w", in.w, in.w_zp);
  const Shape& w = ctx.input(in.w).shape;
  if (ctx.has_input(in.x_zp)) check_per_tensor(op, "x_zero_point", ctx.input(in.x_zp).shape);
  if (in.x_scale >= 0) check_per_tensor(op, "x_scale", ctx.input(in.x_scale).shape);
  if (ctx.has_input(in.w_zp)) channel_shape(op, "w_zero_point", ctx.input(in.w_zp).shape, w);
  if (in.w_scale >= 0) channel_shape(op, "w_scale", ctx.input(in.w_scale).shape, w);
  return linear_detail::conv_output_shape(ctx.attrs(), ctx.input(in.x).shape, w, op);
}

// The int32 convolution of the centered operands (plus the int32 bias).
Tensor conv_accumulate(const OpEvalContext& ctx, const char* op, const ConvQuantInputs& in, const Tensor* bias) {
  const Tensor& x = ctx.input(in.x);
  const Tensor& w = ctx.input(in.w);
  const Tensor* xzp = ctx.has_input(in.x_zp) ? &ctx.input(in.x_zp) : nullptr;
  const Tensor* wzp = ctx.has_input(in.w_zp) ? &ctx.input(in.w_zp) : nullptr;
  Tensor xc = centered(x, xzp, {}, op);
  Tensor wc = centered(w, wzp, wzp ? channel_shape(op, "w_zero_point", wzp->shape(), w.shape()) : Shape{}, op);
  return linear_detail::conv_int32(ctx.attrs(), xc, wc, bias, op);
}

OpDef conv_integer_op() {
  return ops::make_op(
      "ConvInteger", 10,
      [](const OpInferContext& ctx) { return ops::one(DType::kInt32, conv_quant_shape(ctx, "ConvInteger", kConvInteger)); },
      [](const OpEvalContext& ctx) {
        return std::vector<Tensor>{conv_accumulate(ctx, "ConvInteger", kConvInteger, nullptr)};
      });
}

constexpr const char* kQLinearConvName = "QLinearConv";

OpDef qlinear_conv_op() {
  return ops::make_op(
      kQLinearConvName, 10,
      [](const OpInferContext& ctx) {
        Shape out = conv_quant_shape(ctx, kQLinearConvName, kQLinearConv);
        for (int i : {1, 4, 6})
          if (ctx.input(i).dtype != DType::kFloat32)
            fail_unsupported("{}: scale element type {} is not supported (float32)", kQLinearConvName, dtype_name(ctx.input(i).dtype));
        check_per_tensor(kQLinearConvName, "y_scale", ctx.input(6).shape);
        if (ctx.has_input(7)) check_per_tensor(kQLinearConvName, "y_zero_point", ctx.input(7).shape);
        if (ctx.has_input(8)) {
          const TensorType& b = ctx.input(8);
          if (b.dtype != DType::kInt32) fail("{}: bias B must be int32, got {}", kQLinearConvName, dtype_name(b.dtype));
          if (b.shape != Shape{out[1]}) fail("{}: bias B must have shape [{}], got {}", kQLinearConvName, out[1], shape_str(b.shape));
        }
        return ops::one(qlinear_output_type(ctx, kQLinearConvName, 7, 0), out);
      },
      [](const OpEvalContext& ctx) {
        Tensor acc = conv_accumulate(ctx, kQLinearConvName, kQLinearConv, ctx.has_input(8) ? &ctx.input(8) : nullptr);
        const int64_t M = acc.dim(1), per_image = M == 0 ? 0 : acc.numel() / std::max<int64_t>(1, acc.dim(0)) / M;
        const float xs = ctx.input(1).data<float>()[0], ys = ctx.input(6).data<float>()[0];
        const Tensor& ws = ctx.input(4);
        std::vector<double> m(static_cast<size_t>(M));
        for (int64_t k = 0; k < M; ++k) m[static_cast<size_t>(k)] = multiplier<float>(xs, ws.data<float>()[ws.numel() == 1 ? 0 : k], ys);
        const int64_t yzp = zero_point_value(ctx, 7);
        Tensor y(ctx.output_type(0));
        const int32_t* c = acc.data<int32_t>();
        dispatch_dtype<uint8_t, int8_t>(y.dtype(), kQLinearConvName, [&](auto qtag) {
          using Q = decltype(qtag);
          Q* yd = y.data<Q>();
          for (int64_t i = 0; i < acc.numel(); ++i) yd[i] = requantize<Q>(c[i], m[static_cast<size_t>((i / per_image) % M)], yzp);
        });
        return std::vector<Tensor>{y};
      });
}

}  // namespace

void register_quant_linear_ops(OpRegistry& r) {
  r.add(matmul_integer_op());
  r.add(conv_integer_op());
  r.add(qlinear_matmul_op());
  r.add(qlinear_conv_op());
}

}  // namespace korch
