// Scalar arithmetic fuses only within its own group, offered whole (kernel_candidate.h).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ir/text_format.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {
namespace {

using NodeSets = std::set<std::vector<NodeId>>;

NodeSets node_sets(const CandidateSet& cs) {
  NodeSets out;
  for (const KernelCandidate& c : cs.candidates) out.insert(c.nodes);
  return out;
}

CandidateOptions with_groups(bool whole) {
  CandidateOptions co;
  co.whole_scalar_groups = whole;
  return co;
}

// The scale of a quantizer: a tensor reduced to one element (ReduceMax, not scalar arithmetic: it
// reads a tensor), then three scalar steps, then broadcast (Expand: it writes a tensor) into a Mul.
const char* kScaleChain = R"(graph t (opset 17) {
  input x: f32[16]
  const axes: i64[1] = [0]
  const c: f32[1] = [2]
  const shape: i64[1] = [16]
  %m: f32[1] = ReduceMax(x, axes)
  %a: f32[1] = Sub(m, c)
  %d: f32[1] = Div(a, c)
  %b: f32[1] = Neg(d)
  %e: f32[16] = Expand(b, shape)
  %y: f32[16] = Mul(x, e)
  output y
})";

TEST(ScalarGroups, ScalarStepsJoinOnlyTheirWholeGroup) {
  const Graph g = parse_graph(kScaleChain);
  const CandidateSet cs = enumerate_candidates(g, with_groups(true));
  EXPECT_EQ(node_sets(cs), (NodeSets{{0}, {1}, {2}, {3}, {4}, {5}, {4, 5}, {1, 2, 3}}));
  EXPECT_EQ(cs.scalar_primitives, 3);
  EXPECT_EQ(cs.scalar_groups, 1);
  // The whole group writes what its tensor reader needs.
  bool found = false;
  for (const KernelCandidate& c : cs.candidates)
    if (c.nodes == std::vector<NodeId>{1, 2, 3} && !c.minimal_outputs) {
      found = true;
      EXPECT_EQ(c.outputs, g.nodes[3].outputs);
      EXPECT_EQ(c.inputs, g.nodes[1].inputs);  // m and c
    }
  EXPECT_TRUE(found);
}

TEST(ScalarGroups, OffTheyAreEnumeratedLikeAnyPrimitive) {
  const Graph g = parse_graph(kScaleChain);
  const CandidateSet cs = enumerate_candidates(g, with_groups(false));
  NodeSets chains;  // every run of consecutive primitives of the chain 0 -> 1 -> ... -> 5
  for (NodeId first = 0; first < 6; ++first)
    for (NodeId last = first; last < 6; ++last) {
      std::vector<NodeId> run;
      for (NodeId v = first; v <= last; ++v) run.push_back(v);
      chains.insert(run);
    }
  EXPECT_EQ(node_sets(cs), chains);
  EXPECT_EQ(cs.scalar_primitives, 0);
}

TEST(ScalarGroups, OneKernelPerPrimitiveIsUnchanged) {
  const Graph g = parse_graph(kScaleChain);
  CandidateOptions co = with_groups(true);
  co.max_primitives = 1;
  EXPECT_EQ(node_sets(enumerate_candidates(g, co)), (NodeSets{{0}, {1}, {2}, {3}, {4}, {5}}));
}

// A group larger than the kernel size cap is still offered whole: the cap bounds the enumeration
// of subsets, and a whole group is one candidate.
TEST(ScalarGroups, AWholeGroupMayPassTheSizeCap) {
  const Graph g = parse_graph(kScaleChain);
  CandidateOptions co = with_groups(true);
  co.max_primitives = 2;
  EXPECT_TRUE(node_sets(enumerate_candidates(g, co)).count({1, 2, 3}));
  co.max_primitives = 8;
  EXPECT_EQ(node_sets(enumerate_candidates(g, co)), (NodeSets{{0}, {1}, {2}, {3}, {4}, {5}, {4, 5}, {1, 2, 3}}));
}

// s1 -> e -> t -> r -> s2 leaves the group {s1, s2} through tensor primitives and comes back: the
// group alone is not convex, so its primitives are enumerated like any others and the reason kept.
TEST(ScalarGroups, ANonConvexGroupIsNotRestricted) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[16]
  input p: f32[1]
  const axes: i64[1] = [0]
  const shape: i64[1] = [16]
  %s1: f32[1] = Neg(p)
  %e: f32[16] = Expand(s1, shape)
  %t: f32[16] = Mul(x, e)
  %r: f32[1] = ReduceMax(t, axes)
  %s2: f32[1] = Add(r, s1)
  output s2
})");
  const CandidateSet on = enumerate_candidates(g, with_groups(true));
  EXPECT_EQ(node_sets(on), node_sets(enumerate_candidates(g, with_groups(false))));
  EXPECT_EQ(on.scalar_primitives, 0);
  bool reason = false;
  for (const auto& [why, n] : on.rejected) reason |= why.find("scalar group not offered whole") != std::string::npos;
  EXPECT_TRUE(reason);
}

}  // namespace
}  // namespace korch
