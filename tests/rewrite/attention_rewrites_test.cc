#include <algorithm>
#include <cmath>

#include "rewrite/alternatives.h"
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

// The single alternative of `rule` in `g`, applied and checked.
Graph apply_only(const Graph& g, const std::string& rule, double tol = 1e-5, float scale = 1.f) {
  std::vector<Alternative> alts = of_rule(g, rule);
  EXPECT_EQ(alts.size(), 1u) << rule;
  if (alts.empty()) return g;
  return apply_checked(g, alts[0], tol, scale);
}

const Node& producer(const Graph& g, ValueId v) {
  EXPECT_GE(g.value(v).producer, 0);
  return g.nodes.at(static_cast<size_t>(g.value(v).producer));
}

Attributes ints_attr(const std::string& name, std::vector<int64_t> v) {
  Attributes a;
  a.set(name, std::move(v));
  return a;
}
Attributes int_attr(const std::string& name, int64_t v) {
  Attributes a;
  a.set(name, v);
  return a;
}

// Softmax(x, axis=-1) -> MatMul(., v): the two-node operator graph, fissioned.
Graph softmax_matmul(Shape x, Shape v) {
  GraphBuilder b;
  ValueId p = b.op("Softmax", {b.input(std::move(x))}, int_attr("axis", -1));
  b.output(b.op("MatMul", {p, b.input(std::move(v))}));
  return fission(b.g);
}

// ---------------------------------------------------------------------------------------------
// (a) reduce_sum_as_matmul

TEST(AttentionRewrites, ReduceSumLastAxisBecomesMatMulWithOnes) {
  for (int opset : {11, 13, 18}) {
    GraphBuilder b(opset);
    ValueId x = b.input({2, 4, 6});
    ValueId s = opset < 13 ? b.op("ReduceSum", {x}, ints_attr("axes", {2})) : b.op("ReduceSum", {x, b.ints({-1})});
    b.output(s);
    Graph r = apply_only(b.g, "reduce_sum_as_matmul");
    ASSERT_EQ(op_list(r), (Ops{"MatMul"})) << opset;
    const Tensor* ones = r.value(r.nodes[0].inputs[1]).constant.get();
    ASSERT_NE(ones, nullptr);
    EXPECT_EQ(ones->shape(), (Shape{6, 1}));
    EXPECT_TRUE(all_elements_equal(*ones, 1.0));
    EXPECT_EQ(r.nodes[0].inputs[0], r.inputs[0]);
  }
}

TEST(AttentionRewrites, ReduceSumSecondToLastAxisTakesOnesOnTheLeft) {
  GraphBuilder b;
  ValueId x = b.input({3, 5, 4}, DType::kFloat64);
  b.output(b.op("ReduceSum", {x, b.ints({1})}));
  Graph r = apply_only(b.g, "reduce_sum_as_matmul");
  ASSERT_EQ(op_list(r), (Ops{"MatMul"}));
  const Tensor* ones = r.value(r.nodes[0].inputs[0]).constant.get();
  ASSERT_NE(ones, nullptr);
  EXPECT_EQ(ones->type(), (TensorType{DType::kFloat64, {1, 5}}));
  // rank 1: the only axis is the last one
  GraphBuilder b1;
  b1.output(b1.op("ReduceSum", {b1.input({7})}));
  EXPECT_EQ(op_list(apply_only(b1.g, "reduce_sum_as_matmul")), (Ops{"MatMul"}));
}

TEST(AttentionRewrites, SoftmaxRowSumAfterFission) {
  Graph p = softmax_matmul({2, 4, 6}, {2, 6, 5});
  ASSERT_EQ(count_op(p, "ReduceSum"), 1);
  Graph r = apply_only(p, "reduce_sum_as_matmul", 1e-5, 1e4f);  // large magnitudes: no overflow
  EXPECT_EQ(count_op(r, "ReduceSum"), 0);
  EXPECT_EQ(count_op(r, "MatMul"), 2);
  EXPECT_EQ(count_op(r, "ReduceMax"), 1);
}

TEST(AttentionRewrites, ReduceSumNotMatched) {
  auto none = [](const Graph& g) { EXPECT_TRUE(of_rule(g, "reduce_sum_as_matmul").empty()); };
  {  // keepdims=0
    GraphBuilder b;
    b.output(b.op("ReduceSum", {b.input({2, 4, 6}), b.ints({2})}, int_attr("keepdims", 0)));
    none(b.g);
  }
  {  // a leading axis, two axes, all axes of a rank-3 tensor
    for (std::vector<int64_t> axes : {std::vector<int64_t>{0}, {1, 2}, {}}) {
      GraphBuilder b;
      ValueId x = b.input({2, 4, 6});
      b.output(axes.empty() ? b.op("ReduceSum", {x}) : b.op("ReduceSum", {x, b.ints(axes)}));
      none(b.g);
    }
  }
  {  // another reduction, an integer tensor
    GraphBuilder b;
    b.output(b.op("ReduceMax", {b.input({2, 4, 6})}, ints_attr("axes", {2})));
    b.output(b.op("ReduceSum", {b.input({2, 4}, DType::kInt32), b.ints({1})}));
    none(b.g);
  }
}

// ---------------------------------------------------------------------------------------------
// (b) scale_after_matmul / scale_before_matmul

TEST(AttentionRewrites, SoftmaxDivisionCommutesPastMatMul) {
  Graph p = softmax_matmul({2, 4, 6}, {2, 6, 5});
  Graph r = apply_only(p, "scale_after_matmul", 1e-5, 1e4f);
  // o = Div(MatMul(e, V), Expand(rowsum, [2,4,5]))
  const Node& div = producer(r, r.outputs[0]);
  ASSERT_EQ(div.op_type, "Div");
  const Node& mm = producer(r, div.inputs[0]);
  ASSERT_EQ(mm.op_type, "MatMul");
  EXPECT_EQ(producer(r, mm.inputs[0]).op_type, "Exp");
  EXPECT_EQ(mm.inputs[1], r.inputs[1]);
  const Node& ex = producer(r, div.inputs[1]);
  ASSERT_EQ(ex.op_type, "Expand");
  EXPECT_EQ(r.type(ex.outputs[0]).shape, (Shape{2, 4, 5}));
  EXPECT_EQ(producer(r, ex.inputs[0]).op_type, "ReduceSum");
  EXPECT_EQ(count_op(r, "Div"), 1);
  EXPECT_EQ(count_op(r, "Expand"), 2);  // the max's Expand and the new one (the old one is gone)
}

TEST(AttentionRewrites, ScaleVariantsMoveAfterMatMul) {
  {  // scalar constant on the right operand, Mul with the scale first; batch broadcasting
    GraphBuilder b;
    ValueId a = b.input({4, 6});
    ValueId bb = b.op("Mul", {b.scalar(0.125f), b.input({3, 6, 5})});
    b.output(b.op("MatMul", {a, bb}));
    Graph r = apply_only(b.g, "scale_after_matmul");
    EXPECT_EQ(op_list(r), (Ops{"MatMul", "Mul"}));
  }
  {  // per-column scale of the right operand ([1,N] via Expand), per-row of the left: both move
    GraphBuilder b;
    ValueId a = b.op("Div", {b.input({2, 4, 6}), b.op("Expand", {b.input({2, 4, 1}), b.ints({2, 4, 6})})});
    ValueId bb = b.op("Mul", {b.input({6, 5}), b.op("Expand", {b.input({1, 5}), b.ints({6, 5})})});
    b.output(b.op("MatMul", {a, bb}));
    Graph r = apply_only(b.g, "scale_after_matmul");
    EXPECT_EQ(count_op(r, "Div"), 1);
    EXPECT_EQ(count_op(r, "Mul"), 1);
  }
  {  // operator graph: implicit broadcasting of a [M,1] tensor
    GraphBuilder b;
    ValueId a = b.op("Div", {b.input({2, 4, 6}), b.input({4, 1})});
    b.output(b.op("MatMul", {a, b.input({2, 6, 3})}));
    Graph r = apply_only(b.g, "scale_after_matmul");
    EXPECT_EQ(op_list(r), (Ops{"MatMul", "Expand", "Div"}));
  }
}

TEST(AttentionRewrites, ScaleAfterMatMulNotMatched) {
  auto none = [](const Graph& g) { EXPECT_TRUE(of_rule(g, "scale_after_matmul").empty()); };
  {  // a per-column scale of the LEFT operand varies along the contracted axis
    GraphBuilder b;
    ValueId a = b.op("Mul", {b.input({4, 6}), b.op("Expand", {b.input({1, 6}), b.ints({4, 6})})});
    b.output(b.op("MatMul", {a, b.input({6, 5})}));
    none(b.g);
  }
  {  // scale divided BY the operand; the scaled operand has another user
    GraphBuilder b;
    ValueId a = b.op("Div", {b.scalar(2.f), b.input({4, 6})});
    b.output(b.op("MatMul", {a, b.input({6, 5})}));
    ValueId c = b.op("Mul", {b.input({4, 6}), b.scalar(2.f)});
    b.output(b.op("MatMul", {c, b.input({6, 5})}));
    b.output(c);
    none(b.g);
  }
}

TEST(AttentionRewrites, RowScaleOfMatMulOutputMovesOntoLeftOperand) {
  GraphBuilder b;
  ValueId mm = b.op("MatMul", {b.input({2, 4, 6}), b.input({2, 6, 5})});
  b.output(b.op("Div", {mm, b.op("Expand", {b.input({2, 4, 1}), b.ints({2, 4, 5})})}));
  Graph r = apply_only(b.g, "scale_before_matmul");
  EXPECT_EQ(op_list(r), (Ops{"Expand", "Div", "MatMul"}));
  const Node& m = producer(r, r.outputs[0]);
  ASSERT_EQ(m.op_type, "MatMul");
  EXPECT_EQ(producer(r, m.inputs[0]).op_type, "Div");
  EXPECT_EQ(r.type(m.inputs[0]).shape, (Shape{2, 4, 6}));
  // and the softmax-after-MatMul of (b) round-trips back
  Graph p = softmax_matmul({2, 4, 6}, {2, 6, 5});
  Graph q = apply_only(apply_only(p, "scale_after_matmul"), "scale_before_matmul");
  Ops po = op_list(p), qo = op_list(q);
  std::sort(po.begin(), po.end());
  std::sort(qo.begin(), qo.end());
  EXPECT_EQ(qo, po);
}

TEST(AttentionRewrites, ScaleBeforeMatMulNotMatched) {
  auto none = [](const Graph& g) { EXPECT_TRUE(of_rule(g, "scale_before_matmul").empty()); };
  {  // a per-column scale of the output
    GraphBuilder b;
    ValueId mm = b.op("MatMul", {b.input({4, 6}), b.input({6, 5})});
    b.output(b.op("Mul", {mm, b.op("Expand", {b.input({1, 5}), b.ints({4, 5})})}));
    none(b.g);
  }
  {  // a row scale with batch dims the left operand does not have
    GraphBuilder b;
    ValueId mm = b.op("MatMul", {b.input({4, 6}), b.input({3, 6, 5})});
    b.output(b.op("Mul", {mm, b.op("Expand", {b.input({3, 4, 1}), b.ints({3, 4, 5})})}));
    none(b.g);
  }
  {  // the MatMul output is also a graph output
    GraphBuilder b;
    ValueId mm = b.op("MatMul", {b.input({4, 6}), b.input({6, 5})});
    b.output(b.op("Mul", {mm, b.scalar(3.f)}));
    b.output(mm);
    none(b.g);
  }
}

// ---------------------------------------------------------------------------------------------
// (c) transpose_into_einsum / transpose_of_matmul

TEST(AttentionRewrites, TransposedOperandsBecomeEinsumSubscripts) {
  struct Case {
    bool ta, tb;
    const char* eq;
  };
  for (Case c : {Case{true, false, "...ji,...jk->...ik"}, Case{false, true, "...ij,...kj->...ik"},
                 Case{true, true, "...ji,...kj->...ik"}}) {
    GraphBuilder b;
    ValueId a = c.ta ? b.op("Transpose", {b.input({2, 6, 4})}, attrs_perm({0, 2, 1})) : b.input({2, 4, 6});
    ValueId bb = c.tb ? b.op("Transpose", {b.input({2, 5, 6})}, attrs_perm({0, 2, 1})) : b.input({2, 6, 5});
    b.output(b.op("MatMul", {a, bb}));
    Graph r = apply_only(b.g, "transpose_into_einsum");
    ASSERT_EQ(op_list(r), (Ops{"Einsum"})) << c.eq;
    EXPECT_EQ(r.nodes[0].attrs.get_string("equation", ""), c.eq);
    EXPECT_EQ(r.nodes[0].inputs, r.inputs);
  }
}

// ONNX Einsum (and onnxruntime) require every "..." to cover the same number of dims, so a
// MatMul broadcasting a rank-2 operand against a rank-3 one is not offered.
TEST(AttentionRewrites, TransposeIntoEinsumNeedsEqualRanks) {
  GraphBuilder b;
  ValueId a = b.op("Transpose", {b.input({2, 6, 4})}, attrs_perm({0, 2, 1}));
  b.output(b.op("MatMul", {a, b.input({6, 5})}));
  for (const Alternative& alt : find_alternatives(b.g)) EXPECT_NE(alt.rule, "transpose_into_einsum");
}

TEST(AttentionRewrites, TransposeOfMatMulMovesOntoOperands) {
  GraphBuilder b;
  ValueId mm = b.op("MatMul", {b.input({2, 4, 6}), b.input({6, 5})});
  b.output(b.op("Transpose", {mm}, attrs_perm({0, 2, 1})));
  Graph r = apply_only(b.g, "transpose_of_matmul");
  EXPECT_EQ(op_list(r), (Ops{"Transpose", "Transpose", "MatMul"}));
  const Node& m = producer(r, r.outputs[0]);
  EXPECT_EQ(producer(r, m.inputs[0]).inputs[0], r.inputs[1]);
  EXPECT_EQ(producer(r, m.inputs[1]).inputs[0], r.inputs[0]);
  EXPECT_EQ(producer(r, m.inputs[1]).attrs.get_ints("perm"), (std::vector<int64_t>{0, 2, 1}));
}

TEST(AttentionRewrites, TransposeRulesNotMatched) {
  {  // a Transpose that moves a batch axis; Einsum needs opset 12
    GraphBuilder b;
    ValueId a = b.op("Transpose", {b.input({4, 2, 6})}, attrs_perm({1, 0, 2}));
    b.output(b.op("MatMul", {a, b.input({2, 6, 5})}));
    EXPECT_TRUE(of_rule(b.g, "transpose_into_einsum").empty());
    GraphBuilder b11(11);
    b11.output(b11.op("MatMul", {b11.op("Transpose", {b11.input({6, 4})}), b11.input({6, 5})}));
    EXPECT_TRUE(of_rule(b11.g, "transpose_into_einsum").empty());
  }
  {  // the MatMul output has another user; a Transpose of a non-MatMul
    GraphBuilder b;
    ValueId mm = b.op("MatMul", {b.input({4, 6}), b.input({6, 5})});
    b.output(b.op("Transpose", {mm}));
    b.output(b.op("Relu", {mm}));
    b.output(b.op("Transpose", {b.op("Relu", {b.input({3, 4})})}));
    EXPECT_TRUE(of_rule(b.g, "transpose_of_matmul").empty());
  }
}

// ---------------------------------------------------------------------------------------------
// The paper's attention block: Softmax(Q @ K^T / sqrt(d)) @ V, fissioned.

Graph attention_block() {
  GraphBuilder b;
  ValueId q = b.input({2, 4, 8}), k = b.input({2, 6, 8}), v = b.input({2, 6, 5});
  ValueId kt = b.op("Transpose", {k}, attrs_perm({0, 2, 1}));
  ValueId s = b.op("Div", {b.op("MatMul", {q, kt}), b.scalar(std::sqrt(8.f))});
  ValueId p = b.op("Softmax", {s}, int_attr("axis", -1));
  b.output(b.op("MatMul", {p, v}));
  return fission(b.g);
}

TEST(AttentionRewrites, AttentionBlockOffersTheRowSumAndTheDivision) {
  Graph g = attention_block();
  std::vector<Alternative> alts = find_alternatives(g);
  const Alternative *sum = nullptr, *div = nullptr;
  std::vector<std::string> rules;
  for (const Alternative& a : alts) {
    rules.push_back(a.rule);
    EXPECT_FALSE(a.description.empty());
    if (a.rule == "reduce_sum_as_matmul") sum = &a;
    if (a.rule == "scale_after_matmul") div = &a;
  }
  ASSERT_NE(sum, nullptr);
  ASSERT_NE(div, nullptr);
  EXPECT_EQ(std::count(rules.begin(), rules.end(), "transpose_into_einsum"), 1);  // Q @ K^T
  EXPECT_EQ(std::count(rules.begin(), rules.end(), "scale_before_matmul"), 1);    // / sqrt(d) onto Q
  // (a) names the row-sum ReduceSum, (b) the softmax's Div and the MatMul with V
  ASSERT_EQ(sum->nodes.size(), 1u);
  const Node* rs = nullptr;
  for (const Node& n : g.nodes)
    if (n.name == sum->nodes[0]) rs = &n;
  ASSERT_NE(rs, nullptr);
  EXPECT_EQ(rs->op_type, "ReduceSum");

  // Both applied, in either order, to one copy: the second still matches (it re-checks).
  for (bool sum_first : {true, false}) {
    Graph r = g;
    (sum_first ? sum : div)->apply(r);
    (sum_first ? div : sum)->apply(r);
    EXPECT_NO_THROW(verify_graph(r, true));
    EXPECT_EQ(count_op(r, "ReduceSum"), 0);
    EXPECT_EQ(count_op(r, "MatMul"), 3);  // Q@K^T, the row sum, e@V
    EXPECT_EQ(producer(r, r.outputs[0]).op_type, "Div");
    for (float scale : {1.f, 1e3f}) {
      std::vector<Tensor> in = random_inputs(g, 5);
      for (Tensor& t : in)
        for (float& x : t.span<float>()) x *= scale;
      Tensor want = interpret(g, in)[0], got = interpret(r, in)[0];
      EXPECT_LE(rel_l2(got, want), 1e-5) << "scale " << scale;
      for (int64_t i = 0; i < got.numel(); ++i) ASSERT_TRUE(std::isfinite(got.get_as_double(i)));
    }
  }
  // Every alternative on its own keeps the function too.
  for (const Alternative& a : alts) apply_checked(g, a);
}

TEST(AttentionRewritesDeathTest, ApplyOnAGraphThatNoLongerMatchesFails) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Graph g = attention_block();
  std::vector<Alternative> alts = of_rule(g, "reduce_sum_as_matmul");
  ASSERT_EQ(alts.size(), 1u);
  Graph r = g;
  alts[0].apply(r);
  EXPECT_DEATH(alts[0].apply(r), "reduce_sum_as_matmul");
  GraphBuilder other;
  other.output(other.op("Relu", {other.input({3})}));
  EXPECT_DEATH(alts[0].apply(other.g), "anchor");
}

}  // namespace
}  // namespace korch
