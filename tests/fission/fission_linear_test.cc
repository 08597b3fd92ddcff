#include "fission_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

Attributes gemm_attrs(int64_t ta, int64_t tb, float alpha, float beta) {
  Attributes a;
  if (ta) a.set("transA", ta);
  if (tb) a.set("transB", tb);
  if (alpha != 1.f) a.set("alpha", alpha);
  if (beta != 1.f) a.set("beta", beta);
  return a;
}

Tensor random_const(DType dt, Shape s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return random_tensor(TensorType{dt, std::move(s)}, rng);
}

TEST(FissionLinear, GemmAllTransposesAndScales) {
  const int64_t M = 3, K = 5, N = 4;
  for (int64_t ta : {0, 1})
    for (int64_t tb : {0, 1})
      for (auto [alpha, beta] : {std::pair{1.f, 1.f}, std::pair{2.5f, 0.5f}, std::pair{-1.f, 0.f}}) {
        SCOPED_TRACE(fmt::format("transA {} transB {} alpha {} beta {}", ta, tb, alpha, beta));
        Shape as = ta ? Shape{K, M} : Shape{M, K}, bs = tb ? Shape{N, K} : Shape{K, N};
        for (Shape cs : {Shape{M, N}, Shape{N}, Shape{1, N}, Shape{M, 1}, Shape{}}) {
          Graph g = single_op_graph("Gemm", {in(as), in(bs), in(cs)}, gemm_attrs(ta, tb, alpha, beta), 13);
          Graph p = expect_fission_equivalent(g);
          EXPECT_EQ(count_op(p, "MatMul"), 1);
          EXPECT_EQ(count_op(p, "Transpose"), ta + tb);
          EXPECT_EQ(count_op(p, "Mul"), (alpha != 1.f) + (beta != 1.f && beta != 0.f));
          EXPECT_EQ(count_op(p, "Add"), beta != 0.f);
          EXPECT_EQ(count_op(p, "Expand"), beta != 0.f && (cs != Shape{M, N}));
        }
      }
}

TEST(FissionLinear, GemmWithoutC) {
  for (int opset : {11, 13, 22}) {
    Graph g = single_op_graph("Gemm", {in({3, 5}), in({4, 5}), absent()}, gemm_attrs(0, 1, 0.25f, 1.f), opset);
    Graph p = expect_fission_equivalent(g);
    EXPECT_EQ(count_op(p, "Add"), 0);
    EXPECT_EQ(count_op(p, "Mul"), 1);
  }
  // The common case: nothing but the MatMul.
  Graph p = expect_fission_equivalent(single_op_graph("Gemm", {in({3, 5}), in({5, 4})}, {}, 13));
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].op_type, "MatMul");
}

TEST(FissionLinear, GemmWeightsFold) {
  // A Linear layer: B constant with transB, C a constant bias. The transposed weight and the
  // beta-scaled bias fold into constants; left: MatMul, Expand of the bias, Add.
  Graph g = single_op_graph("Gemm", {in({8, 16}), cst(random_const(DType::kFloat32, {32, 16}, 1)),
                                     cst(random_const(DType::kFloat32, {32}, 2))},
                            gemm_attrs(0, 1, 1.f, 0.5f), 13);
  Graph p = expect_fission_equivalent(g);
  EXPECT_EQ(count_op(p, "Transpose"), 0);
  EXPECT_EQ(count_op(p, "Mul"), 0);
  EXPECT_EQ(count_op(p, "MatMul"), 1);
  EXPECT_EQ(count_op(p, "Expand"), 1);
  EXPECT_EQ(count_op(p, "Add"), 1);
  EXPECT_EQ(primitive_counts(p)["linear"], 1);
  EXPECT_EQ(primitive_counts(p)["broadcast"], 1);
  EXPECT_EQ(primitive_counts(p)["elementwise"], 1);
}

TEST(FissionLinear, GemmLargeMagnitudeAndF64) {
  expect_fission_equivalent(single_op_graph("Gemm", {in({4, 6}), in({6, 3}), in({3})}, gemm_attrs(0, 0, 3.f, 2.f), 13),
                            1e-5, 1e4f);
  expect_fission_equivalent(single_op_graph("Gemm", {in(DType::kFloat64, {6, 4}), in(DType::kFloat64, {3, 6}),
                                                     in(DType::kFloat64, {4, 1})},
                                            gemm_attrs(1, 1, 0.5f, -2.f), 13));
}

TEST(FissionLinear, GemmIntegers) {
  // Integral scales stay in the integer type; a fractional one goes through f64 and truncates once.
  Graph p = expect_fission_equivalent(
      single_op_graph("Gemm", {in(DType::kInt32, {3, 4}), in(DType::kInt32, {4, 2}), in(DType::kInt32, {2})},
                      gemm_attrs(0, 0, 2.f, 3.f), 13), 0);
  EXPECT_EQ(count_op(p, "Cast"), 0);
  Graph pf = expect_fission_equivalent(
      single_op_graph("Gemm", {in(DType::kInt64, {3, 4}), in(DType::kInt64, {4, 2}), in(DType::kInt64, {3, 1})},
                      gemm_attrs(0, 0, 0.5f, 1.5f), 13), 0);
  EXPECT_EQ(count_op(pf, "Cast"), 3);
}

Attributes conv_attrs(std::vector<int64_t> pads, std::vector<int64_t> strides, int64_t group = 1) {
  Attributes a;
  a.set("pads", std::move(pads));
  a.set("strides", std::move(strides));
  if (group != 1) a.set("group", group);
  return a;
}

TEST(FissionLinear, ConvBiasBecomesAnAdd) {
  EXPECT_EQ(primitive_kind(single_op_graph("Conv", {in({1, 2, 5, 5}), in({3, 2, 3, 3}), in({3})}),
                           single_op_graph("Conv", {in({1, 2, 5, 5}), in({3, 2, 3, 3}), in({3})}).nodes[0]),
            PrimitiveKind::kOperator);
  // 2-D, strided, padded, grouped; weights and bias constant (as in a model) or inputs.
  for (int64_t group : {1, 2}) {
    for (bool constants : {false, true}) {
      SCOPED_TRACE(fmt::format("group {} constants {}", group, constants));
      OpInput w = constants ? cst(random_const(DType::kFloat32, {4, 4 / group, 3, 3}, 3)) : in({4, 4 / group, 3, 3});
      OpInput bias = constants ? cst(random_const(DType::kFloat32, {4}, 4)) : in({4});
      Graph g = single_op_graph("Conv", {in({2, 4, 7, 6}), w, bias}, conv_attrs({1, 1, 1, 1}, {2, 1}, group));
      Graph p = expect_fission_equivalent(g);
      EXPECT_EQ(count_op(p, "Conv"), 1);
      EXPECT_EQ(count_op(p, "Expand"), 1);
      EXPECT_EQ(count_op(p, "Add"), 1);
      EXPECT_EQ(count_op(p, "Reshape"), constants ? 0 : 1);  // a constant bias reshape folds
      for (const Node& n : p.nodes)
        if (n.op_type == "Conv") {
          EXPECT_EQ(n.inputs.size(), 2u);
          EXPECT_EQ(n.attrs, g.nodes[0].attrs);
          EXPECT_EQ(primitive_kind(p, n), PrimitiveKind::kLinear);
        }
    }
  }
  // 1-D and 3-D, large magnitudes, f64.
  expect_fission_equivalent(single_op_graph("Conv", {in({1, 2, 9}), in({3, 2, 2}), in({3})}), 1e-5, 1e4f);
  expect_fission_equivalent(single_op_graph(
      "Conv", {in(DType::kFloat64, {1, 2, 4, 4, 3}), in(DType::kFloat64, {2, 2, 2, 2, 2}), in(DType::kFloat64, {2})}));
}

TEST(FissionLinear, ConvWithoutBiasIsUntouched) {
  Graph g = single_op_graph("Conv", {in({1, 2, 5, 5}), in({3, 2, 3, 3})}, conv_attrs({0, 0, 0, 0}, {1, 1}));
  EXPECT_EQ(primitive_kind(g, g.nodes[0]), PrimitiveKind::kLinear);
  Graph p = expect_fission_equivalent(g);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].op_type, "Conv");
  // An omitted (empty-name) bias: the rule emits the two-input Conv.
  Graph g2 = single_op_graph("Conv", {in({1, 2, 5, 5}), in({3, 2, 3, 3}), absent()});
  Graph p2 = expect_fission_equivalent(g2);
  ASSERT_EQ(p2.nodes.size(), 1u);
  EXPECT_EQ(p2.nodes[0].op_type, "Conv");
}

TEST(FissionLinear, ConvTransposeBiasBecomesAnAdd) {
  for (int64_t group : {1, 2}) {
    Attributes a;
    a.set("strides", std::vector<int64_t>{2, 2});
    a.set("output_padding", std::vector<int64_t>{1, 0});
    if (group != 1) a.set("group", group);
    // W: [C, M/group, kh, kw]; output channels M = 3 * group.
    Graph g = single_op_graph("ConvTranspose", {in({2, 4, 3, 5}), cst(random_const(DType::kFloat32, {4, 3, 3, 2}, 5)),
                                                cst(random_const(DType::kFloat32, {3 * group}, 6))},
                              a);
    Graph p = expect_fission_equivalent(g);
    EXPECT_EQ(count_op(p, "ConvTranspose"), 1);
    EXPECT_EQ(count_op(p, "Add"), 1);
    EXPECT_EQ(count_op(p, "Expand"), 1);
  }
  expect_fission_equivalent(single_op_graph("ConvTranspose", {in({1, 2, 6}), in({2, 3, 3}), in({3})}), 1e-5, 1e4f);
  Graph g = single_op_graph("ConvTranspose", {in({1, 2, 6}), in({2, 3, 3})});
  EXPECT_EQ(expect_fission_equivalent(g).nodes.size(), 1u);
}

// A ConvTranspose whose windows tile the output (stride = kernel, no padding) becomes one MatMul of
// each input pixel with the weights and a layout step that places the patches; 1-, 2- and 3-D, with
// and without a bias, runtime or constant weights. Overlapping windows, padding or groups keep the
// library deconvolution.
TEST(FissionLinear, NonOverlappingConvTransposeIsAMatMulAndAPatchLayout) {
  struct Case {
    Shape x, w;
    bool bias, const_w;
  };
  for (const Case& c : {Case{{2, 4, 3, 5}, {4, 3, 2, 2}, true, true}, Case{{1, 5, 4, 3}, {5, 2, 3, 2}, false, false},
                        Case{{1, 3, 7}, {3, 4, 4}, true, false}, Case{{1, 2, 2, 3, 2}, {2, 3, 2, 1, 3}, false, true}}) {
    SCOPED_TRACE(shape_str(c.x) + " " + shape_str(c.w));
    Attributes a;
    std::vector<int64_t> k(c.w.begin() + 2, c.w.end());
    a.set("strides", k);
    a.set("kernel_shape", k);
    std::vector<OpInput> ins = {in(c.x), c.const_w ? cst(random_const(DType::kFloat32, c.w, 5)) : in(c.w)};
    if (c.bias) ins.push_back(cst(random_const(DType::kFloat32, {c.w[1]}, 6)));
    Graph g = single_op_graph("ConvTranspose", ins, a);
    EXPECT_EQ(primitive_kind(g, g.nodes[0]), PrimitiveKind::kOperator);
    Graph p = expect_fission_equivalent(g);
    EXPECT_EQ(count_op(p, "ConvTranspose"), 0);
    EXPECT_EQ(count_op(p, "MatMul"), 1);
    EXPECT_EQ(count_op(p, "Add"), c.bias ? 1 : 0);
  }
  auto keeps_library = [](Attributes a, Shape w) {
    Graph g = single_op_graph("ConvTranspose", {in({1, 4, 3, 3}), in(std::move(w))}, std::move(a));
    return primitive_kind(g, g.nodes[0]) == PrimitiveKind::kLinear;
  };
  Attributes overlap;
  overlap.set("strides", std::vector<int64_t>{2, 2});
  EXPECT_TRUE(keeps_library(overlap, {4, 2, 3, 3}));
  Attributes padded = overlap;
  padded.set("pads", std::vector<int64_t>{1, 0, 0, 0});
  EXPECT_TRUE(keeps_library(padded, {4, 2, 2, 2}));
  Attributes grouped = overlap;
  grouped.set("group", int64_t{2});
  EXPECT_TRUE(keeps_library(grouped, {4, 1, 2, 2}));
  EXPECT_FALSE(keeps_library(overlap, {4, 2, 2, 2}));
}

}  // namespace
}  // namespace korch
