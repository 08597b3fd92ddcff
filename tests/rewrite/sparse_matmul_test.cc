// "sparse_matmul_as_gathers" (rewrite/sparse_matmul.cc): the MatMuls of a fissioned linear or
// cubic Resize offered as Gathers, scaled and added; dense MatMuls are not.
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

// Resize(x, scales) in `mode`, fissioned: one MatMul per resized axis.
Graph resized(Shape x, std::vector<float> scales, const std::string& mode) {
  GraphBuilder b;
  Attributes a;
  a.set("mode", mode);
  const int64_t rank = static_cast<int64_t>(scales.size());
  b.output(b.op("Resize", {b.input(std::move(x)), kNoValue, b.floats(scales, {rank})}, a));
  return fission(b.g);
}

TEST(SparseMatmulAsGathers, BilinearUpsamplingOfBothAxes) {
  const Graph g = resized({1, 3, 8, 6}, {1, 1, 2, 2.5f}, "linear");
  ASSERT_EQ(count_op(g, "MatMul"), 2);
  const std::vector<Alternative> alts = of_rule(g, "sparse_matmul_as_gathers");
  ASSERT_EQ(alts.size(), 2u);  // the height axis (left form) and the width axis (right form)
  for (const Alternative& a : alts) {
    const Graph r = apply_checked(g, a);
    EXPECT_EQ(count_op(r, "MatMul"), 1);
    EXPECT_EQ(count_op(r, "Gather"), 2) << a.description;  // two taps of a linear interpolation
    // whose weights add up to 1: g1 + (g0 - g1) * w0, one broadcast weight
    EXPECT_EQ(count_op(r, "Expand") - count_op(g, "Expand"), 1) << a.description;
    EXPECT_EQ(count_op(r, "Sub") - count_op(g, "Sub"), 1) << a.description;
    EXPECT_NE(a.description.find("2 taps"), std::string::npos) << a.description;
    EXPECT_NE(a.description.find("interpolated"), std::string::npos) << a.description;
  }
  // Both applied: no MatMul left, the same function.
  Graph both = g;
  alts[0].apply(both);
  alts[1].apply(both);
  EXPECT_EQ(count_op(both, "MatMul"), 0);
  std::vector<Tensor> in = random_inputs(g, 5);
  EXPECT_LE(rel_l2(interpret(both, in)[0], interpret(g, in)[0]), 1e-6);
}

TEST(SparseMatmulAsGathers, CubicTakesFourTaps) {
  const Graph g = resized({2, 10, 7}, {1, 1, 3}, "cubic");
  const std::vector<Alternative> alts = of_rule(g, "sparse_matmul_as_gathers");
  ASSERT_EQ(alts.size(), 1u);
  const Graph r = apply_checked(g, alts[0]);
  EXPECT_EQ(count_op(r, "Gather"), 4);
  EXPECT_EQ(count_op(r, "Expand") - count_op(g, "Expand"), 4);  // a weight per tap
}

// A column with fewer nonzeros than the others gathers its last row again with weight 0; an all-
// zero column gathers row 0 with weight 0 in every tap.
TEST(SparseMatmulAsGathers, ColumnsWithFewerTapsAndEmptyColumns) {
  GraphBuilder b;
  // W[6, 4]: column 0 one nonzero, column 1 two, column 2 none, column 3 three.
  std::vector<float> w(24, 0.f);
  w[2 * 4 + 0] = 0.5f;
  w[0 * 4 + 1] = 1.5f, w[5 * 4 + 1] = -2.f;
  w[1 * 4 + 3] = 0.25f, w[3 * 4 + 3] = 3.f, w[4 * 4 + 3] = -1.f;
  b.output(b.op("MatMul", {b.input({2, 5, 6}), b.floats(w, {6, 4})}));
  const std::vector<Alternative> alts = of_rule(b.g, "sparse_matmul_as_gathers");
  ASSERT_EQ(alts.size(), 1u);
  const Graph r = apply_checked(b.g, alts[0], 1e-6);
  EXPECT_EQ(count_op(r, "Gather"), 3);
  EXPECT_EQ(count_op(r, "Expand"), 3);  // weights that do not add up to 1: scaled and added
}

TEST(SparseMatmulAsGathers, DenseOrVariableOperandsAreNotOffered) {
  {
    GraphBuilder b;  // a dense constant
    b.output(b.op("MatMul", {b.input({4, 8}), b.random({8, 5})}));
    EXPECT_TRUE(of_rule(b.g, "sparse_matmul_as_gathers").empty());
  }
  {
    GraphBuilder b;  // both operands variable
    b.output(b.op("MatMul", {b.input({4, 8}), b.input({8, 5})}));
    EXPECT_TRUE(of_rule(b.g, "sparse_matmul_as_gathers").empty());
  }
  {
    GraphBuilder b;  // as many taps as K: nothing to skip
    b.output(b.op("MatMul", {b.input({4, 2}), b.floats({1, 2, 3, 4}, {2, 2})}));
    EXPECT_TRUE(of_rule(b.g, "sparse_matmul_as_gathers").empty());
  }
}

}  // namespace
}  // namespace korch
