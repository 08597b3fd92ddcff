#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

TEST(RewriteBroadcastSinking, ElementwiseOverExpandsRunsOnTheSources) {
  GraphBuilder b;
  ValueId a = b.op("Expand", {b.input({3, 1}), b.ints({3, 8})});
  ValueId c = b.op("Expand", {b.input({3, 1}), b.ints({3, 8})});
  b.output(b.op("Mul", {a, c}));
  Graph r = expect_rewrite_equivalent(b.g, sink_broadcasts);
  EXPECT_EQ(op_list(r), (Ops{"Mul", "Expand"}));
  EXPECT_EQ(r.type(r.nodes[0].outputs[0]).shape, (Shape{3, 1}));
}

TEST(RewriteBroadcastSinking, UnaryAndScalarOperands) {
  GraphBuilder b;
  ValueId e = b.op("Expand", {b.input({4}), b.ints({2, 3, 4})});
  ValueId d = b.op("Div", {e, b.scalar(2.f)});
  b.output(b.op("Exp", {d}));
  Graph r = expect_rewrite_equivalent(b.g, simplify_pass());
  // Both the Div and the Exp now run on the [4] source; one Expand at the end.
  EXPECT_EQ(op_list(r), (Ops{"Div", "Exp", "Expand"}));
}

TEST(RewriteBroadcastSinking, NotAppliedWhenItCouldLose) {
  {  // the Expand has another consumer: sinking would add an Expand, not remove one
    GraphBuilder b;
    ValueId e = b.op("Expand", {b.input({3, 1}), b.ints({3, 8})});
    b.output(b.op("Relu", {e}));
    b.output(b.op("Neg", {e}));
    expect_rewrite_equivalent(b.g, sink_broadcasts, /*expect_change=*/false);
  }
  {  // one operand is full size already
    GraphBuilder b;
    ValueId e = b.op("Expand", {b.input({3, 1}), b.ints({3, 8})});
    b.output(b.op("Add", {e, b.input({3, 8})}));
    expect_rewrite_equivalent(b.g, sink_broadcasts, false);
  }
  {  // sources of different shapes
    GraphBuilder b;
    ValueId e1 = b.op("Expand", {b.input({3, 1}), b.ints({3, 8})});
    ValueId e2 = b.op("Expand", {b.input({1, 8}), b.ints({3, 8})});
    b.output(b.op("Add", {e1, e2}));
    expect_rewrite_equivalent(b.g, sink_broadcasts, false);
  }
}

}  // namespace
}  // namespace korch
