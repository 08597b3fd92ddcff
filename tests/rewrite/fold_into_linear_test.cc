#include <stdexcept>

#include "rewrite/rewrite_util.h"
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

// Conv (constant weights, no bias) -> Mul(Expand(s)) -> Add(Expand(b)): the BatchNorm shape after fission.
struct ConvBn {
  GraphBuilder b;
  ValueId conv, mul;
  ConvBn(Shape s_shape, int64_t group = 1, bool bias_input = false, bool expand_scale = true) {
    ValueId x = b.input({2, 4, 5, 5});
    Attributes ca;
    ca.set("group", group);
    ca.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    std::vector<ValueId> ins = {x, b.random({6, 4 / group, 3, 3}, 11)};
    if (bias_input) ins.push_back(b.random({6}, 12));
    conv = b.op("Conv", ins, ca);  // [2,6,5,5]
    ValueId s = b.random(s_shape, 13);
    if (expand_scale) s = b.op("Expand", {s, b.ints({2, 6, 5, 5})});
    mul = b.op("Mul", {conv, s});
    ValueId bias = b.op("Expand", {b.random({1, 6, 1, 1}, 14), b.ints({2, 6, 5, 5})});
    b.output(b.op("Add", {mul, bias}));
  }
};

TEST(RewriteFoldIntoLinear, ConvPerChannelScaleMovesIntoTheWeights) {
  ConvBn m({1, 6, 1, 1});
  Graph r = expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, true, 1e-5);
  EXPECT_EQ(count_op(r, "Mul"), 0);
  EXPECT_EQ(count_op(r, "Conv"), 1);
  EXPECT_EQ(count_op(r, "Add"), 1);  // the bias add stays
  const Node& conv = r.nodes[0];
  ASSERT_EQ(conv.op_type, "Conv");
  const Tensor* w = r.value(conv.inputs[1]).constant.get();
  ASSERT_NE(w, nullptr);
  // W'[m, ...] = W[m, ...] * s[m]
  const Tensor& w0 = *m.b.g.value(m.b.g.nodes[0].inputs[1]).constant;
  const Tensor& s = *m.b.g.value(m.b.g.nodes[1].inputs[0]).constant;
  for (int64_t oc : {0, 3, 5})
    EXPECT_EQ(w->get_as_double(oc * 36 + 7), static_cast<float>(w0.get_as_double(oc * 36 + 7) * s.get_as_double(oc)));
}

TEST(RewriteFoldIntoLinear, ScaleVariants) {
  ConvBn rank3({6, 1, 1});                                      // rank-3 scale, broadcast
  ConvBn scalar({}, 1, false, false);                          // scalar constant
  ConvBn grouped({1, 6, 1, 1}, 2);                             // grouped conv
  ConvBn with_bias({1, 6, 1, 1}, 1, true);                     // a Conv bias input is scaled too
  ConvBn direct({6, 1, 1}, 1, false, false);                   // a broadcasting Mul (operator graph)
  for (ConvBn* m : {&rank3, &scalar, &grouped, &with_bias, &direct}) {
    Graph r = expect_rewrite_equivalent(m->b.g, fold_scale_into_linear, true, 1e-5);
    EXPECT_EQ(count_op(r, "Mul"), 0);
  }
}

TEST(RewriteFoldIntoLinear, NotFoldedWhenUnsafe) {
  {  // the scale varies along a spatial axis
    ConvBn m({1, 1, 5, 1});
    expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, false);
  }
  {  // the conv output has another user
    ConvBn m({1, 6, 1, 1});
    m.b.output(m.b.op("Relu", {m.conv}));
    expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, false);
  }
  {  // weights computed at run time
    GraphBuilder b;
    ValueId conv = b.op("Conv", {b.input({1, 2, 4, 4}), b.input({3, 2, 1, 1})});
    b.output(b.op("Mul", {conv, b.scalar(2.f)}));
    expect_rewrite_equivalent(b.g, fold_scale_into_linear, false);
  }
  {  // a non-finite scale is not exact to fold
    GraphBuilder b;
    ValueId conv = b.op("Conv", {b.input({1, 2, 4, 4}), b.random({3, 2, 1, 1})});
    b.output(b.op("Mul", {conv, b.scalar(INFINITY)}));
    expect_rewrite_equivalent(b.g, fold_scale_into_linear, false);
  }
}

TEST(RewriteFoldIntoLinear, MatMulColumnScale) {
  for (Shape bshape : {Shape{8, 6}, Shape{2, 8, 6}}) {
    GraphBuilder b;
    ValueId mm = b.op("MatMul", {b.input({2, 5, 8}), b.random(bshape, 21)});  // [2,5,6]
    ValueId s = b.op("Expand", {b.random({6}, 22), b.ints({2, 5, 6})});
    b.output(b.op("Mul", {s, mm}));  // scale on the left
    Graph r = expect_rewrite_equivalent(b.g, fold_scale_into_linear, true, 1e-5);
    ASSERT_EQ(op_list(r), (Ops{"MatMul"}));
    const Tensor& b0 = *b.g.value(b.g.nodes[0].inputs[1]).constant;
    const Tensor& b1 = *r.value(r.nodes[0].inputs[1]).constant;
    const Tensor& sv = *b.g.value(b.g.nodes[1].inputs[0]).constant;
    EXPECT_EQ(b1.get_as_double(3 * 6 + 4), static_cast<float>(b0.get_as_double(3 * 6 + 4) * sv.get_as_double(4)));
  }
}

TEST(RewriteFoldIntoLinear, MatMulRowScaleIsNotAColumnScale) {
  GraphBuilder b;
  ValueId mm = b.op("MatMul", {b.input({5, 8}), b.random({8, 6})});
  b.output(b.op("Mul", {mm, b.op("Expand", {b.random({5, 1}), b.ints({5, 6})})}));
  expect_rewrite_equivalent(b.g, fold_scale_into_linear, false);
}

TEST(RewriteFoldIntoLinear, SimplifyFoldsAndCleansUp) {
  ConvBn m({1, 6, 1, 1});
  Graph r = expect_rewrite_equivalent(m.b.g, simplify_pass(), true, 1e-5);
  EXPECT_EQ(op_list(r), (Ops{"Conv", "Expand", "Add"}));
}


// --- shifts: a scale through a bias Add, two bias Adds merged (the Conv(bias) + BatchNorm shape) ---

// Linear (Conv [2,6,5,5] or MatMul [2,5,6]) with constant weights -> Add(E(b)) -> Mul(E(s)) -> Add(E(c)).
struct BiasChain {
  GraphBuilder b;
  ValueId lin, add1, mul, add2;
  Shape out, ch;  // output shape, per-channel constant shape
  BiasChain(bool conv, bool scale = true, bool shift = true) {
    if (conv) {
      Attributes ca;
      ca.set("pads", std::vector<int64_t>{1, 1, 1, 1});
      lin = b.op("Conv", {b.input({2, 4, 5, 5}), b.random({6, 4, 3, 3}, 31)}, ca);
      out = {2, 6, 5, 5};
      ch = {1, 6, 1, 1};
    } else {
      lin = b.op("MatMul", {b.input({2, 5, 8}), b.random({8, 6}, 31)});
      out = {2, 5, 6};
      ch = {6};
    }
    add1 = b.op("Add", {lin, expand(32)});
    ValueId v = add1;
    if (scale) v = mul = b.op("Mul", {expand(33), v});  // scale on the left
    if (shift) v = add2 = b.op("Add", {v, expand(34)});
    b.output(v);
  }
  ValueId expand(uint64_t seed) { return b.op("Expand", {b.random(ch, seed), b.ints(out)}); }
  const Tensor& constant(uint64_t k) const {  // the per-channel constants: 0 = b, 1 = s, 2 = c
    int seen = 0;
    for (const Node& n : b.g.nodes)
      if (n.op_type == "Expand" && seen++ == static_cast<int>(k)) return *b.g.value(n.inputs[0]).constant;
    throw std::runtime_error("no such constant");
  }
};

// The shift constant feeding the single Add of `r` (through its Expand).
const Tensor& final_shift(const Graph& r) {
  for (const Node& n : r.nodes)
    if (n.op_type == "Add")
      for (ValueId v : n.inputs)
        if (const Node* p = producer_of(r, v); p && p->op_type == "Expand") return *r.value(p->inputs[0]).constant;
  throw std::runtime_error("no shift");
}

TEST(RewriteFoldIntoLinear, ScaleThroughBiasAdd) {
  for (bool conv : {true, false}) {
    BiasChain m(conv, true, false);
    Graph r = expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, true, 1e-5);
    EXPECT_EQ(count_op(r, "Mul"), 0) << conv;
    EXPECT_EQ(count_op(r, "Add"), 1);
    EXPECT_EQ(count_op(r, conv ? "Conv" : "MatMul"), 1);
    // b' = b * s
    const Tensor& b2 = final_shift(r);
    for (int64_t c : {0, 4})
      EXPECT_EQ(b2.get_as_double(c), static_cast<float>(m.constant(0).get_as_double(c) * m.constant(1).get_as_double(c)));
  }
}

TEST(RewriteFoldIntoLinear, ScaleThroughBiasAddScalesAConvBiasInput) {
  GraphBuilder b;
  ValueId conv = b.op("Conv", {b.input({1, 2, 4, 4}), b.random({3, 2, 1, 1}, 1), b.random({3}, 2)});
  ValueId a = b.op("Add", {b.op("Expand", {b.random({3, 1, 1}, 3), b.ints({1, 3, 4, 4})}), conv});  // bias on the left
  b.output(b.op("Mul", {a, b.op("Expand", {b.random({1, 3, 1, 1}, 4), b.ints({1, 3, 4, 4})})}));
  Graph r = expect_rewrite_equivalent(b.g, fold_scale_into_linear, true, 1e-5);
  EXPECT_EQ(op_list(r), (Ops{"Conv", "Expand", "Add"}));
}

TEST(RewriteFoldIntoLinear, TwoBiasAddsMerge) {
  for (bool conv : {true, false}) {
    BiasChain m(conv, false, true);
    Graph r = expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, true, 1e-5);
    EXPECT_EQ(op_list(r), (Ops{conv ? "Conv" : "MatMul", "Expand", "Add"}));
    const Tensor& b2 = final_shift(r);
    EXPECT_EQ(b2.get_as_double(5), static_cast<float>(m.constant(0).get_as_double(5) + m.constant(1).get_as_double(5)));
    // the weights are untouched
    EXPECT_EQ(r.nodes[0].inputs[1], m.b.g.nodes[0].inputs[1]);
  }
}

TEST(RewriteFoldIntoLinear, FullChainEndsAsLinearPlusOneBias) {
  for (bool conv : {true, false}) {
    BiasChain m(conv);
    Graph r = expect_rewrite_equivalent(m.b.g, simplify_pass(), true, 1e-5);
    EXPECT_EQ(op_list(r), (Ops{conv ? "Conv" : "MatMul", "Expand", "Add"}));
    // bias' = b * s + c
    const Tensor& b2 = final_shift(r);
    for (int64_t c : {1, 3}) {
      const float bs = static_cast<float>(m.constant(0).get_as_double(c) * m.constant(1).get_as_double(c));
      EXPECT_EQ(b2.get_as_double(c), static_cast<float>(bs + m.constant(2).get_as_double(c)));
    }
  }
}

TEST(RewriteFoldIntoLinear, ShiftsNotFoldedWhenUnsafe) {
  for (bool conv : {true, false}) {
    {  // the bias Add's output has another user: neither the scale nor the shift moves
      BiasChain m(conv);
      m.b.output(m.b.op("Relu", {m.add1}));
      Graph r = expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, false);
      EXPECT_EQ(count_op(r, "Add"), 2);
      EXPECT_EQ(count_op(r, "Mul"), 1);
    }
    {  // the bias Add's output is a graph output
      BiasChain m(conv, false, true);
      m.b.output(m.add1);
      expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, false);
    }
    {  // the linear output has another user: the scale cannot go into the weights
      BiasChain m(conv, true, false);
      m.b.output(m.b.op("Relu", {m.lin}));
      expect_rewrite_equivalent(m.b.g, fold_scale_into_linear, false);
    }
  }
  {  // the shift varies along a spatial axis, not per channel
    GraphBuilder b;
    ValueId conv = b.op("Conv", {b.input({1, 2, 4, 4}), b.random({3, 2, 1, 1})});
    ValueId a = b.op("Add", {conv, b.op("Expand", {b.random({3, 1, 1}), b.ints({1, 3, 4, 4})})});
    b.output(b.op("Add", {a, b.op("Expand", {b.random({1, 4, 1}), b.ints({1, 3, 4, 4})})}));
    expect_rewrite_equivalent(b.g, fold_scale_into_linear, false);
  }
  {  // MatMul: a per-row shift is not a per-column one
    GraphBuilder b;
    ValueId mm = b.op("MatMul", {b.input({5, 8}), b.random({8, 6})});
    ValueId a = b.op("Add", {mm, b.op("Expand", {b.random({6}), b.ints({5, 6})})});
    b.output(b.op("Mul", {a, b.op("Expand", {b.random({5, 1}), b.ints({5, 6})})}));
    expect_rewrite_equivalent(b.g, fold_scale_into_linear, false);
  }
  {  // the bias Add is not after a linear primitive
    GraphBuilder b;
    ValueId r = b.op("Relu", {b.input({5, 6})});
    ValueId a = b.op("Add", {r, b.op("Expand", {b.random({6}), b.ints({5, 6})})});
    b.output(b.op("Add", {a, b.op("Expand", {b.random({6}), b.ints({5, 6})})}));
    expect_rewrite_equivalent(b.g, fold_scale_into_linear, false);
  }
}

// Conv(bias) + BatchNormalization as operators, fissioned, then simplified: one Conv and one bias Add.
TEST(RewriteFoldIntoLinear, ConvBatchNormAfterFission) {
  for (int opset : {9, 17}) {
    GraphBuilder b(opset);
    Attributes ca;
    ca.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    ValueId conv = b.op("Conv", {b.input({2, 3, 6, 6}), b.random({4, 3, 3, 3}, 41), b.random({4}, 42)}, ca);
    ValueId var = b.floats({0.5f, 1.5f, 2.f, 0.25f}, {4});
    ValueId bn = b.op("BatchNormalization", {conv, b.random({4}, 43), b.random({4}, 44), b.random({4}, 45), var});
    b.output(bn);
    Graph p = fission(b.g);
    EXPECT_EQ(count_op(p, "Mul"), 1);
    EXPECT_EQ(count_op(p, "Add"), 2);
    Graph r = expect_rewrite_equivalent(p, simplify_pass(), true, 1e-5);
    EXPECT_EQ(op_list(r), (Ops{"Conv", "Expand", "Add"}));
    EXPECT_EQ(r.nodes[0].inputs.size(), 2u);  // still bias-free: a linear primitive
    // and against the operator graph
    std::vector<Tensor> inputs = random_inputs(b.g, 3);
    EXPECT_LE(rel_l2(interpret(r, inputs)[0], interpret(b.g, inputs)[0]), 1e-5);
  }
}

TEST(RewriteFoldIntoLinear, MatMulBatchNormStyleAfterFission) {
  // MatMul(x, B) + bias as an operator Add with broadcasting, then a broadcasting per-column Mul/Add.
  // Fission folds these small broadcasts into full-size constants whose values repeat per column.
  GraphBuilder b;
  ValueId mm = b.op("MatMul", {b.input({3, 4, 8}), b.random({8, 5}, 51)});
  ValueId a = b.op("Add", {mm, b.random({5}, 52)});
  ValueId m = b.op("Mul", {a, b.random({5}, 53)});
  b.output(b.op("Add", {b.random({1, 5}, 54), m}));
  Graph p = fission(b.g);
  Graph r = expect_rewrite_equivalent(p, simplify_pass(), true, 1e-5);
  EXPECT_EQ(op_list(r), (Ops{"MatMul", "Expand", "Add"}));
  std::vector<Tensor> inputs = random_inputs(b.g, 3);
  EXPECT_LE(rel_l2(interpret(r, inputs)[0], interpret(b.g, inputs)[0]), 1e-5);
}

}  // namespace
}  // namespace korch

namespace korch {
namespace {

using namespace korch::testing;

// SegFormer's decode head after conv_over_upsampled_concat and the layout pass: a per-stage MLP
// (MatMul 32 -> 64 with a bias) reshaped to [N, H, W, C] and read by a channels-last 1x1 Conv
// (64 -> 64): one MatMul 32 -> 64 with the bias mapped through, then the Reshape.
struct MlpThenPointwise {
  GraphBuilder b;
  explicit MlpThenPointwise(int64_t k = 32, int64_t n = 64, int64_t m = 64, bool bias = true, bool conv = true) {
    ValueId x = b.input({1, 20, k});
    ValueId h = b.op("MatMul", {x, b.random({k, n}, 3)});
    if (bias) h = b.op("Add", {b.op("Expand", {b.random({n}, 4), b.ints({1, 20, n})}), h});
    ValueId r = b.op("Reshape", {h, b.ints({1, 4, 5, n})});
    if (conv) {
      Attributes a;
      a.set("channels_last", int64_t{1});
      b.output(b.op("Conv", {r, b.random({m, n, 1, 1}, 5)}, a));
    } else {
      b.output(b.op("MatMul", {r, b.random({n, m}, 5)}));
    }
  }
};

TEST(RewriteFoldLinearIntoLinear, MlpThenPointwiseConvBecomesOneMatMul) {
  MlpThenPointwise m;
  Graph r = expect_rewrite_equivalent(m.b.g, fold_linear_into_linear, true, 1e-5);
  EXPECT_EQ(count_op(r, "Conv"), 0);
  EXPECT_EQ(count_op(r, "MatMul"), 1);
  EXPECT_EQ(count_op(r, "Add"), 1);
  for (const Node& n : r.nodes)
    if (n.op_type == "MatMul") {
      EXPECT_EQ(r.type(n.inputs[1]).shape, (Shape{32, 64}));
    }
}

// The same head before the layout pass (and on the CUDA path): the MLP's rows are brought to
// channels-first by Transpose [0, 2, 1] and a Reshape of the pixels, or by the 4-D channels-first
// Transpose, then a channels-first 1x1 Conv.
TEST(RewriteFoldLinearIntoLinear, ChannelsFirstConvReadsTheRowsThroughTheirTranspose) {
  for (bool flat : {true, false}) {
    GraphBuilder b;
    ValueId h = b.op("MatMul", {b.input({1, 20, 32}), b.random({32, 64}, 3)});
    h = b.op("Add", {h, b.op("Expand", {b.random({64}, 4), b.ints({1, 20, 64})})});
    ValueId v = flat ? b.op("Reshape", {b.op("Transpose", {h}, attrs_perm({0, 2, 1})), b.ints({1, 64, 4, 5})})
                     : b.op("Transpose", {b.op("Reshape", {h, b.ints({1, 4, 5, 64})})}, attrs_perm({0, 3, 1, 2}));
    b.output(b.op("Conv", {v, b.random({48, 64, 1, 1}, 5)}));
    Graph r = expect_rewrite_equivalent(b.g, fold_linear_into_linear, true, 1e-5);
    EXPECT_EQ(count_op(r, "Conv"), 0) << flat;
    EXPECT_EQ(count_op(r, "MatMul"), 1) << flat;
  }
  {  // a Transpose that does not bring the channels to axis 1 is not a channels-first view
    GraphBuilder b;
    ValueId h = b.op("MatMul", {b.input({1, 20, 32}), b.random({32, 64}, 3)});
    ValueId v = b.op("Transpose", {b.op("Reshape", {h, b.ints({1, 4, 5, 64})})}, attrs_perm({0, 3, 2, 1}));
    b.output(b.op("Conv", {v, b.random({48, 64, 1, 1}, 5)}));
    expect_rewrite_equivalent(b.g, fold_linear_into_linear, false);
  }
}

TEST(RewriteFoldLinearIntoLinear, TwoMatMulsWithoutBias) {
  MlpThenPointwise m(16, 48, 24, false, false);
  Graph r = expect_rewrite_equivalent(m.b.g, fold_linear_into_linear, true, 1e-5);
  EXPECT_EQ(count_op(r, "MatMul"), 1);
  EXPECT_EQ(count_op(r, "Add"), 0);
}

TEST(RewriteFoldLinearIntoLinear, LeftAloneWhereItWouldCostMore) {
  {  // a bottleneck: 64 -> 8 -> 64 is 1024 multiply-adds per row, folded 4096
    MlpThenPointwise m(64, 8, 64);
    expect_rewrite_equivalent(m.b.g, fold_linear_into_linear, false);
  }
  {  // a nonlinearity between the two
    GraphBuilder b;
    ValueId h = b.op("Relu", {b.op("MatMul", {b.input({1, 20, 32}), b.random({32, 64}, 3)})});
    b.output(b.op("MatMul", {h, b.random({64, 64}, 5)}));
    expect_rewrite_equivalent(b.g, fold_linear_into_linear, false);
  }
  {  // the inner product is read twice
    GraphBuilder b;
    ValueId h = b.op("MatMul", {b.input({1, 20, 32}), b.random({32, 64}, 3)});
    b.output(b.op("MatMul", {h, b.random({64, 64}, 5)}));
    b.output(h);
    expect_rewrite_equivalent(b.g, fold_linear_into_linear, false);
  }
  {  // a 3x3 Conv mixes neighbours: not a per-row map
    GraphBuilder b;
    ValueId h = b.op("MatMul", {b.input({1, 20, 32}), b.random({32, 64}, 3)});
    Attributes a;
    a.set("channels_last", int64_t{1});
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    b.output(b.op("Conv", {b.op("Reshape", {h, b.ints({1, 4, 5, 64})}), b.random({64, 64, 3, 3}, 5)}, a));
    expect_rewrite_equivalent(b.g, fold_linear_into_linear, false);
  }
}

}  // namespace
}  // namespace korch
