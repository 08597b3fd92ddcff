// Unit tests for the resize family: Resize (opsets 10..19+) and Upsample (7, 9).
#include <gtest/gtest.h>

#include <cmath>

#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using test::error_code;
using test::make_attrs;

Node make_node(const std::string& op, int num_inputs, Attributes attrs = {}) {
  Node n;
  n.op_type = op;
  n.name = op;
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(i);
  n.outputs = {100};
  n.attrs = std::move(attrs);
  return n;
}

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }
Tensor i64(std::vector<int64_t> v) { return test::vec1(v); }
Tensor scales(std::vector<float> v) { return test::vec1(v); }

Tensor iota(Shape s, float start = 1.f) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

// Resize-19 with (X, roi omitted, scales, sizes).
Tensor resize(const Tensor& x, const Tensor* sc, const Tensor* sz, Attributes a = {}, int opset = 19,
              const Tensor* roi = nullptr) {
  Node n = make_node("Resize", 4, std::move(a));
  return eval_node(n, opset, {&x, roi, sc, sz}).at(0);
}

void expect_near(const Tensor& t, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_NEAR(t.get_as_double(i), want[static_cast<size_t>(i)], tol) << "element " << i;
}

TEST(ResizeOps, NearestUpsample2xNCHW) {
  Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor sc = scales({1, 1, 2, 2});
  Tensor y = resize(x, &sc, nullptr);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  expect_near(y, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
}

TEST(ResizeOps, BilinearHalfPixel) {
  Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor sc = scales({1, 1, 2, 2});
  Tensor y = resize(x, &sc, nullptr, make_attrs({{"mode", std::string("linear")}}));
  expect_near(y, {1, 1.25, 1.75, 2, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3, 3.25, 3.75, 4});
}

TEST(ResizeOps, BicubicMatchesOnnxReference) {
  Tensor x = iota({1, 1, 4, 4});
  Tensor sc = scales({1, 1, 2, 2});
  Tensor y = resize(x, &sc, nullptr, make_attrs({{"mode", std::string("cubic")}}));
  ASSERT_EQ(y.shape(), (Shape{1, 1, 8, 8}));
  std::vector<float> row0 = {0.47265625f, 0.76953125f, 1.24609375f, 1.875f, 2.28125f, 2.91015625f, 3.38671875f, 3.68359375f};
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(y.data<float>()[i], row0[static_cast<size_t>(i)], 1e-5);
  EXPECT_NEAR(y.data<float>()[3 * 8 + 7], 9.29296875, 1e-5);
}

TEST(ResizeOps, AntialiasLinearDownsample) {
  Tensor x = iota({1, 1, 4, 4});
  Tensor sc = scales({1, 1, 0.6f, 0.6f});
  Tensor y = resize(x, &sc, nullptr, make_attrs({{"mode", std::string("linear")}, {"antialias", int64_t{1}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  expect_near(y, {2.875f, 4.5f, 9.375f, 11.f}, 1e-4);
}

TEST(ResizeOps, OutputSizeIsFloorOfInputTimesScale) {
  Tensor x = iota({1, 1, 3, 4});
  Tensor sc = scales({1, 1, 1.5f, 0.6f});  // 4.5 -> 4, 2.4 -> 2
  EXPECT_EQ(resize(x, &sc, nullptr).shape(), (Shape{1, 1, 4, 2}));
  // Types only (infer) agree with eval.
  Node n = make_node("Resize", 4);
  TensorType xt = x.type(), st = sc.type();
  auto types = infer_node(n, 19, {&xt, nullptr, &st, nullptr}, {nullptr, nullptr, &sc, nullptr});
  EXPECT_EQ(types.at(0).shape, (Shape{1, 1, 4, 2}));
}

TEST(ResizeOps, AlignCornersAndRankTwo) {
  Tensor x = iota({2, 4});
  Tensor sc = scales({1.5f, 0.5f});
  Tensor y = resize(x, &sc, nullptr,
                    make_attrs({{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string("align_corners")}}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  expect_near(y, {1, 4, 3, 6, 5, 8});
}

TEST(ResizeOps, SizesWithKeepAspectRatioAndAxes) {
  Tensor x = iota({1, 1, 4, 4});
  Tensor sz = i64({7, 8});
  Attributes a = make_attrs({{"axes", std::vector<int64_t>{2, 3}}, {"keep_aspect_ratio_policy", std::string("not_larger")}});
  EXPECT_EQ(resize(x, nullptr, &sz, a).shape(), (Shape{1, 1, 7, 7}));
  a.set("keep_aspect_ratio_policy", std::string("not_smaller"));
  EXPECT_EQ(resize(x, nullptr, &sz, a).shape(), (Shape{1, 1, 8, 8}));
  // Reversed axes order: sizes follow the axes list.
  Tensor sz2 = i64({2, 6});
  Tensor y = resize(x, nullptr, &sz2, make_attrs({{"axes", std::vector<int64_t>{3, 2}}}));
  EXPECT_EQ(y.shape(), (Shape{1, 1, 6, 2}));
}

TEST(ResizeOps, NearestModes) {
  Tensor x = f32({10, 20, 30}, {3});
  Tensor sz = i64({5});
  // asymmetric: x_orig = y * 0.6 -> 0, 0.6, 1.2, 1.8, 2.4
  auto run = [&](const char* mode) {
    return resize(x, nullptr, &sz,
                  make_attrs({{"coordinate_transformation_mode", std::string("asymmetric")}, {"nearest_mode", std::string(mode)}}))
        .to_float_vector();
  };
  EXPECT_EQ(run("floor"), (std::vector<float>{10, 10, 20, 20, 30}));
  EXPECT_EQ(run("ceil"), (std::vector<float>{10, 20, 30, 30, 30}));
  EXPECT_EQ(run("round_prefer_floor"), (std::vector<float>{10, 20, 20, 30, 30}));
}

TEST(ResizeOps, TfCropAndResizeExtrapolation) {
  Tensor x = iota({1, 1, 4, 4});
  Tensor roi = f32({0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f}, {8});
  Tensor sz = i64({1, 1, 3, 3});
  Tensor y = resize(x, nullptr, &sz,
                    make_attrs({{"mode", std::string("linear")},
                           {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                           {"extrapolation_value", 10.f}}),
                    19, &roi);
  expect_near(y, {7.6f, 10, 10, 12.4f, 10, 10, 10, 10, 10});
}

// The general (axis-by-axis) path must agree with the fused 2-D path: resizing axis 0 and then
// the last two axes separately equals resizing all three at once.
TEST(ResizeOps, GeneralPathMatchesSeparable) {
  Tensor x(DType::kFloat32, {2, 3, 5, 7});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = std::sin(0.37f * static_cast<float>(i));
  Attributes a = make_attrs({{"mode", std::string("cubic")}});
  Tensor all = scales({1.5f, 1, 1.6f, 0.7f});
  Tensor s0 = scales({1.5f, 1, 1, 1});
  Tensor s23 = scales({1, 1, 1.6f, 0.7f});
  Tensor y = resize(x, &all, nullptr, a);
  Tensor t = resize(x, &s0, nullptr, a);
  Tensor y2 = resize(t, &s23, nullptr, a);
  ASSERT_EQ(y.shape(), (Shape{3, 3, 8, 4}));
  ASSERT_EQ(y2.shape(), y.shape());
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_NEAR(y.data<float>()[i], y2.data<float>()[i], 1e-5);
  // Nearest through the general gather path.
  Tensor yn = resize(x, &all, nullptr);
  Tensor yn2 = resize(resize(x, &s0, nullptr), &s23, nullptr);
  EXPECT_TRUE(yn == yn2);
}

TEST(ResizeOps, IntegerLinearRoundsAndKeepsType) {
  Tensor x = Tensor::from_vector<uint8_t>({0, 255, 10, 11}, {2, 2});
  Tensor sc = scales({1, 2});
  Tensor y = resize(x, &sc, nullptr, make_attrs({{"mode", std::string("linear")}}));
  EXPECT_EQ(y.dtype(), DType::kUInt8);
  // half_pixel on [0, 255]: 0, 63.75, 191.25, 255 -> rounded.
  EXPECT_EQ(y.to_int_vector(), (std::vector<int64_t>{0, 64, 191, 255, 10, 10, 11, 11}));
}

TEST(ResizeOps, Opset10AndOpset11Inputs) {
  Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor sc = scales({1, 1, 2, 2});
  Node n10 = make_node("Resize", 2);
  Tensor y10 = eval_node(n10, 10, {&x, &sc}).at(0);
  expect_near(y10, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  // Opset 11: empty scales + sizes.
  Tensor empty_scales(DType::kFloat32, {0});
  Tensor empty_roi(DType::kFloat32, {0});
  Tensor sz = i64({1, 1, 4, 4});
  Node n11 = make_node("Resize", 4);
  EXPECT_TRUE(eval_node(n11, 11, {&x, &empty_roi, &empty_scales, &sz}).at(0) == y10);
}

TEST(ResizeOps, Upsample) {
  Tensor x = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  Node n7 = make_node("Upsample", 1, make_attrs({{"scales", std::vector<float>{1, 1, 2, 3}}}));
  Tensor y = eval_node(n7, 7, {&x}).at(0);
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 6}));
  expect_near(y, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  // Opset 9 linear (asymmetric): [1, 2] x2 -> 1, 1.5, 2, 2.
  Tensor x1 = f32({1, 2}, {1, 2});
  Tensor sc = scales({1, 2});
  Node n9 = make_node("Upsample", 2, make_attrs({{"mode", std::string("linear")}}));
  expect_near(eval_node(n9, 9, {&x1, &sc}).at(0), {1, 1.5, 2, 2});
  // Scales below 1 are invalid for Upsample; Upsample is gone after opset 9.
  Tensor bad = scales({1, 0.5f});
  try {
    eval_node(n9, 9, {&x1, &bad});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalid);
    EXPECT_NE(std::string(e.what()).find(">= 1"), std::string::npos) << e.what();
  }
  try {
    eval_node(n9, 10, {&x1, &sc});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

TEST(ResizeOps, Errors) {
  Tensor x = iota({1, 1, 2, 2});
  Tensor sc = scales({1, 1, 2, 2});
  Tensor sz = i64({1, 1, 4, 4});
  std::string msg;
  EXPECT_EQ(error_code([&] { resize(x, &sc, &sz); }, &msg), ErrorCode::kInvalid);
  EXPECT_NE(msg.find("only one of"), std::string::npos) << msg;
  EXPECT_EQ(error_code([&] { resize(x, nullptr, nullptr); }), ErrorCode::kInvalid);
  Tensor sc3 = scales({1, 2, 2});
  EXPECT_EQ(error_code([&] { resize(x, &sc3, nullptr); }, &msg), ErrorCode::kInvalid);
  EXPECT_NE(msg.find("expected 4"), std::string::npos) << msg;
  Tensor neg = scales({1, 1, -2, 2});
  EXPECT_EQ(error_code([&] { resize(x, &neg, nullptr); }), ErrorCode::kInvalid);
  EXPECT_EQ(error_code([&] { resize(x, &sc, nullptr, make_attrs({{"mode", std::string("bogus")}})); }, &msg), ErrorCode::kInvalid);
  EXPECT_NE(msg.find("bogus"), std::string::npos);
  EXPECT_EQ(error_code([&] { resize(x, &sc, nullptr, make_attrs({{"coordinate_transformation_mode", std::string("x")}})); }),
            ErrorCode::kInvalid);
  EXPECT_EQ(error_code([&] { resize(x, &sc, nullptr, make_attrs({{"axes", std::vector<int64_t>{2, 9}}})); }), ErrorCode::kInvalid);
  // Non-constant scales: the standard compile-time-constant error.
  Node n = make_node("Resize", 4);
  TensorType xt = x.type(), st = sc.type();
  EXPECT_EQ(error_code([&] { infer_node(n, 19, {&xt, nullptr, &st, nullptr}, {nullptr, nullptr, nullptr, nullptr}); }, &msg),
            ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("compile-time constant"), std::string::npos) << msg;
}

}  // namespace
}  // namespace korch
