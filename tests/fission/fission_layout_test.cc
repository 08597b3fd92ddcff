#include <set>

#include "fission_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

using Attr = std::pair<std::string, AttrValue>;
Attributes attrs(std::vector<Attr> list) {
  Attributes a;
  for (auto& [k, v] : list) a.set(k, v);
  return a;
}
Attr s(const char* k, const char* v) { return {k, std::string(v)}; }
Attr i(const char* k, int64_t v) { return {k, v}; }
Attr f(const char* k, float v) { return {k, v}; }

Tensor floats(std::vector<float> v) { return Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())}); }
Tensor ints(std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

// Resize at `opset` (>= 11 form: X, roi, scales, sizes; 10: X, scales). Empty scales/sizes/roi are
// passed as empty constants where a later input needs the slot, as exporters do.
Graph resize(int opset, Shape x, std::vector<float> scales, std::vector<int64_t> sizes, Attributes a,
             std::vector<float> roi = {}, DType dt = DType::kFloat32) {
  if (opset < 11) return single_op_graph("Resize", {in(dt, x), cst(floats(scales))}, std::move(a), opset);
  std::vector<OpInput> ins{in(dt, x), roi.empty() ? cst(floats({})) : cst(floats(roi)),
                           scales.empty() ? cst(floats({})) : cst(floats(scales))};
  if (!sizes.empty()) ins.push_back(cst(ints(sizes)));
  return single_op_graph("Resize", ins, std::move(a), opset);
}

int only_ops(const Graph& p, std::set<std::string> allowed) {
  int bad = 0;
  for (const Node& n : p.nodes)
    if (!allowed.count(n.op_type)) {
      ADD_FAILURE() << "unexpected " << n.op_type;
      ++bad;
    }
  return bad;
}

// ---------------------------------------------------------------- nearest: bit-exact Gathers

TEST(FissionLayout, ResizeNearestIsGathersBitExact) {
  for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    for (const char* ct : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"})
      for (std::vector<float> sc : {std::vector<float>{1, 1, 2, 3}, {1, 1, 0.5f, 0.7f}, {1, 1, 1.5f, 2.5f}}) {
        SCOPED_TRACE(std::string(nm) + " " + ct);
        Graph g = resize(13, {1, 2, 5, 6}, sc, {}, attrs({s("mode", "nearest"), s("nearest_mode", nm),
                                                            s("coordinate_transformation_mode", ct)}));
        Graph p = expect_fission_equivalent(g, 0.0);
        EXPECT_EQ(count_op(p, "Gather"), 2);
        only_ops(p, {"Gather"});
      }
}

TEST(FissionLayout, ResizeNearestSizesAndOldModes) {
  // sizes (scale = size / in), tf_half_pixel_for_nn (opset 11 only), opset 10 (asymmetric, floor/ceil).
  expect_fission_equivalent(resize(11, {2, 3, 4, 5}, {}, {2, 3, 7, 3},
                                   attrs({s("coordinate_transformation_mode", "tf_half_pixel_for_nn")})),
                            0.0);
  expect_fission_equivalent(resize(13, {2, 3, 4, 5}, {}, {2, 3, 9, 2}, attrs({})), 0.0);
  Graph up = expect_fission_equivalent(resize(10, {1, 1, 3, 4}, {1, 1, 2, 2}, {}, attrs({})), 0.0);
  EXPECT_EQ(count_op(up, "Gather"), 2);
  expect_fission_equivalent(resize(10, {1, 1, 7, 9}, {1, 1, 0.5f, 0.6f}, {}, attrs({})), 0.0);
  // A middle axis and a leading axis (general case of the interpreter).
  Graph mid = expect_fission_equivalent(resize(13, {3, 4, 5}, {2, 1.5f, 1}, {}, attrs({})), 0.0);
  EXPECT_EQ(count_op(mid, "Gather"), 2);
}

TEST(FissionLayout, ResizeNearestAllDtypesBitExact) {
  for (DType dt : {DType::kFloat64, DType::kFloat16, DType::kInt32, DType::kUInt8, DType::kBool, DType::kInt64}) {
    SCOPED_TRACE(dtype_name(dt));
    expect_fission_equivalent(resize(13, {1, 2, 3, 4}, {1, 1, 2, 1.5f}, {}, attrs({}), {}, dt), 0.0);
  }
}

TEST(FissionLayout, ResizeNearestCropAndResizeExtrapolates) {
  // Parts of the roi lie outside the image: those positions take extrapolation_value (Pad + Gather).
  for (float ev : {0.f, -3.5f}) {
    Graph g = resize(13, {1, 2, 4, 5}, {}, {1, 2, 6, 7},
                     attrs({s("coordinate_transformation_mode", "tf_crop_and_resize"), f("extrapolation_value", ev)}),
                     {0, 0, -0.3f, 0.2f, 1, 1, 1.2f, 0.9f});
    Graph p = expect_fission_equivalent(g, 0.0);
    EXPECT_EQ(count_op(p, "Pad"), 1);  // only H extrapolates
    EXPECT_EQ(count_op(p, "Gather"), 2);
  }
  // Integer dtype: the extrapolation value is stored rounded, as the interpreter does.
  expect_fission_equivalent(resize(13, {1, 1, 4, 4}, {1, 1, 1.5f, 1.5f}, {},
                                   attrs({s("coordinate_transformation_mode", "tf_crop_and_resize"),
                                          f("extrapolation_value", 2.6f)}),
                                   {0, 0, -0.5f, -0.5f, 1, 1, 1.5f, 1.5f}, DType::kInt32),
                            0.0);
}

TEST(FissionLayout, ResizeOpset18AxesPolicyAndSymmetric) {
  // axes attribute (negative too), keep_aspect_ratio_policy, half_pixel_symmetric.
  for (const char* pol : {"stretch", "not_larger", "not_smaller"})
    for (const char* mode : {"nearest", "linear", "cubic"}) {
      SCOPED_TRACE(std::string(pol) + " " + mode);
      Graph g = resize(18, {1, 2, 5, 7}, {}, {9, 4},
                       attrs({{"axes", std::vector<int64_t>{2, -1}}, s("keep_aspect_ratio_policy", pol),
                              s("mode", mode), s("coordinate_transformation_mode", "half_pixel_symmetric")}));
      expect_fission_equivalent(g, std::string(mode) == "nearest" ? 0.0 : 1e-5);
    }
  // Policy with three axes and coprime sizes (the probe reduces the winning ratio).
  expect_fission_equivalent(resize(19, {2, 6, 10, 9}, {}, {7, 13, 11},
                                   attrs({{"axes", std::vector<int64_t>{1, 2, 3}},
                                          s("keep_aspect_ratio_policy", "not_larger"), s("mode", "linear")})),
                            1e-5);
  // axes = [1]: only channels are resized.
  Graph c = expect_fission_equivalent(
      resize(18, {2, 3, 4, 5}, {2.f}, {}, attrs({{"axes", std::vector<int64_t>{1}}, s("mode", "linear")})), 1e-5);
  EXPECT_EQ(count_op(c, "MatMul"), 1);
  EXPECT_EQ(count_op(c, "Reshape"), 2);
}

// ---------------------------------------------------------------- linear / cubic: MatMuls

TEST(FissionLayout, ResizeLinearIsTwoMatMuls) {
  Graph g = resize(13, {2, 3, 6, 8}, {1, 1, 2, 2}, {}, attrs({s("mode", "linear")}));
  Graph p = expect_fission_equivalent(g, 1e-5);
  EXPECT_EQ(count_op(p, "MatMul"), 2);
  only_ops(p, {"MatMul"});
  EXPECT_EQ(primitive_counts(p)["linear"], 2);
}

TEST(FissionLayout, ResizeLinearCubicAllCoordinateModes) {
  for (const char* mode : {"linear", "cubic"})
    for (const char* ct : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"})
      for (std::vector<float> sc : {std::vector<float>{1, 1, 2.5f, 1.7f}, {1, 1, 0.4f, 0.75f}}) {
        SCOPED_TRACE(std::string(mode) + " " + ct);
        Graph g = resize(13, {1, 2, 7, 9}, sc, {}, attrs({s("mode", mode), s("coordinate_transformation_mode", ct)}));
        expect_fission_equivalent(g, 1e-5, 1e3f);
      }
  // cubic_coeff_a and exclude_outside.
  for (int64_t ex : {0, 1})
    expect_fission_equivalent(resize(13, {1, 1, 6, 6}, {1, 1, 1.5f, 0.5f}, {},
                                     attrs({s("mode", "cubic"), f("cubic_coeff_a", -0.5f), i("exclude_outside", ex)})),
                              1e-5);
  // Sizes, opset 10 linear, rank 5 (axes 2..4: one reshaped MatMul).
  expect_fission_equivalent(resize(11, {1, 2, 5, 6}, {}, {1, 2, 8, 3}, attrs({s("mode", "linear")})), 1e-5);
  expect_fission_equivalent(resize(10, {1, 2, 5, 6}, {1, 1, 2, 0.5f}, {}, attrs({s("mode", "linear")})), 1e-5);
  Graph v = expect_fission_equivalent(resize(13, {1, 2, 3, 4, 5}, {1, 1, 2, 2, 2}, {}, attrs({s("mode", "linear")})),
                                      1e-5);
  EXPECT_EQ(count_op(v, "MatMul"), 3);
}

TEST(FissionLayout, ResizeAntialias) {
  for (const char* mode : {"linear", "cubic"})
    for (std::vector<float> sc : {std::vector<float>{1, 1, 0.3f, 0.5f}, {1, 1, 0.6f, 2.f}}) {
      SCOPED_TRACE(mode);
      expect_fission_equivalent(
          resize(18, {1, 2, 12, 10}, sc, {}, attrs({s("mode", mode), i("antialias", 1)})), 1e-5);
    }
}

TEST(FissionLayout, ResizeLinearCropAndResizeExtrapolationIsABias) {
  Graph g = resize(13, {1, 2, 5, 6}, {}, {1, 2, 7, 8},
                   attrs({s("mode", "linear"), s("coordinate_transformation_mode", "tf_crop_and_resize"),
                          f("extrapolation_value", 10.f)}),
                   {0, 0, -0.4f, 0.3f, 1, 1, 1.3f, 0.8f});
  Graph p = expect_fission_equivalent(g, 1e-5);
  EXPECT_EQ(count_op(p, "MatMul"), 2);
  EXPECT_EQ(count_op(p, "Add"), 1);  // only H has extrapolated positions
  EXPECT_EQ(count_op(p, "Expand"), 1);
  // Extrapolation 0: no bias at all.
  Graph z = expect_fission_equivalent(
      resize(13, {1, 1, 5, 6}, {}, {1, 1, 7, 8},
             attrs({s("mode", "cubic"), s("coordinate_transformation_mode", "tf_crop_and_resize")}),
             {0, 0, -0.4f, -0.2f, 1, 1, 1.3f, 1.1f}),
      1e-5);
  EXPECT_EQ(count_op(z, "Add"), 0);
}

TEST(FissionLayout, ResizeLinearSelectionBecomesGather) {
  // align_corners 7 -> 4: source positions 0, 2, 4, 6 exactly; asymmetric 0.5: 0, 2, 4.
  Graph p = expect_fission_equivalent(
      resize(13, {1, 1, 7, 6}, {}, {1, 1, 4, 3}, attrs({s("mode", "linear"), s("coordinate_transformation_mode", "align_corners")})),
      0.0);
  EXPECT_EQ(count_op(p, "Gather"), 1);  // H; W 6 -> 3 with align_corners interpolates
  EXPECT_EQ(count_op(p, "MatMul"), 1);
}

TEST(FissionLayout, ResizeLinearOtherDtypes) {
  // f64 is interpolated in f64 (only summation order differs from the reference).
  Graph d = expect_fission_equivalent(
      resize(13, {1, 2, 5, 4}, {1, 1, 1.7f, 0.6f}, {}, attrs({s("mode", "cubic")}), {}, DType::kFloat64), 1e-12);
  EXPECT_EQ(count_op(d, "Cast"), 0);
  // Scale 2 half_pixel weights are 1/4, 3/4: on f16 or small-integer inputs every product and sum
  // is exact in double in any order, so these must match bit for bit (rounding, saturation).
  for (DType dt : {DType::kFloat16, DType::kUInt8, DType::kInt32}) {
    SCOPED_TRACE(dtype_name(dt));
    Graph p = expect_fission_equivalent(resize(13, {1, 2, 3, 4}, {1, 1, 2, 2}, {}, attrs({s("mode", "linear")}), {}, dt),
                                        0.0);
    EXPECT_EQ(count_op(p, "Cast"), 2);
    EXPECT_EQ(count_op(p, "Round"), dt == DType::kFloat16 ? 0 : 1);
  }
  // Opset 10 has no Round: the magic-constant rounding, ties to even.
  Graph p10 = expect_fission_equivalent(
      resize(10, {1, 1, 3, 4}, {1, 1, 2, 2}, {}, attrs({s("mode", "linear")}), {}, DType::kInt32), 0.0);
  EXPECT_EQ(count_op(p10, "Round"), 0);
  // Upsample linear of int8 (random inputs 0..9) at opsets 7 and 9.
  expect_fission_equivalent(single_op_graph("Upsample", {in(DType::kInt8, {1, 1, 3, 3})},
                                            attrs({s("mode", "linear"), {"scales", std::vector<float>{1, 1, 2, 2}}}), 7),
                            0.0);
  expect_fission_equivalent(
      single_op_graph("Upsample", {in(DType::kInt8, {1, 1, 3, 3}), cst(floats({1, 1, 2, 2}))}, attrs({s("mode", "linear")}), 9),
      0.0);
}

TEST(FissionLayout, ResizeScaleOneIsIdentityAndEmptyOutput) {
  Graph p = expect_fission_equivalent(resize(13, {1, 2, 3, 4}, {1, 1, 1, 1}, {}, attrs({s("mode", "linear")})), 0.0);
  EXPECT_EQ(count_op(p, "MatMul"), 0);
  Graph e = expect_fission_equivalent(resize(13, {1, 2, 3, 4}, {1, 1, 0.2f, 1}, {}, attrs({})), 0.0);
  EXPECT_EQ(e.nodes.size(), 1u);  // the output Identity of the empty constant
}

// ---------------------------------------------------------------- Upsample

TEST(FissionLayout, Upsample) {
  for (int opset : {7, 8}) {
    Graph g = single_op_graph("Upsample", {in({1, 2, 3, 4})},
                              attrs({s("mode", "nearest"), {"scales", std::vector<float>{1, 1, 2, 3}}}), opset);
    Graph p = expect_fission_equivalent(g, 0.0);
    EXPECT_EQ(count_op(p, "Gather"), 2);
    expect_fission_equivalent(single_op_graph("Upsample", {in({1, 2, 3, 4})},
                                              attrs({s("mode", "bilinear"), {"scales", std::vector<float>{1, 1, 2, 1.5f}}}),
                                              opset),
                              1e-5);
  }
  Graph l = expect_fission_equivalent(
      single_op_graph("Upsample", {in({1, 2, 3, 4}), cst(floats({1, 1, 2.5f, 2}))}, attrs({s("mode", "linear")}), 9),
      1e-5);
  EXPECT_EQ(count_op(l, "MatMul"), 2);
}

// ---------------------------------------------------------------- Dropout

TEST(FissionLayout, DropoutIsTheInput) {
  for (int opset : {7, 10, 12, 13, 22}) {
    SCOPED_TRACE(opset);
    Graph g = single_op_graph("Dropout", {in({4, 5, 6})}, attrs({f("ratio", 0.3f)}), opset, 2);
    if (opset >= 12) {
      g = single_op_graph("Dropout", {in({4, 5, 6}), cst(Tensor::scalar<float>(0.3f)),
                                                    cst(Tensor::scalar<bool>(false))}, {}, opset, 2);
    }
    Graph p = expect_fission_equivalent(g, 0.0);
    // The mask: one Expand (Tile at opset 7) of a constant one; the output: the input (an Identity
    // keeps its name).
    EXPECT_EQ(count_op(p, opset >= 8 ? "Expand" : "Tile"), 1);
    EXPECT_EQ(count_op(p, "Identity"), 1);
    EXPECT_EQ(p.nodes.size(), 2u);
  }
  Graph one = single_op_graph("Dropout", {in({5})}, {}, 13);
  EXPECT_EQ(count_op(expect_fission_equivalent(one, 0.0), "Dropout"), 0);
}

TEST(FissionLayout, DropoutFeedingAnotherOp) {
  // Dropout -> Relu: the Relu reads the graph input directly.
  Graph g;
  g.opset = 13;
  ValueId x = g.add_input("x", {DType::kFloat32, {4, 4}});
  ValueId d = g.add_value("d", {DType::kFloat32, {4, 4}});
  ValueId y = g.add_value("y", {DType::kFloat32, {4, 4}});
  Node n1;
  n1.op_type = "Dropout";
  n1.name = "drop";
  n1.inputs = {x};
  n1.outputs = {d};
  g.add_node(n1);
  Node n2;
  n2.op_type = "Relu";
  n2.name = "relu";
  n2.inputs = {d};
  n2.outputs = {y};
  g.add_node(n2);
  g.outputs = {y};
  Graph p = expect_fission_equivalent(g, 0.0);
  ASSERT_EQ(p.nodes.size(), 1u);
  EXPECT_EQ(p.nodes[0].op_type, "Relu");
  EXPECT_EQ(p.nodes[0].inputs[0], p.inputs[0]);
}

// ---------------------------------------------------------------- data-dependent gathers stay opaque

TEST(FissionLayout, GathersWithRuntimeIndicesStayOpaque) {
  Graph g = single_op_graph("Gather", {in({5, 3}), in(DType::kInt64, {4})}, attrs({i("axis", 0)}));
  FissionReport rep;
  Graph p = fission(g, &rep);
  EXPECT_EQ(primitive_counts(p)["opaque"], 1);
  EXPECT_TRUE(rep.kept_opaque.empty());  // opaque primitives are not operators left whole
  Graph c = single_op_graph("Gather", {in({5, 3}), cst(ints({4, 0}))}, attrs({i("axis", 0)}));
  EXPECT_EQ(primitive_counts(fission(c))["layout"], 1);
}

}  // namespace
}  // namespace korch
