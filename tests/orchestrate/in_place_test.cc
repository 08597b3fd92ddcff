// Concats and views written in place (runtime/memory_plan.h) in the candidate enumeration and
// the costs.
#include <gtest/gtest.h>

#include <algorithm>

#include "ir/text_format.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/kernel_candidate.h"
#include "orchestrate/kernel_cost.h"
#include "orchestrate/kernel_plan.h"

namespace korch {
namespace {

// y joins a and b in place and is read by Exp; o joins z and d in place and is a graph output.
// q joins e and f along an interleaved axis: an ordinary Concat.
Graph joins() {
  return parse_graph(R"(graph t (opset 17) {
  input x: f32[1,16,4,4]
  input x2: f32[1,32,4,4]
  %a: f32[1,16,4,4] = Relu(x)
  %b: f32[1,16,4,4] = Sigmoid(x)
  %y: f32[1,32,4,4] = Concat(a, b) {axis=1}
  %z: f32[1,32,4,4] = Exp(y)
  %d: f32[1,32,4,4] = Neg(x2)
  %o: f32[1,64,4,4] = Concat(z, d) {axis=1}
  %e: f32[1,16,4,4] = Abs(x)
  %f: f32[1,16,4,4] = Tanh(x)
  %q: f32[1,16,8,4] = Concat(e, f) {axis=2}
  output o, q
})");
}

NodeId node_writing(const Graph& g, const char* name) { return g.value(g.find_value(name)).producer; }

bool contains(const KernelCandidate& c, NodeId n) { return std::binary_search(c.nodes.begin(), c.nodes.end(), n); }

TEST(InPlaceCandidates, JoinAKernelOnlyWithAReaderOfTheirOutput) {
  const Graph g = joins();
  const NodeId y = node_writing(g, "y"), z = node_writing(g, "z"), o = node_writing(g, "o"), q = node_writing(g, "q");
  CandidateOptions opt;
  opt.max_primitives = 8;
  const CandidateSet cs = enumerate_candidates(g, opt);
  int with_y = 0, with_q = 0;
  for (const KernelCandidate& c : cs.candidates) {
    if (c.nodes.size() < 2) continue;
    EXPECT_FALSE(contains(c, o)) << describe_candidate(g, c);  // read by no node: alone
    if (contains(c, y)) {
      ++with_y;
      EXPECT_TRUE(contains(c, z)) << describe_candidate(g, c);
    }
    with_q += contains(c, q);
  }
  EXPECT_GT(with_y, 0);  // {y, z}, {a, y, z}, ...
  EXPECT_GT(with_q, 0);  // an ordinary Concat fuses as before
  EXPECT_TRUE(cs.rejected.count(
      "a Concat or view written in place joins a kernel only with a reader of its output (not offered; still grown)"));
  EXPECT_TRUE(cs.rejected.count("a Concat or view written in place that no node reads runs alone"));
}

TEST(InPlaceCandidates, CostNothingAlone) {
  const Graph g = joins();
  AnalyticCost cost(cpu_spec(), FusionRules{});
  for (const char* name : {"y", "o"}) {
    const KernelCandidate c = make_candidate(g, {node_writing(g, name)}, false);
    EXPECT_TRUE(written_in_place(g, c));
    EXPECT_EQ(cost.cost(g, c).seconds, 0) << name;
  }
  const KernelCandidate q = make_candidate(g, {node_writing(g, "q")}, false);
  EXPECT_FALSE(written_in_place(g, q));
  EXPECT_GT(cost.cost(g, q).seconds, 0);
  const KernelCandidate yz = make_candidate(g, {node_writing(g, "y"), node_writing(g, "z")}, false);
  EXPECT_FALSE(written_in_place(g, yz));
  EXPECT_GT(cost.cost(g, yz).seconds, 0);
}

// The memory floor under a budget counts what a step holds at least: a value that may lie in a
// graph output's tensor holds no arena memory; values that may share a holder's buffer count once.
TEST(InPlaceCandidates, StepBytesCountWhatMayShareABufferOnce) {
  const Graph g = joins();
  const auto holders = possible_holders(g);
  EXPECT_EQ(holders.at(g.find_value("a")), g.find_value("y"));
  EXPECT_EQ(holders.at(g.find_value("z")), g.find_value("o"));
  const auto bytes = [&](std::vector<const char*> outs) {
    std::vector<NodeId> nodes;
    for (const char* v : outs) nodes.push_back(node_writing(g, v));
    return step_bytes(g, make_candidate(g, nodes, false), holders);
  };
  EXPECT_EQ(bytes({"a"}), 1024);  // a, in y's buffer or its own
  EXPECT_EQ(bytes({"z"}), 2048);  // reads y; z may lie in the output o
  EXPECT_EQ(bytes({"d"}), 0);     // reads an input, writes into o
  EXPECT_EQ(bytes({"y"}), 2048);  // a, b and y: one buffer at most
  EXPECT_EQ(bytes({"e"}), 1024);  // an ordinary value
}

}  // namespace
}  // namespace korch
