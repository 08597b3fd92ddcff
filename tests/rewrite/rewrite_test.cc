// The simplify() driver: fixed point, dead code, verification, on hand-built and fissioned graphs.
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

TEST(RewriteSimplify, ReachesAFixedPointAcrossFamilies) {
  // Each family exposes work for another: the Squeeze/Unsqueeze pair becomes a Reshape chain that
  // merges back to x, which makes the two Exps common, whose Sub with 0 then vanishes.
  GraphBuilder b;
  ValueId x = b.input({1, 4, 3});
  ValueId sq = b.op("Squeeze", {x, b.ints({0})});
  ValueId back = b.op("Unsqueeze", {sq, b.ints({0})});
  ValueId e1 = b.op("Exp", {x}), e2 = b.op("Exp", {back});
  ValueId d = b.op("Sub", {e1, b.op("Identity", {b.scalar(0.f)})});
  b.output(b.op("Add", {d, e2}));
  Graph r = b.g;
  SimplifyOptions o;
  o.verify = true;
  SimplifyReport rep;
  simplify(r, o, &rep);
  EXPECT_TRUE(rep.fixed_point);
  EXPECT_GE(rep.iterations, 2);
  EXPECT_EQ(rep.nodes_before, 7);
  EXPECT_EQ(rep.nodes_after, 2);
  EXPECT_EQ(op_list(r), (Ops{"Exp", "Add"}));
  expect_rewrite_equivalent(b.g, simplify_pass());
}

TEST(RewriteSimplify, IterationCapStops) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  b.output(b.op("Relu", {b.op("Identity", {b.op("Identity", {x})})}));
  Graph r = b.g;
  SimplifyOptions o;
  o.max_iterations = 1;
  SimplifyReport rep;
  simplify(r, o, &rep);
  EXPECT_EQ(rep.iterations, 1);
  EXPECT_FALSE(rep.fixed_point);  // the first round changed something; no round confirmed the fixed point
  EXPECT_EQ(op_list(r), (Ops{"Relu"}));
}

TEST(RewriteSimplify, AfterFissionSharedBroadcastsMerge) {
  // An op graph whose two implicit broadcasts of b fission into two identical Expands.
  GraphBuilder b;
  ValueId x = b.input({4, 3}), bias = b.input({3});
  ValueId y = b.op("Add", {x, bias});
  b.output(b.op("Mul", {y, bias}));
  Graph p = fission(b.g);
  ASSERT_EQ(count_op(p, "Expand"), 2);
  Graph r = expect_rewrite_equivalent(p, simplify_pass());
  EXPECT_EQ(count_op(r, "Expand"), 1);
  EXPECT_EQ(r.nodes.size(), 3u);
  for (const Node& n : r.nodes) EXPECT_NE(primitive_kind(r, n), PrimitiveKind::kOperator);
}

TEST(RewriteSimplify, AnUnchangedGraphReportsNoChange) {
  GraphBuilder b;
  b.output(b.op("Relu", {b.input({2})}));
  Graph r = expect_rewrite_equivalent(b.g, simplify_pass(), /*expect_change=*/false);
  EXPECT_EQ(r.nodes.size(), 1u);
}

}  // namespace
}  // namespace korch
