// Fission of the normalization family: Softmax, LogSoftmax, Hardmax, LayerNormalization,
// InstanceNormalization, GroupNormalization, BatchNormalization, LpNormalization,
// MeanVarianceNormalization and LRN. Every statistic is a keepdims reduce primitive; every use of
// a statistic against the full tensor goes through an explicit Expand (FissionBuilder::elementwise;
// before opset 8, which has no Expand, a Reshape + Tile: see FissionBuilder::broadcast_to).
//
// What each rule produces (x: f32[2,3,4]; "E(v)" is an Expand of v to the shape of x):
//
//   Softmax(axis=-1), opset >= 13
//     m = ReduceMax(x, [2])            f32[2,3,1]   (subtracting the max: no overflow for |x| ~ 1e4)
//     d = Sub(x, E(m)); e = Exp(d)
//     s = ReduceSum(e, [2]);  y = Div(e, E(s))
//   LogSoftmax: the same up to s, then y = Sub(d, E(Log(s))).
//   Softmax/LogSoftmax opset < 13 (input coerced to 2-D at `axis`): the reductions run over all
//     axes [axis, rank) instead of one — the same rows as the 2-D view, without Reshapes. For
//     axis == rank (rows of one element) a reduction over no axes is the identity.
//   Hardmax(axis=1), opset >= 13
//     a = ArgMax(x, axis=1, keepdims=1)                   i64[2,1,4]  (first maximum wins, as in ONNX)
//     y = Cast(Equal(E(iota), E(a)), to=f32)              iota = i64[1,3,1] constant {0,1,2}
//   Hardmax opset < 13: ArgMax needs one axis, so x is Reshaped to [O, R] (the 2-D view), the rule
//     above runs on axis 1 and the result is Reshaped back.
//   LayerNormalization(axis=1, epsilon, stash_type) over axes [1, 2]
//     xs = Cast(x, stash) (only when stash_type differs from x's type)
//     mean = ReduceMean(xs, [1,2]); d = Sub(xs, E(mean))
//     var = ReduceMean(Mul(d, d), [1,2]); inv = Reciprocal(Sqrt(Add(var, eps)))
//     n = Cast(Mul(d, E(inv)), x type); y = Add(Mul(n, E(Scale)), E(B))   (Add only with B)
//     outputs Mean = mean and InvStdDev = inv (stash type, shape [2,1,1]) when requested.
//   InstanceNormalization (x: [N, C, H, W]): mean/var as above over [2, 3];
//     a = Mul(inv, E(Reshape(scale, [C,1,1])))   [N,C,1,1] (scale folded into the statistic)
//     y = Add(Mul(d, E(a)), E(Reshape(B, [C,1,1])))
//   GroupNormalization(num_groups=G) (x: [N, C, H, W]): r = Reshape(x, [N, G, C/G*H*W]);
//     mean/var over [2] of r (cast to stash_type first in opset 21);
//     opset 18 (scale/bias per group): a = Mul(inv, E(Reshape(scale, [G,1])));
//       y = Reshape(Add(Mul(d, E(a)), E(Reshape(bias, [G,1]))), x shape)
//     opset 21 (per channel): n = Reshape(Cast(Mul(d, E(inv)), x type), x shape);
//       y = Add(Mul(n, E(Reshape(scale, [C,1,1]))), E(Reshape(bias, [C,1,1])))
//   BatchNormalization (inference): a = Div(scale, Sqrt(Add(var, eps))); c = Sub(B, Mul(mean, a))
//     on the [C] parameters (constants: the builder folds a and c to two constants), Reshaped to
//     [C,1,1]; y = Add(Mul(x, E(a)), E(c)). spatial=0 (opsets 7/8): parameters of shape
//     [C, H, W] broadcast to x directly. Mixed parameter types (opset 15) are computed in the
//     widest float type and Cast to x's type.
//   LpNormalization(axis, p): n = ReduceSum(Abs(x)) (p=1) or Sqrt(ReduceSum(Mul(x, x))) (p=2);
//     y = Div(x, E(Add(n, Cast(Not(Greater(n, 0))))))   (a zero norm gives 0, as in the reference)
//   MeanVarianceNormalization(axes): y = Div(d, E(Add(Sqrt(var), 1e-9))) with d, var as above.
//   LRN(size, alpha, beta, bias): q = Mul(x, x);
//     the window sum over channels [c - floor((size-1)/2), c + ceil((size-1)/2)] is
//     Pad(q, channels by floor/ceil of (size-1)/2 zeros) followed by the sum of `size`
//     Slices of C channels at offsets 0..size-1 (Adds);
//     y = Div(x, Pow(Add(Mul(sum, alpha/size), bias), beta)).
//     Why Pad + Slices rather than a Conv with a ones kernel: the window sum is then made of
//     layout and elementwise primitives that fuse with the surrounding Mul/Pow/Div into one
//     memory-bound kernel reading x once; a Conv over a [N, 1, C, H*W] view is a 1-channel
//     convolution that libraries run poorly and that breaks that fusion. For windows wider than
//     kMaxSliceWindow (never seen in models) the Slice sum would grow linearly, so the rule uses
//     the Conv formulation there: Reshape(q, [N,1,C,S]) -> Conv(ones[1,1,size,1], pads
//     [lo,0,hi,0]) -> Reshape back.
#include <algorithm>

#include "fission/fission.h"

namespace korch {

namespace {

using Ids = std::vector<ValueId>;

constexpr int64_t kMaxSliceWindow = 8;

int64_t normalize_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

std::vector<int64_t> axes_from(int64_t first, int64_t rank) {
  std::vector<int64_t> a;
  for (int64_t i = first; i < rank; ++i) a.push_back(i);
  return a;
}

// keepdims reduction; a reduction over no axes is the identity (ONNX's empty axes would mean
// "all axes", which is not what a row of one element means).
ValueId reduce_keep(FissionBuilder& b, const std::string& op, ValueId x, const std::vector<int64_t>& axes) {
  if (axes.empty()) return x;
  return b.reduce(op, x, axes);
}


// Elementwise op with numpy broadcasting made explicit (Expand, or Reshape + Tile before opset 8).
ValueId ew(FissionBuilder& b, const std::string& op, const Ids& ins) { return b.elementwise(op, ins); }

// Two-pass statistics over `axes` (keepdims): mean, centered x and (optionally) 1/sqrt(var + eps).
struct Moments {
  ValueId mean = kNoValue, centered = kNoValue, var = kNoValue;
};

Moments moments(FissionBuilder& b, ValueId x, const std::vector<int64_t>& axes) {
  Moments m;
  m.mean = reduce_keep(b, "ReduceMean", x, axes);
  m.centered = ew(b, "Sub", {x, m.mean});
  m.var = reduce_keep(b, "ReduceMean", ew(b, "Mul", {m.centered, m.centered}), axes);
  return m;
}

ValueId inv_std(FissionBuilder& b, ValueId var, double eps) {
  DType dt = b.type(var).dtype;
  return ew(b, "Reciprocal", {ew(b, "Sqrt", {ew(b, "Add", {var, b.scalar(eps, dt)})})});
}

// A per-channel parameter [C] as [C, 1, ..., 1] so that it broadcasts against [N, C, D1, ...].
ValueId channel_param(FissionBuilder& b, ValueId p, int64_t rank) {
  Shape s = {b.type(p).numel()};
  for (int64_t i = 2; i < rank; ++i) s.push_back(1);
  return b.reshape(p, s);
}

DType stash_dtype(const Node& n) {
  int64_t code = n.attrs.get_int("stash_type", 1);
  std::optional<DType> dt = dtype_from_onnx(static_cast<int>(code));
  KORCH_CHECK(dt && is_float(*dt), "stash_type {} is not a floating-point type", code);
  return *dt;
}

// Layout primitives in the attribute (old opsets) or input form.
ValueId pad_axis(FissionBuilder& b, ValueId x, int64_t axis, int64_t before, int64_t after) {
  if (before == 0 && after == 0) return x;
  const int64_t rank = b.type(x).rank();
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  pads[static_cast<size_t>(axis)] = before;
  pads[static_cast<size_t>(rank + axis)] = after;
  Attributes a;
  a.set("mode", std::string("constant"));
  if (b.opset() < 11) {
    a.set("pads", pads);
    a.set("value", 0.f);
    return b.add1("Pad", {x}, std::move(a));
  }
  return b.add1("Pad", {x, b.int_list(pads)}, std::move(a));
}

ValueId slice_axis(FissionBuilder& b, ValueId x, int64_t axis, int64_t start, int64_t end) {
  if (start == 0 && end == b.type(x).shape[static_cast<size_t>(axis)]) return x;
  if (b.opset() < 10) {
    Attributes a;
    a.set("starts", std::vector<int64_t>{start});
    a.set("ends", std::vector<int64_t>{end});
    a.set("axes", std::vector<int64_t>{axis});
    return b.add1("Slice", {x}, std::move(a));
  }
  return b.add1("Slice", {x, b.int_list({start}), b.int_list({end}), b.int_list({axis})});
}

// ---------------------------------------------------------------------------------------------
// Softmax family

// Axes a softmax-like op normalises over: one axis (opset >= 13) or [axis, rank) (2-D coercion).
std::vector<int64_t> soft_axes(const Node& n, int opset, int64_t rank) {
  if (opset < 13) return axes_from(normalize_axis(n.attrs.get_int("axis", 1), rank), rank);
  return {normalize_axis(n.attrs.get_int("axis", -1), rank)};
}

Ids softmax_rule(FissionBuilder& b, const Node& n, const Ids& in, bool log) {
  ValueId x = in[0];
  std::vector<int64_t> axes = soft_axes(n, b.opset(), b.type(x).rank());
  ValueId m = reduce_keep(b, "ReduceMax", x, axes);
  ValueId d = ew(b, "Sub", {x, m});
  ValueId e = ew(b, "Exp", {d});
  ValueId s = reduce_keep(b, "ReduceSum", e, axes);
  if (log) return {ew(b, "Sub", {d, ew(b, "Log", {s})})};
  return {ew(b, "Div", {e, s})};
}

Ids hardmax_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const TensorType xt = b.type(x);
  const int64_t rank = xt.rank();
  ValueId v = x;
  int64_t axis;
  if (b.opset() < 13) {
    int64_t a = normalize_axis(n.attrs.get_int("axis", 1), rank);
    int64_t O = 1, R = 1;
    for (int64_t d = 0; d < rank; ++d) (d < a ? O : R) *= xt.shape[static_cast<size_t>(d)];
    v = b.reshape(x, {O, R});
    axis = 1;
  } else {
    axis = normalize_axis(n.attrs.get_int("axis", -1), rank);
  }
  const Shape vs = b.type(v).shape;  // a copy: adding values reallocates the graph's storage
  const int64_t R = vs[static_cast<size_t>(axis)];
  Attributes aa;
  aa.set("axis", axis);
  aa.set("keepdims", int64_t{1});
  ValueId am = b.add1("ArgMax", {v}, std::move(aa));
  // iota along `axis`: shape [1, .., R, .., 1] holding 0..R-1.
  Shape is(vs.size(), 1);
  is[static_cast<size_t>(axis)] = R;
  std::vector<int64_t> iv(static_cast<size_t>(R));
  for (int64_t r = 0; r < R; ++r) iv[static_cast<size_t>(r)] = r;
  ValueId iota = b.constant(Tensor::from_vector<int64_t>(iv, is));
  ValueId y = b.cast(ew(b, "Equal", {iota, am}), xt.dtype);
  return {b.reshape(y, xt.shape)};
}

// ---------------------------------------------------------------------------------------------
// Layer / Instance / Group normalization

Ids layernorm_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const TensorType xt = b.type(x);
  const int64_t rank = xt.rank();
  const double eps = n.attrs.get_float("epsilon", 1e-5f);
  std::vector<int64_t> axes = axes_from(normalize_axis(n.attrs.get_int("axis", -1), rank), rank);
  ValueId xs = b.cast(x, stash_dtype(n));
  Moments m = moments(b, xs, axes);
  ValueId inv = inv_std(b, m.var, eps);
  ValueId y = b.cast(ew(b, "Mul", {m.centered, inv}), xt.dtype);
  y = ew(b, "Mul", {y, in[1]});
  if (in.size() > 2 && in[2] != kNoValue) y = ew(b, "Add", {y, in[2]});
  Ids out(n.outputs.size(), kNoValue);
  out[0] = y;
  if (out.size() > 1 && n.outputs[1] != kNoValue) out[1] = m.mean;
  if (out.size() > 2 && n.outputs[2] != kNoValue) out[2] = inv;
  return out;
}

Ids instancenorm_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const int64_t rank = b.type(x).rank();
  const double eps = n.attrs.get_float("epsilon", 1e-5f);
  Moments m = moments(b, x, axes_from(2, rank));
  ValueId a = ew(b, "Mul", {inv_std(b, m.var, eps), channel_param(b, in[1], rank)});
  return {ew(b, "Add", {ew(b, "Mul", {m.centered, a}), channel_param(b, in[2], rank)})};
}

Ids groupnorm_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const TensorType xt = b.type(x);
  const int64_t rank = xt.rank();
  const int64_t N = xt.shape[0], G = n.attrs.get_int("num_groups");
  const double eps = n.attrs.get_float("epsilon", 1e-5f);
  ValueId r = b.reshape(x, {N, G, xt.numel() / std::max<int64_t>(N * G, 1)});
  if (b.opset() < 21) {
    // Per-group scale and bias: applied in the [N, G, K] view, scale folded into 1/std.
    Moments m = moments(b, r, {2});
    ValueId a = ew(b, "Mul", {inv_std(b, m.var, eps), b.reshape(in[1], {G, 1})});
    ValueId y = ew(b, "Add", {ew(b, "Mul", {m.centered, a}), b.reshape(in[2], {G, 1})});
    return {b.reshape(y, xt.shape)};
  }
  Moments m = moments(b, b.cast(r, stash_dtype(n)), {2});
  ValueId norm = b.cast(ew(b, "Mul", {m.centered, inv_std(b, m.var, eps)}), xt.dtype);
  norm = b.reshape(norm, xt.shape);
  return {ew(b, "Add", {ew(b, "Mul", {norm, channel_param(b, in[1], rank)}), channel_param(b, in[2], rank)})};
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization (inference)

int dtype_rank(DType t) {
  switch (t) {
    case DType::kFloat64: return 3;
    case DType::kFloat32: return 2;
    default: return 1;  // f16, bf16
  }
}

Ids batchnorm_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const TensorType xt = b.type(x);
  const int64_t rank = xt.rank();
  const double eps = n.attrs.get_float("epsilon", 1e-5f);
  // Parameters are computed in x's type when they all share it, else in the widest float type.
  DType cd = xt.dtype;
  bool mixed = false;
  for (int i = 1; i <= 4; ++i) mixed |= b.type(in[static_cast<size_t>(i)]).dtype != xt.dtype;
  if (mixed) {
    cd = DType::kFloat32;
    for (int i = 0; i <= 4; ++i)
      if (dtype_rank(b.type(in[static_cast<size_t>(i)]).dtype) > dtype_rank(cd)) cd = b.type(in[static_cast<size_t>(i)]).dtype;
  }
  ValueId scale = b.cast(in[1], cd), bias = b.cast(in[2], cd), mean = b.cast(in[3], cd),
          var = b.cast(in[4], cd);
  ValueId a = ew(b, "Div", {scale, ew(b, "Sqrt", {ew(b, "Add", {var, b.scalar(eps, cd)})})});
  ValueId c = ew(b, "Sub", {bias, ew(b, "Mul", {mean, a})});
  a = b.cast(a, xt.dtype);
  c = b.cast(c, xt.dtype);
  // [C] parameters go to [C, 1, ..]; spatial=0 parameters [C, D1, ..] already broadcast.
  if (b.type(a).rank() == 1) {
    a = channel_param(b, a, rank);
    c = channel_param(b, c, rank);
  }
  return {ew(b, "Add", {ew(b, "Mul", {x, a}), c})};
}

// ---------------------------------------------------------------------------------------------
// LpNormalization, MeanVarianceNormalization, LRN

Ids lpnorm_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const DType dt = b.type(x).dtype;
  const int64_t axis = normalize_axis(n.attrs.get_int("axis", -1), b.type(x).rank());
  const int64_t p = n.attrs.get_int("p", 2);
  KORCH_CHECK(p == 1 || p == 2, "LpNormalization: p must be 1 or 2, got {}", p);
  ValueId norm = p == 1 ? b.reduce("ReduceSum", ew(b, "Abs", {x}), {axis})
                        : ew(b, "Sqrt", {b.reduce("ReduceSum", ew(b, "Mul", {x, x}), {axis})});
  // A zero norm becomes 1 (x is all zeros there: 0 / 1 = 0): norm + Cast(Not(norm > 0)). Exact
  // for every other norm, and made of ops that exist from opset 7 (Where is 9+, float Equal 11+).
  ValueId zero = b.cast(ew(b, "Not", {ew(b, "Greater", {norm, b.scalar(0, dt)})}), dt);
  return {ew(b, "Div", {x, ew(b, "Add", {norm, zero})})};
}

Ids mvn_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const int64_t rank = b.type(x).rank();
  std::vector<int64_t> axes;
  for (int64_t a : n.attrs.get_ints("axes", {0, 2, 3})) axes.push_back(normalize_axis(a, rank));
  std::sort(axes.begin(), axes.end());
  Moments m = moments(b, x, axes);
  ValueId den = ew(b, "Add", {ew(b, "Sqrt", {m.var}), b.scalar(1e-9, b.type(x).dtype)});
  return {ew(b, "Div", {m.centered, den})};
}

Ids lrn_rule(FissionBuilder& b, const Node& n, const Ids& in) {
  ValueId x = in[0];
  const TensorType xt = b.type(x);
  const double alpha = n.attrs.get_float("alpha", 1e-4f), beta = n.attrs.get_float("beta", 0.75f),
               bias = n.attrs.get_float("bias", 1.0f);
  const int64_t size = n.attrs.get_int("size");
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  const int64_t N = xt.shape[0], C = xt.shape[1];
  ValueId sq = ew(b, "Mul", {x, x});
  ValueId sum;
  if (size <= kMaxSliceWindow) {
    ValueId padded = pad_axis(b, sq, 1, lo, hi);
    sum = slice_axis(b, padded, 1, 0, C);
    for (int64_t k = 1; k < size; ++k) sum = ew(b, "Add", {sum, slice_axis(b, padded, 1, k, k + C)});
  } else {
    const int64_t S = xt.numel() / std::max<int64_t>(N * C, 1);
    std::vector<float> ones(static_cast<size_t>(size), 1.f);
    ValueId w = b.cast(b.constant(Tensor::from_vector<float>(ones, {1, 1, size, 1})), xt.dtype);
    Attributes a;
    a.set("kernel_shape", std::vector<int64_t>{size, 1});
    a.set("pads", std::vector<int64_t>{lo, 0, hi, 0});
    sum = b.reshape(b.add1("Conv", {b.reshape(sq, {N, 1, C, S}), w}, std::move(a)), xt.shape);
  }
  ValueId den = ew(b, "Add", {ew(b, "Mul", {sum, b.scalar(alpha / static_cast<double>(size), xt.dtype)}),
                              b.scalar(bias, xt.dtype)});
  den = ew(b, "Pow", {den, b.scalar(beta, xt.dtype)});
  return {ew(b, "Div", {x, den})};
}

}  // namespace

void register_norm_fission(FissionRegistry& r) {
  r.add("Softmax", [](FissionBuilder& b, const Node& n, const Ids& in) { return softmax_rule(b, n, in, false); });
  r.add("LogSoftmax", [](FissionBuilder& b, const Node& n, const Ids& in) { return softmax_rule(b, n, in, true); });
  r.add("Hardmax", hardmax_rule);
  r.add("LayerNormalization", layernorm_rule);
  r.add("InstanceNormalization", instancenorm_rule);
  r.add("GroupNormalization", groupnorm_rule);
  r.add("BatchNormalization", batchnorm_rule);
  r.add("LpNormalization", lpnorm_rule);
  r.add("MeanVarianceNormalization", mvn_rule);
  r.add("LRN", lrn_rule);
}

}  // namespace korch
