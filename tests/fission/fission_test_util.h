// Helpers for fission tests: build a one-operator graph, fission it, and check that the result
// (a) contains only primitives and (b) computes the same outputs as the operator in the
// reference interpreter on seeded random inputs.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "fission/fission.h"
#include "ir/interpreter.h"
#include "ir/op_registry.h"
#include "ir/primitive.h"
#include "ir/random.h"

namespace korch::testing {

struct OpInput {
  TensorType type;
  std::optional<Tensor> constant;  // set: a constant (weights, axes, shapes); unset: a graph input
};
inline OpInput in(DType t, Shape s) { return {TensorType{t, std::move(s)}, std::nullopt}; }
inline OpInput in(Shape s) { return in(DType::kFloat32, std::move(s)); }
inline OpInput cst(Tensor t) { return {t.type(), std::move(t)}; }
inline OpInput absent() { return {TensorType{}, std::nullopt}; }

// One node `op` over `inputs`; output types come from the op registry.
inline Graph single_op_graph(const std::string& op, const std::vector<OpInput>& inputs, Attributes attrs = {},
                             int opset = 17, int num_outputs = 1) {
  Graph g;
  g.opset = opset;
  Node n;
  n.op_type = op;
  n.name = op + "_0";
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const OpInput& x = inputs[i];
    if (x.type.dtype == DType::kUndefined) { n.inputs.push_back(kNoValue); continue; }
    std::string name = "in" + std::to_string(i);
    n.inputs.push_back(x.constant ? g.add_constant(name, *x.constant) : g.add_input(name, x.type));
  }
  std::vector<const TensorType*> types;
  std::vector<const Tensor*> consts;
  for (ValueId v : n.inputs) {
    types.push_back(v == kNoValue ? nullptr : &g.type(v));
    consts.push_back(v == kNoValue ? nullptr : g.value(v).constant.get());
  }
  n.outputs.assign(static_cast<size_t>(num_outputs), kNoValue);
  std::vector<TensorType> outs = infer_node(n, opset, types, consts);
  for (int k = 0; k < num_outputs; ++k) {
    n.outputs[static_cast<size_t>(k)] = g.add_value("out" + std::to_string(k), outs[static_cast<size_t>(k)]);
    g.outputs.push_back(n.outputs[static_cast<size_t>(k)]);
  }
  g.add_node(std::move(n));
  return g;
}

inline double rel_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.get_as_double(i), e = want.get_as_double(i);
    num += (a - e) * (a - e);
    den += e * e;
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

// Fissions `g`, checks that no operator is left (unless `allow_opaque`), that the result
// verifies, and that it matches `g` on random inputs (floats scaled by `scale`, to probe
// overflow in Softmax & co.) within `tol` relative L2 error, with no inf/nan introduced.
// Returns the primitive graph for structural checks.
inline Graph expect_fission_equivalent(const Graph& g, double tol = 1e-5, float scale = 1.f, uint64_t seed = 0,
                                       bool allow_opaque = false) {
  FissionReport report;
  Graph p = fission(g, &report);
  EXPECT_NO_THROW(verify_graph(p, true));
  for (const Node& n : p.nodes) {
    PrimitiveKind k = primitive_kind(p, n);
    EXPECT_NE(k, PrimitiveKind::kOperator) << n.op_type << " left as an operator";
    if (!allow_opaque) {
      EXPECT_NE(k, PrimitiveKind::kOpaque) << n.op_type << " is opaque";
    }
  }
  std::vector<Tensor> inputs = random_inputs(g, seed);
  for (Tensor& t : inputs)
    if (t.dtype() == DType::kFloat32)
      for (float& v : t.span<float>()) v *= scale;
  std::vector<Tensor> want = interpret(g, inputs);
  std::vector<Tensor> got = interpret(p, inputs);
  EXPECT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i) {
    EXPECT_EQ(got[i].type(), want[i].type());
    if (got[i].type() != want[i].type()) continue;
    bool finite_want = true, finite_got = true;
    for (int64_t k = 0; k < want[i].numel(); ++k) {
      finite_want &= std::isfinite(want[i].get_as_double(k));
      finite_got &= std::isfinite(got[i].get_as_double(k));
    }
    if (finite_want) {
      EXPECT_TRUE(finite_got) << "output " << i << ": fission introduced inf/nan";
    }
    EXPECT_LE(rel_l2(got[i], want[i]), tol) << "output " << i;
  }
  return p;
}

inline int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

}  // namespace korch::testing
