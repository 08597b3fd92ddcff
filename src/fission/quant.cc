// Fission of the quantized operators into integer linear primitives plus elementwise scaling.
// Every rule reproduces the reference interpreter's arithmetic exactly (ir/ops/quant.cc,
// ir/ops/quant_linear.cc): the same operations in the same types, so integer results are equal
// bit for bit, not only close.
//
//   DequantizeLinear x: u8[N,C,H,W], s: f32[C], zp: u8[C], axis=1 ->
//     d = Sub(Cast(x, i32), Cast(Reshape(zp, [1,C,1,1]), i32))   (8- and 16-bit x only)
//     y = Mul(Cast(d, f32), Reshape(s, [1,C,1,1]))
//   QuantizeLinear x: f32, s, zp: u8 ->
//     q = Div(x, s);  q = Where(IsNaN(q), 0, q)      (NaN quantizes to the zero point)
//     y = Cast(Clip(Add(Round(q), Cast(zp, f32)), 0, 255), u8)    (Round: half to even)
//   DynamicQuantizeLinear x: f32 ->
//     hi = Max(ReduceMax(x), 0);  lo = Min(ReduceMin(x), 0)
//     scale = Div(Where(Equal(hi, lo), 1, Sub(hi, lo)), 255)
//     zp = Round(Clip(Sub(0, Div(lo, scale)), 0, 255))  (f32, NaN as 0; the u8 output is its Cast)
//     y = Cast(Clip(Add(Round(Where(IsNaN(q), 0, q)), zp), 0, 255), u8) with q = Div(x, scale)
//   QLinearConv x, xs, xzp, w, ws, wzp, ys, yzp, B ->
//     c = ConvInteger(x, w - wzp, xzp)               (weights folded: a linear primitive)
//     c = Add(c, Reshape(B, [1,M,1,1]))              (int32)
//     m = Cast(Div(Mul(xs, ws), ys), f64)            (per output channel; folds to a constant)
//     y = Cast(Clip(Add(Round(Mul(Cast(c, f64), m)), yzp), lo, hi), u8|s8)
//   QLinearMatMul: the same with MatMulInteger (a per tensor, b per tensor or per column).
//   ConvInteger / MatMulInteger with a nonzero constant weight zero point: the zero point is
//     folded into the constant weights (int8 when w - wzp fits, which int8 kernels need); where it
//     does not fit (uint8 weights), y = Linear(x, w - 128) + (128 - wzp) * Linear(x, ones) (the
//     second a sum over each receptive field; split_weight_zero_point).
//
// Per-tensor QuantizeLinear / DequantizeLinear with constant parameters are elementwise primitives
// (ir/primitive.h) and reach these rules only as constants to fold. What a rule cannot express
// exactly (float16/bfloat16 scales, blocked or per-row layouts, weights or weight zero points that
// are not constants, int32/int4/float8 types, opset 10, which has no Round) is kept as the
// operator: it runs whole in the reference interpreter.
#include "fission/fission.h"

#include <optional>

#include "ir/dtype.h"

namespace korch {

namespace {

bool has(const std::vector<ValueId>& in, size_t i) { return i < in.size() && in[i] != kNoValue; }

// Round (half to even), which every quantizer needs, exists from opset 11 on.
bool has_round(const FissionBuilder& b) { return b.opset() >= 11; }

std::vector<ValueId> keep(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  return b.add(n.op_type, in, n.attrs, static_cast<int>(n.outputs.size()));
}

// Quantized constants (weights the frontend leaves unfolded for integer_linear_from_qdq) fold
// as the operator: one constant, not a chain of broadcasts.
bool all_constant(const FissionBuilder& b, const std::vector<ValueId>& in) {
  for (ValueId v : in)
    if (v != kNoValue && !b.constant_value(v)) return false;
  return true;
}

bool per_tensor(const Shape& s) { return shape_numel(s) == 1 && s.size() <= 1; }

// A scale or zero point laid out for `x` of rank `rank`: per tensor as is, per axis (1-D of
// x.shape[axis]) reshaped to broadcast along `axis`. nullopt: another layout.
std::optional<ValueId> along_axis(FissionBuilder& b, ValueId p, size_t rank, int64_t axis) {
  const Shape s = b.type(p).shape;
  if (per_tensor(s)) return s.empty() ? p : b.reshape(p, {});
  if (s.size() != 1 || axis < 0 || static_cast<size_t>(axis) >= rank) return std::nullopt;
  Shape r(rank, 1);
  r[static_cast<size_t>(axis)] = s[0];
  return b.reshape(p, r);
}

int64_t quant_axis(const Node& n, size_t rank) {
  int64_t axis = n.attrs.get_int("axis", 1);
  return axis < 0 ? axis + static_cast<int64_t>(rank) : axis;
}

// Round half to even, add the zero point, saturate, convert: the tail of every quantizer.
ValueId saturate_to(FissionBuilder& b, ValueId q, ValueId zp, DType out) {
  const DType work = b.type(q).dtype;
  const auto [lo, hi] = *quantized_range(out);
  ValueId r = b.add1("Round", {q});
  if (zp != kNoValue) r = b.elementwise("Add", {r, b.cast(zp, work)});
  r = b.elementwise("Clip", {r, b.scalar(lo, work), b.scalar(hi, work)});
  return b.cast(r, out);
}

ValueId nan_to_zero(FissionBuilder& b, ValueId q) {
  return b.elementwise("Where", {b.add1("IsNaN", {q}), b.scalar(0, b.type(q).dtype), q});
}

std::vector<ValueId> dequantize_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  const TensorType x = b.type(in[0]);  // a copy: adding nodes moves the graph's values
  const size_t rank = x.shape.size();
  if (all_constant(b, in) || b.type(in[1]).dtype != DType::kFloat32 || !quantized_range(x.dtype) ||
      n.attrs.get_int("block_size", 0) > 0)
    return keep(b, n, in);
  const int64_t axis = quant_axis(n, rank);
  auto s = along_axis(b, in[1], rank, axis);
  std::optional<ValueId> zp = has(in, 2) ? along_axis(b, in[2], rank, axis) : std::optional<ValueId>(kNoValue);
  if (!s || !zp) return keep(b, n, in);
  ValueId v = b.cast(in[0], DType::kInt32);  // every covered type and its differences fit int32
  if (*zp != kNoValue) v = b.elementwise("Sub", {v, b.cast(*zp, DType::kInt32)});
  return {b.elementwise("Mul", {b.cast(v, DType::kFloat32), *s})};
}

std::vector<ValueId> quantize_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  const TensorType x = b.type(in[0]);  // a copy: adding nodes moves the graph's values
  const size_t rank = x.shape.size();
  DType out = has(in, 2) ? b.type(in[2]).dtype : DType::kUInt8;
  if (!has(in, 2) && n.attrs.has("output_dtype") && n.attrs.get_int("output_dtype") != 0) {
    auto t = dtype_from_onnx(static_cast<int>(n.attrs.get_int("output_dtype")));
    if (!t) return keep(b, n, in);
    out = *t;
  }
  if (all_constant(b, in) || x.dtype != DType::kFloat32 || b.type(in[1]).dtype != DType::kFloat32 ||
      !quantized_range(out) || !has_round(b) || n.attrs.get_int("block_size", 0) > 0)
    return keep(b, n, in);
  const int64_t axis = quant_axis(n, rank);
  auto s = along_axis(b, in[1], rank, axis);
  std::optional<ValueId> zp = has(in, 2) ? along_axis(b, in[2], rank, axis) : std::optional<ValueId>(kNoValue);
  if (!s || !zp) return keep(b, n, in);
  ValueId q = nan_to_zero(b, b.elementwise("Div", {in[0], *s}));
  return {saturate_to(b, q, *zp, out)};
}

std::vector<ValueId> dynamic_quantize_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  const TensorType x = b.type(in[0]);  // a copy: adding nodes moves the graph's values
  if (x.dtype != DType::kFloat32 || x.shape.empty() || !has_round(b)) return keep(b, n, in);
  std::vector<int64_t> all(x.shape.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const DType f = DType::kFloat32;
  ValueId hi = b.elementwise("Max", {b.reduce("ReduceMax", in[0], all, false), b.scalar(0, f)});
  ValueId lo = b.elementwise("Min", {b.reduce("ReduceMin", in[0], all, false), b.scalar(0, f)});
  ValueId range = b.elementwise("Where", {b.elementwise("Equal", {hi, lo}), b.scalar(1, f), b.elementwise("Sub", {hi, lo})});
  ValueId scale = b.elementwise("Div", {range, b.scalar(255, f)});
  ValueId zp = b.elementwise("Sub", {b.scalar(0, f), b.elementwise("Div", {lo, scale})});
  zp = b.add1("Round", {b.elementwise("Clip", {nan_to_zero(b, zp), b.scalar(0, f), b.scalar(255, f)})});
  ValueId q = b.add1("Round", {nan_to_zero(b, b.elementwise("Div", {in[0], scale}))});
  q = b.elementwise("Clip", {b.elementwise("Add", {q, zp}), b.scalar(0, f), b.scalar(255, f)});
  return {b.cast(q, DType::kUInt8), scale, b.cast(zp, DType::kUInt8)};
}

// w - w_zero_point as an int8 constant (the zero point per tensor or along `channel_axis` of w),
// or nullopt when either is not a constant or the difference leaves int8.
std::optional<ValueId> fold_weight_zero_point(FissionBuilder& b, ValueId w, ValueId wzp, int64_t channel_axis) {
  const Tensor* wt = b.constant_value(w);
  const Tensor* zt = b.constant_value(wzp);
  if (!wt || !zt) return std::nullopt;
  const Shape& ws = wt->shape();
  const std::vector<int64_t> wv = wt->to_int_vector(), zv = zt->to_int_vector();
  int64_t inner = 1;  // elements per step of the channel axis
  for (size_t i = static_cast<size_t>(channel_axis) + 1; i < ws.size(); ++i) inner *= ws[i];
  const int64_t channels = ws.empty() ? 1 : ws[static_cast<size_t>(channel_axis)];
  if (zv.size() != 1 && static_cast<int64_t>(zv.size()) != channels) return std::nullopt;
  std::vector<int8_t> out(wv.size());
  for (size_t i = 0; i < wv.size(); ++i) {
    const int64_t z = zv.size() == 1 ? zv[0] : zv[static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels)];
    const int64_t d = wv[i] - z;
    if (d < -128 || d > 127) return std::nullopt;
    out[i] = static_cast<int8_t>(d);
  }
  return b.constant(Tensor::from_vector<int8_t>(out, ws));
}

// A constant weight zero point that does not fold (uint8 weights, as quantize_dynamic's QUInt8
// writes them): with a shift s (128 for uint8, 0 for int8) such that w - s fits int8,
//   sum (x - xzp)(w - zp) = sum (x - xzp)(w - s) + (s - zp) * sum (x - xzp),
// the first an int8 linear primitive and the second the sum of (x - xzp) over each output's
// receptive field: a ConvInteger with all-ones int8 weights (one output channel per group, the
// node's pads, strides and dilations) or, for MatMulInteger, a ReduceSum over K. Exact in int32,
// as the interpreter's sum is. nullopt when w or zp is not a constant or the layout is unknown.
std::optional<ValueId> split_weight_zero_point(FissionBuilder& b, const std::string& op, const Attributes& attrs,
                                               ValueId x, ValueId w, ValueId xzp, ValueId wzp) {
  const Tensor* wt = b.constant_value(w);
  const Tensor* zt = b.constant_value(wzp);
  if (!wt || !zt || (wt->dtype() != DType::kUInt8 && wt->dtype() != DType::kInt8)) return std::nullopt;
  const bool conv = op == "ConvInteger";
  if (xzp != kNoValue && b.type(xzp).numel() != 1) return std::nullopt;  // MatMulInteger's per-row a_zero_point
  const Shape& ws = wt->shape();
  const int64_t channels = conv ? ws[0] : ws.back();  // output channels (columns for MatMul)
  const std::vector<int64_t> zv = zt->to_int_vector();
  if (zv.size() != 1 && static_cast<int64_t>(zv.size()) != channels) return std::nullopt;
  const int64_t shift = wt->dtype() == DType::kUInt8 ? 128 : 0;
  const std::vector<int64_t> wv = wt->to_int_vector();
  std::vector<int8_t> w8(wv.size());
  for (size_t i = 0; i < wv.size(); ++i) w8[i] = static_cast<int8_t>(wv[i] - shift);
  std::vector<int32_t> k(zv.size());
  for (size_t i = 0; i < zv.size(); ++i) k[i] = static_cast<int32_t>(shift - zv[i]);

  std::vector<ValueId> ins = {x, b.constant(Tensor::from_vector<int8_t>(w8, ws))};
  if (xzp != kNoValue) ins.push_back(xzp);
  ValueId main = b.add1(op, ins, attrs);
  const Shape y = b.type(main).shape;
  const size_t rank = y.size();
  // k per output channel ([1, M, 1..] against y) or one scalar.
  std::vector<int32_t> kv = k;
  Shape k_shape;
  if (k.size() > 1) {
    k_shape.assign(conv ? rank : 1, 1);
    k_shape[conv ? 1 : 0] = channels;
  }
  ValueId sum;  // sum of (x - xzp) over each output's receptive field
  if (conv) {
    const int64_t groups = attrs.get_int("group", 1);
    if (groups < 1 || channels % groups != 0) return std::nullopt;
    Shape ones_shape = ws;
    ones_shape[0] = groups;
    const std::vector<int8_t> ones(static_cast<size_t>(shape_numel(ones_shape)), 1);
    std::vector<ValueId> ones_ins = {x, b.constant(Tensor::from_vector<int8_t>(ones, ones_shape))};
    if (xzp != kNoValue) ones_ins.push_back(xzp);
    sum = b.add1(op, ones_ins, attrs);  // [N, groups, spatial..]
    if (groups > 1 && groups != channels) {
      // [N, groups, 1, spatial..] against k [1, groups, M / groups, 1..]: each group's sum serves
      // its own output channels; the product is reshaped to y's [N, M, spatial..] below.
      Shape s1 = b.type(sum).shape;
      s1.insert(s1.begin() + 2, 1);
      sum = b.reshape(sum, s1);
      kv.assign(static_cast<size_t>(channels), 0);
      for (int64_t c = 0; c < channels; ++c) kv[static_cast<size_t>(c)] = k.size() > 1 ? k[static_cast<size_t>(c)] : k[0];
      k_shape.assign(rank + 1, 1);
      k_shape[1] = groups;
      k_shape[2] = channels / groups;
    }
  } else {
    ValueId d = b.cast(x, DType::kInt32);
    if (xzp != kNoValue) d = b.elementwise("Sub", {d, b.cast(xzp, DType::kInt32)});
    sum = b.reduce("ReduceSum", d, {static_cast<int64_t>(b.type(x).shape.size()) - 1});  // [.., M, 1]
  }
  ValueId corr = b.elementwise("Mul", {sum, b.constant(Tensor::from_vector<int32_t>(kv, k_shape))});
  if (b.type(corr).shape.size() > rank) corr = b.reshape(corr, y);
  return b.elementwise("Add", {main, corr});
}

// ConvInteger / MatMulInteger (x, w, x_zero_point?, w_zero_point?) as a linear primitive: the
// weight zero point folded into the weights, or split off (split_weight_zero_point), or the node
// as is when neither can be done.
ValueId integer_linear(FissionBuilder& b, const std::string& op, const Attributes& attrs, ValueId x, ValueId w,
                       ValueId xzp, ValueId wzp) {
  const bool conv = op == "ConvInteger";
  if (wzp != kNoValue) {
    // Conv weights [M, C/g, k..]: per output channel along axis 0; MatMul b [.., K, N]: per column.
    const int64_t axis = conv ? 0 : static_cast<int64_t>(b.type(w).shape.size()) - 1;
    if (auto folded = fold_weight_zero_point(b, w, wzp, axis)) {
      w = *folded;
      wzp = kNoValue;
    } else if (conv || b.type(w).shape.size() == 2) {
      if (auto split = split_weight_zero_point(b, op, attrs, x, w, xzp, wzp)) return *split;
    }
  }
  std::vector<ValueId> ins = {x, w, xzp};
  if (wzp != kNoValue) ins.push_back(wzp);
  while (ins.size() > 2 && ins.back() == kNoValue) ins.pop_back();
  return b.add1(op, ins, attrs);
}

std::vector<ValueId> integer_linear_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  return {integer_linear(b, n.op_type, n.attrs, in[0], in[1], has(in, 2) ? in[2] : kNoValue,
                         has(in, 3) ? in[3] : kNoValue)};
}

// The requantization of an int32 accumulator c: round_half_even(c * m) + y_zero_point, saturated,
// m = a_scale * b_scale / y_scale in float32 (broadcast against c as the scales are laid out).
ValueId requantize(FissionBuilder& b, ValueId c, ValueId as, ValueId bs, ValueId ys, ValueId yzp) {
  ValueId m = b.elementwise("Div", {b.elementwise("Mul", {as, bs}), ys});
  ValueId v = b.elementwise("Mul", {b.cast(c, DType::kFloat64), b.cast(m, DType::kFloat64)});
  return saturate_to(b, v, yzp, b.type(yzp).dtype);
}

bool f32_scales(const FissionBuilder& b, const std::vector<ValueId>& in, std::initializer_list<size_t> idx) {
  for (size_t i : idx)
    if (!has(in, i) || b.type(in[i]).dtype != DType::kFloat32) return false;
  return true;
}

// QLinearConv (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B?).
std::vector<ValueId> qlinear_conv_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  if (!f32_scales(b, in, {1, 4, 6}) || !has(in, 7) || !quantized_range(b.type(in[7]).dtype) || !has_round(b) ||
      !per_tensor(b.type(in[1]).shape) || !per_tensor(b.type(in[6]).shape))
    return keep(b, n, in);
  const size_t rank = b.type(in[0]).shape.size();
  auto ws = along_axis(b, in[4], rank, 1);  // per output channel: dim 1 of the output
  if (!ws) return keep(b, n, in);
  ValueId c = integer_linear(b, "ConvInteger", n.attrs, in[0], in[3], in[2], in[5]);
  if (has(in, 8)) {
    Shape bias(rank, 1);
    bias[1] = b.type(in[8]).shape.empty() ? 1 : b.type(in[8]).shape[0];
    c = b.elementwise("Add", {c, b.reshape(in[8], bias)});
  }
  return {requantize(b, c, b.reshape(in[1], {}), *ws, b.reshape(in[6], {}), b.reshape(in[7], {}))};
}

// QLinearMatMul (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point).
std::vector<ValueId> qlinear_matmul_rule(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  if (!f32_scales(b, in, {1, 4, 6}) || !has(in, 7) || !quantized_range(b.type(in[7]).dtype) || !has_round(b) ||
      !per_tensor(b.type(in[1]).shape) || !per_tensor(b.type(in[6]).shape) ||
      (has(in, 2) && !per_tensor(b.type(in[2]).shape)))
    return keep(b, n, in);
  const Shape bs = b.type(in[4]).shape;
  const int64_t n_cols = b.type(in[3]).shape.empty() ? 1 : b.type(in[3]).shape.back();
  if (!per_tensor(bs) && !(bs.size() == 1 && bs[0] == n_cols)) return keep(b, n, in);  // per column: [N]
  ValueId c = integer_linear(b, "MatMulInteger", {}, in[0], in[3], in[2], has(in, 5) ? in[5] : kNoValue);
  ValueId bsv = per_tensor(bs) ? b.reshape(in[4], {}) : in[4];
  return {requantize(b, c, b.reshape(in[1], {}), bsv, b.reshape(in[6], {}), b.reshape(in[7], {}))};
}

// ------------------------------------------------------------------------------------------------
// Float linear operators on dequantized operands (the QDQ format) as integer linear primitives.

// A DequantizeLinear producing `v` in `g` (nullptr otherwise).
const Node* dequantize_producer(const Graph& g, ValueId v) {
  const NodeId p = g.value(v).producer;
  if (p < 0) return nullptr;
  const Node& n = g.nodes[static_cast<size_t>(p)];
  return n.op_type == "DequantizeLinear" && n.domain.empty() ? &n : nullptr;
}

// The per-tensor f32 constant at input i of `n`, or nullopt.
std::optional<float> const_scalar(const Graph& g, const Node& n, size_t i) {
  if (!has(n.inputs, i)) return std::nullopt;
  const Value& v = g.value(n.inputs[i]);
  if (!v.is_constant() || !per_tensor(v.type.shape) || v.type.dtype != DType::kFloat32) return std::nullopt;
  return v.constant->data<float>()[0];
}

struct QdqOperand {
  ValueId q = kNoValue;    // the integer tensor (input graph)
  ValueId zp = kNoValue;   // its zero point (input graph), kNoValue when absent
  std::vector<float> scale;  // one per tensor, or one per channel along `axis`
  int64_t axis = -1;         // -1 per tensor
};

// The dequantized activation X = DequantizeLinear(xq, scalar scale, scalar zero point).
std::optional<QdqOperand> activation_operand(const Graph& g, ValueId x) {
  const Node* d = dequantize_producer(g, x);
  if (!d || d->attrs.get_int("block_size", 0) > 0) return std::nullopt;
  const DType t = g.type(d->inputs[0]).dtype;
  auto s = const_scalar(g, *d, 1);
  if ((t != DType::kUInt8 && t != DType::kInt8) || !s) return std::nullopt;
  if (has(d->inputs, 2) && (!g.value(d->inputs[2]).is_constant() || !per_tensor(g.type(d->inputs[2]).shape)))
    return std::nullopt;
  return QdqOperand{d->inputs[0], has(d->inputs, 2) ? d->inputs[2] : kNoValue, {*s}, -1};
}

// Constant dequantized weights W = DequantizeLinear(wq, scale per tensor or along channel_axis).
std::optional<QdqOperand> weight_operand(const Graph& g, ValueId w, int64_t channel_axis) {
  const Node* d = dequantize_producer(g, w);
  if (!d || d->attrs.get_int("block_size", 0) > 0) return std::nullopt;
  const Value& q = g.value(d->inputs[0]);
  const Value& s = g.value(d->inputs[1]);
  if (!q.is_constant() || !s.is_constant() || s.type.dtype != DType::kFloat32) return std::nullopt;
  if (q.type.dtype != DType::kInt8 && q.type.dtype != DType::kUInt8) return std::nullopt;
  if (has(d->inputs, 2) && !g.value(d->inputs[2]).is_constant()) return std::nullopt;
  QdqOperand r{d->inputs[0], has(d->inputs, 2) ? d->inputs[2] : kNoValue, {}, -1};
  const float* sd = s.constant->data<float>();
  if (per_tensor(s.type.shape)) {
    r.scale = {sd[0]};
  } else {
    const int64_t rank = static_cast<int64_t>(q.type.shape.size());
    int64_t axis = d->attrs.get_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis != channel_axis || s.type.shape.size() != 1 || s.type.shape[0] != q.type.shape[static_cast<size_t>(axis)])
      return std::nullopt;
    r.scale.assign(sd, sd + s.type.numel());
    r.axis = axis;
  }
  return r;
}

// y = Cast(c, f32) * (x_scale * w_scale) [+ bias], the scales' product per channel of y
// (`channel_dim` of y's rank `rank`, or per tensor).
ValueId rescale(FissionBuilder& b, ValueId c, const QdqOperand& x, const QdqOperand& w, size_t rank,
                size_t channel_dim, ValueId bias) {
  std::vector<float> m(w.scale.size());
  for (size_t i = 0; i < m.size(); ++i) m[i] = x.scale[0] * w.scale[i];
  Shape ms;
  if (m.size() > 1) {
    ms.assign(rank, 1);
    ms[channel_dim] = static_cast<int64_t>(m.size());
  }
  ValueId y = b.elementwise("Mul", {b.cast(c, DType::kFloat32), b.constant(Tensor::from_vector<float>(m, ms))});
  if (bias == kNoValue) return y;
  const int64_t nb = b.type(bias).numel();
  Shape bs(rank, 1);
  bs[channel_dim] = nb;
  return b.elementwise("Add", {y, b.reshape(bias, bs)});
}

}  // namespace

std::optional<std::vector<ValueId>> integer_linear_from_qdq(FissionBuilder& b, const Graph& g, const Node& n,
                                                           const std::function<ValueId(ValueId)>& mapped) {
  if (!n.domain.empty() || !has_round(b)) return std::nullopt;
  const bool conv = n.op_type == "Conv", gemm = n.op_type == "Gemm";
  if ((!conv && !gemm && n.op_type != "MatMul") || n.inputs.size() < 2 || n.outputs.size() != 1) return std::nullopt;
  const size_t rank = g.type(n.outputs[0]).shape.size();
  if (rank < 2 || g.type(n.outputs[0]).dtype != DType::kFloat32) return std::nullopt;
  ValueId bias = kNoValue;
  if (has(n.inputs, 2)) {  // a constant f32 bias per output channel
    const Value& bv = g.value(n.inputs[2]);
    const int64_t channels = g.type(n.outputs[0]).shape[conv ? 1 : rank - 1];
    if (!bv.is_constant() || bv.type.dtype != DType::kFloat32 || bv.type.numel() != channels ||
        (bv.type.shape.size() != 1 && !(gemm && bv.type.shape == Shape{1, channels})))
      return std::nullopt;
    bias = mapped(n.inputs[2]);
  }
  if (gemm && (n.attrs.get_int("transA", 0) != 0 || n.attrs.get_float("alpha", 1.f) != 1.f ||
               (bias != kNoValue && n.attrs.get_float("beta", 1.f) != 1.f)))
    return std::nullopt;
  const bool trans_b = gemm && n.attrs.get_int("transB", 0) != 0;
  // Output channels: Conv weights [M, C/g, k..] axis 0; MatMul b [K, N] axis 1; Gemm B^T [N, K] axis 0.
  const int64_t w_axis = conv || trans_b ? 0 : static_cast<int64_t>(g.type(n.inputs[1]).shape.size()) - 1;
  auto x = activation_operand(g, n.inputs[0]);
  auto w = weight_operand(g, n.inputs[1], w_axis);
  if (!x || !w || (!conv && g.type(n.inputs[1]).shape.size() != 2)) return std::nullopt;
  // int8 weights with their zero point folded in (int8 kernels take no weight zero point);
  // otherwise the float path stays.
  ValueId wq = mapped(w->q);
  if (w->zp != kNoValue) {
    auto folded = fold_weight_zero_point(b, wq, mapped(w->zp), w_axis);
    if (!folded) return std::nullopt;
    wq = *folded;
  }
  if (b.type(wq).dtype != DType::kInt8) return std::nullopt;
  if (trans_b) {  // a constant: folds
    Attributes perm;
    perm.set("perm", std::vector<int64_t>{1, 0});
    wq = b.add1("Transpose", {wq}, perm);
  }
  std::vector<ValueId> ins = {mapped(x->q), wq};
  if (x->zp != kNoValue) ins.push_back(mapped(x->zp));
  ValueId c = b.add1(conv ? "ConvInteger" : "MatMulInteger", ins, conv ? n.attrs : Attributes{});
  return std::vector<ValueId>{rescale(b, c, *x, *w, rank, conv ? 1 : rank - 1, bias)};
}

void register_quant_fission(FissionRegistry& r) {
  r.add("DequantizeLinear", dequantize_rule);
  r.add("QuantizeLinear", quantize_rule);
  r.add("DynamicQuantizeLinear", dynamic_quantize_rule);
  r.add("ConvInteger", integer_linear_rule);
  r.add("MatMulInteger", integer_linear_rule);
  r.add("QLinearConv", qlinear_conv_rule);
  r.add("QLinearMatMul", qlinear_matmul_rule);
}

}  // namespace korch
