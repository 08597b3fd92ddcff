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

}  // namespace
}  // namespace korch
