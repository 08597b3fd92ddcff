#include "fission/fission.h"
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

Attributes axis_attr(int64_t axis) {
  Attributes a;
  a.set("axis", axis);
  return a;
}

// A feature-pyramid head in primitives: y1 [1,4,2,3] upsampled to 4x6 by interpolation MatMuls
// (H by a left constant, W by a right one), y2 [1,5,2,3] by nearest Gathers, y0 [1,3,4,6] at full
// resolution; concatenated along channels and mixed by a 1x1 Conv with `out` channels.
struct Head {
  GraphBuilder b;
  ValueId conv_out = kNoValue;
};
Head pyramid_head(int64_t out_channels) {
  Head h;
  GraphBuilder& b = h.b;
  ValueId y1 = b.input({1, 4, 2, 3});
  ValueId up1 = b.op("MatMul", {b.op("MatMul", {b.random({4, 2}, 3), y1}), b.random({3, 6}, 4)});
  ValueId y2 = b.input({1, 5, 2, 3});
  ValueId g2 = b.op("Gather", {y2, b.ints({0, 0, 1, 1})}, axis_attr(2));
  ValueId up2 = b.op("Gather", {g2, b.ints({0, 0, 1, 1, 2, 2})}, axis_attr(-1));
  ValueId y0 = b.input({1, 3, 4, 6});
  ValueId cat = b.op("Concat", {up1, y0, up2}, axis_attr(1));
  h.conv_out = b.op("Conv", {cat, b.random({out_channels, 12, 1, 1}, 5)});
  b.output(b.op("Relu", {h.conv_out}));
  return h;
}

// Convolutions of `g` whose output has `shape`.
int convs_writing(const Graph& g, const Shape& shape) {
  int k = 0;
  for (const Node& n : g.nodes) k += n.op_type == "Conv" && g.type(n.outputs[0]).shape == shape;
  return k;
}

TEST(RewriteConvOverConcat, TheConvolutionRunsOnEachPartBeforeItsUpsampling) {
  Head h = pyramid_head(3);
  Graph r = expect_rewrite_equivalent(h.b.g, conv_over_upsampled_concat, true, 1e-6);
  EXPECT_EQ(count_op(r, "Concat"), 0);
  EXPECT_EQ(count_op(r, "Conv"), 3);
  EXPECT_EQ(count_op(r, "Add"), 2);
  // Each moved convolution reads the part before its steps: at 2x3, not 4x6.
  EXPECT_EQ(convs_writing(r, {1, 3, 2, 3}), 2);
  expect_rewrite_equivalent(h.b.g, simplify_pass(), true, 1e-6);
}

TEST(RewriteConvOverConcat, StaysWhereItCouldLose) {
  // More output channels than a moved part has: its spatial steps would move more values.
  expect_rewrite_equivalent(pyramid_head(5).b.g, conv_over_upsampled_concat, false);
  // A part that is downsampled on its way (a Gather keeping every other row).
  GraphBuilder b;
  ValueId y = b.input({1, 4, 8, 6});
  ValueId down = b.op("Gather", {y, b.ints({0, 2, 4, 6})}, axis_attr(2));
  ValueId cat = b.op("Concat", {down, b.input({1, 4, 4, 6})}, axis_attr(1));
  b.output(b.op("Conv", {cat, b.random({2, 8, 1, 1})}));
  expect_rewrite_equivalent(b.g, conv_over_upsampled_concat, false);
  // A 3x3 convolution mixes neighbouring pixels: it does not commute with upsampling.
  GraphBuilder c;
  ValueId up = c.op("MatMul", {c.random({4, 2}), c.input({1, 4, 2, 4})});
  ValueId cat3 = c.op("Concat", {up, c.input({1, 4, 4, 4})}, axis_attr(1));
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  c.output(c.op("Conv", {cat3, c.random({2, 8, 3, 3})}, pads));
  expect_rewrite_equivalent(c.g, conv_over_upsampled_concat, false);
}

// A CSP-style neck: the concatenation of a nearest-upsampled part and a lateral part is read by two
// 1x1 convolutions with `out_a` and `out_b` channels (and, when `extra_reader`, by a Relu too).
GraphBuilder csp_neck(int64_t out_a, int64_t out_b, bool extra_reader) {
  GraphBuilder b;
  ValueId y1 = b.input({1, 4, 2, 3});
  ValueId g1 = b.op("Gather", {y1, b.ints({0, 0, 1, 1})}, axis_attr(2));
  ValueId up = b.op("Gather", {g1, b.ints({0, 0, 1, 1, 2, 2})}, axis_attr(3));
  ValueId cat = b.op("Concat", {up, b.input({1, 4, 4, 6})}, axis_attr(1));
  b.output(b.op("Relu", {b.op("Conv", {cat, b.random({out_a, 8, 1, 1}, 6)})}));
  b.output(b.op("Relu", {b.op("Conv", {cat, b.random({out_b, 8, 1, 1}, 7)})}));
  if (extra_reader) b.output(b.op("Relu", {cat}));
  return b;
}

TEST(RewriteConvOverConcat, EveryConvolutionReadingTheConcatMoves) {
  Graph r = expect_rewrite_equivalent(csp_neck(2, 2, false).g, conv_over_upsampled_concat, true, 1e-6);
  EXPECT_EQ(count_op(r, "Concat"), 0);
  EXPECT_EQ(count_op(r, "Conv"), 4);
  EXPECT_EQ(convs_writing(r, {1, 2, 2, 3}), 2);
  // Together more output channels (3 + 2) than the upsampled part has (4): the steps would move more.
  expect_rewrite_equivalent(csp_neck(3, 2, false).g, conv_over_upsampled_concat, false);
  // A reader that is not such a convolution still needs the concatenation.
  expect_rewrite_equivalent(csp_neck(2, 2, true).g, conv_over_upsampled_concat, false);
}

// From an ONNX Resize (linear, half_pixel) through fission: the interpolation MatMuls fission
// makes are what the rule moves the convolution past.
TEST(RewriteConvOverConcat, AppliesToFissionedResize) {
  GraphBuilder b;
  ValueId y1 = b.input({1, 4, 3, 5});
  Attributes lin;
  lin.set("mode", std::string("linear"));
  ValueId up = b.op("Resize", {y1, kNoValue, b.floats({1, 1, 2, 2}, {4})}, lin);
  ValueId cat = b.op("Concat", {up, b.input({1, 6, 6, 10})}, axis_attr(1));
  b.output(b.op("Relu", {b.op("Conv", {cat, b.random({4, 10, 1, 1})})}));
  Graph prims = fission(b.g);
  simplify(prims);
  EXPECT_EQ(count_op(prims, "Concat"), 0);
  const std::vector<Tensor> inputs = random_inputs(b.g, 3);
  const std::vector<Tensor> want = interpret(b.g, inputs), got = interpret(prims, inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(rel_l2(got[0], want[0]), 1e-5);
}

}  // namespace
}  // namespace korch
