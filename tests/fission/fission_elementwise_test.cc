#include "fission_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

TEST(FissionElementwise, SameShapeAddIsAlreadyPrimitive) {
  Graph g = single_op_graph("Add", {in({2, 3}), in({2, 3})});
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(count_op(p, "Expand"), 0);
}

TEST(FissionElementwise, ImplicitBroadcastBecomesExpand) {
  Graph g = single_op_graph("Mul", {in({2, 1, 4}), in({3, 1})});
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Expand"), 2);
  EXPECT_EQ(primitive_counts(p)["elementwise"], 1);
  EXPECT_EQ(primitive_counts(p)["broadcast"], 2);
}

TEST(FissionElementwise, ScalarConstantStaysInTheExpression) {
  Graph g = single_op_graph("Div", {in({4, 5}), cst(Tensor::scalar<float>(2.f))});
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Expand"), 0);
  EXPECT_EQ(p.nodes.size(), 1u);
}

TEST(FissionElementwise, WhereBroadcastsAllThree) {
  Graph g = single_op_graph("Where", {in(DType::kBool, {3, 1}), in({1, 4}), cst(Tensor::scalar<float>(0.f))});
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Expand"), 2);
}

TEST(FissionElementwise, Opset7BroadcastsWithTile) {
  Graph g = single_op_graph("Add", {in({2, 3, 4}), in({3, 1})}, {}, /*opset=*/7);
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Expand"), 0);
  EXPECT_EQ(count_op(p, "Tile"), 1);
}

TEST(FissionElementwise, ClipWithRuntimeBoundsBecomesMaxMin) {
  Graph g = single_op_graph("Clip", {in({3, 4}), in({}), in({})}, {}, 13);
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Clip"), 0);
  EXPECT_EQ(count_op(p, "Max"), 1);
  EXPECT_EQ(count_op(p, "Min"), 1);
  // Only a lower bound.
  expect_fission_equivalent(single_op_graph("Clip", {in({5}), in({}), absent()}, {}, 13));
  // Constant scalar bounds keep the single Clip primitive.
  Graph c = single_op_graph("Clip", {in({3, 4}), cst(Tensor::scalar<float>(-0.5f)), cst(Tensor::scalar<float>(0.5f))});
  EXPECT_EQ(count_op(expect_fission_equivalent(c), "Clip"), 1);
}

TEST(FissionElementwise, OutputNamesArePreserved) {
  Graph g = single_op_graph("Add", {in({2, 3}), in({3})});
  Graph p = fission(g);
  EXPECT_EQ(p.value(p.outputs[0]).name, "out0");
  EXPECT_EQ(p.value(p.inputs[0]).name, "in0");
}

}  // namespace
}  // namespace korch
