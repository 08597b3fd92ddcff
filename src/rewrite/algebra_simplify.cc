// Algebraic simplification (see rewrite.h). Every rule removes nodes or leaves their count equal
// (constant folding trades a node for a constant no larger than its inputs), so it never loses.
// Worked examples:
//
//   remove_neutral_elements  Mul(x, 1) / Mul(1, x) / Add(x, 0) / Add(0, x) / Sub(x, 0) / Div(x, 1) /
//                            Pow(x, 1) -> x, when the output has x's type (the neutral operand may
//                            be a constant of any shape whose elements are all neutral, or an Expand
//                            of one). x + 0 turns -0 into +0: equal as numbers.
//   remove_double_negation   Neg(Neg(x)) -> x;  Not(Not(b)) -> b
//   remove_identities        Identity(x) -> x;  Cast(x, to=x's dtype) / CastLike(x, same dtype) -> x
//   fold_constants           Transpose(w_const, perm) -> w_const' (the node is evaluated once);
//                            not when the result is bigger than the inputs (Expand of a bias stays)
//   eliminate_common_subexpressions
//                            two constants with the same type and bits -> one;
//                            a = Exp(x); b = Exp(x)  -> b is a (same op, inputs and attributes)
#include <unordered_map>

#include "ir/op_registry.h"
#include "rewrite/rewrite.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

bool is_op(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

bool deterministic(const Node& n, int opset) {
  if (!n.domain.empty()) return false;
  const OpDef* def = OpRegistry::global().find(n.op_type);
  return def && def->foldable && opset >= def->min_opset && opset <= def->max_opset;
}

}  // namespace

bool remove_neutral_elements(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
    double neutral;
    bool commutative;
    if (n.op_type == "Mul") { neutral = 1; commutative = true; }
    else if (n.op_type == "Add") { neutral = 0; commutative = true; }
    else if (n.op_type == "Sub") { neutral = 0; commutative = false; }
    else if (n.op_type == "Div") { neutral = 1; commutative = false; }
    else if (n.op_type == "Pow") { neutral = 1; commutative = false; }
    else continue;
    const ValueId y = n.outputs[0];
    for (int j = commutative ? 0 : 1; j < 2; ++j) {
      const ValueId x = n.inputs[static_cast<size_t>(1 - j)];
      const Tensor* c = constant_through_expand(g, n.inputs[static_cast<size_t>(j)]);
      if (c && g.type(x) == g.type(y) && all_elements_equal(*c, neutral) && rw.replace(y, x)) break;
    }
  }
  return rw.finish();
}

bool remove_double_negation(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!(is_op(n, "Neg") || is_op(n, "Not")) || n.outputs[0] == kNoValue) continue;
    const Node* p = producer_of(g, n.inputs[0]);
    if (p && p->op_type == n.op_type && p->domain.empty()) rw.replace(n.outputs[0], p->inputs[0]);
  }
  return rw.finish();
}

bool remove_identities(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (n.outputs.size() != 1 || n.outputs[0] == kNoValue || n.inputs.empty() || n.inputs[0] == kNoValue) continue;
    if (is_op(n, "Identity") || ((is_op(n, "Cast") || is_op(n, "CastLike")) &&
                                 g.type(n.inputs[0]).dtype == g.type(n.outputs[0]).dtype))
      rw.replace(n.outputs[0], n.inputs[0]);
  }
  return rw.finish();
}

bool fold_constants(Graph& g) {
  Rewriter rw(g);
  std::vector<char> is_output(g.values.size(), 0);  // a constant cannot take a graph output's place
  for (ValueId v : g.outputs) is_output[static_cast<size_t>(v)] = 1;
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!deterministic(n, g.opset)) continue;
    bool all_const = true, any_input = false;
    int64_t in_elems = 0, out_elems = 0;
    std::vector<const Tensor*> consts;
    for (ValueId v : n.inputs) {
      const Tensor* t = constant_of(g, v);
      consts.push_back(t);
      if (v == kNoValue) continue;
      any_input = true;
      all_const &= t != nullptr;
      if (t) in_elems += t->numel();
    }
    if (!any_input || !all_const) continue;
    bool feeds_output = false;
    for (ValueId o : n.outputs) feeds_output |= o != kNoValue && is_output[static_cast<size_t>(o)];
    if (feeds_output) continue;
    for (ValueId o : n.outputs)
      if (o != kNoValue) out_elems += g.type(o).numel();
    if (out_elems > in_elems) continue;  // a broadcast of a constant stays a broadcast primitive
    std::vector<Tensor> outs;
    try {
      outs = eval_node(n, g.opset, consts);
    } catch (const Error&) {
      continue;  // leave it to run time (it fails there with the node's name)
    }
    bool ok = outs.size() == n.outputs.size();
    for (size_t k = 0; ok && k < outs.size(); ++k)
      if (n.outputs[k] != kNoValue) ok = outs[k].type() == g.type(n.outputs[k]);
    if (!ok) continue;
    const std::vector<ValueId> node_outputs = n.outputs;
    for (size_t k = 0; k < outs.size(); ++k) {
      const ValueId o = node_outputs[k];
      if (o == kNoValue) continue;
      rw.replace(o, rw.add_constant(g.value(o).name + "/folded", std::move(outs[k])));
    }
  }
  return rw.finish();
}

bool eliminate_common_subexpressions(Graph& g) {
  Rewriter rw(g);
  // Equal constants (type and bits) used by nodes -> the first one.
  std::vector<char> used(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[static_cast<size_t>(v)] = 1;
  std::unordered_map<size_t, std::vector<ValueId>> by_hash;
  for (size_t v = 0; v < g.values.size(); ++v) {
    const Tensor* t = g.values[v].constant.get();
    if (!t || !used[v]) continue;
    size_t h = std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(t->raw()), t->nbytes()));
    h = h * 31 + static_cast<size_t>(t->dtype());
    for (int64_t d : t->shape()) h = h * 1000003 + static_cast<size_t>(d);
    std::vector<ValueId>& bucket = by_hash[h];
    bool merged = false;
    for (ValueId c : bucket)
      if (g.type(c) == t->type() && g.value(c).constant->bitwise_equal(*t)) {
        merged = rw.replace(static_cast<ValueId>(v), c);
        break;
      }
    if (!merged) bucket.push_back(static_cast<ValueId>(v));
  }
  // Identical nodes over identical (resolved) inputs -> the first one.
  std::map<std::tuple<std::string, std::string, std::vector<ValueId>>, std::vector<NodeId>> seen;
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (n.inputs.empty() || !deterministic(n, g.opset)) continue;
    std::vector<NodeId>& same = seen[{n.op_type, n.domain, n.inputs}];
    bool merged = false;
    for (NodeId m : same) {
      const Node& first = g.nodes[static_cast<size_t>(m)];
      if (first.outputs.size() != n.outputs.size() || !(first.attrs == n.attrs)) continue;
      bool ok = true;
      for (size_t k = 0; k < n.outputs.size() && ok; ++k)
        if (n.outputs[k] != kNoValue) ok = first.outputs[k] != kNoValue && rw.can_replace(n.outputs[k], first.outputs[k]);
      if (!ok) continue;
      for (size_t k = 0; k < n.outputs.size(); ++k)
        if (n.outputs[k] != kNoValue) rw.replace(n.outputs[k], first.outputs[k]);
      merged = true;
      break;
    }
    if (!merged) same.push_back(static_cast<NodeId>(i));
  }
  return rw.finish();
}

}  // namespace korch
