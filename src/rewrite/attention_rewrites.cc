// The paper's attention rewrites, offered as alternatives (see alternatives.h for why they are not
// applied greedily). Each rule matches on a primitive graph (after fission; explicit Expands) and
// also on the operator-graph spelling where one exists (implicit broadcasting). Only f32/f64: the
// rules reassociate real arithmetic (exact up to rounding) and Div does not commute with integer
// truncation. Every rule requires the intermediate values it removes to have no other user.
//
// Worked mini examples (x: f32[2,4,6], V: f32[2,6,5]; "E(v, S)" is Expand(v, S)):
//
// (a) "reduce_sum_as_matmul": a row sum as a MatMul with a ones operand (the paper's Softmax
//     denominator trick: as a linear primitive it can fuse into the MatMul kernel before it).
//       s = ReduceSum(x, axes=[2], keepdims=1)        f32[2,4,1]
//     -> s = MatMul(x, ones[6,1])                     f32[2,4,1]
//     A reduction over the second-to-last axis takes the ones on the left:
//       c = ReduceSum(x, axes=[1], keepdims=1)        f32[2,1,6]
//     -> c = MatMul(ones[1,4], x)                     f32[2,1,6]
//     (axes as the attribute before opset 13, as a constant input after; a rank-1 x reduced over
//     its only axis is the last-axis case: MatMul(x[K], ones[K,1]) is f32[1].)
//
// (b) "scale_after_matmul": MatMul is linear in each operand, so a scale of an operand that is
//     constant along the contracted axis commutes to its output. With the softmax of fission,
//       e = Exp(Sub(x, E(m)));  r = ReduceSum(e, [2]) f32[2,4,1]
//       p = Div(e, E(r, [2,4,6]));  o = MatMul(p, V)  f32[2,4,5]
//     -> o = Div(MatMul(e, V), E(r, [2,4,5]))          (softmax(x) @ V = (exp(x-m) @ V) / rowsum)
//     Scales that qualify: a scalar constant (either operand), a tensor broadcast along the last
//     axis only ([.., M, 1], left operand: one factor per row), or along the second-to-last axis
//     only ([.., 1, N], right operand: one factor per output column); Mul in either operand order,
//     Div only as Div(operand, scale). Both operands' scales move when both qualify:
//       o = MatMul(Mul(a, 2), Div(b, 3))  ->  o = Div(Mul(MatMul(a, b), 2), 3)
//     The new Expand broadcasts the same source tensor to the output shape.
//   "scale_before_matmul": the reverse, for a scalar or per-row scale of a MatMul output moved onto
//     the left operand (when the scale broadcasts onto that operand without enlarging it):
//       o = Div(MatMul(e, V), E(r, [2,4,5]))  ->  o = MatMul(Div(e, E(r, [2,4,6])), V)
//
// (c) "transpose_into_einsum": ONNX MatMul has no transpose flags, but Einsum (a linear
//     primitive, opset >= 12) does through its subscripts. With Transposes that swap the last two
//     axes (perm [0,..,r-1,r-2]; default perm for rank 2):
//       o = MatMul(Transpose(a[2,6,4]), b[2,6,5])     -> o = Einsum("...ji,...jk->...ik", a, b)
//       o = MatMul(a[2,4,6], Transpose(b[2,5,6]))     -> o = Einsum("...ij,...kj->...ik", a, b)
//       both transposed                               -> o = Einsum("...ji,...kj->...ik", a, b)
//     Every qualifying operand is absorbed ("..." broadcasts batch dims as MatMul does).
//   "transpose_of_matmul": (a @ b)^T = b^T @ a^T, moving a transpose of the output onto the
//     operands (useful when those transposes then cancel or fold into their producers):
//       o = Transpose(MatMul(a[2,4,6], b[2,6,5]), perm=[0,2,1])   f32[2,5,4]
//     -> o = MatMul(Transpose(b, [0,2,1]), Transpose(a, [0,2,1]))
#include <fmt/format.h>

#include <algorithm>

#include "rewrite/alternatives.h"
#include "support/error.h"

namespace korch {

namespace {

const Node& node_at(const Graph& g, NodeId id) { return g.nodes[static_cast<size_t>(id)]; }

bool is_op(const Node* n, const char* op) { return n && n->domain.empty() && n->op_type == op; }

bool float_dtype(DType t) { return t == DType::kFloat32 || t == DType::kFloat64; }

NodeId producer_id(const Graph& g, ValueId v) { return v == kNoValue ? -1 : g.value(v).producer; }

// `t` is a Transpose swapping only the last two axes of a rank >= 2 input.
bool swaps_last_two(const Graph& g, const Node& t) {
  if (!is_op(&t, "Transpose") || t.inputs.empty() || t.inputs[0] == kNoValue) return false;
  const int64_t r = g.type(t.inputs[0]).rank();
  if (r < 2) return false;
  if (!t.attrs.has("perm")) return r == 2;  // default: reverse all axes
  std::vector<int64_t> p = t.attrs.get_ints("perm");
  if (static_cast<int64_t>(p.size()) != r) return false;
  for (int64_t i = 0; i < r - 2; ++i)
    if (p[static_cast<size_t>(i)] != i) return false;
  return p[static_cast<size_t>(r - 2)] == r - 1 && p[static_cast<size_t>(r - 1)] == r - 2;
}

std::vector<int64_t> swap_perm(int64_t rank) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < rank; ++i) p.push_back(i);
  std::swap(p[static_cast<size_t>(rank - 2)], p[static_cast<size_t>(rank - 1)]);
  return p;
}

// A MatMul with float operands of rank >= 2 (the row/column axes exist on both sides).
bool plain_matmul(const Graph& g, const Node* n) {
  if (!is_op(n, "MatMul") || n->inputs.size() != 2 || n->outputs.size() != 1) return false;
  const TensorType &a = g.type(n->inputs[0]), &b = g.type(n->inputs[1]);
  return float_dtype(a.dtype) && a.rank() >= 2 && b.rank() >= 2;
}

// Dim `from_end` positions from the end of `s` (1 = last); 1 when `s` is shorter.
int64_t dim_from_end(const Shape& s, size_t from_end) { return s.size() >= from_end ? s[s.size() - from_end] : 1; }

// Replaces every use of `old` with `repl` (graph outputs keep their names) and applies.
void replace_and_finish(Rewriter& rw, ValueId old, ValueId repl) {
  KORCH_CHECK(rw.replace(old, repl), "alternative rewrite: cannot replace {} by {}", type_str(rw.graph().type(old)),
              type_str(rw.graph().type(repl)));
  rw.finish();
}

Attributes perm_attrs(std::vector<int64_t> perm) {
  Attributes a;
  a.set("perm", std::move(perm));
  return a;
}

// ---------------------------------------------------------------------------------------------
// (a) reduce_sum_as_matmul, anchored at the ReduceSum.

std::optional<std::vector<int64_t>> reduce_axes(const Graph& g, const Node& n) {
  std::vector<int64_t> axes;
  if (g.opset < 13) {
    axes = n.attrs.get_ints("axes");
  } else if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    std::optional<std::vector<int64_t>> c = constant_ints(g, n.inputs[1]);
    if (!c) return std::nullopt;
    axes = *c;
  }
  const int64_t rank = g.type(n.inputs[0]).rank();
  if (axes.empty()) {
    if (g.opset >= 13 && n.attrs.get_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  for (int64_t& a : axes) {
    if (a < -rank || a >= rank) return std::nullopt;
    if (a < 0) a += rank;
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

std::optional<AltMatch> match_reduce_sum(const Graph& g, const UseInfo&, NodeId id) {
  const Node& n = node_at(g, id);
  if (!is_op(&n, "ReduceSum") || n.inputs.empty() || n.inputs[0] == kNoValue || n.outputs.size() != 1) return std::nullopt;
  if (n.attrs.get_int("keepdims", 1) != 1) return std::nullopt;
  const ValueId x = n.inputs[0], y = n.outputs[0];
  const TensorType xt = g.type(x);
  const int64_t rank = xt.rank();
  if (!float_dtype(xt.dtype) || rank < 1) return std::nullopt;
  std::optional<std::vector<int64_t>> axes = reduce_axes(g, n);
  if (!axes || axes->size() != 1) return std::nullopt;
  const bool last = (*axes)[0] == rank - 1;
  if (!last && !(rank >= 2 && (*axes)[0] == rank - 2)) return std::nullopt;
  const int64_t k = xt.shape[static_cast<size_t>((*axes)[0])];
  AltMatch m;
  m.nodes = {id};
  m.description = last ? fmt::format("ReduceSum({}, last axis) -> MatMul(x, ones[{},1])", type_str(xt), k)
                       : fmt::format("ReduceSum({}, second-to-last axis) -> MatMul(ones[1,{}], x)", type_str(xt), k);
  const DType dt = xt.dtype;
  m.rewrite = [x, y, k, last, dt](Graph& h) {
    Rewriter rw(h);
    Tensor ones(dt, last ? Shape{k, 1} : Shape{1, k});
    dispatch_dtype<KORCH_FLOAT_TYPES>(dt, "reduce_sum_as_matmul", [&](auto tag) {
      using T = decltype(tag);
      for (T& v : ones.span<T>()) v = T(1);
    });
    const ValueId o = rw.add_constant("attn/ones", std::move(ones));
    const ValueId mm = rw.append_node("MatMul", last ? std::vector<ValueId>{x, o} : std::vector<ValueId>{o, x})[0];
    replace_and_finish(rw, y, mm);
  };
  return m;
}

// ---------------------------------------------------------------------------------------------
// (b) scales across a MatMul.

// `s`, a scale operand of an elementwise Mul/Div, as the tensor it broadcasts from.
struct ScaleSource {
  ValueId s = kNoValue;     // the operand as the Mul/Div reads it
  ValueId src = kNoValue;   // the broadcast source (Expand input, or s itself)
  bool scalar_const = false;  // a one-element constant: used as is, no Expand needed
  NodeId expand = -1;       // the Expand producing s, when it has no other user (replaced too)
};

ScaleSource scale_source(const Graph& g, const UseInfo& uses, ValueId s) {
  ScaleSource r;
  r.s = r.src = s;
  if (const Tensor* c = constant_of(g, s); c && c->numel() == 1) {
    r.scalar_const = true;
    return r;
  }
  const NodeId p = producer_id(g, s);
  if (p >= 0 && is_op(&node_at(g, p), "Expand")) {
    r.src = node_at(g, p).inputs[0];
    if (const Tensor* c = constant_of(g, r.src); c && c->numel() == 1 && c->rank() == 0) r.scalar_const = true;
    if (has_single_consumer(g, uses, s)) r.expand = p;
  }
  return r;
}

// The scale as an operand for a Mul/Div producing `shape`: the scalar itself or a new Expand.
ValueId scale_for(Rewriter& rw, const ScaleSource& sc, const Shape& shape) {
  if (sc.scalar_const) return sc.src;
  return rw.append_node("Expand", {sc.src, rw.int_list(shape)})[0];
}

struct ScaledOperand {
  ValueId x = kNoValue;  // the unscaled operand
  std::string op;        // Mul or Div
  ScaleSource scale;
  NodeId node = -1;      // the Mul/Div
};

// Operand `j` (0: left, 1: right) of MatMul `mm` as x * s or x / s with s constant along the
// contracted axis.
std::optional<ScaledOperand> scaled_operand(const Graph& g, const UseInfo& uses, const Node& mm, int j) {
  const ValueId v = mm.inputs[static_cast<size_t>(j)];
  const NodeId pid = producer_id(g, v);
  if (pid < 0 || !has_single_consumer(g, uses, v)) return std::nullopt;
  const Node& p = node_at(g, pid);
  const bool div = is_op(&p, "Div");
  if ((!div && !is_op(&p, "Mul")) || p.inputs.size() != 2) return std::nullopt;
  for (int k = 0; k < (div ? 1 : 2); ++k) {
    const ValueId x = p.inputs[static_cast<size_t>(k)], s = p.inputs[static_cast<size_t>(1 - k)];
    if (g.type(x) != g.type(v)) continue;
    ScaleSource sc = scale_source(g, uses, s);
    if (!sc.scalar_const) {
      if (g.opset < 8) continue;  // no Expand to broadcast it onto the output
      const Shape& rs = g.type(sc.src).shape;
      if (dim_from_end(rs, j == 0 ? 1 : 2) != 1) continue;  // varies along the contracted axis
    }
    return ScaledOperand{x, p.op_type, sc, pid};
  }
  return std::nullopt;
}

std::optional<AltMatch> match_scale_after(const Graph& g, const UseInfo& uses, NodeId id) {
  const Node& mm = node_at(g, id);
  if (!plain_matmul(g, &mm)) return std::nullopt;
  std::optional<ScaledOperand> ops[2] = {scaled_operand(g, uses, mm, 0), scaled_operand(g, uses, mm, 1)};
  if (!ops[0] && !ops[1]) return std::nullopt;
  AltMatch m;
  std::string what;
  for (int j = 0; j < 2; ++j) {
    if (!ops[j]) continue;
    m.nodes.push_back(ops[j]->node);
    if (ops[j]->scale.expand >= 0) m.nodes.push_back(ops[j]->scale.expand);
    what += fmt::format("{}{} of the {} operand by {}", what.empty() ? "" : ", ", ops[j]->op, j == 0 ? "left" : "right",
                        ops[j]->scale.scalar_const ? "a scalar" : type_str(g.type(ops[j]->scale.src)));
  }
  m.nodes.push_back(id);
  m.description = fmt::format("{} moved after MatMul -> {}", what, type_str(g.type(mm.outputs[0])));
  const ValueId a = mm.inputs[0], b = mm.inputs[1], y = mm.outputs[0];
  const Shape out = g.type(y).shape;
  m.rewrite = [ops0 = ops[0], ops1 = ops[1], a, b, y, out](Graph& h) {
    Rewriter rw(h);
    ValueId r = rw.append_node("MatMul", {ops0 ? ops0->x : a, ops1 ? ops1->x : b})[0];
    for (const std::optional<ScaledOperand>* o : {&ops0, &ops1})
      if (*o) r = rw.append_node((*o)->op, {r, scale_for(rw, (*o)->scale, out)})[0];
    replace_and_finish(rw, y, r);
  };
  return m;
}

// Anchored at the Mul/Div of a MatMul output.
std::optional<AltMatch> match_scale_before(const Graph& g, const UseInfo& uses, NodeId id) {
  const Node& n = node_at(g, id);
  const bool div = is_op(&n, "Div");
  if ((!div && !is_op(&n, "Mul")) || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  const ValueId z = n.outputs[0];
  for (int k = 0; k < (div ? 1 : 2); ++k) {
    const ValueId y = n.inputs[static_cast<size_t>(k)], s = n.inputs[static_cast<size_t>(1 - k)];
    const NodeId mid = producer_id(g, y);
    if (mid < 0 || !plain_matmul(g, &node_at(g, mid)) || !has_single_consumer(g, uses, y) || g.type(y) != g.type(z))
      continue;
    const Node& mm = node_at(g, mid);
    const ValueId a = mm.inputs[0], b = mm.inputs[1];
    const Shape as = g.type(a).shape;
    ScaleSource sc = scale_source(g, uses, s);
    if (sc.scalar_const && g.type(sc.src).rank() > static_cast<int64_t>(as.size())) continue;  // would enlarge `a`
    if (!sc.scalar_const) {
      if (g.opset < 8) continue;
      const Shape& rs = g.type(sc.src).shape;
      if (dim_from_end(rs, 1) != 1 || rs.size() > as.size()) continue;  // not one factor per row
      bool fits = true;  // broadcasts onto the left operand without enlarging it
      for (size_t d = 1; d <= rs.size(); ++d) fits &= rs[rs.size() - d] == 1 || rs[rs.size() - d] == as[as.size() - d];
      if (!fits) continue;
    }
    AltMatch m;
    m.nodes = {mid, id};
    if (sc.expand >= 0) m.nodes.push_back(sc.expand);
    m.description = fmt::format("{} of MatMul output {} by {} moved onto the left operand {}", n.op_type,
                                type_str(g.type(y)), sc.scalar_const ? "a scalar" : type_str(g.type(sc.src)),
                                type_str(g.type(a)));
    m.rewrite = [op = n.op_type, sc, a, b, as, z](Graph& h) {
      Rewriter rw(h);
      const ValueId a2 = rw.append_node(op, {a, scale_for(rw, sc, as)})[0];
      replace_and_finish(rw, z, rw.append_node("MatMul", {a2, b})[0]);
    };
    return m;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// (c) transposes and linear primitives.

// Operand `j` of `mm` is a swap-last-two Transpose read only by `mm`: its producer, else -1.
NodeId absorbable_transpose(const Graph& g, const UseInfo& uses, const Node& mm, int j) {
  const ValueId v = mm.inputs[static_cast<size_t>(j)];
  const NodeId p = producer_id(g, v);
  if (p < 0 || !swaps_last_two(g, node_at(g, p)) || !has_single_consumer(g, uses, v)) return -1;
  return p;
}

std::optional<AltMatch> match_transpose_into_einsum(const Graph& g, const UseInfo& uses, NodeId id) {
  const Node& mm = node_at(g, id);
  if (g.opset < 12 || !plain_matmul(g, &mm)) return std::nullopt;
  const NodeId ta = absorbable_transpose(g, uses, mm, 0), tb = absorbable_transpose(g, uses, mm, 1);
  if (ta < 0 && tb < 0) return std::nullopt;
  const ValueId a = ta >= 0 ? node_at(g, ta).inputs[0] : mm.inputs[0];
  const ValueId b = tb >= 0 ? node_at(g, tb).inputs[0] : mm.inputs[1];
  // ONNX Einsum needs each ellipsis to stand for the same number of dims in every operand
  // (onnxruntime rejects "..." of different ranks), so only equal-rank operands qualify.
  if (g.type(a).rank() != g.type(b).rank()) return std::nullopt;
  const std::string eq = fmt::format("...{},...{}->...ik", ta >= 0 ? "ji" : "ij", tb >= 0 ? "kj" : "jk");
  AltMatch m;
  if (ta >= 0) m.nodes.push_back(ta);
  if (tb >= 0) m.nodes.push_back(tb);
  m.nodes.push_back(id);
  m.description = fmt::format("MatMul of transposed operand(s) -> Einsum(\"{}\", {}, {})", eq, type_str(g.type(a)),
                              type_str(g.type(b)));
  m.rewrite = [a, b, eq, y = mm.outputs[0]](Graph& h) {
    Rewriter rw(h);
    Attributes at;
    at.set("equation", eq);
    replace_and_finish(rw, y, rw.append_node("Einsum", {a, b}, std::move(at))[0]);
  };
  return m;
}

// Anchored at the Transpose of a MatMul output.
std::optional<AltMatch> match_transpose_of_matmul(const Graph& g, const UseInfo& uses, NodeId id) {
  const Node& t = node_at(g, id);
  if (!swaps_last_two(g, t) || t.outputs.size() != 1) return std::nullopt;
  const ValueId y = t.inputs[0];
  const NodeId mid = producer_id(g, y);
  if (mid < 0 || !has_single_consumer(g, uses, y)) return std::nullopt;
  const Node& mm = node_at(g, mid);
  if (!is_op(&mm, "MatMul") || mm.inputs.size() != 2 || g.type(mm.inputs[0]).rank() < 2 ||
      g.type(mm.inputs[1]).rank() < 2)
    return std::nullopt;
  const ValueId a = mm.inputs[0], b = mm.inputs[1];
  AltMatch m;
  m.nodes = {mid, id};
  m.description = fmt::format("Transpose(MatMul({}, {})) -> MatMul(Transpose(b), Transpose(a))", type_str(g.type(a)),
                              type_str(g.type(b)));
  m.rewrite = [a, b, ra = g.type(a).rank(), rb = g.type(b).rank(), z = t.outputs[0]](Graph& h) {
    Rewriter rw(h);
    const ValueId bt = rw.append_node("Transpose", {b}, perm_attrs(swap_perm(rb)))[0];
    const ValueId at = rw.append_node("Transpose", {a}, perm_attrs(swap_perm(ra)))[0];
    replace_and_finish(rw, z, rw.append_node("MatMul", {bt, at})[0]);
  };
  return m;
}

}  // namespace

const std::vector<AlternativeFamily>& attention_alternative_families() {
  static const std::vector<AlternativeFamily> f = {
      {"reduce_sum_as_matmul", match_reduce_sum},
      {"scale_after_matmul", match_scale_after},
      {"scale_before_matmul", match_scale_before},
      {"transpose_into_einsum", match_transpose_into_einsum},
      {"transpose_of_matmul", match_transpose_of_matmul},
  };
  return f;
}

}  // namespace korch
