#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

TEST(RewriteAlgebra, NeutralElementsVanish) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  ValueId v = b.op("Mul", {x, b.scalar(1.f)});
  v = b.op("Add", {b.scalar(0.f), v});
  v = b.op("Sub", {v, b.floats({0, 0, 0, 0, 0, 0}, {2, 3})});
  v = b.op("Div", {v, b.op("Expand", {b.floats({1, 1, 1}, {3}), b.ints({2, 3})})});
  v = b.op("Pow", {v, b.scalar(1.f)});
  v = b.op("Mul", {b.floats({1}, {1, 1}), v});
  b.output(b.op("Relu", {v}));
  Graph r = expect_rewrite_equivalent(b.g, remove_neutral_elements);
  EXPECT_EQ(op_list(r), (Ops{"Relu"}));
  EXPECT_EQ(r.nodes[0].inputs[0], r.inputs[0]);
}

TEST(RewriteAlgebra, NonNeutralOrBroadcastingOperandsStay) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  b.output(b.op("Sub", {b.scalar(0.f), x}));                        // 0 - x is Neg, not x
  b.output(b.op("Div", {b.scalar(1.f), x}));                        // 1 / x
  b.output(b.op("Mul", {x, b.scalar(2.f)}));                        // not neutral
  b.output(b.op("Mul", {x, b.floats({1, 1, 1, 1}, {4, 1, 1})}));    // broadcasts x to [4,2,3]
  b.output(b.op("Add", {x, b.floats({0, 0, 0, 1, 0, 0}, {2, 3})}));  // one element is not 0
  expect_rewrite_equivalent(b.g, remove_neutral_elements, /*expect_change=*/false);
}

TEST(RewriteAlgebra, NeutralElementOnIntegers) {
  GraphBuilder b;
  ValueId x = b.input({5}, DType::kInt64);
  ValueId one = b.constant(Tensor::scalar<int64_t>(1));
  b.output(b.op("Div", {b.op("Mul", {x, one}), one}));
  Graph r = expect_rewrite_equivalent(b.g, remove_neutral_elements);
  // The output cannot be the graph input itself: the last node stays, the first is gone.
  EXPECT_EQ(r.nodes.size(), 1u);
}

TEST(RewriteAlgebra, DoubleNegation) {
  GraphBuilder b;
  ValueId x = b.input({4});
  b.output(b.op("Exp", {b.op("Neg", {b.op("Neg", {x})})}));
  b.output(b.op("Neg", {b.op("Neg", {b.op("Neg", {b.op("Abs", {x})})})}));
  ValueId bx = b.input({4}, DType::kBool);
  b.output(b.op("Not", {b.op("Not", {b.op("Not", {bx})})}));
  Graph r = expect_rewrite_equivalent(b.g, remove_double_negation);
  EXPECT_EQ(op_list(r), (Ops{"Exp", "Abs", "Neg", "Not"}));
}

TEST(RewriteAlgebra, IdentitiesAndSameTypeCasts) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  Attributes cast;
  cast.set("to", int64_t{1});  // FLOAT
  ValueId v = b.op("Cast", {b.op("Identity", {b.op("Identity", {x})})}, cast);
  ValueId y = b.op("Relu", {v});
  b.output(b.op("Identity", {y}));
  Graph r = expect_rewrite_equivalent(b.g, remove_identities);
  ASSERT_EQ(op_list(r), (Ops{"Relu"}));
  EXPECT_EQ(r.value(r.outputs[0]).name, b.g.value(b.g.outputs[0]).name);  // the Relu took the output's name
}

TEST(RewriteAlgebra, IdentityOfAnInputAsOutputStays) {
  GraphBuilder b;
  ValueId x = b.input({2});
  b.output(b.op("Identity", {x}));
  b.output(b.op("Identity", {x}));
  Graph r = expect_rewrite_equivalent(b.g, remove_identities, /*expect_change=*/false);
  EXPECT_EQ(r.nodes.size(), 2u);
}

TEST(RewriteAlgebra, ConstantSubexpressionsFold) {
  GraphBuilder b;
  ValueId x = b.input({3, 4});
  ValueId w = b.random({5, 4});
  ValueId wt = b.op("Transpose", {w}, attrs_perm({1, 0}));  // [4,5]
  ValueId ws = b.op("Mul", {wt, b.scalar(0.5f)});
  b.output(b.op("MatMul", {x, ws}));
  Graph r = expect_rewrite_equivalent(b.g, fold_constants);
  ASSERT_EQ(op_list(r), (Ops{"MatMul"}));
  const Tensor* folded = r.value(r.nodes[0].inputs[1]).constant.get();
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(folded->shape(), (Shape{4, 5}));
  const Tensor& orig = *b.g.value(w).constant;
  EXPECT_EQ(folded->get_as_double(1 * 5 + 2), static_cast<float>(orig.get_as_double(2 * 4 + 1) * 0.5));
}

TEST(RewriteAlgebra, GrowingConstantsAndOutputsAreNotFolded) {
  GraphBuilder b;
  ValueId x = b.input({64, 4});
  ValueId bias = b.op("Expand", {b.floats({1, 2, 3, 4}, {4}), b.ints({64, 4})});  // stays a broadcast
  b.output(b.op("Add", {x, bias}));
  b.output(b.op("Neg", {b.floats({1, 2}, {2})}));  // a graph output: stays a node result
  Graph r = expect_rewrite_equivalent(b.g, fold_constants, /*expect_change=*/false);
  EXPECT_EQ(op_list(r), (Ops{"Expand", "Add", "Neg"}));
}

TEST(RewriteAlgebra, CommonSubexpressions) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  ValueId e1 = b.op("Exp", {x}), e2 = b.op("Exp", {x});
  ValueId m1 = b.op("Mul", {e1, b.scalar(3.f)}), m2 = b.op("Mul", {e2, b.scalar(3.f)});  // equal constants
  b.output(b.op("Add", {m1, m2}));
  Graph r = expect_rewrite_equivalent(b.g, eliminate_common_subexpressions);
  EXPECT_EQ(op_list(r), (Ops{"Exp", "Mul", "Add"}));
  EXPECT_EQ(r.nodes[2].inputs[0], r.nodes[2].inputs[1]);
}

TEST(RewriteAlgebra, DifferentAttributesOrConstantsAreNotCommon) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  Attributes a1, a2;
  a1.set("alpha", 0.1f);
  a2.set("alpha", 0.2f);
  b.output(b.op("Add", {b.op("LeakyRelu", {x}, a1), b.op("LeakyRelu", {x}, a2)}));
  b.output(b.op("Add", {b.op("Mul", {x, b.scalar(0.f)}), b.op("Mul", {x, b.scalar(-0.f)})}));  // +0 vs -0 bits
  ValueId y = b.input({2, 3});
  b.output(b.op("Add", {b.op("Sub", {x, y}), b.op("Sub", {y, x})}));  // operand order matters
  expect_rewrite_equivalent(b.g, eliminate_common_subexpressions, /*expect_change=*/false);
}

TEST(RewriteAlgebra, DuplicateGraphOutputsStayDistinctValues) {
  GraphBuilder b;
  ValueId x = b.input({3});
  b.output(b.op("Exp", {x}));
  b.output(b.op("Exp", {x}));  // both outputs need their own name: cannot merge
  Graph r = expect_rewrite_equivalent(b.g, eliminate_common_subexpressions, /*expect_change=*/false);
  EXPECT_EQ(r.nodes.size(), 2u);
}

}  // namespace
}  // namespace korch
