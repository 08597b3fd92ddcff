#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

Attributes axes_attr(std::vector<int64_t> axes) {
  Attributes a;
  a.set("axes", std::move(axes));
  return a;
}

TEST(RewriteLayout, SqueezeUnsqueezeFlattenBecomeReshapes) {
  for (int opset : {11, 17}) {
    GraphBuilder b(opset);
    ValueId x = b.input({1, 3, 1, 4});
    ValueId s = opset >= 13 ? b.op("Squeeze", {x, b.ints({0, 2})}) : b.op("Squeeze", {x}, axes_attr({0, 2}));
    ValueId u = opset >= 13 ? b.op("Unsqueeze", {s, b.ints({0})}) : b.op("Unsqueeze", {s}, axes_attr({0}));
    Attributes fa;
    fa.set("axis", int64_t{2});
    ValueId f = b.op("Flatten", {u}, fa);
    b.output(b.op("Relu", {f}));
    Graph r = expect_rewrite_equivalent(b.g, normalize_reshapes);
    EXPECT_EQ(op_list(r), (Ops{"Reshape", "Reshape", "Reshape", "Relu"})) << "opset " << opset;
    // The normalised chain merges into one Reshape.
    Graph s2 = expect_rewrite_equivalent(b.g, simplify_pass());
    EXPECT_EQ(op_list(s2), (Ops{"Reshape", "Relu"})) << "opset " << opset;
  }
}

TEST(RewriteLayout, TransposeMovingOnlySizeOneDimsIsAReshape) {
  GraphBuilder b;
  ValueId x = b.input({2, 1, 3});
  ValueId t = b.op("Transpose", {x}, attrs_perm({1, 0, 2}));
  ValueId t2 = b.op("Transpose", {b.input({2, 3, 1})}, attrs_perm({0, 2, 1}));  // [2,1,3]
  b.output(b.op("Add", {t, b.op("Reshape", {t2, b.ints({1, 2, 3})})}));
  Graph r = expect_rewrite_equivalent(b.g, normalize_reshapes);
  EXPECT_EQ(count_op(r, "Transpose"), 0);
  EXPECT_EQ(count_op(r, "Reshape"), 3);
  // A real permutation of non-1 dims stays a Transpose.
  GraphBuilder c;
  c.output(c.op("Transpose", {c.input({2, 1, 3})}, attrs_perm({2, 1, 0})));
  expect_rewrite_equivalent(c.g, normalize_reshapes, /*expect_change=*/false);
}

TEST(RewriteLayout, InverseTransposesCancel) {
  GraphBuilder b;
  ValueId x = b.input({2, 3, 4, 5});
  ValueId t1 = b.op("Transpose", {x}, attrs_perm({0, 2, 3, 1}));
  ValueId t2 = b.op("Transpose", {t1}, attrs_perm({0, 3, 1, 2}));
  b.output(b.op("Relu", {t2}));
  Graph r = expect_rewrite_equivalent(b.g, merge_transposes);
  EXPECT_EQ(op_list(r), (Ops{"Relu"}));
  EXPECT_EQ(r.nodes[0].inputs[0], r.inputs[0]);
}

TEST(RewriteLayout, TransposeChainComposes) {
  GraphBuilder b;
  ValueId x = b.input({2, 3, 4});
  ValueId t1 = b.op("Transpose", {x}, attrs_perm({1, 0, 2}));   // [3,2,4]
  ValueId t2 = b.op("Transpose", {t1}, attrs_perm({0, 2, 1}));  // [3,4,2]
  ValueId t3 = b.op("Transpose", {t2});                         // default perm: reverse -> [2,4,3]
  b.output(t3);
  Graph r = expect_rewrite_equivalent(b.g, merge_transposes);
  ASSERT_EQ(op_list(r), (Ops{"Transpose"}));
  EXPECT_EQ(r.nodes[0].attrs.get_ints("perm"), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_EQ(r.nodes[0].inputs[0], r.inputs[0]);
}

TEST(RewriteLayout, TransposePairComposesInOrder) {
  // perm(Transpose(Transpose(x, p1), p2))[i] = p1[p2[i]]; here p2∘p1 would give another shape.
  GraphBuilder b;
  ValueId x = b.input({2, 3, 4, 5});
  ValueId t1 = b.op("Transpose", {x}, attrs_perm({1, 2, 3, 0}));  // [3,4,5,2]
  b.output(b.op("Transpose", {t1}, attrs_perm({0, 2, 1, 3})));     // [3,5,4,2]
  Graph r = expect_rewrite_equivalent(b.g, merge_transposes);
  ASSERT_EQ(op_list(r), (Ops{"Transpose"}));
  EXPECT_EQ(r.nodes[0].attrs.get_ints("perm"), (std::vector<int64_t>{1, 3, 2, 0}));
}

TEST(RewriteLayout, SharedTransposeStaysForItsOtherUser) {
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  ValueId t1 = b.op("Transpose", {x}, attrs_perm({1, 0}));
  ValueId t2 = b.op("Transpose", {t1}, attrs_perm({1, 0}));
  b.output(b.op("Relu", {t2}));
  b.output(b.op("Exp", {t1}));
  Graph r = expect_rewrite_equivalent(b.g, merge_transposes);
  EXPECT_EQ(op_list(r), (Ops{"Transpose", "Relu", "Exp"}));
}

TEST(RewriteLayout, CancellingTransposesOfAnInputThatIsAlsoTheOutputStayValid) {
  // The output would be the graph input itself: not allowed (outputs keep their names), so the
  // pair becomes one identity Transpose and simplify still reaches a fixed point.
  GraphBuilder b;
  ValueId x = b.input({2, 3});
  b.output(b.op("Transpose", {b.op("Transpose", {x}, attrs_perm({1, 0}))}, attrs_perm({1, 0})));
  Graph r = expect_rewrite_equivalent(b.g, simplify_pass());
  EXPECT_EQ(r.nodes.size(), 1u);
}

// Tokens [1, H*W, C] to a channels-last image [1, H, W, C] through the channels-first view a
// model spells (Transpose, Reshape to NCHW, then the layout pass's Transpose to NHWC), and back:
// every element stays where it was in memory, so each chain is one Reshape.
TEST(RewriteLayout, ViewChainsThatKeepMemoryOrderAreOneReshape) {
  GraphBuilder b;
  ValueId tokens = b.input({1, 6, 4});
  ValueId t1 = b.op("Transpose", {tokens}, attrs_perm({0, 2, 1}));  // [1,4,6]
  ValueId r1 = b.op("Reshape", {t1, b.ints({1, 4, 2, 3})});
  ValueId nhwc = b.op("Transpose", {r1}, attrs_perm({0, 2, 3, 1}));  // [1,2,3,4]
  ValueId act = b.op("Relu", {nhwc});
  ValueId t2 = b.op("Transpose", {act}, attrs_perm({0, 3, 1, 2}));  // [1,4,2,3]
  ValueId r2 = b.op("Reshape", {t2, b.ints({1, 4, 6})});
  b.output(b.op("Transpose", {r2}, attrs_perm({0, 2, 1})));        // [1,6,4]
  Graph r = expect_rewrite_equivalent(b.g, merge_view_chains);
  Graph s = expect_rewrite_equivalent(b.g, simplify_pass());
  EXPECT_EQ(count_op(s, "Transpose"), 0);
  EXPECT_EQ(op_list(s), (Ops{"Reshape", "Relu", "Reshape"}));
  EXPECT_EQ(count_op(r, "Transpose"), 0);  // the pass alone (the chains' first Transposes are dead)
}

// Chains that move elements stay: a Transpose that swaps two real dims after the view, and a
// Reshape that splits across two factors of a transposed dim.
TEST(RewriteLayout, ViewChainsThatMoveElementsStay) {
  GraphBuilder b;
  ValueId tokens = b.input({1, 6, 4});
  ValueId t1 = b.op("Transpose", {tokens}, attrs_perm({0, 2, 1}));  // [1,4,6]
  ValueId r1 = b.op("Reshape", {t1, b.ints({1, 4, 2, 3})});
  b.output(b.op("Transpose", {r1}, attrs_perm({0, 3, 2, 1})));      // [1,3,2,4]: w and h swapped
  ValueId x = b.input({2, 6});
  ValueId tx = b.op("Transpose", {x}, attrs_perm({1, 0}));  // [6,2]
  ValueId rx = b.op("Reshape", {tx, b.ints({4, 3})});
  b.output(b.op("Transpose", {rx}, attrs_perm({1, 0})));
  expect_rewrite_equivalent(b.g, merge_view_chains, /*expect_change=*/false);
}

TEST(RewriteLayout, ReshapeChainMerges) {
  GraphBuilder b;
  ValueId x = b.input({2, 3, 4});
  ValueId r1 = b.op("Reshape", {x, b.ints({0, -1})});   // [2,12]
  ValueId r2 = b.op("Reshape", {r1, b.ints({-1, 4})});  // [6,4]
  ValueId r3 = b.op("Reshape", {r2, b.ints({0, 2, 2})});  // [6,2,2]: 0 copies r2's dim 0
  b.output(b.op("Relu", {r3}));
  Graph r = expect_rewrite_equivalent(b.g, merge_reshapes);
  ASSERT_EQ(op_list(r), (Ops{"Reshape", "Relu"}));
  EXPECT_EQ(r.nodes[0].inputs[0], r.inputs[0]);
  EXPECT_EQ(r.value(r.nodes[0].inputs[1]).constant->to_int_vector(), (std::vector<int64_t>{6, 2, 2}));
}

TEST(RewriteLayout, ReshapeBackToTheInputShapeDisappears) {
  GraphBuilder b;
  ValueId x = b.input({2, 3, 4});
  ValueId r1 = b.op("Reshape", {x, b.ints({6, 4})});
  b.output(b.op("Exp", {b.op("Reshape", {r1, b.ints({2, 3, 4})})}));
  Graph r = expect_rewrite_equivalent(b.g, merge_reshapes);
  EXPECT_EQ(op_list(r), (Ops{"Exp"}));
}

TEST(RewriteLayout, NoOpLayoutPrimitivesAreRemoved) {
  GraphBuilder b;
  ValueId x = b.input({2, 3, 4});
  ValueId v = b.op("Reshape", {x, b.ints({2, 3, 4})});
  v = b.op("Expand", {v, b.ints({3, 1})});
  v = b.op("Transpose", {v}, attrs_perm({0, 1, 2}));
  v = b.op("Slice", {v, b.ints({0, 0}), b.ints({100, 3}), b.ints({2, 1})});
  v = b.op("Concat", {v}, [] { Attributes a; a.set("axis", int64_t{1}); return a; }());
  v = b.op("Pad", {v, b.ints({0, 0, 0, 0, 0, 0})});
  v = b.op("Tile", {v, b.ints({1, 1, 1})});
  b.output(b.op("Relu", {v}));
  Graph r = expect_rewrite_equivalent(b.g, remove_noop_layout);
  EXPECT_EQ(op_list(r), (Ops{"Relu"}));
}

TEST(RewriteLayout, ShapePreservingButMovingLayoutStays) {
  GraphBuilder b;
  ValueId x = b.input({3, 3});
  ValueId t = b.op("Transpose", {x}, attrs_perm({1, 0}));                             // same shape, moves data
  ValueId s = b.op("Slice", {t, b.ints({-1}), b.ints({-100}), b.ints({0}), b.ints({-1})});  // reversal
  ValueId p = b.op("Pad", {s, b.ints({1, 0, -1, 0})});                                // shifts rows
  b.output(p);
  expect_rewrite_equivalent(b.g, remove_noop_layout, /*expect_change=*/false);
}

TEST(RewriteLayout, SliceOfConcatSelectingOneInput) {
  for (int opset : {9, 17}) {
    GraphBuilder b(opset);
    ValueId a = b.input({2, 3}), x = b.input({2, 5}), c = b.input({2, 2});
    Attributes ca;
    ca.set("axis", int64_t{1});
    ValueId cat = b.op("Concat", {a, x, c}, ca);  // [2,10]
    auto slice = [&](int64_t s, int64_t e, int64_t axis) {
      if (opset >= 10) return b.op("Slice", {cat, b.ints({s}), b.ints({e}), b.ints({axis})});
      Attributes sa;
      sa.set("starts", std::vector<int64_t>{s});
      sa.set("ends", std::vector<int64_t>{e});
      sa.set("axes", std::vector<int64_t>{axis});
      return b.op("Slice", {cat}, sa);
    };
    b.output(b.op("Relu", {slice(3, 8, 1)}));     // exactly x
    b.output(b.op("Exp", {slice(-2, 100, 1)}));  // exactly c (negative start, clamped end)
    b.output(b.op("Neg", {slice(0, 3, 1)}));      // exactly a
    b.output(slice(2, 7, 1));                     // straddles a and x: stays
    Graph r = expect_rewrite_equivalent(b.g, slice_of_concat);
    EXPECT_EQ(count_op(r, "Slice"), 1) << "opset " << opset;
    EXPECT_EQ(r.nodes[1].op_type, "Relu");
    EXPECT_EQ(r.nodes[1].inputs[0], r.inputs[1]);
    EXPECT_EQ(r.nodes[2].inputs[0], r.inputs[2]);
    EXPECT_EQ(r.nodes[3].inputs[0], r.inputs[0]);
  }
}

TEST(RewriteLayout, SliceOfConcatThatAlsoCutsAnotherAxisStays) {
  GraphBuilder b;
  ValueId cat = b.op("Concat", {b.input({2, 3}), b.input({2, 5})}, [] { Attributes a; a.set("axis", int64_t{1}); return a; }());
  b.output(b.op("Slice", {cat, b.ints({0, 3}), b.ints({1, 8}), b.ints({0, 1})}));
  expect_rewrite_equivalent(b.g, slice_of_concat, /*expect_change=*/false);
}

}  // namespace
}  // namespace korch
