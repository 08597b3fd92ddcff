// Helpers for rewrite tests: a small graph builder (types from the op registry, no folding, so a
// test controls exactly which nodes exist) and an equivalence check of a pass on random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>

#include "../fission/fission_test_util.h"
#include "rewrite/alternatives.h"
#include "rewrite/rewrite.h"

namespace korch::testing {

class GraphBuilder {
 public:
  explicit GraphBuilder(int opset = 17) { g.opset = opset; }

  ValueId input(Shape s, DType dt = DType::kFloat32) { return g.add_input(fresh("x"), {dt, std::move(s)}); }
  ValueId constant(Tensor t) { return g.add_constant(fresh("c"), std::move(t)); }
  ValueId floats(std::vector<float> v, Shape s) { return constant(Tensor::from_vector<float>(v, std::move(s))); }
  ValueId scalar(float v) { return constant(Tensor::scalar<float>(v)); }
  ValueId ints(std::vector<int64_t> v) {
    const int64_t n = static_cast<int64_t>(v.size());
    return constant(Tensor::from_vector<int64_t>(v, {n}));
  }
  // Seeded random f32 constant (weights).
  ValueId random(Shape s, uint64_t seed = 7) {
    std::mt19937_64 rng(seed);
    return constant(random_tensor({DType::kFloat32, std::move(s)}, rng));
  }

  std::vector<ValueId> ops(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs, int num_outputs) {
    Node n;
    n.op_type = op;
    n.name = fresh(op);
    n.inputs = inputs;
    n.attrs = std::move(attrs);
    std::vector<const TensorType*> types;
    std::vector<const Tensor*> consts;
    for (ValueId v : inputs) {
      types.push_back(v == kNoValue ? nullptr : &g.type(v));
      consts.push_back(v == kNoValue ? nullptr : g.value(v).constant.get());
    }
    n.outputs.assign(static_cast<size_t>(num_outputs), kNoValue);
    std::vector<TensorType> out = infer_node(n, g.opset, types, consts);
    for (int k = 0; k < num_outputs; ++k) n.outputs[static_cast<size_t>(k)] = g.add_value(fresh("v"), out[static_cast<size_t>(k)]);
    std::vector<ValueId> ids = n.outputs;
    g.add_node(std::move(n));
    return ids;
  }
  ValueId op(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs = {}) {
    return ops(op, inputs, std::move(attrs), 1)[0];
  }
  void output(ValueId v) { g.outputs.push_back(v); }

  Graph g;

 private:
  std::string fresh(const std::string& base) { return base + std::to_string(counter_++); }
  int counter_ = 0;
};

inline Attributes attrs_perm(std::vector<int64_t> perm) {
  Attributes a;
  a.set("perm", std::move(perm));
  return a;
}

// `r`, a rewrite of `g`, verifies and has g's inputs and outputs (names and types).
inline void expect_same_interface(const Graph& g, const Graph& r) {
  EXPECT_NO_THROW(verify_graph(r, true));
  EXPECT_EQ(r.inputs.size(), g.inputs.size());
  EXPECT_EQ(r.outputs.size(), g.outputs.size());
  for (size_t i = 0; i < g.inputs.size() && i < r.inputs.size(); ++i) {
    EXPECT_EQ(r.value(r.inputs[i]).name, g.value(g.inputs[i]).name);
    EXPECT_EQ(r.type(r.inputs[i]), g.type(g.inputs[i]));
  }
  for (size_t i = 0; i < g.outputs.size() && i < r.outputs.size(); ++i) {
    EXPECT_EQ(r.value(r.outputs[i]).name, g.value(g.outputs[i]).name);
    EXPECT_EQ(r.type(r.outputs[i]), g.type(g.outputs[i]));
  }
}

// Runs `pass` on a copy of `g`; checks it changed (or not, per `expect_change`), that the result
// verifies with the same input/output names and types, and that it computes the same outputs on
// random inputs within `tol` relative L2 (0: bit-exact). Returns the rewritten graph (dead code removed).
inline Graph expect_rewrite_equivalent(const Graph& g, const RewritePassFn& pass, bool expect_change = true,
                                       double tol = 0, uint64_t seed = 1) {
  Graph r = g;
  EXPECT_EQ(pass(r), expect_change);
  r.remove_dead_code();
  expect_same_interface(g, r);
  std::vector<Tensor> inputs = random_inputs(g, seed);
  std::vector<Tensor> want = interpret(g, inputs);
  std::vector<Tensor> got = interpret(r, inputs);
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    EXPECT_EQ(got[i].type(), want[i].type());
    if (got[i].type() != want[i].type()) continue;
    if (tol == 0) EXPECT_TRUE(got[i].bitwise_equal(want[i])) << "output " << i << " differs";
    else EXPECT_LE(rel_l2(got[i], want[i]), tol) << "output " << i;
  }
  return r;
}

inline RewritePassFn simplify_pass() {
  return [](Graph& g) {
    SimplifyOptions o;
    o.verify = true;
    SimplifyReport rep;
    simplify(g, o, &rep);
    EXPECT_TRUE(rep.fixed_point);
    return rep.nodes_after != rep.nodes_before || !rep.changed_by.empty();
  };
}

inline std::vector<std::string> op_list(const Graph& g) {
  std::vector<std::string> ops;
  for (const Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

// The alternatives of `rule` find_alternatives offers in `g`.
inline std::vector<Alternative> of_rule(const Graph& g, const std::string& rule) {
  std::vector<Alternative> out;
  for (Alternative& a : find_alternatives(g))
    if (a.rule == rule) out.push_back(std::move(a));
  return out;
}

// Applies `a` to a copy of `g` and checks the copy verifies, keeps the interface, and computes the
// same outputs on random inputs (floats scaled by `scale`) within `tol` relative L2, with no
// inf/nan introduced. Returns the rewritten graph.
inline Graph apply_checked(const Graph& g, const Alternative& a, double tol = 1e-5, float scale = 1.f,
                           uint64_t seed = 3) {
  Graph r = g;
  a.apply(r);
  expect_same_interface(g, r);
  std::vector<Tensor> inputs = random_inputs(g, seed);
  for (Tensor& t : inputs)
    if (t.dtype() == DType::kFloat32)
      for (float& v : t.span<float>()) v *= scale;
  std::vector<Tensor> want = interpret(g, inputs), got = interpret(r, inputs);
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    EXPECT_EQ(got[i].type(), want[i].type());
    if (got[i].type() != want[i].type()) continue;
    for (int64_t k = 0; k < got[i].numel(); ++k)
      if (!std::isfinite(got[i].get_as_double(k))) {
        ADD_FAILURE() << "output " << i << " has inf/nan";
        break;
      }
    EXPECT_LE(rel_l2(got[i], want[i]), tol) << "output " << i;
  }
  return r;
}

}  // namespace korch::testing
