#include <gtest/gtest.h>

#include "ir/graph_stats.h"
#include "ir/op_registry.h"

namespace korch {
namespace {

// x[2,8] -> MatMul(w[8,4]) -> Transpose -> ReduceSum(axis 0) -> Relu
Graph small_graph() {
  Graph g;
  ValueId x = g.add_input("x", {DType::kFloat32, {2, 8}});
  ValueId w = g.add_constant("w", Tensor(DType::kFloat32, {8, 4}));
  auto add = [&](const std::string& op, std::vector<ValueId> ins, Attributes a, TensorType out) {
    Node n;
    n.op_type = op;
    n.name = op;
    n.inputs = std::move(ins);
    n.attrs = std::move(a);
    n.outputs = {g.add_value(op + "_out", std::move(out))};
    ValueId o = n.outputs[0];
    g.add_node(std::move(n));
    return o;
  };
  ValueId mm = add("MatMul", {x, w}, {}, {DType::kFloat32, {2, 4}});
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  ValueId t = add("Transpose", {mm}, perm, {DType::kFloat32, {4, 2}});
  Attributes red;
  red.set("keepdims", int64_t{0});
  ValueId r = add("ReduceSum", {t, g.add_constant("axes", Tensor::from_vector<int64_t>({1}, {1}))}, red,
                  {DType::kFloat32, {4}});
  g.outputs = {add("Relu", {r}, {}, {DType::kFloat32, {4}})};
  return g;
}

TEST(GraphStats, FlopsAndBytesByPrimitiveKind) {
  Graph g = small_graph();
  verify_graph(g, true);
  EXPECT_DOUBLE_EQ(node_stats(g, g.nodes[0]).flops, 2.0 * 2 * 4 * 8);  // MatMul: 2 x MACs
  EXPECT_DOUBLE_EQ(node_stats(g, g.nodes[1]).flops, 0);                // Transpose: data movement
  EXPECT_DOUBLE_EQ(node_stats(g, g.nodes[2]).flops, 8);                // ReduceSum: one per input
  EXPECT_DOUBLE_EQ(node_stats(g, g.nodes[3]).flops, 4);                // Relu: one per output
  NodeStats mm = node_stats(g, g.nodes[0]);
  EXPECT_DOUBLE_EQ(mm.bytes_read, (16 + 32) * 4);
  EXPECT_DOUBLE_EQ(mm.bytes_written, 8 * 4);
  GraphStats gs = graph_stats(g);
  EXPECT_DOUBLE_EQ(gs.flops, 128 + 0 + 8 + 4);
  EXPECT_EQ(gs.parameters, 32 + 1);
  EXPECT_EQ(gs.op_histogram["MatMul"], 1);
}

}  // namespace
}  // namespace korch
