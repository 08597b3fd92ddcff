// Unit tests for the sampling family: GridSample, AffineGrid, RoiAlign, MaxUnpool, CenterCropPad,
// Col2Im.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/op_registry.h"
#include "op_test_util.h"

namespace korch {
namespace {

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
Tensor i64(std::vector<int64_t> v) {
  int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}
Tensor iota(Shape s, float start = 0.f) {
  Tensor t(DType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = start + static_cast<float>(i);
  return t;
}

void expect_near(const Tensor& t, const std::vector<float>& want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < t.numel(); ++i)
    EXPECT_NEAR(t.get_as_double(i), want[static_cast<size_t>(i)], tol) << "element " << i;
}

// ---------------------------------------------------------------------------------------------
// GridSample

TEST(SamplingOps, GridSampleBilinearIdentityGrid) {
  // align_corners=1: the normalised corners map exactly onto pixel centres.
  Tensor x = iota({1, 1, 2, 3});
  Tensor g = f32({-1, -1, 0, -1, 1, -1, -1, 1, 0, 1, 1, 1}, {1, 2, 3, 2});
  Node n = make_node("GridSample", 2, test::make_attrs({{"align_corners", int64_t{1}}}));
  Tensor y = test::eval_node_checked(n, 16, {&x, &g})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 3}));
  expect_near(y, {0, 1, 2, 3, 4, 5});
}

TEST(SamplingOps, GridSampleMatchesOnnxReference) {
  // test_gridsample_* inputs: X 1x1x3x2 = 0..5, grid 1x2x4x2.
  Tensor x = iota({1, 1, 3, 2});
  Tensor g = f32({-1.0000f, -1.0000f, -0.5000f, -0.5000f, -0.2000f, -0.2000f, 0.0000f, 0.0000f,
                  0.0000f, 0.0000f, -0.2000f, -0.2000f, 0.5000f, 0.5000f, 1.0000f, 1.0000f},
                 {1, 2, 4, 2});
  Node lin = make_node("GridSample", 2, test::make_attrs({{"mode", std::string("linear")}}));
  expect_near(test::eval_node_checked(lin, 20, {&x, &g})[0], {0.0f, 0.5f, 1.7f, 2.5f, 2.5f, 1.7f, 4.5f, 1.25f});
  Node near = make_node("GridSample", 2, test::make_attrs({{"mode", std::string("nearest")}}));
  expect_near(test::eval_node_checked(near, 20, {&x, &g})[0], {0, 0, 2, 2, 2, 2, 5, 0});
  Node cub = make_node("GridSample", 2, test::make_attrs({{"mode", std::string("bicubic")}}));
  expect_near(test::eval_node_checked(cub, 16, {&x, &g})[0], {-0.140625f, 0.3828125f, 1.7555517f, 2.96875f, 2.96875f, 1.7555517f, 5.1445312f, 1.390625f});
  Node border = make_node("GridSample", 2, test::make_attrs({{"padding_mode", std::string("border")}}));
  expect_near(test::eval_node_checked(border, 20, {&x, &g})[0], {0.0f, 0.5f, 1.7f, 2.5f, 2.5f, 1.7f, 4.5f, 5.0f});
  Node refl = make_node("GridSample", 2, test::make_attrs({{"padding_mode", std::string("reflection")}}));
  expect_near(test::eval_node_checked(refl, 20, {&x, &g})[0], {0.0f, 0.5f, 1.7f, 2.5f, 2.5f, 1.7f, 4.5f, 5.0f});
}

TEST(SamplingOps, GridSampleVolumetricNearest) {
  Tensor x = iota({1, 2, 2, 2, 2});
  // (x, y, z) = (+1, -1, +1) with align_corners -> w=1, h=0, d=1.
  Tensor g = f32({1, -1, 1}, {1, 1, 1, 1, 3});
  Node n = make_node("GridSample", 2, test::make_attrs({{"mode", std::string("nearest")}, {"align_corners", int64_t{1}}}));
  Tensor y = test::eval_node_checked(n, 20, {&x, &g})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 2, 1, 1, 1}));
  expect_near(y, {5, 13});
}

TEST(SamplingOps, GridSampleExtremeCoordinatesStayInBounds) {
  Tensor x = iota({1, 1, 3, 2});
  const float nan = std::nanf("");
  Tensor g = f32({nan, 0, 1e30f, -1e30f, -7.3f, 9.1f, 0.2f, nan}, {1, 1, 4, 2});
  for (const char* mode : {"linear", "nearest", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"}) {
      Node n = make_node("GridSample", 2, test::make_attrs({{"mode", std::string(mode)}, {"padding_mode", std::string(pad)}}));
      Tensor y = test::eval_node_checked(n, 20, {&x, &g})[0];
      ASSERT_EQ(y.numel(), 4);
      // (x, y) = (+huge, -huge): all taps outside (zeros -> 0); border nearest clamps to pixel (0, 1).
      if (std::string(pad) == "zeros") {
        EXPECT_EQ(y.data<float>()[1], 0.f) << mode;
      }
      if (std::string(pad) == "border" && std::string(mode) == "nearest") {
        EXPECT_EQ(y.data<float>()[1], 1.f) << mode;
      }
    }
}

TEST(SamplingOps, GridSampleErrors) {
  Tensor x = iota({1, 1, 2, 2, 2});
  Tensor g = f32({0, 0, 0}, {1, 1, 1, 1, 3});
  test::expect_node_error(make_node("GridSample", 2), 16, {&x, &g}, ErrorCode::kInvalid, "must be 4-D");
  Tensor x4 = iota({1, 1, 2, 2});
  Tensor g4 = f32({0, 0}, {1, 1, 1, 2});
  test::expect_node_error(make_node("GridSample", 2, test::make_attrs({{"mode", std::string("linear")}})), 16, {&x4, &g4}, ErrorCode::kInvalid,
               "unknown mode 'linear'");
  test::expect_node_error(make_node("GridSample", 2, test::make_attrs({{"mode", std::string("bilinear")}})), 20, {&x4, &g4},
               ErrorCode::kInvalid, "unknown mode 'bilinear'");
  Tensor g3 = f32({0, 0, 0}, {1, 1, 1, 3});
  test::expect_node_error(make_node("GridSample", 2), 20, {&x4, &g3}, ErrorCode::kInvalid, "last grid dimension must be 2");
  Tensor xi = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {1, 1, 2, 2});
  test::expect_node_error(make_node("GridSample", 2), 20, {&xi, &g4}, ErrorCode::kUnsupported, "i32");
}

// ---------------------------------------------------------------------------------------------
// AffineGrid

TEST(SamplingOps, AffineGridIdentity2D) {
  Tensor theta = f32({1, 0, 0, 0, 1, 0}, {1, 2, 3});
  Tensor size = i64({1, 1, 2, 3});
  Node n = make_node("AffineGrid", 2, test::make_attrs({{"align_corners", int64_t{1}}}));
  Tensor y = test::eval_node_checked(n, 20, {&theta, &size})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 2, 3, 2}));
  expect_near(y, {-1, -1, 0, -1, 1, -1, -1, 1, 0, 1, 1, 1});
  Node n0 = make_node("AffineGrid", 2);
  Tensor y0 = test::eval_node_checked(n0, 20, {&theta, &size})[0];
  expect_near(y0, {-2.f / 3, -0.5f, 0, -0.5f, 2.f / 3, -0.5f, -2.f / 3, 0.5f, 0, 0.5f, 2.f / 3, 0.5f});
}

TEST(SamplingOps, AffineGrid3DTranslation) {
  Tensor theta = f32({1, 0, 0, 0.5f, 0, 1, 0, 0, 0, 0, 2, -1}, {1, 3, 4});
  Tensor size = i64({1, 1, 2, 1, 1});
  Tensor y = test::eval_node_checked(make_node("AffineGrid", 2, test::make_attrs({{"align_corners", int64_t{1}}})), 20, {&theta, &size})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 2, 1, 1, 3}));
  // W=H=1 -> x=y=0 (as PyTorch; onnx.reference gives -1 here); D=2 -> z in {-1, 1}.
  expect_near(y, {0.5f, 0, -3, 0.5f, 0, 1});
}

TEST(SamplingOps, AffineGridErrors) {
  Tensor theta = f32({1, 0, 0, 0, 1, 0}, {1, 2, 3});
  Tensor size5 = i64({1, 1, 2, 2, 2});
  test::expect_node_error(make_node("AffineGrid", 2), 20, {&theta, &size5}, ErrorCode::kInvalid, "theta must have shape (N, 3, 4)");
  Tensor size = i64({1, 1, 2, 2});
  TensorType tt = theta.type(), st = size.type();
  try {
    infer_node(make_node("AffineGrid", 2), 20, {&tt, &st}, {&theta, nullptr});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("constant"), std::string::npos) << e.what();
  }
}

// ---------------------------------------------------------------------------------------------
// RoiAlign

TEST(SamplingOps, RoiAlignAvgHalfPixel) {
  Tensor x = iota({1, 1, 4, 4});
  Tensor rois = f32({0, 0, 4, 4}, {1, 4});
  Tensor bi = i64({0});
  Node n = make_node("RoiAlign", 3, test::make_attrs({{"output_height", int64_t{2}}, {"output_width", int64_t{2}},
                                           {"sampling_ratio", int64_t{1}}}));
  Tensor y = test::eval_node_checked(n, 16, {&x, &rois, &bi})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 2, 2}));
  // half_pixel: samples at (0.5, 0.5) + 2k in continuous coords minus 0.5 -> pixel (0.5, 0.5)...
  expect_near(y, {2.5f, 4.5f, 10.5f, 12.5f});
  // Opset 10: output_half_pixel semantics (no -0.5 shift): samples at pixel (1,1), (1,3), ...
  Tensor y10 = test::eval_node_checked(n, 10, {&x, &rois, &bi})[0];
  expect_near(y10, {5, 7, 13, 15});
}

TEST(SamplingOps, RoiAlignMaxAndErrors) {
  Tensor x = iota({1, 1, 4, 4});
  Tensor rois = f32({0, 0, 4, 4}, {1, 4});
  Tensor bi = i64({0});
  Node n = make_node("RoiAlign", 3, test::make_attrs({{"mode", std::string("max")}, {"sampling_ratio", int64_t{2}},
                                           {"coordinate_transformation_mode", std::string("output_half_pixel")}}));
  Tensor y = test::eval_node_checked(n, 16, {&x, &rois, &bi})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 1, 1}));
  expect_near(y, {15});  // sample (3,3) lies on pixel 15 with weight 1
  Tensor bad = i64({1});
  test::expect_node_error(n, 16, {&x, &rois, &bad}, ErrorCode::kInvalid, "batch index 1 of roi 0 is out of range");
  Tensor rois3 = f32({0, 0, 4}, {1, 3});
  test::expect_node_error(n, 16, {&x, &rois3, &bi}, ErrorCode::kInvalid, "rois must have shape (num_rois, 4)");
  test::expect_node_error(make_node("RoiAlign", 3, test::make_attrs({{"mode", std::string("sum")}})), 16, {&x, &rois, &bi},
               ErrorCode::kInvalid, "unknown mode 'sum'");
}

// ---------------------------------------------------------------------------------------------
// MaxUnpool

TEST(SamplingOps, MaxUnpoolWithAndWithoutOutputShape) {
  Tensor x = f32({5, 6, 7, 8}, {1, 1, 2, 2});
  Tensor ind = Tensor::from_vector<int64_t>({5, 7, 13, 15}, {1, 1, 2, 2});
  Attributes a = test::make_attrs({{"kernel_shape", std::vector<int64_t>{2, 2}}, {"strides", std::vector<int64_t>{2, 2}}});
  Tensor y = test::eval_node_checked(make_node("MaxUnpool", 2, a), 11, {&x, &ind})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 4, 4}));
  expect_near(y, {0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 7, 0, 8});
  Tensor os = i64({1, 1, 5, 5});
  Tensor y5 = test::eval_node_checked(make_node("MaxUnpool", 3, a), 11, {&x, &ind, &os})[0];
  EXPECT_EQ(y5.shape(), (Shape{1, 1, 5, 5}));
  expect_near(y5, {0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0});
  Tensor bad = Tensor::from_vector<int64_t>({5, 7, 13, 16}, {1, 1, 2, 2});
  test::expect_node_error(make_node("MaxUnpool", 2, a), 11, {&x, &bad}, ErrorCode::kInvalid, "index 16 is out of range");
  Tensor small = i64({1, 1, 3, 3});
  test::expect_node_error(make_node("MaxUnpool", 3, a), 11, {&x, &ind, &small}, ErrorCode::kInvalid, "smaller than");
}

// ---------------------------------------------------------------------------------------------
// CenterCropPad

TEST(SamplingOps, CenterCropPadCropAndPad) {
  Tensor x = iota({5, 2});
  Tensor sh = i64({2, 5});
  Tensor y = test::eval_node_checked(make_node("CenterCropPad", 2), 18, {&x, &sh})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  // Rows 1..2 (crop start floor(3/2)=1); columns padded 1 left, 2 right.
  expect_near(y, {0, 2, 3, 0, 0, 0, 4, 5, 0, 0});
  Tensor sh1 = i64({3});
  Tensor y1 = test::eval_node_checked(make_node("CenterCropPad", 2, test::make_attrs({{"axes", std::vector<int64_t>{-1}}})), 18, {&x, &sh1})[0];
  EXPECT_EQ(y1.shape(), (Shape{5, 3}));
  // Odd padding: the extra zero goes to the right.
  EXPECT_EQ(y1.data<float>()[0], 0.f);
  EXPECT_EQ(y1.data<float>()[1], 1.f);
  EXPECT_EQ(y1.data<float>()[2], 0.f);
  test::expect_node_error(make_node("CenterCropPad", 2, test::make_attrs({{"axes", std::vector<int64_t>{2}}})), 18, {&x, &sh1},
               ErrorCode::kInvalid, "axis 2 is out of range");
  test::expect_node_error(make_node("CenterCropPad", 2), 18, {&x, &sh1}, ErrorCode::kInvalid, "shape has 1 values, expected 2");
}

// ---------------------------------------------------------------------------------------------
// Col2Im

TEST(SamplingOps, Col2ImOverlapSums) {
  // 1 channel, image 3x3, block 2x2, stride 1 -> 4 blocks; every column value is 1, so each
  // pixel holds how many blocks cover it.
  Tensor x(DType::kFloat32, {1, 4, 4});
  for (int i = 0; i < 16; ++i) x.data<float>()[i] = 1.f;
  Tensor img = i64({3, 3}), blk = i64({2, 2});
  Tensor y = test::eval_node_checked(make_node("Col2Im", 3), 18, {&x, &img, &blk})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  expect_near(y, {1, 2, 1, 2, 4, 2, 1, 2, 1});
  // With pads 1 on each side and stride 2: blocks (3-1+2)/2+1 = 2 per axis... block 2x2 positions
  // start at -1 and 1; taps in the padding are dropped.
  Tensor x2 = iota({1, 4, 4}, 1.f);
  Tensor y2 = test::eval_node_checked(make_node("Col2Im", 3, test::make_attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}},
                                                 {"strides", std::vector<int64_t>{2, 2}}})),
                  18, {&x2, &img, &blk})[0];
  // Column c_col=k*(L)+l. Pixel (0,0) gets kernel (1,1) of block (0,0): x2[3*4+0] = 13.
  EXPECT_NEAR(y2.data<float>()[0], 13.f, 1e-6);
  Tensor bad = iota({1, 4, 5});
  test::expect_node_error(make_node("Col2Im", 3), 18, {&bad, &img, &blk}, ErrorCode::kInvalid, "does not match the number of blocks");
  Tensor bad2 = iota({1, 5, 4});
  test::expect_node_error(make_node("Col2Im", 3), 18, {&bad2, &img, &blk}, ErrorCode::kInvalid, "not divisible");
}

}  // namespace
}  // namespace korch
