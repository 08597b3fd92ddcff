#include "rewrite/merge_matmuls.h"

#include "rewrite/rewrite_util.h"
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;
using Ops = std::vector<std::string>;

// Applies every site find_matmul_merges reports; true when there was one.
bool merge_all(Graph& g) {
  std::vector<MergeSite> sites = find_matmul_merges(g);
  for (const MergeSite& s : sites) apply_matmul_merge(g, s);
  return !sites.empty();
}

const Node* node_named(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes)
    if (n.op_type == op) return &n;
  return nullptr;
}

// Q/K/V: three MatMuls of x with W[8,6], W[8,4], W[8,6]; q and k feed further ops, v is a graph output.
TEST(RewriteMergeMatMuls, QkvProjectionsBecomeOneMatMulAndASplit) {
  for (int opset : {11, 17}) {
    GraphBuilder b(opset);
    ValueId x = b.input({2, 5, 8});
    ValueId q = b.op("MatMul", {x, b.random({8, 6}, 1)});
    ValueId k = b.op("MatMul", {x, b.random({8, 4}, 2)});
    ValueId v = b.op("MatMul", {x, b.random({8, 6}, 3)});
    b.output(b.op("Relu", {q}));
    b.output(b.op("Neg", {k}));
    b.output(v);
    std::vector<MergeSite> sites = find_matmul_merges(b.g);
    ASSERT_EQ(sites.size(), 1u);
    EXPECT_EQ(sites[0].matmuls.size(), 3u);
    Graph r = expect_rewrite_equivalent(b.g, merge_all, true, 1e-6);
    EXPECT_EQ(count_op(r, "MatMul"), 1);
    EXPECT_EQ(count_op(r, "Split"), 1);
    const Node* mm = node_named(r, "MatMul");
    const Node* split = node_named(r, "Split");
    ASSERT_TRUE(mm && split);
    EXPECT_EQ(r.type(mm->outputs[0]).shape, (Shape{2, 5, 16}));
    EXPECT_EQ(r.value(mm->inputs[0]).name, b.g.value(x).name);
    ASSERT_EQ(split->outputs.size(), 3u);
    EXPECT_EQ(split->attrs.get_int("axis", 0), 2);
    // consumers rewired: Relu reads part 0, Neg part 1, part 2 is the graph output (same name)
    EXPECT_EQ(node_named(r, "Relu")->inputs[0], split->outputs[0]);
    EXPECT_EQ(node_named(r, "Neg")->inputs[0], split->outputs[1]);
    EXPECT_EQ(r.outputs[2], split->outputs[2]);
    // W = Concat(W1, W2, W3) along the last axis
    const Tensor& w = *r.value(mm->inputs[1]).constant;
    EXPECT_EQ(w.shape(), (Shape{8, 16}));
    const Tensor& w2 = *b.g.value(b.g.nodes[1].inputs[1]).constant;
    EXPECT_EQ(w.get_as_double(3 * 16 + 6 + 2), w2.get_as_double(3 * 4 + 2));
    EXPECT_TRUE(find_matmul_merges(r).empty());
  }
}

TEST(RewriteMergeMatMuls, GroupsByLeftOperand) {
  GraphBuilder b;
  ValueId x = b.input({4, 8}), y = b.input({4, 8});
  b.output(b.op("MatMul", {x, b.random({8, 3}, 1)}));
  b.output(b.op("MatMul", {y, b.random({8, 3}, 2)}));
  b.output(b.op("MatMul", {x, b.random({8, 5}, 3)}));
  b.output(b.op("MatMul", {y, b.random({8, 2}, 4)}));
  std::vector<MergeSite> sites = find_matmul_merges(b.g);
  ASSERT_EQ(sites.size(), 2u);
  EXPECT_EQ(sites[0].matmuls, (std::vector<std::string>{b.g.nodes[0].name, b.g.nodes[2].name}));
  Graph r = expect_rewrite_equivalent(b.g, merge_all, true, 1e-6);
  EXPECT_EQ(count_op(r, "MatMul"), 2);
  EXPECT_EQ(count_op(r, "Split"), 2);
}

TEST(RewriteMergeMatMuls, NotMerged) {
  {  // different left operands
    GraphBuilder b;
    b.output(b.op("MatMul", {b.input({4, 8}), b.random({8, 3}, 1)}));
    b.output(b.op("MatMul", {b.input({4, 8}), b.random({8, 3}, 2)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // weights computed at run time
    GraphBuilder b;
    ValueId x = b.input({4, 8});
    b.output(b.op("MatMul", {x, b.input({8, 3})}));
    b.output(b.op("MatMul", {x, b.random({8, 3}, 2)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // different K: x[4] . W1[4,3] vs x[4] . W2[2,4,3] (batched weights, a [2,3] result)
    GraphBuilder b;
    ValueId x = b.input({4});
    b.output(b.op("MatMul", {x, b.random({4, 3}, 1)}));
    b.output(b.op("MatMul", {x, b.random({2, 4, 3}, 2)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // different leading (batch) dims of the weights
    GraphBuilder b;
    ValueId x = b.input({2, 5, 8});
    b.output(b.op("MatMul", {x, b.random({2, 8, 3}, 1)}));
    b.output(b.op("MatMul", {x, b.random({1, 8, 3}, 2)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // a single MatMul
    GraphBuilder b;
    b.output(b.op("MatMul", {b.input({4, 8}), b.random({8, 3}, 1)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
}

TEST(RewriteMergeMatMuls, ApplyChecksTheSite) {
  GraphBuilder b;
  ValueId x = b.input({4, 8});
  b.output(b.op("MatMul", {x, b.random({8, 3}, 1)}));
  b.output(b.op("MatMul", {b.input({4, 8}), b.random({8, 3}, 2)}));
  Graph g = b.g;
  EXPECT_THROW(apply_matmul_merge(g, {{g.nodes[0].name, g.nodes[1].name}}), Error);
  EXPECT_THROW(apply_matmul_merge(g, {{g.nodes[0].name, "nope"}}), Error);
}

// Batched weights with equal leading dims merge too.
TEST(RewriteMergeMatMuls, BatchedWeights) {
  GraphBuilder b;
  ValueId x = b.input({2, 5, 8});
  b.output(b.op("MatMul", {x, b.random({2, 8, 3}, 1)}));
  b.output(b.op("MatMul", {x, b.random({2, 8, 5}, 2)}));
  Graph r = expect_rewrite_equivalent(b.g, merge_all, true, 1e-6);
  EXPECT_EQ(op_list(r), (Ops{"MatMul", "Split"}));
}

// Convs over one input with identical attributes: one Conv over the concatenated output channels.
TEST(RewriteMergeMatMuls, ConvsSharingAnInput) {
  for (int opset : {11, 17}) {
    GraphBuilder b(opset);
    ValueId x = b.input({2, 3, 6, 6});
    Attributes ca;
    ca.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    ca.set("strides", std::vector<int64_t>{2, 2});
    ValueId c1 = b.op("Conv", {x, b.random({4, 3, 3, 3}, 1)}, ca);
    ValueId c2 = b.op("Conv", {x, b.random({2, 3, 3, 3}, 2), b.random({2}, 3)}, ca);  // with a bias
    ValueId c3 = b.op("Conv", {x, b.random({5, 3, 3, 3}, 4)}, ca);
    b.output(b.op("Relu", {c1}));
    b.output(c2);
    b.output(b.op("Sigmoid", {c3}));
    Graph r = expect_rewrite_equivalent(b.g, merge_all, true, 1e-6);
    EXPECT_EQ(count_op(r, "Conv"), 1);
    EXPECT_EQ(count_op(r, "Split"), 1);
    const Node* conv = node_named(r, "Conv");
    const Node* split = node_named(r, "Split");
    ASSERT_TRUE(conv && split);
    EXPECT_EQ(r.type(conv->outputs[0]).shape, (Shape{2, 11, 3, 3}));
    EXPECT_EQ(split->attrs.get_int("axis", 0), 1);
    EXPECT_EQ(node_named(r, "Relu")->inputs[0], split->outputs[0]);
    EXPECT_EQ(r.outputs[1], split->outputs[1]);
    EXPECT_EQ(node_named(r, "Sigmoid")->inputs[0], split->outputs[2]);
    ASSERT_EQ(conv->inputs.size(), 3u);  // biases concatenated, zeros for the bias-free ones
    const Tensor& bias = *r.value(conv->inputs[2]).constant;
    EXPECT_EQ(bias.get_as_double(0), 0.0);
    EXPECT_EQ(bias.get_as_double(4), b.g.value(b.g.nodes[1].inputs[2]).constant->get_as_double(0));
  }
}

TEST(RewriteMergeMatMuls, ConvsNotMerged) {
  Attributes p1, p0, g2;
  p1.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  p0.set("pads", std::vector<int64_t>{0, 0, 0, 0});
  g2.set("group", int64_t{2});
  {  // different attributes
    GraphBuilder b;
    ValueId x = b.input({1, 4, 5, 5});
    b.output(b.op("Conv", {x, b.random({2, 4, 3, 3}, 1)}, p1));
    b.output(b.op("Conv", {x, b.random({2, 4, 3, 3}, 2)}, p0));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // different kernel sizes
    GraphBuilder b;
    ValueId x = b.input({1, 4, 5, 5});
    b.output(b.op("Conv", {x, b.random({2, 4, 3, 3}, 1)}));
    b.output(b.op("Conv", {x, b.random({2, 4, 1, 1}, 2)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // grouped convolutions
    GraphBuilder b;
    ValueId x = b.input({1, 4, 5, 5});
    b.output(b.op("Conv", {x, b.random({2, 2, 3, 3}, 1)}, g2));
    b.output(b.op("Conv", {x, b.random({2, 2, 3, 3}, 2)}, g2));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // different inputs; run-time weights
    GraphBuilder b;
    ValueId x = b.input({1, 4, 5, 5});
    b.output(b.op("Conv", {b.input({1, 4, 5, 5}), b.random({2, 4, 3, 3}, 1)}));
    b.output(b.op("Conv", {x, b.random({2, 4, 3, 3}, 2)}));
    b.output(b.op("Conv", {x, b.input({2, 4, 3, 3})}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
  {  // a MatMul and a Conv never merge
    GraphBuilder b;
    ValueId x = b.input({1, 4, 5, 5});
    b.output(b.op("Conv", {x, b.random({2, 4, 1, 1}, 1)}));
    b.output(b.op("MatMul", {x, b.random({5, 3}, 2)}));
    EXPECT_TRUE(find_matmul_merges(b.g).empty());
  }
}

}  // namespace
}  // namespace korch
