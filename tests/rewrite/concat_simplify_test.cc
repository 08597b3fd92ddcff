#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

Attributes axis_attr(int64_t axis) {
  Attributes a;
  a.set("axis", axis);
  return a;
}

ValueId slice(GraphBuilder& b, ValueId x, int64_t start, int64_t end, int64_t axis) {
  return b.op("Slice", {x, b.ints({start}), b.ints({end}), b.ints({axis})});
}

TEST(RewriteConcat, StridedSlicesBecomeOneSliceOfAView) {
  for (int64_t offset : {0, 1, 2}) {
    GraphBuilder b;
    ValueId x = b.input({1, 12, 3, 2});
    // Channels offset..offset+1 of each group of 4: [o, o+2), [o+4, o+6), [o+8, o+10).
    ValueId cat = b.op("Concat", {slice(b, x, offset, offset + 2, 1), slice(b, x, offset + 4, offset + 6, 1),
                                  slice(b, x, offset + 8, offset + 10, 1)},
                       axis_attr(1));
    b.output(b.op("Relu", {cat}));
    Graph r = expect_rewrite_equivalent(b.g, regroup_sliced_concat);
    EXPECT_EQ(op_list(r), (Ops{"Reshape", "Slice", "Reshape", "Relu"})) << "offset " << offset;
    EXPECT_EQ(r.type(r.nodes[0].outputs[0]).shape, (Shape{1, 3, 4, 3, 2}));
  }
}

TEST(RewriteConcat, RunsInsideALargerConcat) {
  GraphBuilder b;
  ValueId x = b.input({2, 9}), y = b.input({2, 3});
  // A consecutive run (0:2, 2:5) then y then a strided run of one-wide pieces (6, 7, 8 at stride 1
  // is consecutive too) and a single piece that stays.
  ValueId cat = b.op("Concat",
                     {slice(b, x, 0, 2, 1), slice(b, x, 2, 5, 1), y, slice(b, x, 6, 7, 1), slice(b, x, 7, 8, 1),
                      slice(b, x, 0, 1, 1)},
                     axis_attr(1));
  b.output(cat);
  Graph r = expect_rewrite_equivalent(b.g, regroup_sliced_concat);
  EXPECT_EQ(count_op(r, "Slice"), 3);
  EXPECT_EQ(count_op(r, "Concat"), 1);
}

TEST(RewriteConcat, SlicesThatDoNotTileStay) {
  {  // stride 3 does not divide 10
    GraphBuilder b;
    ValueId x = b.input({1, 10});
    b.output(b.op("Concat", {slice(b, x, 0, 2, 1), slice(b, x, 3, 5, 1), slice(b, x, 6, 8, 1)}, axis_attr(1)));
    expect_rewrite_equivalent(b.g, regroup_sliced_concat, /*expect_change=*/false);
  }
  {  // pieces of two different values, or cut along another axis than the Concat's
    GraphBuilder b;
    ValueId x = b.input({4, 6}), z = b.input({4, 6});
    b.output(b.op("Concat", {slice(b, x, 0, 2, 1), slice(b, z, 2, 4, 1)}, axis_attr(1)));
    b.output(b.op("Concat", {slice(b, x, 0, 2, 0), slice(b, x, 2, 4, 0)}, axis_attr(1)));
    expect_rewrite_equivalent(b.g, regroup_sliced_concat, /*expect_change=*/false);
  }
  {  // the window at the stride would run past the group: [3, 5) with stride 4
    GraphBuilder b;
    ValueId x = b.input({1, 8});
    b.output(b.op("Concat", {slice(b, x, 3, 5, 1), slice(b, x, 7, 9, 1)}, axis_attr(1)));
    expect_rewrite_equivalent(b.g, regroup_sliced_concat, /*expect_change=*/false);
  }
}

TEST(RewriteConcat, ElementwiseOpsWithConstantsHoistedOverTheConcat) {
  GraphBuilder b;
  ValueId x = b.input({1, 6, 3, 3});
  ValueId grid = b.random({1, 1, 3, 3});
  // Two Muls by different scalars on channels 0 and 1:3, then three Adds of one shared grid on 3, 4, 5.
  ValueId cat = b.op("Concat",
                     {b.op("Mul", {slice(b, x, 0, 1, 1), b.scalar(2.f)}), b.op("Mul", {slice(b, x, 1, 3, 1), b.scalar(3.f)}),
                      b.op("Add", {slice(b, x, 3, 4, 1), grid}), b.op("Add", {slice(b, x, 4, 5, 1), grid}),
                      b.op("Add", {slice(b, x, 5, 6, 1), grid})},
                     axis_attr(1));
  b.output(cat);
  Graph r = expect_rewrite_equivalent(b.g, hoist_elementwise_over_concat);
  EXPECT_EQ(count_op(r, "Mul"), 1);
  EXPECT_EQ(count_op(r, "Add"), 1);
  // Constants that broadcast are Expanded (elementwise primitives take operands of their shape):
  // the per-piece scalars 2, 3, 3 as a [1,3,1,1] constant, the shared grid as it is.
  for (const Node& n : r.nodes) {
    if (n.op_type != "Expand") continue;
    const Shape& src = r.type(n.inputs[0]).shape;
    EXPECT_TRUE(src == (Shape{1, 3, 1, 1}) || src == (Shape{1, 1, 3, 3})) << type_str(r.type(n.inputs[0]));
  }
  EXPECT_EQ(count_op(r, "Expand"), 2);
  r = expect_rewrite_equivalent(r, simplify_pass());
  EXPECT_EQ(count_op(r, "Slice"), 2);
}

TEST(RewriteConcat, HoistingWouldLoseOrChangeMeaning) {
  {  // a piece is read elsewhere too: its op would run twice
    GraphBuilder b;
    ValueId x = b.input({2, 4});
    ValueId m = b.op("Mul", {slice(b, x, 0, 2, 1), b.scalar(2.f)});
    b.output(b.op("Concat", {m, b.op("Mul", {slice(b, x, 2, 4, 1), b.scalar(3.f)})}, axis_attr(1)));
    b.output(m);
    expect_rewrite_equivalent(b.g, hoist_elementwise_over_concat, /*expect_change=*/false);
  }
  {  // the pieces are not Slices of one value: a Relu of convolutions stays in their epilogues
    GraphBuilder b;
    b.output(b.op("Concat", {b.op("Relu", {b.input({1, 2, 3})}), b.op("Relu", {b.input({1, 4, 3})})}, axis_attr(1)));
    expect_rewrite_equivalent(b.g, hoist_elementwise_over_concat, /*expect_change=*/false);
  }
  {  // Clip bounds must stay scalars: pieces clipped differently keep their Clips
    GraphBuilder b;
    ValueId x = b.input({2, 4});
    b.output(b.op("Concat", {b.op("Clip", {slice(b, x, 0, 2, 1), b.scalar(0.f), b.scalar(1.f)}),
                             b.op("Clip", {slice(b, x, 2, 4, 1), b.scalar(0.f), b.scalar(6.f)})},
                  axis_attr(1)));
    expect_rewrite_equivalent(b.g, hoist_elementwise_over_concat, /*expect_change=*/false);
  }
  {  // the constant is on the other side in one piece; two variable operands
    GraphBuilder b;
    ValueId x = b.input({2, 4});
    ValueId l = slice(b, x, 0, 2, 1), r = slice(b, x, 2, 4, 1);
    b.output(b.op("Concat", {b.op("Sub", {l, b.scalar(2.f)}), b.op("Sub", {b.scalar(2.f), r})}, axis_attr(1)));
    b.output(b.op("Concat", {b.op("Mul", {l, l}), b.op("Mul", {r, r})}, axis_attr(1)));
    expect_rewrite_equivalent(b.g, hoist_elementwise_over_concat, /*expect_change=*/false);
  }
}

TEST(RewriteConcat, EqualClipBoundsAreHoisted) {
  GraphBuilder b;
  ValueId x = b.input({2, 4});
  ValueId lo = b.scalar(0.f), hi = b.scalar(6.f);
  b.output(b.op("Concat", {b.op("Clip", {slice(b, x, 0, 2, 1), lo, hi}), b.op("Clip", {slice(b, x, 2, 4, 1), lo, hi})},
                axis_attr(1)));
  Graph r = expect_rewrite_equivalent(b.g, hoist_elementwise_over_concat);
  EXPECT_EQ(count_op(r, "Clip"), 1);
}

TEST(RewriteConcat, SlicesOfAnElementwiseOpOfAConcatReadThePieces) {
  GraphBuilder b;
  ValueId p = b.input({1, 3, 2}), q = b.input({1, 3, 2});
  ValueId per_channel = b.op("Expand", {b.random({1, 6, 1}), b.ints({1, 6, 2})});
  ValueId div = b.op("Div", {b.op("Concat", {p, q}, axis_attr(1)), b.scalar(13.f)});
  ValueId mul = b.op("Mul", {b.op("Concat", {p, q}, axis_attr(1)), per_channel});
  b.output(b.op("Exp", {slice(b, div, 0, 3, 1)}));
  b.output(b.op("Neg", {slice(b, div, 3, 6, 1)}));
  b.output(slice(b, mul, 3, 6, 1));  // the per-channel constant is cut to the piece's channels
  Graph r = expect_rewrite_equivalent(b.g, slice_elementwise_of_concat);
  r = expect_rewrite_equivalent(r, simplify_pass());
  EXPECT_EQ(count_op(r, "Concat"), 0);
  EXPECT_EQ(count_op(r, "Slice"), 0);
  EXPECT_EQ(count_op(r, "Div"), 2);
}

TEST(RewriteConcat, SliceThatStraddlesPiecesOrAnotherReaderStays) {
  GraphBuilder b;
  ValueId p = b.input({1, 3}), q = b.input({1, 3});
  ValueId div = b.op("Div", {b.op("Concat", {p, q}, axis_attr(1)), b.scalar(13.f)});
  b.output(slice(b, div, 0, 3, 1));
  b.output(slice(b, div, 2, 5, 1));
  ValueId add = b.op("Add", {b.op("Concat", {p, q}, axis_attr(1)), b.scalar(1.f)});
  b.output(slice(b, add, 0, 3, 1));
  b.output(b.op("Relu", {add}));
  expect_rewrite_equivalent(b.g, slice_elementwise_of_concat, /*expect_change=*/false);
}

// A YOLO-style decode (as pytorch-YOLOv4 exports it): the head output is cut into per-anchor channel
// Slices, regrouped, transformed, cut into one-channel pieces, offset by grids, regrouped and cut
// again. simplify() leaves the same function with far fewer Slices and Concats.
TEST(RewriteConcat, DetectionHeadDecodeSimplifies) {
  GraphBuilder b;
  const int64_t anchors = 3, per = 7, h = 4, w = 5;  // 2 xy + 2 wh + 1 objectness + 2 classes per anchor
  ValueId head = b.input({1, anchors * per, h, w});
  std::vector<ValueId> xy, wh;
  for (int64_t a = 0; a < anchors; ++a) {
    xy.push_back(slice(b, head, a * per, a * per + 2, 1));
    wh.push_back(slice(b, head, a * per + 2, a * per + 4, 1));
  }
  ValueId sxy = b.op("Sub", {b.op("Mul", {b.op("Sigmoid", {b.op("Concat", xy, axis_attr(1))}), b.scalar(1.05f)}),
                             b.scalar(0.025f)});
  ValueId ewh = b.op("Exp", {b.op("Concat", wh, axis_attr(1))});
  ValueId grid_x = b.random({1, 1, h, w}, 3), grid_y = b.random({1, 1, h, w}, 4);
  std::vector<ValueId> bx, by;
  for (int64_t a = 0; a < anchors; ++a) {
    bx.push_back(b.op("Add", {slice(b, sxy, 2 * a, 2 * a + 1, 1), grid_x}));
    by.push_back(b.op("Add", {slice(b, sxy, 2 * a + 1, 2 * a + 2, 1), grid_y}));
  }
  for (int64_t a = 0; a < anchors; ++a) {
    bx.push_back(b.op("Mul", {slice(b, ewh, 2 * a, 2 * a + 1, 1), b.scalar(1.5f + static_cast<float>(a))}));
    by.push_back(b.op("Mul", {slice(b, ewh, 2 * a + 1, 2 * a + 2, 1), b.scalar(2.5f + static_cast<float>(a))}));
  }
  ValueId dx = b.op("Div", {b.op("Concat", bx, axis_attr(1)), b.scalar(static_cast<float>(w))});
  ValueId dy = b.op("Div", {b.op("Concat", by, axis_attr(1)), b.scalar(static_cast<float>(h))});
  for (ValueId d : {dx, dy}) {
    b.output(b.op("Exp", {slice(b, d, 0, anchors, 1)}));
    b.output(b.op("Neg", {slice(b, d, anchors, 2 * anchors, 1)}));
  }
  const int before_slices = count_op(b.g, "Slice"), before_concats = count_op(b.g, "Concat");
  Graph r = expect_rewrite_equivalent(b.g, simplify_pass());
  EXPECT_EQ(before_slices, 22);
  EXPECT_EQ(before_concats, 4);
  EXPECT_LE(count_op(r, "Slice"), 6);
  EXPECT_EQ(count_op(r, "Concat"), 0);
  EXPECT_EQ(count_op(r, "Div"), 4);  // one per output piece, no Concat joined only to be cut
}

}  // namespace
}  // namespace korch
