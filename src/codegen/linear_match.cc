// match_linear: which part of a linear kernel runs as one oneDNN primitive, as a JSON description.
//
// Worked example. Kernel {Expand, Conv, Add, Relu, Mul} over
//     y = Conv(x, W);  b = Expand(c[1,64,1,1], [1,64,56,56]);  s = Add(y, b);  r = Relu(s)
//     m = Mul(r, r)
// The step is Conv + binary_add(c as [1,64,1,1]) + eltwise_relu, result = r; Expand is absorbed
// (its only reader, Add, is absorbed) and the post-op reads the small constant c. Mul(r, r) is a
// binary of the chain value with itself: no post-op expresses it, so the chain stops and the loop
// emitter runs Mul reading r.
//
// The chain grows one consumer at a time from the linear output. A value of the chain may be
// extended only when it is not a kernel output and its one kernel reader is the next node (an
// intermediate written nowhere cannot be read by anyone else). Three two-reader patterns are
// recognised: SiLU, Mul(v, Sigmoid(v)) (eltwise_swish); GELU, Mul(v, Add(Erf(Div(v, sqrt 2)), 1))
// (eltwise_gelu_erf, then linear by 2); Mish, Mul(v, Tanh(Softplus(v))) (eltwise_mish).
//
// Description (all dims are oneDNN dims; user memory is row-major unless strides are given):
//   op            "Conv" | "ConvTranspose" | "MatMul" (Einsum runs as a strided MatMul)
//   src_dims, weights_dims, dst_dims, [src_strides], [weights_strides], [dst_strides] (the last
//                 for a channels-last Conv: dst and full-shape operands are NHWC memory)
//   conv          {strides, dilations (oneDNN: d-1), pads_begin, pads_end, group}   (Conv-like)
//   operands      [{role: src|weights|binary|src_zero_point, dims, constant}]  (desc order =
//                 LinearMatch::operands)
//   dtypes        {src: u8|s8, weights: s8, dst: s32|f32|u8|s8} for ConvInteger / MatMulInteger
//                 (absent: all f32); src_zero_point: the operand holding x's zero point, or
//                 src_zero_point_value: its value when it is a constant. An int8 step's chain:
//                 Cast to f32 + Mul by a constant = output_scales (+ output_scales_mask: 0 or the
//                 channel bit), then float post-ops (no full-shape operand), then a per-tensor
//                 QuantizeLinear = an int8 dst
//   post_ops      [{type: eltwise, alg, alpha, beta} | {type: binary, alg, operand | value}]
//                 (value: a single constant, held by the step; int8 steps divide by one exactly)
//   format        "auto" | "plain" | "blocked": layouts of src/dst for Conv-like ops (the
//                 profiler may try both; auto = blocked, see cpu_linear_step.cc)
//   operand_slots, result_slot   -1 here; args[] positions filled by the caller
// Geometry per op: linear_geometry.cc.
#include "codegen/linear_match.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "codegen/linear_internal.h"
#include "ir/primitive.h"

namespace korch {

namespace {

using nlohmann::json;

// The description's name of an element type an int8 step reads or writes.
const char* dnnl_type(DType t) {
  switch (t) {
    case DType::kUInt8: return "u8";
    case DType::kInt8: return "s8";
    case DType::kInt32: return "s32";
    default: return "f32";
  }
}

struct Chain {
  std::vector<NodeId> absorbed;
  std::vector<NodeId> expands;  // Expand nodes whose outputs feed absorbed binaries
  json post_ops = json::array();
  json operands = json::array();
  std::vector<ValueId> operand_values;
};

class Matcher {
 public:
  Matcher(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& outputs,
          const std::function<std::string(const json&)>& library)
      : g_(g), nodes_(nodes), outputs_(outputs), library_(library) {}

  LinearMatchResult run();

 private:
  const Node& node(NodeId id) const { return g_.nodes[static_cast<size_t>(id)]; }
  bool in_kernel(NodeId id) const { return std::binary_search(nodes_.begin(), nodes_.end(), id); }
  bool produced_inside(ValueId v) const { return g_.value(v).producer >= 0 && in_kernel(g_.value(v).producer); }
  bool is_output(ValueId v) const { return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end(); }
  // Kernel nodes reading v, one entry per read.
  std::vector<NodeId> readers(ValueId v) const;

  // Tries to express `n` (reading chain value r) as post-ops; false: the chain stops here.
  bool extend(const Node& n, NodeId id, ValueId r);
  bool eltwise(const Node& n, json& ops);
  bool binary(const Node& n, ValueId r, json& ops);
  static bool append_post_op(json& ops, const json& op);
  std::optional<double> scalar_value(ValueId v) const;
  // `d` with the chain's operands and post-ops, its slots unassigned (-1: the backend binds them).
  json with_chain(json d) const {
    d["operands"] = chain_.operands;
    d["post_ops"] = chain_.post_ops;
    d["operand_slots"] = std::vector<int>(chain_.operands.size(), -1);
    d["result_slot"] = -1;
    return d;
  }
  // An activation read as Mul(r, f(r)), so r has two kernel readers (SiLU, GELU, Mish): the nodes
  // it absorbs (the Mul last) and its post-ops; nullopt when rd is not one of them (or one of its
  // intermediates is read elsewhere or is a kernel output).
  struct TwoReader {
    std::vector<NodeId> nodes;
    json post_ops;
  };
  std::optional<TwoReader> two_reader_activation(ValueId r, const std::vector<NodeId>& rd) const;
  // oneDNN dims of a tensor operand broadcast against the chain's ONNX shape, or nullopt.
  std::optional<Shape> dnnl_dims(const Shape& operand) const;
  bool fast_broadcast(const Shape& dims, const std::string& op) const;
  void add_operand(ValueId v, const std::string& role, const Shape& dims);
  // ConvInteger / MatMulInteger: why oneDNN's int8 kernels cannot run it ("" when they can).
  std::string integer_operands(const Node& ln) const;
  // The kernel node that alone reads v (v not a kernel output), or -1.
  NodeId sole_reader(ValueId v) const;
  // Integer result r: Cast(r, f32) then Mul by a constant per tensor or per output channel becomes
  // oneDNN's output scales (the same float(acc) * scale). Returns the chain value (r if none).
  ValueId integer_scale(ValueId r, json& d);
  // After the float post-ops of an int8 step: a per-tensor QuantizeLinear to int8/uint8 with a
  // zero point of 0 becomes a division post-op and oneDNN's rounding (half to even), saturating
  // conversion to an int8 dst: exactly the interpreter's result. (A nonzero zero point would be
  // added before rounding, in float: round(q + zp) is not round(q) + zp at ties and when the sum
  // rounds, so such a QuantizeLinear stays a loop kernel.) True and r moved to its output if so.
  bool quantize_tail(ValueId& r);

  const Graph& g_;
  const std::vector<NodeId>& nodes_;
  const std::vector<ValueId>& outputs_;
  const std::function<std::string(const json&)>& library_;
  bool integer_ = false;  // an int8 step: no full-shape binary (its dst is not f32)
  linear_detail::LinearGeometry geo_;  // of the linear node; the chain keeps its output shape
  Chain chain_;
};

std::vector<NodeId> Matcher::readers(ValueId v) const {
  std::vector<NodeId> out;
  for (NodeId id : nodes_)
    for (ValueId in : node(id).inputs)
      if (in == v) out.push_back(id);
  return out;
}

void Matcher::add_operand(ValueId v, const std::string& role, const Shape& dims) {
  chain_.operand_values.push_back(v);
  chain_.operands.push_back({{"role", role}, {"dims", dims}, {"constant", g_.value(v).is_constant()}});
}

std::string Matcher::integer_operands(const Node& ln) const {
  const DType x = g_.type(ln.inputs[0]).dtype, w = g_.type(ln.inputs[1]).dtype;
  if (x != DType::kUInt8 && x != DType::kInt8)
    return fmt::format("{} on {} (int8 or uint8 only)", ln.op_type, dtype_name(x));
  if (w != DType::kInt8)
    return fmt::format("{} with {} weights (oneDNN's int8 kernels take int8 weights)", ln.op_type, dtype_name(w));
  if (ln.inputs.size() > 2 && ln.inputs[2] != kNoValue && g_.type(ln.inputs[2]).numel() != 1)
    return fmt::format("{} with a zero point per row (oneDNN: one value)", ln.op_type);
  return "";
}

NodeId Matcher::sole_reader(ValueId v) const {
  if (is_output(v)) return -1;
  std::vector<NodeId> rd = readers(v);
  return rd.size() == 1 ? rd[0] : -1;
}

ValueId Matcher::integer_scale(ValueId r, json& d) {
  const NodeId c = sole_reader(r);
  if (c < 0 || node(c).op_type != "Cast" || g_.type(node(c).outputs[0]).dtype != DType::kFloat32) return r;
  const ValueId f = node(c).outputs[0];
  const NodeId m = sole_reader(f);
  if (m < 0 || node(m).op_type != "Mul" || node(m).inputs.size() != 2) return r;
  ValueId other = node(m).inputs[0] == f ? node(m).inputs[1] : node(m).inputs[0];
  if (other == f) return r;
  NodeId expand = -1;
  if (produced_inside(other)) {
    const Node& e = node(g_.value(other).producer);
    if (e.op_type != "Expand") return r;
    expand = g_.value(other).producer;
    other = e.inputs[0];
  }
  const Value& ov = g_.value(other);
  if (!ov.is_constant() || ov.type.dtype != DType::kFloat32) return r;
  auto dims = dnnl_dims(ov.type.shape);
  if (!dims) return r;
  const size_t channel = geo_.channel_first ? 1 : dims->size() - 1;
  int mask = 0;
  if (ov.type.numel() > 1) {
    for (size_t i = 0; i < dims->size(); ++i)
      if ((*dims)[i] != (i == channel ? geo_.dnnl_dst[i] : 1)) return r;
    mask = 1 << channel;
  }
  const float* v = ov.constant->data<float>();
  d["output_scales"] = std::vector<float>(v, v + ov.type.numel());
  d["output_scales_mask"] = mask;
  chain_.absorbed.push_back(c);
  chain_.absorbed.push_back(m);
  if (expand >= 0) chain_.expands.push_back(expand);
  return node(m).outputs[0];
}

bool Matcher::quantize_tail(ValueId& r) {
  const NodeId n = sole_reader(r);
  if (n < 0 || node(n).op_type != "QuantizeLinear" || node(n).inputs[0] != r ||
      primitive_kind(g_, node(n)) != PrimitiveKind::kElementwise)
    return false;
  const Node& q = node(n);
  const DType to = g_.type(q.outputs[0]).dtype;
  auto scale = scalar_value(q.inputs[1]);
  const bool zp = q.inputs.size() > 2 && q.inputs[2] != kNoValue && g_.value(q.inputs[2]).constant->get_as_double(0) != 0;
  if ((to != DType::kUInt8 && to != DType::kInt8) || !scale || zp) return false;
  chain_.post_ops.push_back({{"type", "binary"}, {"alg", "div"}, {"value", *scale}});
  chain_.absorbed.push_back(n);
  r = q.outputs[0];
  return true;
}

std::optional<Matcher::TwoReader> Matcher::two_reader_activation(ValueId r, const std::vector<NodeId>& rd) const {
  auto eltwise_op = [](const char* alg, double alpha = 0) {
    return json{{"type", "eltwise"}, {"alg", alg}, {"alpha", alpha}, {"beta", 0.0}};
  };
  // r / sqrt(2), or r * (1 / sqrt(2)) in either order.
  auto over_sqrt2 = [&](const Node& n) {
    if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return false;
    if (n.inputs[0] != r && !(n.op_type == "Mul" && n.inputs[1] == r)) return false;
    auto c = scalar_value(n.inputs[0] == r ? n.inputs[1] : n.inputs[0]);
    const double want = n.op_type == "Div" ? std::sqrt(2.0) : n.op_type == "Mul" ? std::sqrt(0.5) : 0.0;
    return c && want != 0 && std::abs(*c - want) <= 1e-6 * want;
  };
  for (size_t first : {0, 1}) {
    const NodeId m = rd[1 - first];
    const Node& mn = node(m);
    if (mn.op_type != "Mul") continue;
    // f(r) from the other reader, along nodes each read only by the next.
    std::vector<NodeId> path{rd[first]};
    auto then = [&](const char* op) {
      const NodeId n = sole_reader(node(path.back()).outputs[0]);
      if (n < 0 || node(n).op_type != op) return false;
      path.push_back(n);
      return true;
    };
    auto adds_one = [&] {
      const Node& a = node(path.back());
      const ValueId prev = node(path[path.size() - 2]).outputs[0];
      const ValueId other = a.inputs[0] == prev ? a.inputs[1] : a.inputs[0];
      return other != prev && scalar_value(other) == std::optional<double>(1.0);
    };
    const Node& p = node(path[0]);
    json ops = json::array();
    if (p.op_type == "Sigmoid") ops.push_back(eltwise_op("swish", 1.0));
    else if (p.op_type == "Softplus" && then("Tanh")) ops.push_back(eltwise_op("mish"));
    else if (over_sqrt2(p) && then("Erf") && then("Add") && adds_one())
      ops = json::array({eltwise_op("gelu_erf"), eltwise_op("linear", 2.0)});
    else continue;
    const ValueId f = node(path.back()).outputs[0];
    if (sole_reader(f) != m || !((mn.inputs[0] == r && mn.inputs[1] == f) || (mn.inputs[1] == r && mn.inputs[0] == f)))
      continue;
    path.push_back(m);
    return TwoReader{std::move(path), std::move(ops)};
  }
  return std::nullopt;
}

std::optional<double> Matcher::scalar_value(ValueId v) const {
  if (v == kNoValue) return std::nullopt;
  const Value& val = g_.value(v);
  if (!val.is_constant() || val.type.numel() != 1 || !is_float(val.type.dtype)) return std::nullopt;
  return val.constant->get_as_double(0);
}

std::optional<Shape> Matcher::dnnl_dims(const Shape& operand) const {
  if (operand.size() > geo_.onnx_out.size()) return std::nullopt;
  Shape s(geo_.onnx_out.size() - operand.size(), 1);
  s.insert(s.end(), operand.begin(), operand.end());
  for (size_t i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != geo_.onnx_out[i]) return std::nullopt;
  if (s == geo_.onnx_out) return geo_.dnnl_dst;
  if (std::all_of(s.begin(), s.end(), [](int64_t v) { return v == 1; })) return Shape(geo_.dnnl_dst.size(), 1);
  // Channels-last: the operand's dims in oneDNN's NCHW order. Its row-major memory is that of the
  // plain NCHW tensor only when the channel dim is 1 or the only non-unit dim (per-channel), the
  // broadcasts fast_broadcast lets through besides the full shape (which gets dst_strides).
  if (geo_.channels_last) return permute_shape(s, channels_first_perm(static_cast<int64_t>(s.size())));
  if (geo_.unit_dims_dropped) return std::nullopt;  // unit dims dropped from the ONNX shape: keep it simple
  if (!geo_.rows_collapsed) return s;
  // Rows [b.., M] collapsed into one dim: all of them broadcast, or none.
  Shape rows(s.begin(), s.end() - 1), full(geo_.onnx_out.begin(), geo_.onnx_out.end() - 1);
  const int64_t cols = s.back();
  if (std::all_of(rows.begin(), rows.end(), [](int64_t v) { return v == 1; })) return Shape{1, cols};
  if (rows == full) return Shape{geo_.dnnl_dst[0], cols};
  return std::nullopt;
}

// Binary operand shapes oneDNN 2.6 runs in its fast kernels. Others make it fall back to a plain
// gemm convolution or the reference matmul (ref:any), many times slower than stopping the chain
// and letting the loop emitter apply the op (measured: tests/codegen/linear_bench_test.cc,
// BroadcastImpls). Conv: per-channel, a single value, or one full-shape Add/Sub (run as a sum
// post-op; brgconv takes no full-shape binary). MatMul: per-column (N), a single value, full.
bool Matcher::fast_broadcast(const Shape& dims, const std::string& op) const {
  const size_t r = dims.size();
  size_t non_unit = 0, last = 0;
  for (size_t i = 0; i < r; ++i)
    if (dims[i] != 1) ++non_unit, last = i;
  if (non_unit == 0) return true;
  if (dims == geo_.dnnl_dst && integer_) return false;
  if (dims == geo_.dnnl_dst) {
    if (!geo_.channel_first) return true;
    if (op != "Add" && op != "Sub") return false;
    for (const json& o : chain_.post_ops)  // one sum per primitive
      if (o.at("type") == "binary" && o.contains("operand") &&
          chain_.operands.at(o.at("operand").get<size_t>()).at("dims") == dims)
        return false;
    return true;
  }
  return non_unit == 1 && last == (geo_.channel_first ? 1 : r - 1);
}

bool Matcher::eltwise(const Node& n, json& ops) {
  auto op = [&](const char* alg, double alpha = 0, double beta = 0) {
    ops.push_back({{"type", "eltwise"}, {"alg", alg}, {"alpha", alpha}, {"beta", beta}});
    return true;
  };
  const std::string& t = n.op_type;
  if (t == "Pow" && n.inputs.size() == 2) {  // x^p with a constant exponent
    auto p = scalar_value(n.inputs[1]);
    return p && n.inputs[1] != n.inputs[0] && op("pow", 1.0, *p);
  }
  if (n.inputs.size() != 1 && t != "Clip") return false;
  if (t == "Relu") return op("relu");
  if (t == "LeakyRelu") return op("relu", n.attrs.get_float("alpha", 0.01f));
  if (t == "Elu") return op("elu", n.attrs.get_float("alpha", 1.0f));
  if (t == "Sigmoid") return op("logistic");
  if (t == "Tanh") return op("tanh");
  if (t == "Exp") return op("exp");
  if (t == "Log") return op("log");
  if (t == "Sqrt") return op("sqrt");
  if (t == "Abs") return op("abs");
  if (t == "Softplus") return op("soft_relu");
  if (t == "Mish") return op("mish");
  if (t == "HardSwish") return op("hardswish");
  if (t == "Neg") return op("linear", -1.0, 0.0);
  if (t == "Reciprocal") return op("pow", 1.0, -1.0);
  if (t == "HardSigmoid") {  // max(0, min(1, alpha*x + beta)): no such eltwise in oneDNN 2.6
    op("linear", n.attrs.get_float("alpha", 0.2f), n.attrs.get_float("beta", 0.5f));
    return op("clip", 0.0, 1.0);
  }
  if (t == "Gelu") {
    std::string approx = n.attrs.get_string("approximate", "none");
    return approx == "tanh" ? op("gelu_tanh") : approx == "none" ? op("gelu_erf") : false;
  }
  if (t == "Clip") {
    // Opset >= 11: min/max are optional inputs (baked scalars); before: attributes.
    double lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
    if (n.inputs.size() == 1 && g_.opset < 11) {
      lo = n.attrs.get_float("min", static_cast<float>(lo));
      hi = n.attrs.get_float("max", static_cast<float>(hi));
    }
    for (size_t i = 1; i < n.inputs.size() && i < 3; ++i) {
      if (n.inputs[i] == kNoValue) continue;
      auto v = scalar_value(n.inputs[i]);
      if (!v) return false;
      (i == 1 ? lo : hi) = *v;
    }
    return op("clip", lo, hi);
  }
  return false;
}

bool Matcher::binary(const Node& n, ValueId r, json& ops) {
  const std::string& t = n.op_type;
  if (n.inputs.size() != 2 || (t != "Add" && t != "Mul" && t != "Sub" && t != "Div" && t != "Max" && t != "Min"))
    return false;
  const bool r_first = n.inputs[0] == r;
  ValueId other = r_first ? n.inputs[1] : n.inputs[0];
  if (other == r) return false;  // a binary of the chain value with itself
  NodeId expand = -1;
  const NodeId p = g_.value(other).producer;
  if (p >= 0 && in_kernel(p)) {
    // Only an Expand of a value from outside the kernel (a bias): the post-op reads the small one.
    if (node(p).op_type != "Expand" || produced_inside(node(p).inputs[0])) return false;
    expand = p;
    other = node(p).inputs[0];
  }
  if (g_.type(other).dtype != DType::kFloat32) return false;
  if (auto c = scalar_value(other)) {
    const double v = *c;
    auto lin = [&](double alpha, double beta) {
      ops.push_back({{"type", "eltwise"}, {"alg", "linear"}, {"alpha", alpha}, {"beta", beta}});
    };
    if (t == "Add") lin(1, v);
    else if (t == "Mul") lin(v, 0);
    else if (t == "Sub") r_first ? lin(1, -v) : lin(-1, v);
    else if (t == "Div" && r_first && integer_)  // exact division: an int8 dst rounds the quotient
      ops.push_back({{"type", "binary"}, {"alg", "div"}, {"value", v}});
    else if (t == "Div" && r_first) lin(1.0 / v, 0);
    else if (t == "Div") ops.push_back({{"type", "eltwise"}, {"alg", "pow"}, {"alpha", v}, {"beta", -1.0}});
    else if (t == "Max") ops.push_back({{"type", "eltwise"}, {"alg", "clip"}, {"alpha", v}, {"beta", std::numeric_limits<float>::max()}});
    else ops.push_back({{"type", "eltwise"}, {"alg", "clip"}, {"alpha", -std::numeric_limits<float>::max()}, {"beta", v}});
  } else {
    if (g_.value(other).is_constant() && g_.type(other).numel() <= 1) return false;  // non-float scalar
    if (t == "Div" && !r_first) return false;  // other / r: no post-op divides by the accumulator
    auto dims = dnnl_dims(g_.type(other).shape);
    if (!dims || !fast_broadcast(*dims, t)) return false;
    const std::string alg = t == "Add" ? "add" : t == "Mul" ? "mul" : t == "Sub" ? "sub" : t == "Div" ? "div"
                          : t == "Max" ? "max" : "min";
    ops.push_back({{"type", "binary"}, {"alg", alg}, {"operand", chain_.operands.size()}});
    add_operand(other, "binary", *dims);
    if (t == "Sub" && !r_first)  // other - r = -(r - other)
      ops.push_back({{"type", "eltwise"}, {"alg", "linear"}, {"alpha", -1.0}, {"beta", 0.0}});
  }
  if (expand >= 0) chain_.expands.push_back(expand);
  return true;
}

bool Matcher::extend(const Node& n, NodeId id, ValueId r) {
  if (n.outputs.size() != 1 || g_.type(n.outputs[0]).shape != g_.type(r).shape ||
      g_.type(n.outputs[0]).dtype != DType::kFloat32)
    return false;
  if (n.inputs.empty() || (n.inputs[0] != r && (n.inputs.size() < 2 || n.inputs[1] != r))) return false;
  // eltwise() never adds operands and binary() adds its operand only when it succeeds.
  json ops = json::array();
  const size_t operands_before = chain_.operands.size(), expands_before = chain_.expands.size();
  if (!(n.inputs[0] == r && eltwise(n, ops)) && !binary(n, r, ops)) return false;
  json merged = chain_.post_ops;
  for (auto& op : ops) {
    if (!append_post_op(merged, op)) {  // roll back what binary() recorded
      chain_.operands.erase(chain_.operands.begin() + static_cast<long>(operands_before), chain_.operands.end());
      chain_.operand_values.resize(operands_before);
      chain_.expands.resize(expands_before);
      return false;
    }
  }
  chain_.post_ops = std::move(merged);
  chain_.absorbed.push_back(id);
  return true;
}

// oneDNN 2.6's brgemm kernels (brgconv, brgconv_1x1, brdgmm_dw, brg matmul: every f32 kernel on
// avx512_core here) compute a wrong result when one eltwise algorithm appears twice in a post-op
// chain with different alpha/beta (linear(0.5,0) then linear(-1,2); clip(0,6) then clip(-1,1);
// LeakyRelu then Relu), while chains of distinct algorithms are right; measured with a standalone
// oneDNN program against scalar loops. So consecutive linear ops are composed into one (cheaper
// anyway), and a node that would repeat an algorithm with other parameters ends the chain.
bool Matcher::append_post_op(json& ops, const json& op) {
  if (op.at("type") == "eltwise" && op.at("alg") == "linear" && !ops.empty() && ops.back().at("type") == "eltwise" &&
      ops.back().at("alg") == "linear") {
    const double a1 = ops.back().at("alpha"), b1 = ops.back().at("beta"), a2 = op.at("alpha"), b2 = op.at("beta");
    ops.back()["alpha"] = a2 * a1;
    ops.back()["beta"] = a2 * b1 + b2;
    return true;
  }
  if (op.at("type") == "eltwise")
    for (const json& o : ops)
      if (o.at("type") == "eltwise" && o.at("alg") == op.at("alg") &&
          (o.at("alpha") != op.at("alpha") || o.at("beta") != op.at("beta")))
        return false;
  ops.push_back(op);
  return true;
}

LinearMatchResult Matcher::run() {
  LinearMatchResult res;
  NodeId lin = -1;
  for (NodeId id : nodes_) {
    if (primitive_kind(g_, node(id)) != PrimitiveKind::kLinear) continue;
    if (lin >= 0) return {false, {}, "more than one linear primitive in the kernel"};
    lin = id;
  }
  if (lin < 0) return {false, {}, "no linear primitive in the kernel"};
  const Node& ln = node(lin);
  const bool integer = ln.op_type == "ConvInteger" || ln.op_type == "MatMulInteger";
  for (size_t i = 0; i < ln.inputs.size(); ++i) {
    const ValueId v = ln.inputs[i];
    if (v == kNoValue) continue;
    if (!integer && g_.type(v).dtype != DType::kFloat32)
      return {false, {}, fmt::format("{} on {} (only f32 is supported)", ln.op_type, dtype_name(g_.type(v).dtype))};
    if (produced_inside(v))
      return {false, {}, fmt::format("an operand of {} is computed inside the kernel (no prologues)", ln.op_type)};
  }
  if (integer) {
    if (std::string why = integer_operands(ln); !why.empty()) return {false, {}, why};
  }
  geo_ = linear_detail::linear_geometry(g_, ln);
  if (!geo_.reason.empty()) return {false, {}, geo_.reason};
  json d = geo_.fields;
  add_operand(ln.inputs[0], "src", geo_.src_dims);
  add_operand(ln.inputs[1], "weights", geo_.weights_dims);
  if (integer) {
    d["dtypes"] = {{"src", dnnl_type(g_.type(ln.inputs[0]).dtype)}, {"weights", "s8"}, {"dst", "s32"}};
    // The src zero point (one value) is read at run time: DynamicQuantizeLinear computes it.
    if (ln.inputs.size() > 2 && ln.inputs[2] != kNoValue) {
      const Value& zp = g_.value(ln.inputs[2]);
      if (zp.is_constant()) {  // a baked scalar: no argument
        d["src_zero_point_value"] = zp.constant->to_int_vector().at(0);
      } else {
        d["src_zero_point"] = chain_.operands.size();
        add_operand(ln.inputs[2], "src_zero_point", {1});
      }
    }
  }

  ValueId r = ln.outputs[0];
  integer_ = integer;
  // An int8 step takes float post-ops only after its output scales (the accumulator is int32).
  const bool scaled = !integer || (r = integer_scale(r, d)) != ln.outputs[0];
  // Whether the backend's library refuses the post-ops of the chain so far (then the chain is put
  // back as it was before its last node, and stops).
  auto refused = [&] {
    if (!library_) return false;
    return !library_(with_chain(d)).empty();
  };
  while (scaled && !is_output(r)) {
    std::vector<NodeId> rd = readers(r);
    std::optional<Chain> before;  // to put back when the backend's library refuses this step
    if (library_) before = chain_;
    ValueId next = kNoValue;
    if (rd.size() == 1) {
      const Node& n = node(rd[0]);
      if (!extend(n, rd[0], r)) break;
      next = n.outputs[0];
    } else if (auto act = rd.size() == 2 ? two_reader_activation(r, rd) : std::nullopt) {
      // SiLU Mul(r, Sigmoid(r)) -> swish; GELU Mul(r, Add(Erf(Div(r, sqrt 2)), 1)) -> gelu_erf
      // (half of that) then linear(2), the exporter's 0.5 often after it or folded into the next
      // weights; Mish Mul(r, Tanh(Softplus(r))) -> mish. All of an activation's post-ops or none.
      json ops = chain_.post_ops;
      bool fits = true;
      for (const json& op : act->post_ops) fits = fits && append_post_op(ops, op);
      if (!fits) break;
      chain_.post_ops = std::move(ops);
      chain_.absorbed.insert(chain_.absorbed.end(), act->nodes.begin(), act->nodes.end());
      next = node(act->nodes.back()).outputs[0];
    } else {
      break;
    }
    if (refused()) {
      chain_ = std::move(*before);
      break;
    }
    r = next;
  }
  if (integer && scaled) quantize_tail(r);
  if (integer) d["dtypes"]["dst"] = dnnl_type(g_.type(r).dtype);
  // An Expand is absorbed when every kernel reader of it is absorbed and nobody else needs it.
  std::vector<NodeId> absorbed = chain_.absorbed;
  for (NodeId e : chain_.expands) {
    if (std::find(absorbed.begin(), absorbed.end(), e) != absorbed.end()) continue;
    const ValueId ev = node(e).outputs[0];
    bool all = !is_output(ev);
    for (NodeId rd : readers(ev)) all &= std::find(chain_.absorbed.begin(), chain_.absorbed.end(), rd) != chain_.absorbed.end();
    if (all) absorbed.push_back(e);
  }
  std::sort(absorbed.begin(), absorbed.end());

  d = with_chain(std::move(d));
  d["format"] = "auto";
  res.ok = true;
  res.match.linear = lin;
  res.match.absorbed = std::move(absorbed);
  res.match.result = r;
  res.match.operands = chain_.operand_values;
  res.match.desc = std::move(d);
  return res;
}

}  // namespace

LinearMatchResult match_linear(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& outputs,
                               const std::function<std::string(const json&)>& library) {
  return Matcher(g, nodes, outputs, library).run();
}

}  // namespace korch
