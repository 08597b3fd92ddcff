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

TEST(FissionElementwise, OutputNamesArePreserved) {
  Graph g = single_op_graph("Add", {in({2, 3}), in({3})});
  Graph p = fission(g);
  EXPECT_EQ(p.value(p.outputs[0]).name, "out0");
  EXPECT_EQ(p.value(p.inputs[0]).name, "in0");
}

}  // namespace
}  // namespace korch
