#include "rewrite/conv_padding.h"

#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

RewritePassFn symmetric_pads(int* changed) {
  return [changed](Graph& g) {
    *changed = make_conv_padding_symmetric(g);
    return *changed > 0;
  };
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

// Every Conv left pads each axis alike.
void expect_symmetric(const Graph& g) {
  for (const Node& n : g.nodes) {
    if (n.op_type != "Conv") continue;
    EXPECT_EQ(n.attrs.get_string("auto_pad", "NOTSET"), "NOTSET");
    const std::vector<int64_t> p = n.attrs.get_ints("pads");
    for (size_t d = 0; d < p.size() / 2; ++d) EXPECT_EQ(p[d], p[p.size() / 2 + d]) << n.name;
  }
}

TEST(RewriteConvPadding, SameUpperAtStrideTwoBecomesAPadAndASymmetricConv) {
  GraphBuilder b;  // 3x3 at stride 2 on 8x8, SAME_UPPER: 0 before, 1 after on both axes
  Attributes a;
  a.set("strides", std::vector<int64_t>{2, 2});
  a.set("auto_pad", std::string("SAME_UPPER"));
  b.output(b.op("Conv", {b.input({1, 3, 8, 8}), b.random({4, 3, 3, 3}, 3)}, a));
  int changed = 0;
  Graph out = expect_rewrite_equivalent(b.g, symmetric_pads(&changed), true, 0);
  EXPECT_EQ(changed, 1);
  EXPECT_EQ(count_op(out, "Pad"), 1);
  expect_symmetric(out);
}

TEST(RewriteConvPadding, ExplicitAsymmetricPadsKeepTheSharedPartOnTheConv) {
  GraphBuilder b;  // 1-D [2 before, 1 after] and 2-D [1,0 before, 2,0 after], dilated, grouped
  Attributes a1;
  a1.set("pads", std::vector<int64_t>{2, 1});
  ValueId y = b.op("Conv", {b.input({1, 2, 9}), b.random({2, 2, 3}, 4)}, a1);
  Attributes a2;
  a2.set("pads", std::vector<int64_t>{1, 0, 2, 0});
  a2.set("dilations", std::vector<int64_t>{2, 1});
  a2.set("group", int64_t{2});
  b.output(y);
  b.output(b.op("Conv", {b.input({1, 4, 7, 6}), b.random({6, 2, 3, 2}, 5)}, a2));
  int changed = 0;
  Graph out = expect_rewrite_equivalent(b.g, symmetric_pads(&changed), true, 0);
  EXPECT_EQ(changed, 2);
  expect_symmetric(out);
  for (const Node& n : out.nodes) {
    if (n.op_type == "Conv" && n.attrs.get_ints("pads").size() == 2) {
      EXPECT_EQ(n.attrs.get_ints("pads"), (std::vector<int64_t>{1, 1}));
    }
  }
}

TEST(RewriteConvPadding, SymmetricPaddingIsLeftAlone) {
  GraphBuilder b;
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.output(b.op("Conv", {b.input({1, 3, 8, 8}), b.random({4, 3, 3, 3}, 3)}, a));
  int changed = 0;
  expect_rewrite_equivalent(b.g, symmetric_pads(&changed), false, 0);
  EXPECT_EQ(changed, 0);
}

}  // namespace
}  // namespace korch
