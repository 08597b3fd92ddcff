// Elementwise primitives as scalar expressions, following the reference interpreter's formulas
// (src/ir/ops/elementwise*.cc) so results agree to rounding: e.g. Sigmoid is
// x >= 0 ? 1/(1+e) : e/(1+e) with e = exp(-|x|), Softplus uses log1p, Gelu uses erf.
#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>

#include "codegen/loop_kernel_internal.h"
#include "support/error.h"

namespace korch::loop {

namespace {

std::optional<Fn> plain_unary(const std::string& op) {
  static const std::map<std::string, Fn> m = {
      {"Neg", Fn::kNeg},     {"Abs", Fn::kAbs},     {"Not", Fn::kNot},     {"Exp", Fn::kExp},
      {"Log", Fn::kLog},     {"Sqrt", Fn::kSqrt},   {"Tanh", Fn::kTanh},   {"Erf", Fn::kErf},
      {"Sin", Fn::kSin},     {"Cos", Fn::kCos},     {"Tan", Fn::kTan},     {"Floor", Fn::kFloor},
      {"Ceil", Fn::kCeil},   {"Round", Fn::kRound}, {"Atan", Fn::kAtan},   {"Asin", Fn::kAsin},
      {"Acos", Fn::kAcos},   {"Sinh", Fn::kSinh},   {"Cosh", Fn::kCosh},   {"IsNaN", Fn::kIsNaN}};
  auto it = m.find(op);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::optional<Fn> plain_binary(const std::string& op) {
  static const std::map<std::string, Fn> m = {
      {"Add", Fn::kAdd},  {"Sub", Fn::kSub},  {"Mul", Fn::kMul},          {"Div", Fn::kDiv},
      {"Equal", Fn::kEq}, {"Less", Fn::kLt},  {"LessOrEqual", Fn::kLe},   {"Greater", Fn::kGt},
      {"GreaterOrEqual", Fn::kGe},            {"And", Fn::kAnd},          {"Or", Fn::kOr},
      {"Xor", Fn::kXor}};
  auto it = m.find(op);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

bool float_only(const std::string& op) {
  static const std::set<std::string> s = {
      "Exp", "Log", "Sqrt", "Tanh", "Erf", "Sin", "Cos", "Tan", "Floor", "Ceil", "Round", "Atan", "Asin",
      "Acos", "Sinh", "Cosh", "IsNaN", "Sigmoid", "Softplus", "Softsign", "Mish", "HardSwish", "HardSigmoid",
      "LeakyRelu", "Elu", "Selu", "Celu", "ThresholdedRelu", "Gelu", "Reciprocal", "Shrink", "Sum", "Mean",
      "Asinh", "Acosh", "Atanh", "IsInf"};
  return s.count(op) != 0;
}

// Whether every element of v is at most 0 (or NaN) by construction, for any values of the
// kernel's arguments: v = Sub(a, m) with m the keepdims ReduceMax of a itself (broadcast back by
// an Expand to a's shape, or of a's rank), the Sub, Expand and ReduceMax all computed inside the
// kernel, as in a softmax's exp(x - max): each a[i] is one of the elements its max was taken
// over. (A max read as an argument is left out: a kernel is checked on arguments drawn apart.)
bool at_most_zero(const Graph& g, const std::map<ValueId, NodeId>& inside, ValueId v) {
  auto producer = [&](ValueId x) -> const Node* {
    auto it = inside.find(x);
    return it == inside.end() ? nullptr : &g.nodes[static_cast<size_t>(it->second)];
  };
  const Node* sub = producer(v);
  if (!sub || sub->op_type != "Sub" || sub->inputs.size() != 2) return false;
  const ValueId a = sub->inputs[0];
  ValueId m = sub->inputs[1];
  const Shape& as = g.type(a).shape;
  if (g.type(v).shape != as) return false;
  if (const Node* e = producer(m); e && e->op_type == "Expand" && g.type(m).shape == as) m = e->inputs[0];
  const Node* r = producer(m);
  return r && r->op_type == "ReduceMax" && !r->inputs.empty() && r->inputs[0] == a &&
         r->attrs.get_int("keepdims", 1) == 1 && g.type(m).shape.size() == as.size();
}

}  // namespace

int StageBuilder::elementwise_value(const Node& n, const std::vector<int>& idx) {
  const Graph& g = kc_.g;
  const std::string& op = n.op_type;
  const DType out_dt = g.type(n.outputs[0]).dtype;
  // Operands: same shape as the output, or a single element (scalar constant or argument).
  auto operand = [&](size_t i) -> int {
    if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return -1;
    const ValueId v = n.inputs[i];
    const Shape& s = g.type(v).shape;
    if (s.size() == idx.size()) return value_at(v, idx);
    KORCH_CHECK(shape_numel(s) == 1, "elementwise operand of shape {} in {}", shape_str(s), node_ref(n));
    return value_at(v, std::vector<int>(s.size(), ix_const(0)));
  };
  const DType in_dt = n.inputs.empty() ? out_dt : g.type(n.inputs[0]).dtype;
  if (float_only(op) && !is_float(in_dt))
    unsupported(fmt::format("{}: element type {} is not supported", node_ref(n), dtype_name(in_dt)));
  auto c = [&](double v) { return e_const(in_dt, v); };

  // exp(-|v|): the shape the printers know never overflows (the CPU prints it korch_exp_negabs).
  auto exp_neg_abs = [&](int v) { return e_unary(Fn::kExp, e_unary(Fn::kNeg, e_unary(Fn::kAbs, v))); };
  // exp(x - max(x)) as exp(-|x - max(x)|): the same value (NaN included); a softmax's exp kernel
  // 23-30% faster on the CPU.
  if (op == "Exp" && is_float(out_dt) && at_most_zero(g, kc_.producer, n.inputs[0])) return exp_neg_abs(operand(0));
  if (auto f = plain_unary(op)) return e_unary(*f, operand(0));
  if (auto f = plain_binary(op)) return e_binary(*f, operand(0), operand(1));
  if (op == "Identity") return operand(0);
  if (op == "Cast" || op == "CastLike") return e_cast(out_dt, operand(0));

  const int x = operand(0);
  if (op == "Relu") return e_select(e_binary(Fn::kLt, x, c(0)), c(0), x);
  if (op == "Reciprocal") return e_binary(Fn::kDiv, c(1), x);
  if (op == "Sigmoid") {
    // 1 / (1 + e) for x >= 0, e / (1 + e) below, with e = exp(-|x|) (never overflows): one
    // division either way, and for x < 0 one rounding fewer than e * (1 / (1 + e)).
    const int e = exp_neg_abs(x);
    return e_binary(Fn::kDiv, e_select(e_binary(Fn::kGe, x, c(0)), c(1), e), e_binary(Fn::kAdd, c(1), e));
  }
  auto softplus = [&](int v) {
    const int pos = e_binary(Fn::kAdd, v, e_unary(Fn::kLog1p, e_unary(Fn::kExp, e_unary(Fn::kNeg, v))));
    const int neg = e_unary(Fn::kLog1p, e_unary(Fn::kExp, v));
    return e_select(e_binary(Fn::kGt, v, c(0)), pos, neg);
  };
  auto clamp01 = [&](int v) { return e_binary(Fn::kMax, c(0), e_binary(Fn::kMin, c(1), v)); };
  if (op == "Softplus") return softplus(x);
  if (op == "Softsign") return e_binary(Fn::kDiv, x, e_binary(Fn::kAdd, c(1), e_unary(Fn::kAbs, x)));
  if (op == "Mish") return e_binary(Fn::kMul, x, e_unary(Fn::kTanh, softplus(x)));
  if (op == "HardSwish")
    return e_binary(Fn::kMul, x, clamp01(e_binary(Fn::kAdd, e_binary(Fn::kDiv, x, c(6)), c(0.5))));
  if (op == "HardSigmoid") {
    const float alpha = n.attrs.get_float("alpha", 0.2f), beta = n.attrs.get_float("beta", 0.5f);
    return clamp01(e_binary(Fn::kAdd, e_binary(Fn::kMul, c(alpha), x), c(beta)));
  }
  if (op == "LeakyRelu") {
    const float alpha = n.attrs.get_float("alpha", 0.01f);
    return e_select(e_binary(Fn::kLt, x, c(0)), e_binary(Fn::kMul, c(alpha), x), x);
  }
  if (op == "PRelu") {
    const int slope = operand(1);
    return e_select(e_binary(Fn::kLt, x, c(0)), e_binary(Fn::kMul, slope, x), x);
  }
  if (op == "Elu") {
    const float alpha = n.attrs.get_float("alpha", 1.0f);
    return e_select(e_binary(Fn::kLt, x, c(0)),
                    e_binary(Fn::kMul, c(alpha), e_binary(Fn::kSub, e_unary(Fn::kExp, x), c(1))), x);
  }
  if (op == "Selu") {
    const float alpha = n.attrs.get_float("alpha", 1.67326319217681884765625f);
    const float gamma = n.attrs.get_float("gamma", 1.05070102214813232421875f);
    const int neg = e_binary(Fn::kMul, c(gamma),
                             e_binary(Fn::kSub, e_binary(Fn::kMul, c(alpha), e_unary(Fn::kExp, x)), c(alpha)));
    return e_select(e_binary(Fn::kGt, x, c(0)), e_binary(Fn::kMul, c(gamma), x), neg);
  }
  if (op == "Celu") {
    const float alpha = n.attrs.get_float("alpha", 1.0f);
    const int neg = e_binary(Fn::kMul, c(alpha),
                             e_binary(Fn::kSub, e_unary(Fn::kExp, e_binary(Fn::kDiv, x, c(alpha))), c(1)));
    return e_binary(Fn::kAdd, e_binary(Fn::kMax, c(0), x), e_binary(Fn::kMin, c(0), neg));
  }
  if (op == "ThresholdedRelu") {
    const float alpha = n.attrs.get_float("alpha", 1.0f);
    return e_select(e_binary(Fn::kGt, x, c(alpha)), x, c(0));
  }
  if (op == "Shrink") {
    const float bias = n.attrs.get_float("bias", 0.0f), lambd = n.attrs.get_float("lambd", 0.5f);
    return e_select(e_binary(Fn::kLt, x, c(-lambd)), e_binary(Fn::kAdd, x, c(bias)),
                    e_select(e_binary(Fn::kGt, x, c(lambd)), e_binary(Fn::kSub, x, c(bias)), c(0)));
  }
  if (op == "Gelu") {
    if (n.attrs.get_string("approximate", "none") == "tanh") {
      const int inner = e_binary(Fn::kMul, c(0.79788456080286535587989211986876),
                                 e_binary(Fn::kAdd, x, e_binary(Fn::kMul, e_binary(Fn::kMul, c(0.044715), x),
                                                                e_binary(Fn::kMul, x, x))));
      return e_binary(Fn::kMul, e_binary(Fn::kMul, c(0.5), x), e_binary(Fn::kAdd, c(1), e_unary(Fn::kTanh, inner)));
    }
    const int er = e_unary(Fn::kErf, e_binary(Fn::kMul, x, c(0.70710678118654752440084436210485)));
    return e_binary(Fn::kMul, e_binary(Fn::kMul, c(0.5), x), e_binary(Fn::kAdd, c(1), er));
  }
  // The inverse hyperbolic functions through log1p, so they keep their relative precision near 0
  // (asinh, atanh) and near 1 (acosh); past 1e18 the square would overflow, and log(2x) is exact
  // to rounding there.
  const double ln2 = 0.69314718055994530942;
  if (op == "Asinh") {
    const int a = e_unary(Fn::kAbs, x);
    const int sq = e_unary(Fn::kSqrt, e_binary(Fn::kAdd, e_binary(Fn::kMul, a, a), c(1)));
    const int small = e_unary(Fn::kLog1p, e_binary(Fn::kAdd, a, e_binary(Fn::kDiv, e_binary(Fn::kMul, a, a),
                                                                         e_binary(Fn::kAdd, c(1), sq))));
    const int big = e_binary(Fn::kAdd, e_unary(Fn::kLog, a), c(ln2));
    const int r = e_select(e_binary(Fn::kGt, a, c(1e18)), big, small);
    return e_select(e_binary(Fn::kLt, x, c(0)), e_unary(Fn::kNeg, r), r);
  }
  if (op == "Acosh") {
    const int xm1 = e_binary(Fn::kSub, x, c(1));
    const int small = e_unary(Fn::kLog1p, e_binary(Fn::kAdd, xm1, e_unary(Fn::kSqrt, e_binary(Fn::kMul, xm1,
                                                                                            e_binary(Fn::kAdd, x, c(1))))));
    const int big = e_binary(Fn::kAdd, e_unary(Fn::kLog, x), c(ln2));
    return e_select(e_binary(Fn::kGt, x, c(1e18)), big, small);  // x < 1: sqrt of a negative, NaN
  }
  if (op == "Atanh")
    return e_binary(Fn::kMul, c(0.5),
                    e_unary(Fn::kLog1p, e_binary(Fn::kDiv, e_binary(Fn::kMul, c(2), x), e_binary(Fn::kSub, c(1), x))));
  if (op == "IsInf") {
    // x - x is NaN exactly for an infinity (and a NaN, which is not one): no infinite constant needed.
    const int nan_x = e_unary(Fn::kIsNaN, x);
    const int inf = e_binary(Fn::kAnd, e_unary(Fn::kNot, nan_x), e_unary(Fn::kIsNaN, e_binary(Fn::kSub, x, x)));
    const bool neg = n.attrs.get_int("detect_negative", 1) != 0, pos = n.attrs.get_int("detect_positive", 1) != 0;
    if (neg && pos) return inf;
    if (!neg && !pos) return e_binary(Fn::kAnd, inf, e_unary(Fn::kNot, inf));
    return e_binary(Fn::kAnd, inf, e_binary(pos ? Fn::kGt : Fn::kLt, x, c(0)));
  }
  if (op == "Sign")
    return e_select(e_binary(Fn::kGt, x, c(0)), c(1), e_select(e_binary(Fn::kLt, x, c(0)), c(-1), c(0)));
  if (op == "Max" || op == "Min" || op == "Sum" || op == "Mean") {
    const Fn f = op == "Max" ? Fn::kMax : op == "Min" ? Fn::kMin : Fn::kAdd;
    int acc = x;
    for (size_t i = 1; i < n.inputs.size(); ++i) acc = e_binary(f, acc, operand(i));
    if (op == "Mean" && n.inputs.size() > 1) acc = e_binary(Fn::kDiv, acc, c(static_cast<double>(n.inputs.size())));
    return acc;
  }
  if (op == "Pow") {
    if (!is_float(in_dt)) unsupported(fmt::format("{}: integer base {} is not supported", node_ref(n), dtype_name(in_dt)));
    return e_binary(Fn::kPow, x, e_cast(in_dt, operand(1)));
  }
  if (op == "Mod") {
    if (!is_float(in_dt)) unsupported(fmt::format("{}: integer Mod is not supported", node_ref(n)));
    const int y = operand(1);
    const int r = e_binary(Fn::kFMod, x, y);
    if (n.attrs.get_int("fmod", 0) != 0) return r;
    // Python mod: a non-zero remainder takes the divisor's sign.
    const int fix = e_binary(Fn::kAnd, e_binary(Fn::kXor, e_binary(Fn::kLt, r, c(0)), e_binary(Fn::kLt, y, c(0))),
                             e_unary(Fn::kNot, e_binary(Fn::kEq, r, c(0))));
    return e_select(fix, e_binary(Fn::kAdd, r, y), r);
  }
  if (op == "Where") return e_select(x, operand(1), operand(2));
  if (op == "Clip") {
    int lo_e = -1, hi_e = -1;
    if (g.opset < 11) {
      if (n.attrs.has("min")) lo_e = c(n.attrs.get_float("min", 0.f));
      if (n.attrs.has("max")) hi_e = c(n.attrs.get_float("max", 0.f));
    } else {
      lo_e = operand(1);
      hi_e = operand(2);
    }
    int v = x;
    if (lo_e >= 0) v = e_select(e_binary(Fn::kLt, v, lo_e), lo_e, v);
    if (hi_e >= 0) v = e_select(e_binary(Fn::kGt, v, hi_e), hi_e, v);
    return v;
  }
  // Per-tensor quantization (a scalar scale and zero point; other layouts are split by fission,
  // fission/quant.cc), computed as the interpreter does: y = saturate(round_half_even(x / s) + zp),
  // NaN to the zero point; x = float(int(q) - int(zp)) * s.
  if (op == "QuantizeLinear") {
    if (in_dt != DType::kFloat32) unsupported(fmt::format("{}: element type {} is not supported", node_ref(n), dtype_name(in_dt)));
    const int q = e_binary(Fn::kDiv, x, operand(1));
    int r = e_unary(Fn::kRound, e_select(e_unary(Fn::kIsNaN, q), c(0), q));
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) r = e_binary(Fn::kAdd, r, e_cast(in_dt, operand(2)));
    const auto range = quantized_range(out_dt);
    if (!range) unsupported(fmt::format("{}: output type {} is not supported", node_ref(n), dtype_name(out_dt)));
    r = e_select(e_binary(Fn::kLt, r, c(range->lo)), c(range->lo), r);
    r = e_select(e_binary(Fn::kGt, r, c(range->hi)), c(range->hi), r);
    return e_cast(out_dt, r);
  }
  if (op == "DequantizeLinear") {
    if (out_dt != DType::kFloat32) unsupported(fmt::format("{}: output type {} is not supported", node_ref(n), dtype_name(out_dt)));
    int v = e_cast(DType::kInt32, x);
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) v = e_binary(Fn::kSub, v, e_cast(DType::kInt32, operand(2)));
    return e_binary(Fn::kMul, e_cast(DType::kFloat32, v), operand(1));
  }
  unsupported(fmt::format("{} has no loop-kernel emitter", node_ref(n)));
}

}  // namespace korch::loop
