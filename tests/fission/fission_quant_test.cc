// Quantized operators split into integer linear primitives plus elementwise scaling
// (fission/quant.cc): exactly what the reference interpreter computes (tolerance 0), every node a
// primitive, and the operators the rules cannot express kept whole.
#include "fission_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

Tensor random_const(DType dt, Shape s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return random_tensor(TensorType{dt, std::move(s)}, rng);
}

// Scales of a few distinct magnitudes (positive, as quantizers write them).
Tensor scales(std::vector<float> v) {
  Shape s = {static_cast<int64_t>(v.size())};
  return Tensor::from_vector<float>(v, s);
}

Attributes axis_attr(int64_t axis) {
  Attributes a;
  a.set("axis", axis);
  return a;
}

TEST(FissionQuant, DequantizePerTensorAndPerAxis) {
  for (DType t : {DType::kUInt8, DType::kInt8}) {
    Graph g = single_op_graph("DequantizeLinear", {in(t, {2, 3, 4, 5}), cst(Tensor::scalar<float>(0.037f)),
                                                   cst(random_const(t, {}, 3))});
    Graph p = expect_fission_equivalent(g, 0.0);  // per tensor, constant parameters: one elementwise primitive
    ASSERT_EQ(count_op(p, "DequantizeLinear"), 1);
    EXPECT_EQ(primitive_kind(p, p.nodes[0]), PrimitiveKind::kElementwise);
    Graph ga = single_op_graph("DequantizeLinear", {in(t, {2, 3, 4, 5}), cst(scales({0.5f, 0.013f, 7.f})),
                                                    cst(random_const(t, {3}, 4))},
                               axis_attr(1), 13);
    expect_fission_equivalent(ga, 0.0);
    // No zero point; the scale an input: split.
    Graph ps = expect_fission_equivalent(single_op_graph("DequantizeLinear", {in(t, {6, 7}), in({})}), 0.0);
    EXPECT_EQ(count_op(ps, "Mul"), 1);
  }
}

TEST(FissionQuant, QuantizeRoundsHalfToEvenAndSaturates) {
  // Values on exact ties (x / s = k + 0.5) and far outside the range.
  std::vector<float> xs;
  for (int i = -700; i < 700; ++i) xs.push_back(static_cast<float>(i) * 0.25f);
  for (DType t : {DType::kUInt8, DType::kInt8, DType::kInt16}) {
    SCOPED_TRACE(dtype_name(t));
    Graph gi = single_op_graph("QuantizeLinear", {in({1400}), cst(Tensor::scalar<float>(0.5f)), cst(random_const(t, {}, 5))});
    Graph p = fission(gi);
    std::vector<Tensor> x = {Tensor::from_vector<float>(xs, {1400})};
    std::vector<Tensor> want = interpret(gi, x), got = interpret(p, x);
    EXPECT_EQ(rel_l2(got[0], want[0]), 0.0);
    EXPECT_EQ(got[0].dtype(), t);
    for (const Node& n : p.nodes) EXPECT_NE(primitive_kind(p, n), PrimitiveKind::kOperator) << n.op_type;
  }
  // Per axis, and without a zero point (uint8).
  expect_fission_equivalent(single_op_graph("QuantizeLinear", {in({2, 3, 4}), cst(scales({0.01f, 0.1f, 1.f})),
                                                               cst(random_const(DType::kInt8, {3}, 6))},
                                            axis_attr(1), 13),
                            0.0, 3.f);
  expect_fission_equivalent(single_op_graph("QuantizeLinear", {in({5, 4}), cst(Tensor::scalar<float>(0.02f))}), 0.0);
}

TEST(FissionQuant, DynamicQuantizeMatchesTheInterpreterExactly) {
  for (float scale : {1.f, 40.f}) {
    Graph g = single_op_graph("DynamicQuantizeLinear", {in({3, 17, 5})}, {}, 11, 3);
    Graph p = expect_fission_equivalent(g, 0.0, scale);
    EXPECT_EQ(count_op(p, "ReduceMax"), 1);
    EXPECT_EQ(count_op(p, "ReduceMin"), 1);
  }
}

TEST(FissionQuant, IntegerLinearOpsFoldTheirWeightZeroPoint) {
  // ConvInteger with uint8 weights and a per-channel zero point: w - zp fits int8.
  std::vector<uint8_t> w(4 * 3 * 3 * 3), zp = {100, 128, 140, 90};
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<uint8_t>(zp[i / 27] - 60 + (i * 37) % 120);
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  Graph g = single_op_graph("ConvInteger", {in(DType::kUInt8, {1, 3, 6, 6}), cst(Tensor::from_vector<uint8_t>(w, {4, 3, 3, 3})),
                                            cst(Tensor::scalar<uint8_t>(128)), cst(Tensor::from_vector<uint8_t>(zp, {4}))},
                            pads, 10);
  EXPECT_EQ(primitive_kind(g, g.nodes[0]), PrimitiveKind::kOperator);
  Graph p = expect_fission_equivalent(g, 0.0);
  ASSERT_EQ(count_op(p, "ConvInteger"), 1);
  EXPECT_EQ(p.type(p.nodes.back().inputs[1]).dtype, DType::kInt8);
  EXPECT_EQ(primitive_kind(p, p.nodes.back()), PrimitiveKind::kLinear);

  // MatMulInteger with a per-column zero point.
  std::vector<int8_t> b(6 * 5), bzp = {3, -2, 0, 7, -9};
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<int8_t>(static_cast<int>(i * 13 % 200) - 100);
  Graph m = single_op_graph("MatMulInteger", {in(DType::kUInt8, {4, 6}), cst(Tensor::from_vector<int8_t>(b, {6, 5})),
                                              in(DType::kUInt8, {}), cst(Tensor::from_vector<int8_t>(bzp, {5}))},
                            {}, 10);
  Graph pm = expect_fission_equivalent(m, 0.0);
  EXPECT_EQ(count_op(pm, "MatMulInteger"), 1);

  // Weights that are not constants stay an operator (the reference runs it).
  Graph k = single_op_graph("MatMulInteger", {in(DType::kUInt8, {3, 2}), in(DType::kUInt8, {2, 2}), absent(),
                                              cst(Tensor::scalar<uint8_t>(1))},
                            {}, 10);
  Graph pk = fission(k);
  ASSERT_EQ(pk.nodes.size(), 1u);
  EXPECT_EQ(primitive_kind(pk, pk.nodes[0]), PrimitiveKind::kOperator);
}

// uint8 weights over their whole range, whose zero point does not fold into int8 (quantize_dynamic's
// QUInt8): Linear(x, w - 128) + (128 - zp) * (sum of x - x_zp over the receptive field), exact.
TEST(FissionQuant, IntegerLinearOpsSplitAWeightZeroPointThatDoesNotFold) {
  auto wide = [](Shape s, uint64_t seed) {
    std::vector<uint8_t> v(static_cast<size_t>(shape_numel(s)));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 97 + seed * 31) % 256);
    return Tensor::from_vector<uint8_t>(v, s);
  };
  struct ConvCase {
    int64_t c, m, group;
    bool per_channel;
  };
  for (const ConvCase& cc : {ConvCase{3, 4, 1, false}, ConvCase{3, 4, 1, true}, ConvCase{4, 4, 4, true},
                             ConvCase{4, 6, 2, true}, ConvCase{4, 6, 2, false}}) {
    SCOPED_TRACE(fmt::format("C {} M {} group {} per channel {}", cc.c, cc.m, cc.group, cc.per_channel));
    Attributes attrs;
    attrs.set("pads", std::vector<int64_t>{1, 0, 1, 2});
    attrs.set("strides", std::vector<int64_t>{2, 1});
    attrs.set("group", cc.group);
    std::vector<uint8_t> zp(static_cast<size_t>(cc.per_channel ? cc.m : 1));
    for (size_t i = 0; i < zp.size(); ++i) zp[i] = static_cast<uint8_t>(3 + 61 * i);
    Graph g = single_op_graph("ConvInteger",
                              {in(DType::kUInt8, {2, cc.c, 7, 6}), cst(wide({cc.m, cc.c / cc.group, 3, 3}, 5)),
                               cst(Tensor::scalar<uint8_t>(131)),
                               cst(cc.per_channel ? Tensor::from_vector<uint8_t>(zp, {cc.m}) : Tensor::scalar<uint8_t>(zp[0]))},
                              attrs, 10);
    Graph p = expect_fission_equivalent(g, 0.0);
    EXPECT_EQ(count_op(p, "ConvInteger"), 2);  // the int8 weights and the all-ones receptive-field sum
    for (const Node& n : p.nodes)
      if (n.op_type == "ConvInteger") {
        EXPECT_EQ(p.type(n.inputs[1]).dtype, DType::kInt8);
        EXPECT_EQ(primitive_kind(p, n), PrimitiveKind::kLinear);
      }
  }
  for (bool per_column : {false, true}) {
    SCOPED_TRACE(fmt::format("MatMulInteger per column {}", per_column));
    Graph m = single_op_graph("MatMulInteger",
                              {in(DType::kUInt8, {2, 3, 6}), cst(wide({6, 5}, 9)), in(DType::kUInt8, {}),
                               cst(per_column ? Tensor::from_vector<uint8_t>({0, 255, 7, 128, 201}, {5})
                                              : Tensor::scalar<uint8_t>(250))},
                              {}, 10);
    Graph pm = expect_fission_equivalent(m, 0.0);
    EXPECT_EQ(count_op(pm, "MatMulInteger"), 1);
    EXPECT_EQ(count_op(pm, "ReduceSum"), 1);
  }
}

TEST(FissionQuant, QLinearConvAndMatMulRequantizeExactly) {
  const Tensor w = random_const(DType::kInt8, {4, 3, 3, 3}, 7);
  Attributes pads;
  pads.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  for (bool per_channel : {false, true}) {
    for (bool bias : {false, true}) {
      SCOPED_TRACE(fmt::format("per channel {} bias {}", per_channel, bias));
      std::vector<OpInput> ins = {in(DType::kUInt8, {1, 3, 7, 7}),
                                  cst(Tensor::scalar<float>(0.02f)),
                                  cst(Tensor::scalar<uint8_t>(121)),
                                  cst(w),
                                  per_channel ? cst(scales({0.003f, 0.011f, 0.0007f, 0.02f})) : cst(Tensor::scalar<float>(0.004f)),
                                  per_channel ? cst(Tensor::from_vector<int8_t>({0, 0, 0, 0}, {4})) : cst(Tensor::scalar<int8_t>(0)),
                                  cst(Tensor::scalar<float>(0.05f)),
                                  cst(Tensor::scalar<uint8_t>(130))};
      if (bias) ins.push_back(cst(Tensor::from_vector<int32_t>({-500, 20, 3000, 7}, {4})));
      Graph g = single_op_graph("QLinearConv", ins, pads, 13);
      Graph p = expect_fission_equivalent(g, 0.0);
      EXPECT_EQ(count_op(p, "ConvInteger"), 1);
      EXPECT_EQ(count_op(p, "Round"), 1);
    }
  }
  for (bool per_column : {false, true}) {
    Graph g = single_op_graph("QLinearMatMul",
                              {in(DType::kUInt8, {2, 5, 6}), cst(Tensor::scalar<float>(0.03f)), cst(Tensor::scalar<uint8_t>(125)),
                               cst(random_const(DType::kInt8, {6, 3}, 8)),
                               per_column ? cst(scales({0.01f, 0.002f, 0.05f})) : cst(Tensor::scalar<float>(0.01f)),
                               per_column ? cst(Tensor::from_vector<int8_t>({1, -1, 4}, {3})) : cst(Tensor::scalar<int8_t>(2)),
                               cst(Tensor::scalar<float>(0.04f)), cst(Tensor::scalar<int8_t>(-3))},
                              {}, 13);
    Graph p = expect_fission_equivalent(g, 0.0);
    EXPECT_EQ(count_op(p, "MatMulInteger"), 1);
  }
}

}  // namespace
}  // namespace korch
