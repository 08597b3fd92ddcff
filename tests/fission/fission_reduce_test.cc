#include "fission_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

Attributes attrs_axes(std::vector<int64_t> axes, int64_t keepdims) {
  Attributes a;
  a.set("axes", std::move(axes));
  a.set("keepdims", keepdims);
  return a;
}
Attributes attrs_keep(int64_t keepdims, int64_t noop = 0) {
  Attributes a;
  a.set("keepdims", keepdims);
  if (noop) a.set("noop_with_empty_axes", noop);
  return a;
}
OpInput axes_cst(std::vector<int64_t> axes) {
  int64_t n = static_cast<int64_t>(axes.size());
  return cst(Tensor::from_vector<int64_t>(axes, {n}));
}

// `op` over x with `axes` (nullopt: no axes) in the opset's form: attribute before 18, input from 18.
Graph reduce_graph(const std::string& op, OpInput x, std::optional<std::vector<int64_t>> axes, int64_t keepdims,
                   int opset, int64_t noop = 0) {
  if (opset < 18)
    return single_op_graph(op, {x}, axes ? attrs_axes(*axes, keepdims) : attrs_keep(keepdims), opset);
  if (!axes) return single_op_graph(op, {x}, attrs_keep(keepdims, noop), opset);
  return single_op_graph(op, {x, axes_cst(*axes)}, attrs_keep(keepdims, noop), opset);
}

// The graph's first input made positive: it becomes Abs(raw) (for Log of a sum).
Graph positive_input(Graph g) {
  ValueId x = g.inputs[0];
  ValueId raw = g.add_input("raw", g.type(x));
  g.inputs.erase(g.inputs.begin());
  Node n;
  n.op_type = "Abs";
  n.name = "abs";
  n.inputs = {raw};
  n.outputs = {x};
  g.add_node(std::move(n));
  g.topo_sort();
  return g;
}

struct Config {
  std::optional<std::vector<int64_t>> axes;
  int64_t keepdims;
  int opset;
};
const Config kConfigs[] = {
    {std::vector<int64_t>{1}, 0, 13},     {std::vector<int64_t>{1}, 1, 13}, {std::vector<int64_t>{0, 2}, 0, 11},
    {std::vector<int64_t>{-1}, 1, 18},    {std::vector<int64_t>{2, 0}, 0, 18}, {std::nullopt, 0, 13},
    {std::nullopt, 1, 18},                {std::vector<int64_t>{}, 0, 18},  {std::vector<int64_t>{0, 1, 2}, 1, 22},
};

void check_all_configs(const std::string& op, bool positive, float scale = 1.f) {
  for (const Config& c : kConfigs) {
    SCOPED_TRACE(op + " opset " + std::to_string(c.opset) + " keepdims " + std::to_string(c.keepdims) +
                 " axes " + (c.axes ? std::to_string(c.axes->size()) : "none"));
    Graph g = reduce_graph(op, in({2, 3, 4}), c.axes, c.keepdims, c.opset);
    if (positive) g = positive_input(g);
    expect_fission_equivalent(g, 1e-5, scale);
  }
}

TEST(FissionReduce, ReduceL1) {
  check_all_configs("ReduceL1", false);
  Graph p = expect_fission_equivalent(reduce_graph("ReduceL1", in({2, 3, 4}), std::vector<int64_t>{1}, 0, 13));
  EXPECT_EQ(count_op(p, "Abs"), 1);
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(count_op(p, "Reshape"), 1);  // keepdims=0
  EXPECT_EQ(p.nodes.size(), 3u);
  // f64 and integers.
  expect_fission_equivalent(reduce_graph("ReduceL1", in(DType::kFloat64, {3, 5}), std::vector<int64_t>{1}, 1, 18));
  Graph pi = expect_fission_equivalent(reduce_graph("ReduceL1", in(DType::kInt32, {3, 5}), std::vector<int64_t>{0}, 0, 13), 0);
  EXPECT_EQ(count_op(pi, "Cast"), 0);
}

TEST(FissionReduce, ReduceL2) {
  check_all_configs("ReduceL2", false);
  check_all_configs("ReduceL2", false, 1e4f);
  Graph p = expect_fission_equivalent(reduce_graph("ReduceL2", in({2, 3, 4}), std::vector<int64_t>{2}, 1, 18));
  EXPECT_EQ(count_op(p, "Mul"), 1);
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(count_op(p, "Sqrt"), 1);
  EXPECT_EQ(count_op(p, "Reshape"), 0);
  expect_fission_equivalent(reduce_graph("ReduceL2", in(DType::kFloat64, {4, 6}), std::nullopt, 0, 18));
  // Integers: Sqrt is float-only, so the sum runs in f64 between Casts (truncated like the reference).
  Graph pi = expect_fission_equivalent(reduce_graph("ReduceL2", in(DType::kInt64, {4, 6}), std::vector<int64_t>{1}, 0, 13), 0);
  EXPECT_EQ(count_op(pi, "Cast"), 2);
}

TEST(FissionReduce, ReduceSumSquare) {
  check_all_configs("ReduceSumSquare", false);
  Graph p = expect_fission_equivalent(reduce_graph("ReduceSumSquare", in({5, 7}), std::vector<int64_t>{0}, 1, 13));
  EXPECT_EQ(count_op(p, "Mul"), 1);
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(p.nodes.size(), 2u);
  expect_fission_equivalent(reduce_graph("ReduceSumSquare", in(DType::kInt32, {3, 4}), std::vector<int64_t>{1}, 0, 18), 0);
}

TEST(FissionReduce, ReduceLogSum) {
  check_all_configs("ReduceLogSum", true);
  Graph p = expect_fission_equivalent(positive_input(reduce_graph("ReduceLogSum", in({2, 3, 4}), std::vector<int64_t>{0, 2}, 0, 18)));
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(count_op(p, "Log"), 1);
  EXPECT_EQ(count_op(p, "Reshape"), 1);
  expect_fission_equivalent(positive_input(reduce_graph("ReduceLogSum", in(DType::kFloat64, {3, 4}), std::nullopt, 1, 13)));
  // Integers in [0, 10): the log runs in f64 and is truncated back.
  expect_fission_equivalent(reduce_graph("ReduceLogSum", in(DType::kInt32, {3, 8}), std::vector<int64_t>{1}, 0, 18), 0);
}

TEST(FissionReduce, ReduceLogSumExpSubtractsTheMax) {
  check_all_configs("ReduceLogSumExp", false);
  check_all_configs("ReduceLogSumExp", false, 1e4f);  // exp(1e4) overflows without the shift
  Graph p = expect_fission_equivalent(reduce_graph("ReduceLogSumExp", in({2, 3, 4}), std::vector<int64_t>{1}, 0, 18), 1e-5, 1e4f);
  EXPECT_EQ(count_op(p, "ReduceMax"), 1);
  EXPECT_EQ(count_op(p, "Sub"), 1);
  EXPECT_EQ(count_op(p, "Exp"), 1);
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(count_op(p, "Log"), 1);
  EXPECT_EQ(count_op(p, "Expand"), 1);  // the max broadcast back over the reduced axis
  for (const Node& n : p.nodes) EXPECT_NE(primitive_kind(p, n), PrimitiveKind::kOperator) << n.op_type;
  expect_fission_equivalent(reduce_graph("ReduceLogSumExp", in(DType::kFloat64, {3, 5}), std::vector<int64_t>{-1}, 1, 13), 1e-5, 1e4f);
  expect_fission_equivalent(reduce_graph("ReduceLogSumExp", in(DType::kInt64, {3, 5}), std::vector<int64_t>{1}, 1, 13), 0);
}

TEST(FissionReduce, ReduceLogSumExpOfAllMinusInfinityStaysMinusInfinity) {
  Tensor x(DType::kFloat32, {2, 3});
  for (float& v : x.span<float>()) v = -std::numeric_limits<float>::infinity();
  x.data<float>()[3] = 1.f;  // second row finite
  Graph g = reduce_graph("ReduceLogSumExp", in({2, 3}), std::vector<int64_t>{1}, 0, 18);
  Graph p = fission(g);
  Tensor want = interpret(g, {x})[0], got = interpret(p, {x})[0];
  EXPECT_TRUE(std::isinf(want.data<float>()[0]) && want.data<float>()[0] < 0);
  EXPECT_EQ(got.data<float>()[0], want.data<float>()[0]);
  EXPECT_FLOAT_EQ(got.data<float>()[1], want.data<float>()[1]);
}

TEST(FissionReduce, IntegerLogOfZeroSaturatesLikeTheReference) {
  // Row 0 sums to 0: log(0) = -inf, stored as the lowest int32 (not wrapped to 0 by the Cast).
  Tensor x = Tensor::from_vector<int32_t>({0, 0, 0, 2, 3, 4}, {2, 3});
  Graph g = reduce_graph("ReduceLogSum", in(DType::kInt32, {2, 3}), std::vector<int64_t>{1}, 0, 18);
  Graph p = fission(g);
  EXPECT_EQ(count_op(p, "Clip"), 1);
  Tensor want = interpret(g, {x})[0], got = interpret(p, {x})[0];
  EXPECT_EQ(want.data<int32_t>()[0], std::numeric_limits<int32_t>::lowest());
  EXPECT_EQ(got.data<int32_t>()[0], want.data<int32_t>()[0]);
  EXPECT_EQ(got.data<int32_t>()[1], want.data<int32_t>()[1]);
}

TEST(FissionReduce, NoopWithEmptyAxesReturnsTheInput) {
  for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    SCOPED_TRACE(op);
    Graph g = single_op_graph(op, {in({2, 3})}, attrs_keep(1, 1), 18);
    Graph p = expect_fission_equivalent(g);
    ASSERT_EQ(p.nodes.size(), 1u);
    EXPECT_EQ(p.nodes[0].op_type, "Identity");
    // An empty axes input means the same.
    Graph g2 = single_op_graph(op, {in({2, 3}), axes_cst({})}, attrs_keep(0, 1), 18);
    EXPECT_EQ(expect_fission_equivalent(g2).nodes.size(), 1u);
  }
  // Without noop_with_empty_axes, empty axes reduce everything.
  Graph p = expect_fission_equivalent(single_op_graph("ReduceL1", {in({2, 3}), axes_cst({})}, attrs_keep(0), 18));
  EXPECT_EQ(p.value(p.outputs[0]).type.shape, Shape{});
}

TEST(FissionReduce, HalfPrecisionWorksInFloat32) {
  Graph g = reduce_graph("ReduceSumSquare", in(DType::kFloat16, {4, 8}), std::vector<int64_t>{1}, 0, 18);
  Graph p = expect_fission_equivalent(g, 1e-3);  // the f16 result itself has a 2^-11 rounding error
  EXPECT_EQ(count_op(p, "Cast"), 2);
  expect_fission_equivalent(reduce_graph("ReduceLogSumExp", in(DType::kFloat16, {4, 8}), std::vector<int64_t>{1}, 1, 13), 1e-3);
}

TEST(FissionReduce, GlobalAveragePool) {
  for (Shape s : {Shape{2, 3, 5}, Shape{2, 3, 4, 5}, Shape{1, 2, 3, 4, 2}}) {
    Graph p = expect_fission_equivalent(single_op_graph("GlobalAveragePool", {in(s)}));
    ASSERT_EQ(p.nodes.size(), 1u);
    EXPECT_EQ(p.nodes[0].op_type, "ReduceMean");
    EXPECT_EQ(primitive_kind(p, p.nodes[0]), PrimitiveKind::kReduce);
  }
  // Opset 18: axes as an input of ReduceMean.
  Graph p = expect_fission_equivalent(single_op_graph("GlobalAveragePool", {in(DType::kFloat64, {2, 3, 4, 4})}, {}, 18));
  EXPECT_EQ(p.nodes[0].inputs.size(), 2u);
  expect_fission_equivalent(single_op_graph("GlobalAveragePool", {in({2, 3, 4, 4})}), 1e-5, 1e4f);
}

TEST(FissionReduce, GlobalMaxPool) {
  for (int opset : {13, 18, 22}) {
    Graph p = expect_fission_equivalent(single_op_graph("GlobalMaxPool", {in({2, 3, 4, 5})}, {}, opset));
    ASSERT_EQ(p.nodes.size(), 1u);
    EXPECT_EQ(p.nodes[0].op_type, "ReduceMax");
  }
  expect_fission_equivalent(single_op_graph("GlobalMaxPool", {in(DType::kFloat64, {1, 2, 7})}));
}

TEST(FissionReduce, GlobalLpPool) {
  for (int64_t p : {1, 2, 3, 4}) {
    SCOPED_TRACE(p);
    Attributes a;
    a.set("p", p);
    for (Shape s : {Shape{2, 3, 5}, Shape{2, 3, 4, 5}}) {
      Graph pg = expect_fission_equivalent(single_op_graph("GlobalLpPool", {in(s)}, a));
      EXPECT_EQ(count_op(pg, "ReduceSum"), 1);
      EXPECT_EQ(count_op(pg, "Sqrt"), p == 2 ? 1 : 0);
      EXPECT_EQ(count_op(pg, "Pow"), p > 2 ? 2 : 0);
    }
    expect_fission_equivalent(single_op_graph("GlobalLpPool", {in(DType::kFloat64, {2, 3, 4, 4})}, a, 18));
  }
  Graph pg = expect_fission_equivalent(single_op_graph("GlobalLpPool", {in({2, 3, 4, 4})}));  // default p = 2
  EXPECT_EQ(count_op(pg, "Sqrt"), 1);
}

TEST(FissionReduce, LargeMaxPoolWindowsSplitIntoColumnAndRowPools) {
  using I = std::vector<int64_t>;
  struct Case { Shape x; I k, st, pads, dil; int64_t ceil; };
  for (const Case& c : {Case{{1, 4, 19, 19}, {13, 13}, {1, 1}, {6, 6, 6, 6}, {1, 1}, 0},  // SPP
                        Case{{2, 3, 11, 12}, {5, 7}, {2, 1}, {2, 3, 1, 3}, {1, 1}, 1},
                        Case{{1, 2, 16, 15}, {5, 5}, {1, 1}, {4, 0, 4, 2}, {2, 1}, 0},
                        Case{{1, 2, 20, 21}, {9, 9}, {1, 1}, {0, 0, 0, 0}, {1, 1}, 0}}) {
    Attributes a;
    a.set("kernel_shape", c.k);
    a.set("strides", c.st);
    a.set("pads", c.pads);
    a.set("dilations", c.dil);
    a.set("ceil_mode", c.ceil);
    Graph g = single_op_graph("MaxPool", {in(c.x)}, a);
    ASSERT_TRUE(separable_max_pool(g, g.nodes[0]));
    // The max of the same elements: exact.
    Graph p = expect_fission_equivalent(g, 0.0);
    ASSERT_EQ(p.nodes.size(), 2u);
    EXPECT_EQ(p.nodes[0].attrs.get_ints("kernel_shape"), (I{c.k[0], 1}));
    EXPECT_EQ(p.nodes[1].attrs.get_ints("kernel_shape"), (I{1, c.k[1]}));
  }
  // Padding almost as wide as the window: edge windows hold one input row or column.
  Attributes a;
  a.set("kernel_shape", I{5, 5});
  a.set("pads", I{4, 4, 4, 4});
  expect_fission_equivalent(single_op_graph("MaxPool", {in({1, 1, 3, 3})}, a), 0.0);
}

TEST(FissionReduce, SmallOrIndexedMaxPoolsStayOnePrimitive) {
  using I = std::vector<int64_t>;
  auto pool = [](I k, I st, bool indices, const char* auto_pad = "NOTSET") {
    Attributes a;
    a.set("kernel_shape", k);
    a.set("strides", st);
    a.set("auto_pad", std::string(auto_pad));
    return single_op_graph("MaxPool", {in({1, 3, 20, 20})}, a, 17, indices ? 2 : 1);
  };
  for (Graph g : {pool({3, 3}, {1, 1}, false), pool({3, 3}, {2, 2}, false), pool({5, 5}, {2, 2}, false),
                  pool({13, 13}, {1, 1}, true), pool({5, 5}, {1, 1}, false, "SAME_UPPER"), pool({7, 1}, {1, 1}, false)}) {
    EXPECT_FALSE(separable_max_pool(g, g.nodes[0]));
    EXPECT_EQ(primitive_kind(g, g.nodes[0]), PrimitiveKind::kReduce);
    Graph p = fission(g);
    EXPECT_EQ(count_op(p, "MaxPool"), 1);
  }
}

}  // namespace
}  // namespace korch
