// Groups offered whole above the kernel size cap (kernel_candidate.h): scalar arithmetic, which
// fuses only within its own group, and row groups, the convex set of elementwise, broadcast,
// reduce and Reshape primitives grown around a reduce.
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

CandidateOptions capped(int max_primitives, bool row_groups) {
  CandidateOptions co;
  co.max_primitives = max_primitives;
  co.whole_row_groups = row_groups;
  return co;
}

// A post-norm block: a layer norm (nodes 0-9) whose output y is read by a MatMul and by the
// residual Add after it (11). The maximal connected set of non-linear primitives, {0-9, 11}, is
// not convex (y -> MatMul -> Add leaves it and comes back); the row group is the layer norm.
const char* kPostNorm = R"(graph t (opset 17) {
  input x: f32[4,8]
  input w: f32[8,8]
  const axes: i64[1] = [1]
  const shape: i64[2] = [4,8]
  const eps: f32[1] = [0.00001]
  %m: f32[4,1] = ReduceMean(x, axes) {keepdims=1}
  %me: f32[4,8] = Expand(m, shape)
  %d: f32[4,8] = Sub(x, me)
  %sq: f32[4,8] = Mul(d, d)
  %v: f32[4,1] = ReduceMean(sq, axes) {keepdims=1}
  %ve: f32[4,1] = Add(v, eps)
  %s: f32[4,1] = Sqrt(ve)
  %r: f32[4,1] = Reciprocal(s)
  %re: f32[4,8] = Expand(r, shape)
  %y: f32[4,8] = Mul(d, re)
  %z: f32[4,8] = MatMul(y, w)
  %o: f32[4,8] = Add(z, y)
  output o
})";

const std::vector<NodeId> kLayerNorm = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};

TEST(RowGroups, ALayerNormIsOfferedWholeAboveTheCap) {
  const Graph g = parse_graph(kPostNorm);
  const CandidateSet on = enumerate_candidates(g, capped(4, true));
  EXPECT_TRUE(node_sets(on).count(kLayerNorm));
  EXPECT_EQ(on.row_groups, 1);
  // Full and minimal outputs: the whole group writes y alone either way (nothing else is read
  // outside it), so one candidate.
  int whole = 0;
  for (const KernelCandidate& c : on.candidates)
    if (c.nodes == kLayerNorm) {
      ++whole;
      EXPECT_EQ(c.outputs, g.nodes[9].outputs);
      EXPECT_EQ(c.inputs, (std::vector<ValueId>{g.nodes[0].inputs[0], g.nodes[0].inputs[1], g.nodes[1].inputs[1],
                                                g.nodes[5].inputs[1]}));
    }
  EXPECT_EQ(whole, 1);
  // The Add after the MatMul joins no row group: with it, the set is not convex.
  for (const std::vector<NodeId>& s : node_sets(on))
    if (s.size() > 4) EXPECT_EQ(s, kLayerNorm);
  // Off, or within the cap, the candidates are the enumeration's alone.
  const CandidateSet off = enumerate_candidates(g, capped(4, false));
  EXPECT_FALSE(node_sets(off).count(kLayerNorm));
  EXPECT_EQ(off.row_groups, 0);
  NodeSets with = node_sets(on);
  with.erase(kLayerNorm);
  EXPECT_EQ(with, node_sets(off));
  const CandidateSet wide = enumerate_candidates(g, capped(12, true));
  EXPECT_TRUE(node_sets(wide).count(kLayerNorm));
  EXPECT_EQ(wide.row_groups, 0);  // enumerated within the cap: not counted again
  EXPECT_EQ(node_sets(wide), node_sets(enumerate_candidates(g, capped(12, false))));
}

// One kernel per primitive stays that.
TEST(RowGroups, OneKernelPerPrimitiveIsUnchanged) {
  const Graph g = parse_graph(kPostNorm);
  const CandidateSet cs = enumerate_candidates(g, capped(1, true));
  EXPECT_EQ(cs.candidates.size(), g.nodes.size());
  EXPECT_EQ(cs.row_groups, 0);
}

// Grown around the reduce, the group takes a neighbour with the primitives that keep it convex:
// the Mul (node 5) reads the mean through Sqrt and Expand (3, 4), which come with it whatever the
// order the neighbours are tried in. Without a reduce, no group.
TEST(RowGroups, ANeighbourComesWithWhatKeepsTheGroupConvex) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,8]
  const axes: i64[1] = [1]
  const shape: i64[2] = [4,8]
  %e: f32[4,8] = Exp(x)
  %m: f32[4,1] = ReduceSum(e, axes) {keepdims=1}
  %n: f32[4,1] = Neg(m)
  %s: f32[4,1] = Sqrt(m)
  %se: f32[4,8] = Expand(s, shape)
  %y: f32[4,8] = Mul(e, se)
  output y
  output n
})");
  const CandidateSet cs = enumerate_candidates(g, capped(2, true));
  EXPECT_TRUE(node_sets(cs).count({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(cs.row_groups, 1);
  const Graph none = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,8]
  %a: f32[4,8] = Exp(x)
  %b: f32[4,8] = Neg(a)
  %c: f32[4,8] = Abs(b)
  output c
})");
  EXPECT_EQ(enumerate_candidates(none, capped(2, true)).row_groups, 0);
}

}  // namespace
}  // namespace korch
