// The greedy-fusion baseline (greedy_fusion.h): the rules' groups on small graphs, and their price
// on a cost table: a group that was a candidate costs that candidate, others split into prefixes.
#include "orchestrate/greedy_fusion.h"

#include <gtest/gtest.h>

#include <limits>

#include "ir/text_format.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {
namespace {

using Groups = std::vector<std::vector<NodeId>>;

int candidate_with(const std::vector<KernelCandidate>& cands, const std::vector<NodeId>& nodes) {
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].nodes == nodes && !cands[i].minimal_outputs) return static_cast<int>(i);
  return -1;
}

// Costs that tell the candidates apart: candidate i costs i + 1.
std::vector<double> distinct_costs(const std::vector<KernelCandidate>& cands) {
  std::vector<double> c;
  for (size_t i = 0; i < cands.size(); ++i) c.push_back(static_cast<double>(i + 1));
  return c;
}

const char* kConvChain = R"(graph t (opset 17) {
  input x: f32[1,3,8,8]
  input w: f32[4,3,1,1]
  input b: f32[1,4,8,8]
  %c: f32[1,4,8,8] = Conv(x, w)
  %a: f32[1,4,8,8] = Add(c, b)
  %y: f32[1,4,8,8] = Relu(a)
  output y
})";

TEST(GreedyFusion, ConvAddReluIsOneGroupPricedAsItsCandidate) {
  const Graph g = parse_graph(kConvChain);
  EXPECT_EQ(greedy_fusion_groups(g), (Groups{{0, 1, 2}}));
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  const int whole = candidate_with(cs.candidates, {0, 1, 2});
  ASSERT_GE(whole, 0);
  const std::vector<double> costs = distinct_costs(cs.candidates);
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, costs);
  ASSERT_TRUE(r.ok) << r.why;
  EXPECT_EQ(r.kernels, (std::vector<int>{whole}));
  EXPECT_DOUBLE_EQ(r.seconds, costs[static_cast<size_t>(whole)]);
  EXPECT_EQ(r.split_groups, 0);
}

TEST(GreedyFusion, GroupWithoutCandidateSplitsIntoLongestPrefixes) {
  const Graph g = parse_graph(kConvChain);
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  std::vector<double> costs = distinct_costs(cs.candidates);
  // The whole chain cannot be emitted (infinite cost): Conv+Add, then Relu alone.
  costs[static_cast<size_t>(candidate_with(cs.candidates, {0, 1, 2}))] = std::numeric_limits<double>::infinity();
  const int head = candidate_with(cs.candidates, {0, 1}), tail = candidate_with(cs.candidates, {2});
  ASSERT_GE(head, 0);
  ASSERT_GE(tail, 0);
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, costs);
  ASSERT_TRUE(r.ok) << r.why;
  EXPECT_EQ(r.kernels, (std::vector<int>{head, tail}));
  EXPECT_DOUBLE_EQ(r.seconds, costs[static_cast<size_t>(head)] + costs[static_cast<size_t>(tail)]);
  EXPECT_EQ(r.groups.size(), 1u);
  EXPECT_EQ(r.split_groups, 1);
}

TEST(GreedyFusion, PrimitiveWithoutAnyFiniteKernelLeavesNoBaseline) {
  const Graph g = parse_graph(kConvChain);
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  std::vector<double> costs(cs.candidates.size(), std::numeric_limits<double>::infinity());
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, costs);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.seconds, 0);
  EXPECT_NE(r.why.find("'"), std::string::npos) << r.why;  // names the primitive
}

// The Expand of a constant bias has no producer: it goes into its consumer's group, and the
// whole Conv + bias + Relu is the one candidate it was.
TEST(GreedyFusion, ExpandOfABiasJoinsItsConsumer) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[1,3,8,8]
  input w: f32[4,3,1,1]
  const bias: f32[1,4,1,1] = [1, 2, 3, 4]
  const shape: i64[4] = [1, 4, 8, 8]
  %c: f32[1,4,8,8] = Conv(x, w)
  %e: f32[1,4,8,8] = Expand(bias, shape)
  %a: f32[1,4,8,8] = Add(c, e)
  %y: f32[1,4,8,8] = Relu(a)
  output y
})");
  EXPECT_EQ(greedy_fusion_groups(g), (Groups{{0, 1, 2, 3}}));
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, distinct_costs(cs.candidates));
  ASSERT_TRUE(r.ok) << r.why;
  EXPECT_EQ(r.kernels, (std::vector<int>{candidate_with(cs.candidates, {0, 1, 2, 3})}));
}

// a feeds b and c, which meet again in d: elementwise producers fuse every consumer.
TEST(GreedyFusion, ElementwiseDiamondIsOneGroup) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[16]
  %a: f32[16] = Relu(x)
  %b: f32[16] = Neg(a)
  %c: f32[16] = Exp(a)
  %d: f32[16] = Add(b, c)
  output d
})");
  EXPECT_EQ(greedy_fusion_groups(g), (Groups{{0, 1, 2, 3}}));
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  const std::vector<double> costs = distinct_costs(cs.candidates);
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, costs);
  ASSERT_TRUE(r.ok) << r.why;
  ASSERT_EQ(r.kernels.size(), 1u);
  EXPECT_EQ(cs.candidates[static_cast<size_t>(r.kernels[0])].nodes, (std::vector<NodeId>{0, 1, 2, 3}));
}

// A diamond through a linear primitive: d reads a (group {a}) and m (a MatMul of a, its own
// group). Joining a's group would make {a, d} and {m} read each other: d joins m's group instead.
TEST(GreedyFusion, JoinThatWouldCycleGoesToTheOtherProducer) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[8,8]
  input w: f32[8,8]
  %a: f32[8,8] = Relu(x)
  %m: f32[8,8] = MatMul(a, w)
  %d: f32[8,8] = Add(a, m)
  output d
})");
  EXPECT_EQ(greedy_fusion_groups(g), (Groups{{0}, {1, 2}}));
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, distinct_costs(cs.candidates));
  ASSERT_TRUE(r.ok) << r.why;
  EXPECT_EQ(r.kernels.size(), 2u);
}

// A reduction absorbs its elementwise producer and ends the group: the Neg after it starts anew.
TEST(GreedyFusion, ReductionIsASink) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,16]
  const axes: i64[1] = [1]
  %e: f32[4,16] = Exp(x)
  %s: f32[4,1] = ReduceSum(e, axes)
  %n: f32[4,1] = Neg(s)
  output n
})");
  EXPECT_EQ(greedy_fusion_groups(g), (Groups{{0, 1}, {2}}));
  const CandidateSet cs = enumerate_candidates(g, CandidateOptions{});
  const std::vector<double> costs = distinct_costs(cs.candidates);
  const GreedyFusion r = greedy_fusion_cost(g, cs.candidates, costs);
  ASSERT_TRUE(r.ok) << r.why;
  const int sink = candidate_with(cs.candidates, {0, 1}), after = candidate_with(cs.candidates, {2});
  EXPECT_EQ(r.kernels, (std::vector<int>{sink, after}));
  EXPECT_DOUBLE_EQ(r.seconds, costs[static_cast<size_t>(sink)] + costs[static_cast<size_t>(after)]);
}

// A linear primitive never joins a group: two MatMuls in a row are two groups.
TEST(GreedyFusion, LinearStartsAGroup) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[8,8]
  input w: f32[8,8]
  %m: f32[8,8] = MatMul(x, w)
  %r: f32[8,8] = Relu(m)
  %k: f32[8,8] = MatMul(r, w)
  output k
})");
  EXPECT_EQ(greedy_fusion_groups(g), (Groups{{0, 1}, {2}}));
}

}  // namespace
}  // namespace korch
