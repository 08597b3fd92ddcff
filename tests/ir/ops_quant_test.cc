// Unit tests for the quant family: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/op_registry.h"
#include "op_test_util.h"

namespace korch {
namespace {

Node make_node(const std::string& op, int num_inputs, Attributes attrs = {}, int num_outputs = 1) {
  Node n;
  n.op_type = op;
  n.name = op;
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(100 + i);
  n.attrs = std::move(attrs);
  return n;
}

template <typename T>
std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (T x : t.span<T>()) v.push_back(static_cast<int64_t>(x));
  return v;
}

const std::vector<float> kX = {0, 2, 3, 1000, -254, -1000, 2.5f, -2.5f, 1.5f, 0.5f};

TEST(QuantOps, QuantizeRoundsHalfToEvenAndSaturates) {
  Tensor x = Tensor::from_vector<float>(kX, {10});
  Tensor s = Tensor::scalar<float>(2.f);
  Tensor zu = Tensor::scalar<uint8_t>(128);
  Tensor yu = test::eval_node_checked(make_node("QuantizeLinear", 3), 13, {&x, &s, &zu})[0];
  EXPECT_EQ(ints<uint8_t>(yu), (std::vector<int64_t>{128, 129, 130, 255, 1, 0, 129, 127, 129, 128}));
  Tensor zi = Tensor::scalar<int8_t>(1);
  Tensor yi = test::eval_node_checked(make_node("QuantizeLinear", 3), 10, {&x, &s, &zi})[0];
  EXPECT_EQ(ints<int8_t>(yi), (std::vector<int64_t>{1, 2, 3, 127, -126, -128, 2, 0, 2, 1}));
  // No zero point: uint8 with zero point 0.
  Tensor y0 = test::eval_node_checked(make_node("QuantizeLinear", 2), 13, {&x, &s})[0];
  EXPECT_EQ(y0.dtype(), DType::kUInt8);
  EXPECT_EQ(ints<uint8_t>(y0)[4], 0);
}

TEST(QuantOps, QuantizePerAxisAndInt16) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {1, 2, 3});
  Tensor s = Tensor::from_vector<float>({1, 0.5f}, {2});
  Tensor z = Tensor::from_vector<int16_t>({0, -1000}, {2});
  Tensor y = test::eval_node_checked(make_node("QuantizeLinear", 3), 21, {&x, &s, &z})[0];
  EXPECT_EQ(y.dtype(), DType::kInt16);
  EXPECT_EQ(ints<int16_t>(y), (std::vector<int64_t>{1, 2, 3, -992, -990, -988}));
  // axis=-1 with 3 scales.
  Tensor s3 = Tensor::from_vector<float>({1, 2, 4}, {3});
  Tensor y3 = test::eval_node_checked(make_node("QuantizeLinear", 2, test::make_attrs({{"axis", int64_t{-1}}})), 13, {&x, &s3})[0];
  EXPECT_EQ(ints<uint8_t>(y3), (std::vector<int64_t>{1, 1, 1, 4, 2, 2}));  // 0.75 -> 1, 2.5 -> 2, 1.5 -> 2
}

TEST(QuantOps, QuantizeBlockedAndOutputDtype) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {2, 5});
  Tensor s = Tensor::from_vector<float>({1, 2, 4, 1, 0.5f, 0.25f}, {2, 3});
  Node n = make_node("QuantizeLinear", 2, test::make_attrs({{"axis", int64_t{1}}, {"block_size", int64_t{2}}, {"output_dtype", int64_t{3}}}));
  Tensor y = test::eval_node_checked(n, 21, {&x, &s})[0];
  EXPECT_EQ(y.dtype(), DType::kInt8);
  // Row 0 blocks: [1,2]/1, [3,4]/2, [5]/4 -> 1,2,2,2,1; row 1: [6,7]/1, [8,9]/0.5, [10]/0.25.
  EXPECT_EQ(ints<int8_t>(y), (std::vector<int64_t>{1, 2, 2, 2, 1, 6, 7, 16, 18, 40}));
  Tensor bad = Tensor::from_vector<float>({1, 2, 4, 1}, {2, 2});
  test::expect_node_error(n, 21, {&x, &bad}, ErrorCode::kInvalid, "blocked scale shape");
  Node f8 = make_node("QuantizeLinear", 2, test::make_attrs({{"output_dtype", int64_t{17}}}));
  Tensor s1 = Tensor::scalar<float>(1.f);
  test::expect_node_error(f8, 21, {&x, &s1}, ErrorCode::kUnsupported, "float8e4m3fn");
  Node mismatch = make_node("QuantizeLinear", 3, test::make_attrs({{"output_dtype", int64_t{3}}}));
  Tensor zu = Tensor::scalar<uint8_t>(0);
  test::expect_node_error(mismatch, 21, {&x, &s1, &zu}, ErrorCode::kInvalid, "differs from the zero point type");
}

TEST(QuantOps, QuantizeOpset10RejectsPerAxis) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  Tensor s = Tensor::from_vector<float>({1, 2}, {2});
  test::expect_node_error(make_node("QuantizeLinear", 2), 10, {&x, &s}, ErrorCode::kInvalid, "scale must be a scalar");
  Tensor s3 = Tensor::from_vector<float>({1, 2, 3}, {3});
  test::expect_node_error(make_node("QuantizeLinear", 2), 13, {&x, &s3}, ErrorCode::kInvalid, "per-axis scale must have shape (2)");
}

TEST(QuantOps, DequantizePerTensorPerAxisAndTypes) {
  Tensor x = Tensor::from_vector<uint8_t>({0, 3, 128, 255}, {4});
  Tensor s = Tensor::scalar<float>(2.f);
  Tensor z = Tensor::scalar<uint8_t>(128);
  Tensor y = test::eval_node_checked(make_node("DequantizeLinear", 3), 10, {&x, &s, &z})[0];
  EXPECT_EQ(y.dtype(), DType::kFloat32);
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{-256, -250, 0, 254}));
  Tensor xi = Tensor::from_vector<int32_t>({-100000, 7}, {2});
  Tensor sp = Tensor::from_vector<float>({0.5f, 3.f}, {2});
  Tensor yi = test::eval_node_checked(make_node("DequantizeLinear", 2, test::make_attrs({{"axis", int64_t{0}}})), 13, {&xi, &sp})[0];
  EXPECT_EQ(yi.to_float_vector(), (std::vector<float>{-50000, 21}));
  Tensor x16 = Tensor::from_vector<int16_t>({-32768, 32767}, {2});
  Tensor h = Tensor::from_vector<Float16>({Float16(0.5f)}, {});
  Tensor y16 = test::eval_node_checked(make_node("DequantizeLinear", 2), 21, {&x16, &h})[0];
  EXPECT_EQ(y16.dtype(), DType::kFloat16);
  EXPECT_EQ(y16.to_float_vector(), (std::vector<float>{-16384, 16384}));  // 16383.5 rounds to f16 16384
  // A [1]-shaped zero point with a scalar scale is per-tensor too.
  Tensor z1 = Tensor::from_vector<uint8_t>({3}, {1});
  EXPECT_EQ(test::eval_node_checked(make_node("DequantizeLinear", 3), 13, {&x, &s, &z1})[0].to_float_vector(),
            (std::vector<float>{-6, 0, 250, 504}));
  Tensor z2 = Tensor::from_vector<uint8_t>({3, 4}, {2});
  test::expect_node_error(make_node("DequantizeLinear", 3), 13, {&x, &s, &z2}, ErrorCode::kInvalid,
               "does not match the per-tensor scale");
  Tensor zbad = Tensor::scalar<int8_t>(0);
  test::expect_node_error(make_node("DequantizeLinear", 3), 13, {&x, &s, &zbad}, ErrorCode::kInvalid, "zero point type i8");
}

TEST(QuantOps, DequantizeBlocked) {
  Tensor x = Tensor::from_vector<int8_t>({1, 2, 3, 4, 5, 6}, {1, 6});
  Tensor s = Tensor::from_vector<float>({1, 10, 100}, {1, 3});
  Tensor z = Tensor::from_vector<int8_t>({0, 1, 2}, {1, 3});
  Tensor y = test::eval_node_checked(make_node("DequantizeLinear", 3, test::make_attrs({{"axis", int64_t{1}}, {"block_size", int64_t{2}}})), 21,
                 {&x, &s, &z})[0];
  EXPECT_EQ(y.to_float_vector(), (std::vector<float>{1, 2, 20, 30, 300, 400}));
  // block_size is ignored before opset 21: a (1, 3) scale is then neither per-tensor nor per-axis.
  test::expect_node_error(make_node("DequantizeLinear", 3, test::make_attrs({{"axis", int64_t{1}}, {"block_size", int64_t{2}}})), 19,
               {&x, &s, &z}, ErrorCode::kInvalid, "per-axis scale");
}

TEST(QuantOps, DynamicQuantizeLinear) {
  Tensor x = Tensor::from_vector<float>({1, 2.1f, -3, 0, 5.5f, -7.7f}, {2, 3});
  Node n = make_node("DynamicQuantizeLinear", 1, {}, 3);
  std::vector<Tensor> out = test::eval_node_checked(n, 11, {&x});
  EXPECT_EQ(ints<uint8_t>(out[0]), (std::vector<int64_t>{168, 190, 91, 149, 255, 0}));
  EXPECT_NEAR(out[1].data<float>()[0], 0.0517647f, 1e-7);
  EXPECT_EQ(out[2].data<uint8_t>()[0], 149);
  // All-positive input: the range still includes 0, zero point 0.
  Tensor p = Tensor::from_vector<float>({0.5f, 255.f}, {2});
  std::vector<Tensor> op = test::eval_node_checked(n, 11, {&p});
  EXPECT_EQ(ints<uint8_t>(op[0]), (std::vector<int64_t>{0, 255}));
  EXPECT_EQ(op[2].data<uint8_t>()[0], 0);
  Tensor d = Tensor::from_vector<double>({1.0}, {1});
  test::expect_node_error(n, 11, {&d}, ErrorCode::kUnsupported, "f64");
}

}  // namespace
}  // namespace korch
