// Fission of the normalization family (src/fission/norm.cc): every operator, over axes,
// attributes, opsets, dtypes and large magnitudes, checked against the reference interpreter,
// plus the primitives each rule emits.
#include "fission_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

Attributes attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

// Feeds input 0 of `g` from `pre`(x[, arg]), so a test can shape the values the operator sees
// (ties for Hardmax, zero rows for LpNormalization, a non-negative variance input).
Graph with_pre(Graph g, const std::string& pre, std::optional<Tensor> arg = std::nullopt) {
  ValueId v0 = g.inputs[0];
  TensorType t = g.type(v0);
  g.inputs.erase(g.inputs.begin());
  g.value(v0).name = "pre_out";
  ValueId x = g.add_input("x", t);
  Node n;
  n.op_type = pre;
  n.name = "pre";
  n.inputs = {x};
  if (arg) n.inputs.push_back(g.add_constant("pre_arg", *arg));
  n.outputs = {v0};
  g.add_node(std::move(n));
  g.topo_sort();
  return g;
}

Tensor iota_f32(Shape s, float start, float step) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i);
  return Tensor::from_vector<float>(v, s);
}

Tensor positive_f32(Shape s, float start = 0.5f) { return iota_f32(std::move(s), start, 0.25f); }

// ---------------------------------------------------------------------------------------------
// Softmax / LogSoftmax

TEST(FissionNorm, SoftmaxStructure) {
  Graph p = expect_fission_equivalent(single_op_graph("Softmax", {in({2, 3, 4})}, attrs({{"axis", int64_t{1}}}), 13));
  EXPECT_EQ(count_op(p, "ReduceMax"), 1);
  EXPECT_EQ(count_op(p, "Sub"), 1);
  EXPECT_EQ(count_op(p, "Exp"), 1);
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(count_op(p, "Div"), 1);
  EXPECT_EQ(count_op(p, "Expand"), 2);  // the max and the sum, back to [2,3,4]
  EXPECT_EQ(p.nodes.size(), 7u);
  EXPECT_EQ(primitive_counts(p)["reduce"], 2);
}

TEST(FissionNorm, SoftmaxAxesAndOpsets) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int opset : {7, 11, 13, 18}) {
      for (int64_t axis : {-3, -1, 0, 1, 2}) {
        SCOPED_TRACE(std::string(op) + " opset " + std::to_string(opset) + " axis " + std::to_string(axis));
        expect_fission_equivalent(single_op_graph(op, {in({2, 3, 5})}, attrs({{"axis", axis}}), opset));
      }
    }
    // Default axis: 1 (2-D coercion) before 13, -1 from 13.
    expect_fission_equivalent(single_op_graph(op, {in({2, 3, 5})}, {}, 11));
    expect_fission_equivalent(single_op_graph(op, {in({2, 3, 5})}, {}, 13));
    // axis == rank before 13: rows of one element.
    expect_fission_equivalent(single_op_graph(op, {in({2, 3})}, attrs({{"axis", int64_t{2}}}), 11));
    expect_fission_equivalent(single_op_graph(op, {in({7})}, {}, 13));
    expect_fission_equivalent(single_op_graph(op, {in(DType::kFloat64, {3, 4})}, {}, 13), 1e-12);
  }
}

TEST(FissionNorm, SoftmaxCoercedTo2DReducesTrailingAxes) {
  // Opset 11, axis 1 of [2,3,4,5]: rows are the 60 trailing elements.
  Graph p = expect_fission_equivalent(single_op_graph("Softmax", {in({2, 3, 4, 5})}, attrs({{"axis", int64_t{1}}}), 11));
  EXPECT_EQ(count_op(p, "Reshape"), 0);
  for (const Node& n : p.nodes)
    if (n.op_type == "ReduceMax") { EXPECT_EQ(n.attrs.get_ints("axes"), (std::vector<int64_t>{1, 2, 3})); }
  Graph q = expect_fission_equivalent(single_op_graph("LogSoftmax", {in({2, 3, 4, 5})}, attrs({{"axis", int64_t{1}}}), 11));
  EXPECT_EQ(count_op(q, "Log"), 1);
}

TEST(FissionNorm, SoftmaxLargeMagnitudes) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int64_t axis : {0, -1}) {
      SCOPED_TRACE(op);
      // Inputs up to 1e4 in magnitude: exp without the max subtraction would overflow.
      expect_fission_equivalent(single_op_graph(op, {in({4, 16})}, attrs({{"axis", axis}}), 13), 1e-5, 1e4f, 1);
      expect_fission_equivalent(single_op_graph(op, {in({4, 16})}, attrs({{"axis", axis}}), 11), 1e-5, 1e4f, 2);
    }
  }
}

TEST(FissionNorm, LogSoftmaxStructure) {
  Graph p = expect_fission_equivalent(single_op_graph("LogSoftmax", {in({3, 8})}, {}, 13));
  EXPECT_EQ(count_op(p, "ReduceMax"), 1);
  EXPECT_EQ(count_op(p, "Exp"), 1);
  EXPECT_EQ(count_op(p, "ReduceSum"), 1);
  EXPECT_EQ(count_op(p, "Log"), 1);
  EXPECT_EQ(count_op(p, "Sub"), 2);
  EXPECT_EQ(count_op(p, "Div"), 0);
}

// ---------------------------------------------------------------------------------------------
// Hardmax

TEST(FissionNorm, HardmaxStructure) {
  Graph p = expect_fission_equivalent(single_op_graph("Hardmax", {in({2, 3, 4})}, attrs({{"axis", int64_t{1}}}), 13));
  EXPECT_EQ(count_op(p, "ArgMax"), 1);
  EXPECT_EQ(count_op(p, "Equal"), 1);
  EXPECT_EQ(count_op(p, "Cast"), 1);
  EXPECT_EQ(count_op(p, "Reshape"), 0);
  // Opset 11: the 2-D view needs Reshapes around the single-axis ArgMax.
  Graph q = expect_fission_equivalent(single_op_graph("Hardmax", {in({2, 3, 4})}, attrs({{"axis", int64_t{1}}}), 11));
  EXPECT_EQ(count_op(q, "ArgMax"), 1);
  EXPECT_EQ(count_op(q, "Reshape"), 2);
}

TEST(FissionNorm, HardmaxAxesOpsetsAndTies) {
  for (int opset : {7, 11, 13}) {
    for (int64_t axis : {-1, 0, 1, 2}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " axis " + std::to_string(axis));
      expect_fission_equivalent(single_op_graph("Hardmax", {in({3, 4, 5})}, attrs({{"axis", axis}}), opset), 0);
      // Floor(x) of x in [-1, 1) is -1 or 0, all ties: the first maximum must win.
      expect_fission_equivalent(with_pre(single_op_graph("Hardmax", {in({3, 4, 5})}, attrs({{"axis", axis}}), opset), "Floor"), 0);
    }
  }
  expect_fission_equivalent(single_op_graph("Hardmax", {in({2, 3})}, attrs({{"axis", int64_t{2}}}), 11), 0);
  expect_fission_equivalent(single_op_graph("Hardmax", {in(DType::kFloat64, {4, 6})}, {}, 13), 0);
}

// ---------------------------------------------------------------------------------------------
// LayerNormalization

TEST(FissionNorm, LayerNormStructure) {
  Graph p = expect_fission_equivalent(
      single_op_graph("LayerNormalization", {in({4, 4, 8}), cst(positive_f32({8})), cst(iota_f32({8}, -1, 0.3f))}, {}, 17));
  EXPECT_EQ(count_op(p, "ReduceMean"), 2);  // mean and variance, two passes
  EXPECT_EQ(count_op(p, "Sqrt"), 1);
  EXPECT_EQ(count_op(p, "Reciprocal"), 1);
  EXPECT_EQ(count_op(p, "Cast"), 0);
  EXPECT_EQ(count_op(p, "Expand"), 4);  // mean, 1/std, scale, bias
  EXPECT_EQ(count_op(p, "Add"), 2);     // var + eps, + bias
}

TEST(FissionNorm, LayerNormAxesBiasAndBroadcastScale) {
  for (int64_t axis : {-1, -2, 0, 1, 2}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    const Shape xs = {2, 3, 4};
    Shape ns(xs.begin() + (axis < 0 ? axis + 3 : axis), xs.end());
    expect_fission_equivalent(single_op_graph("LayerNormalization", {in({2, 3, 4}), in(ns), in(ns)}, attrs({{"axis", axis}}), 17));
    expect_fission_equivalent(single_op_graph("LayerNormalization", {in({2, 3, 4}), in(ns)}, attrs({{"axis", axis}}), 17));
  }
  // Scale/B of a broadcastable shape, epsilon, opset 22.
  expect_fission_equivalent(single_op_graph("LayerNormalization", {in({2, 3, 4}), in({1, 4}), in({4})},
                                            attrs({{"axis", int64_t{1}}, {"epsilon", 1e-3f}}), 22));
  // Large offset and magnitude: two-pass variance keeps precision.
  expect_fission_equivalent(single_op_graph("LayerNormalization", {in({4, 64}), cst(positive_f32({64}))}, {}, 17), 1e-5, 1e4f, 3);
}

TEST(FissionNorm, LayerNormMeanInvStdOutputsAndStashType) {
  Graph g = single_op_graph("LayerNormalization", {in({2, 3, 4}), in({4}), in({4})}, {}, 17, 3);
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(p.outputs.size(), 3u);
  EXPECT_EQ(p.type(p.outputs[1]), (TensorType{DType::kFloat32, {2, 3, 1}}));
  // Only Mean requested (InvStdDev omitted).
  Graph g2 = single_op_graph("LayerNormalization", {in({2, 3, 4}), in({3, 4})}, attrs({{"axis", int64_t{1}}}), 17, 2);
  expect_fission_equivalent(g2);
  // f64 input and f64 stash: exact up to rounding.
  Graph g3 = single_op_graph("LayerNormalization", {in(DType::kFloat64, {3, 5}), in(DType::kFloat64, {5})},
                             attrs({{"stash_type", int64_t{11}}}), 17, 3);
  Graph p3 = expect_fission_equivalent(g3, 1e-12);
  EXPECT_EQ(count_op(p3, "Cast"), 0);
  EXPECT_EQ(p3.type(p3.outputs[2]).dtype, DType::kFloat64);
  // f64 input with the default f32 stash: statistics in f32 (as the ONNX function), Casts around.
  Graph g4 = single_op_graph("LayerNormalization", {in(DType::kFloat64, {3, 5}), in(DType::kFloat64, {5})}, {}, 17, 3);
  Graph p4 = expect_fission_equivalent(g4, 1e-5);
  EXPECT_EQ(count_op(p4, "Cast"), 2);
  EXPECT_EQ(p4.type(p4.outputs[1]).dtype, DType::kFloat32);
  // f32 input with an f64 stash.
  expect_fission_equivalent(single_op_graph("LayerNormalization", {in({3, 5}), in({5})},
                                            attrs({{"stash_type", int64_t{11}}}), 17, 3));
}

// ---------------------------------------------------------------------------------------------
// InstanceNormalization / GroupNormalization

TEST(FissionNorm, InstanceNorm) {
  Graph p = expect_fission_equivalent(
      single_op_graph("InstanceNormalization", {in({2, 3, 4, 5}), cst(positive_f32({3})), cst(iota_f32({3}, -1, 1))}, {}, 17));
  EXPECT_EQ(count_op(p, "ReduceMean"), 2);
  EXPECT_EQ(count_op(p, "Reshape"), 0);  // the constant [C] -> [C,1,1] reshapes are folded
  for (const Node& n : p.nodes)
    if (n.op_type == "ReduceMean") { EXPECT_EQ(p.type(n.outputs[0]).shape, (Shape{2, 3, 1, 1})); }
  expect_fission_equivalent(single_op_graph("InstanceNormalization", {in({2, 3, 7}), in({3}), in({3})},
                                            attrs({{"epsilon", 1e-2f}}), 7));
  expect_fission_equivalent(single_op_graph("InstanceNormalization", {in({1, 2, 3, 2, 2}), in({2}), in({2})}, {}, 22));
  expect_fission_equivalent(single_op_graph("InstanceNormalization", {in({2, 3}), in({3}), in({3})}, {}, 17));  // S = 1
  expect_fission_equivalent(single_op_graph("InstanceNormalization", {in({2, 4, 9}), in({4}), in({4})}, {}, 17), 1e-5, 1e4f, 4);
  expect_fission_equivalent(single_op_graph("InstanceNormalization",
                                            {in(DType::kFloat64, {2, 3, 6}), in(DType::kFloat64, {3}), in(DType::kFloat64, {3})}, {}, 17),
                            1e-12);
}

TEST(FissionNorm, GroupNormOpset18PerGroup) {
  Graph p = expect_fission_equivalent(single_op_graph(
      "GroupNormalization", {in({2, 6, 3, 3}), cst(positive_f32({3})), cst(iota_f32({3}, -1, 1))},
      attrs({{"num_groups", int64_t{3}}}), 18));
  EXPECT_EQ(count_op(p, "Reshape"), 2);  // [N,C,H,W] -> [N,G,K] and back
  EXPECT_EQ(count_op(p, "ReduceMean"), 2);
  for (const Node& n : p.nodes)
    if (n.op_type == "ReduceMean") { EXPECT_EQ(p.type(n.outputs[0]).shape, (Shape{2, 3, 1})); }
  for (int64_t G : {1, 2, 6}) {
    SCOPED_TRACE(G);
    expect_fission_equivalent(single_op_graph("GroupNormalization", {in({2, 6, 5}), in({G}), in({G})},
                                              attrs({{"num_groups", G}, {"epsilon", 1e-3f}}), 18));
  }
  expect_fission_equivalent(single_op_graph("GroupNormalization", {in({3, 4}), in({2}), in({2})},
                                            attrs({{"num_groups", int64_t{2}}}), 18));
  expect_fission_equivalent(single_op_graph("GroupNormalization", {in({2, 4, 8}), in({2}), in({2})},
                                            attrs({{"num_groups", int64_t{2}}}), 18), 1e-5, 1e4f, 5);
}

TEST(FissionNorm, GroupNormOpset21PerChannelAndStash) {
  Graph p = expect_fission_equivalent(single_op_graph("GroupNormalization", {in({2, 6, 3, 3}), in({6}), in({6})},
                                                      attrs({{"num_groups", int64_t{2}}}), 21));
  EXPECT_EQ(count_op(p, "Cast"), 0);
  for (int64_t G : {1, 3, 6}) {
    SCOPED_TRACE(G);
    expect_fission_equivalent(single_op_graph("GroupNormalization", {in({2, 6, 2, 2}), cst(positive_f32({6})), in({6})},
                                              attrs({{"num_groups", G}}), 21));
  }
  // stash_type f64 on an f32 input: statistics in f64, then Cast back.
  Graph q = expect_fission_equivalent(single_op_graph("GroupNormalization", {in({2, 4, 5}), in({4}), in({4})},
                                                      attrs({{"num_groups", int64_t{2}}, {"stash_type", int64_t{11}}}), 21));
  EXPECT_EQ(count_op(q, "Cast"), 2);
  expect_fission_equivalent(single_op_graph("GroupNormalization",
                                            {in(DType::kFloat64, {2, 4, 5}), in(DType::kFloat64, {4}), in(DType::kFloat64, {4})},
                                            attrs({{"num_groups", int64_t{4}}, {"stash_type", int64_t{11}}}), 21),
                            1e-12);
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization

TEST(FissionNorm, BatchNormConstantParametersFold) {
  Graph g = single_op_graph("BatchNormalization", {in({2, 3, 4, 4}), cst(positive_f32({3})), cst(iota_f32({3}, -1, 0.5f)),
                                                   cst(iota_f32({3}, 0.2f, -0.3f)), cst(positive_f32({3}, 0.1f))},
                            attrs({{"epsilon", 1e-3f}}), 15);
  Graph p = expect_fission_equivalent(g);
  // scale and shift are folded to constants: x * E(a) + E(c) only.
  EXPECT_EQ(p.nodes.size(), 4u);
  EXPECT_EQ(count_op(p, "Mul"), 1);
  EXPECT_EQ(count_op(p, "Add"), 1);
  EXPECT_EQ(count_op(p, "Expand"), 2);
  EXPECT_EQ(count_op(p, "Sqrt"), 0);
}

TEST(FissionNorm, BeforeOpset8BroadcastsAreTiles) {
  // Opset 7 has no Expand: the [C,1,1] scale and shift are Tiled to x's shape.
  Graph g = single_op_graph("BatchNormalization", {in({2, 3, 4, 4}), cst(positive_f32({3})), cst(iota_f32({3}, -1, 0.5f)),
                                                   cst(iota_f32({3}, 0.2f, -0.3f)), cst(positive_f32({3}, 0.1f))},
                            {}, 7);
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Expand"), 0);
  EXPECT_EQ(count_op(p, "Tile"), 2);
  Graph q = expect_fission_equivalent(single_op_graph("Softmax", {in({2, 3, 4})}, attrs({{"axis", int64_t{2}}}), 7));
  EXPECT_EQ(count_op(q, "Expand"), 0);
  EXPECT_EQ(count_op(q, "Tile"), 2);
}

TEST(FissionNorm, BatchNormOpsetsRanksAndRuntimeParameters) {
  auto params = [](int64_t C) {
    return std::vector<OpInput>{cst(positive_f32({C})), cst(iota_f32({C}, -1, 0.5f)), cst(iota_f32({C}, 0.2f, -0.3f)),
                                cst(positive_f32({C}, 0.1f))};
  };
  for (int opset : {7, 9, 14, 15}) {
    for (Shape s : {Shape{2, 3}, Shape{2, 3, 5}, Shape{1, 3, 2, 2, 2}}) {
      std::vector<OpInput> ins = {in(s)};
      for (OpInput& p : params(3)) ins.push_back(p);
      expect_fission_equivalent(single_op_graph("BatchNormalization", ins, {}, opset));
    }
  }
  // Parameters only known at run time: scale/shift stay primitives. The variance is Abs(v) so
  // that it is non-negative.
  Graph h;
  h.opset = 15;
  ValueId x = h.add_input("x", {DType::kFloat32, {2, 3, 4}});
  ValueId sc = h.add_input("scale", {DType::kFloat32, {3}});
  ValueId bb = h.add_input("B", {DType::kFloat32, {3}});
  ValueId mu = h.add_input("mean", {DType::kFloat32, {3}});
  ValueId v0 = h.add_input("v", {DType::kFloat32, {3}});
  ValueId var = h.add_value("var", {DType::kFloat32, {3}});
  ValueId y = h.add_value("y", {DType::kFloat32, {2, 3, 4}});
  Node abs{"abs", "Abs", "", {v0}, {var}, {}};
  Node bn{"bn", "BatchNormalization", "", {x, sc, bb, mu, var}, {y}, {}};
  h.add_node(abs);
  h.add_node(bn);
  h.outputs = {y};
  Graph p = expect_fission_equivalent(h);
  EXPECT_EQ(count_op(p, "Sqrt"), 1);
  EXPECT_EQ(count_op(p, "Div"), 1);
  EXPECT_EQ(count_op(p, "Reshape"), 2);  // [C] -> [C,1] for the scale and the shift
}

TEST(FissionNorm, BatchNormSpatial0AndMixedTypes) {
  // Opset 7/8 spatial=0: per-activation parameters [C, H, W].
  for (int opset : {7, 8}) {
    Graph g = single_op_graph("BatchNormalization", {in({2, 3, 2, 4}), cst(positive_f32({3, 2, 4})), cst(iota_f32({3, 2, 4}, -1, 0.1f)),
                                                     cst(iota_f32({3, 2, 4}, 0.5f, -0.05f)), cst(positive_f32({3, 2, 4}, 0.1f))},
                              attrs({{"spatial", int64_t{0}}}), opset);
    Graph p = expect_fission_equivalent(g);
    EXPECT_EQ(count_op(p, "Reshape"), 0);
    // spatial=0 with [C] parameters is the same as spatial=1.
    expect_fission_equivalent(single_op_graph("BatchNormalization", {in({2, 3, 4}), in({3}), in({3}), cst(positive_f32({3})),
                                                                     cst(positive_f32({3}))},
                                              attrs({{"spatial", int64_t{0}}}), opset));
  }
  // Opset 15: mean/var f64 (T2) with x, scale, B f32.
  auto f64 = [](Tensor t) {
    std::vector<double> v;
    for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_as_double(i));
    return Tensor::from_vector<double>(v, t.shape());
  };
  Graph g = single_op_graph("BatchNormalization", {in({2, 3, 4}), in({3}), in({3}), cst(f64(iota_f32({3}, 0.2f, -0.3f))),
                                                   cst(f64(positive_f32({3})))},
                            {}, 15);
  expect_fission_equivalent(g);
  expect_fission_equivalent(single_op_graph("BatchNormalization",
                                            {in(DType::kFloat64, {2, 3, 4}), in(DType::kFloat64, {3}), in(DType::kFloat64, {3}),
                                             cst(f64(positive_f32({3}))), cst(f64(positive_f32({3})))},
                                            {}, 15),
                            1e-12);
}

// ---------------------------------------------------------------------------------------------
// LpNormalization / MeanVarianceNormalization

TEST(FissionNorm, LpNormalization) {
  for (int64_t p : {1, 2}) {
    for (int64_t axis : {-1, 0, 1, 2}) {
      SCOPED_TRACE("p " + std::to_string(p) + " axis " + std::to_string(axis));
      expect_fission_equivalent(single_op_graph("LpNormalization", {in({2, 3, 4})}, attrs({{"p", p}, {"axis", axis}}), 7));
    }
    expect_fission_equivalent(single_op_graph("LpNormalization", {in({5, 6})}, attrs({{"p", p}}), 22), 1e-5, 1e4f, 6);
    // Zero rows give zeros (not NaN): x masked to zero in row 1.
    std::vector<float> mask(12, 1.f);
    for (int i = 4; i < 8; ++i) mask[static_cast<size_t>(i)] = 0.f;
    Graph z = with_pre(single_op_graph("LpNormalization", {in({3, 4})}, attrs({{"p", p}}), 13), "Mul",
                       Tensor::from_vector<float>(mask, {3, 4}));
    expect_fission_equivalent(z);
  }
  Graph q = expect_fission_equivalent(single_op_graph("LpNormalization", {in({2, 8})}, {}, 13));
  EXPECT_EQ(count_op(q, "ReduceSum"), 1);
  EXPECT_EQ(count_op(q, "Sqrt"), 1);
  EXPECT_EQ(count_op(q, "Greater"), 1);  // the zero-norm guard on the [2,1] norms
  EXPECT_EQ(count_op(q, "Expand"), 1);
  Graph r = expect_fission_equivalent(single_op_graph("LpNormalization", {in({2, 8})}, attrs({{"p", int64_t{1}}}), 13));
  EXPECT_EQ(count_op(r, "Abs"), 1);
  EXPECT_EQ(count_op(r, "Sqrt"), 0);
  expect_fission_equivalent(single_op_graph("LpNormalization", {in(DType::kFloat64, {3, 5})}, {}, 13), 1e-12);
}

TEST(FissionNorm, MeanVarianceNormalization) {
  Graph p = expect_fission_equivalent(single_op_graph("MeanVarianceNormalization", {in({2, 3, 4, 5})}, {}, 13));
  EXPECT_EQ(count_op(p, "ReduceMean"), 2);
  for (const Node& n : p.nodes)
    if (n.op_type == "ReduceMean") { EXPECT_EQ(p.type(n.outputs[0]).shape, (Shape{1, 3, 1, 1})); }
  for (std::vector<int64_t> axes : {std::vector<int64_t>{1}, {2, 3}, {-1}, {0, 1, 2, 3}, {3, 0}}) {
    expect_fission_equivalent(single_op_graph("MeanVarianceNormalization", {in({2, 3, 4, 5})}, attrs({{"axes", axes}}), 9));
  }
  expect_fission_equivalent(single_op_graph("MeanVarianceNormalization", {in({2, 6})}, attrs({{"axes", std::vector<int64_t>{1}}}), 13),
                            1e-5, 1e4f, 7);
  expect_fission_equivalent(single_op_graph("MeanVarianceNormalization", {in(DType::kFloat64, {2, 3, 2, 2})}, {}, 13), 1e-12);
}

// ---------------------------------------------------------------------------------------------
// LRN

TEST(FissionNorm, LrnIsPadPlusSlices) {
  Graph p = expect_fission_equivalent(single_op_graph("LRN", {in({2, 7, 3, 3})}, attrs({{"size", int64_t{5}}}), 13));
  EXPECT_EQ(count_op(p, "Pad"), 1);
  EXPECT_EQ(count_op(p, "Slice"), 5);
  EXPECT_EQ(count_op(p, "Add"), 5);  // 4 for the window sum, 1 for the bias
  EXPECT_EQ(count_op(p, "Pow"), 1);
  EXPECT_EQ(count_op(p, "Conv"), 0);
  for (const Node& n : p.nodes)
    if (n.op_type == "Pad") { EXPECT_EQ(p.type(n.outputs[0]).shape, (Shape{2, 11, 3, 3})); }
}

TEST(FissionNorm, LrnSizesAttributesOpsets) {
  for (int opset : {7, 10, 11, 13}) {  // Slice/Pad attribute forms before 10/11
    for (int64_t size : {1, 2, 3, 4, 5, 8}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " size " + std::to_string(size));
      expect_fission_equivalent(single_op_graph("LRN", {in({2, 6, 3, 2})}, attrs({{"size", size}}), opset));
    }
  }
  // Window wider than the channels, rank 3 and 5, non-default attributes, large magnitudes.
  expect_fission_equivalent(single_op_graph("LRN", {in({1, 3, 4})}, attrs({{"size", int64_t{7}}}), 13));
  expect_fission_equivalent(single_op_graph("LRN", {in({1, 4, 2, 2, 3})},
                                            attrs({{"size", int64_t{3}}, {"alpha", 0.5f}, {"beta", 0.5f}, {"bias", 2.f}}), 13));
  expect_fission_equivalent(single_op_graph("LRN", {in({1, 8, 4, 4})}, attrs({{"size", int64_t{5}}, {"alpha", 1e-2f}}), 13),
                            1e-5, 1e2f, 8);
  expect_fission_equivalent(single_op_graph("LRN", {in(DType::kFloat64, {1, 5, 3})}, attrs({{"size", int64_t{3}}}), 13), 1e-12);
}

TEST(FissionNorm, LrnWideWindowUsesConv) {
  for (int opset : {7, 13}) {
    Graph p = expect_fission_equivalent(single_op_graph("LRN", {in({2, 12, 3, 2})},
                                                        attrs({{"size", int64_t{9}}, {"alpha", 0.1f}}), opset));
    EXPECT_EQ(count_op(p, "Conv"), 1);
    EXPECT_EQ(count_op(p, "Slice"), 0);
    Graph q = expect_fission_equivalent(single_op_graph("LRN", {in({1, 5, 7})}, attrs({{"size", int64_t{10}}}), opset));
    EXPECT_EQ(count_op(q, "Conv"), 1);
  }
}

}  // namespace
}  // namespace korch
