// Kernel signatures: kernel_signature() follows the candidate's order (it names the generated
// code), kernel_cost_signature() does not (it keys the measured costs), so the same primitives
// sorted differently by two graphs share one tuning record.
#include "codegen/kernel_signature.h"

#include <gtest/gtest.h>

#include <string>

#include "ir/text_format.h"
#include "orchestrate/kernel_candidate.h"

namespace korch {
namespace {

// Two branches from x joined by a Sub, with the branches in the order given.
Graph branches(const std::string& first, const std::string& second) {
  return parse_graph(R"(graph t (opset 17) {
  input x: f32[4,8]
  )" + first + "\n  " +
                     second + R"(
  %d: f32[4,8] = Sub(a, b)
  output d
})");
}

KernelCandidate all_nodes(const Graph& g) {
  std::vector<NodeId> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) nodes.push_back(static_cast<NodeId>(i));
  return make_candidate(g, nodes, false);
}

const char* kRelu = "%a: f32[4,8] = Relu(x)";
const char* kExp = "%b: f32[4,8] = Exp(x)";

TEST(KernelCostSignature, TheSameKernelInAnotherNodeOrderHasOneCostSignature) {
  const Graph one = branches(kRelu, kExp), other = branches(kExp, kRelu);
  const KernelCandidate c1 = all_nodes(one), c2 = all_nodes(other);
  EXPECT_NE(kernel_signature(one, c1), kernel_signature(other, c2));  // the generated code differs
  EXPECT_EQ(kernel_cost_signature(one, c1), kernel_cost_signature(other, c2));
}

TEST(KernelCostSignature, AnotherComputationHasAnotherCostSignature) {
  const Graph g = branches(kRelu, kExp);
  // Sub(b, a) instead of Sub(a, b).
  Graph swapped = g;
  std::swap(swapped.nodes.back().inputs[0], swapped.nodes.back().inputs[1]);
  EXPECT_NE(kernel_cost_signature(g, all_nodes(g)), kernel_cost_signature(swapped, all_nodes(swapped)));
  // Tanh instead of Exp.
  const Graph tanh = branches(kRelu, "%b: f32[4,8] = Tanh(x)");
  EXPECT_NE(kernel_cost_signature(g, all_nodes(g)), kernel_cost_signature(tanh, all_nodes(tanh)));
  // Another output set: the Relu's output as well.
  KernelCandidate more = all_nodes(g);
  more.outputs.insert(more.outputs.begin(), g.nodes[0].outputs[0]);
  EXPECT_NE(kernel_cost_signature(g, all_nodes(g)), kernel_cost_signature(g, more));
}

// A chain has one order only: its records in the tuning database keep their keys.
TEST(KernelCostSignature, AChainKeepsItsSignature) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,8]
  input y: f32[4,8]
  %a: f32[4,8] = Mul(x, y)
  %b: f32[4,8] = Add(a, y)
  %c: f32[4,8] = Relu(b)
  output c
})");
  const KernelCandidate c = all_nodes(g);
  EXPECT_EQ(kernel_cost_signature(g, c), kernel_signature(g, c));
  const KernelCandidate one = make_candidate(g, {1}, false);
  EXPECT_EQ(kernel_cost_signature(g, one), kernel_signature(g, one));
}

}  // namespace
}  // namespace korch
