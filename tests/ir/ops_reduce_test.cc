// Unit tests for the reduce family: Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax/Hardmax, CumSum, TopK.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using test::error_message;
using test::eval_op;
using test::make_attrs;
using test::make_node;

Tensor iota_f(Shape s, float start = 0.f, float step = 1.f) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + step * static_cast<float>(i);
  return Tensor::from_vector<float>(v, std::move(s));
}

Tensor axes(std::vector<int64_t> v) { return test::vec1(v); }

void expect_near(const Tensor& got, const std::vector<float>& want, float tol = 1e-5f) {
  std::vector<float> g = got.to_float_vector();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol * std::max(1.f, std::fabs(want[i]))) << "at " << i;
}

// --- Reduce* ---------------------------------------------------------------------------------

TEST(ReduceOps, SumAxesAttributeBeforeOpset13AndInputAfter) {
  Tensor x = iota_f({2, 3});
  Tensor a = eval_op("ReduceSum", 11, {x}, make_attrs({{"axes", std::vector<int64_t>{1}}}))[0];
  EXPECT_EQ(a.shape(), (Shape{2, 1}));
  expect_near(a, {3, 12});
  Tensor b = eval_op("ReduceSum", 13, {x, axes({0})}, make_attrs({{"keepdims", int64_t{0}}}))[0];
  EXPECT_EQ(b.shape(), (Shape{3}));
  expect_near(b, {3, 5, 7});
  // ReduceMean keeps axes as an attribute until opset 18.
  Tensor c = eval_op("ReduceMean", 17, {x}, make_attrs({{"axes", std::vector<int64_t>{-1}}, {"keepdims", int64_t{0}}}))[0];
  expect_near(c, {1, 4});
  Tensor d = eval_op("ReduceMean", 18, {x, axes({-1})}, make_attrs({{"keepdims", int64_t{0}}}))[0];
  expect_near(d, {1, 4});
}

TEST(ReduceOps, EmptyAxesReduceAllOrNoop) {
  Tensor x = iota_f({2, 3});
  Tensor all = eval_op("ReduceSum", 13, {x})[0];
  EXPECT_EQ(all.shape(), (Shape{1, 1}));
  expect_near(all, {15});
  Tensor all2 = eval_op("ReduceMax", 18, {x, axes({})}, make_attrs({{"keepdims", int64_t{0}}}))[0];
  EXPECT_EQ(all2.shape(), (Shape{}));
  expect_near(all2, {5});
  Tensor noop = eval_op("ReduceSum", 13, {x, axes({})}, make_attrs({{"noop_with_empty_axes", int64_t{1}}}))[0];
  EXPECT_EQ(noop.shape(), (Shape{2, 3}));
  expect_near(noop, {0, 1, 2, 3, 4, 5});
  // Before opset 13 noop_with_empty_axes does not exist: empty means reduce all.
  Tensor old = eval_op("ReduceSum", 11, {x}, make_attrs({{"noop_with_empty_axes", int64_t{1}}}))[0];
  expect_near(old, {15});
}

TEST(ReduceOps, AllKindsOnMiddleAxis) {
  Tensor x = Tensor::from_vector<float>({1, -2, 3, 4, -5, 6, 0.5f, 2, -1, 3, 1, 1}, {2, 3, 2});
  auto red = [&](const char* op) { return eval_op(op, 18, {x, axes({1})}, make_attrs({{"keepdims", int64_t{0}}}))[0]; };
  expect_near(red("ReduceSum"), {1 + 3 - 5, -2 + 4 + 6, 0.5f - 1 + 1, 2 + 3 + 1});
  expect_near(red("ReduceMean"), {-1.f / 3, 8.f / 3, 0.5f / 3, 2});
  expect_near(red("ReduceMax"), {3, 6, 1, 3});
  expect_near(red("ReduceMin"), {-5, -2, -1, 1});
  expect_near(red("ReduceProd"), {-15, -48, -0.5f, 6});
  expect_near(red("ReduceL1"), {9, 12, 2.5f, 6});
  expect_near(red("ReduceL2"), {std::sqrt(35.f), std::sqrt(56.f), std::sqrt(2.25f), std::sqrt(14.f)});
  expect_near(red("ReduceSumSquare"), {35, 56, 2.25f, 14});
  Tensor pos = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2});
  expect_near(eval_op("ReduceLogSum", 18, {pos, axes({1})})[0], {std::log(3.f), std::log(7.f)});
  expect_near(eval_op("ReduceLogSumExp", 18, {pos, axes({0})})[0],
              {std::log(std::exp(1.f) + std::exp(3.f)), std::log(std::exp(2.f) + std::exp(4.f))});
}

TEST(ReduceOps, LogSumExpLargeValuesDoNotOverflow) {
  Tensor x = Tensor::from_vector<float>({1000, 1000, -1000, -1000}, {2, 2});
  expect_near(eval_op("ReduceLogSumExp", 18, {x, axes({1})})[0], {1000 + std::log(2.f), -1000 + std::log(2.f)});
}

// Reduction over non-adjacent axes (generic path) and over a leading block (strided path),
// checked against a naive loop.
TEST(ReduceOps, NonContiguousAxesMatchNaiveLoop) {
  Tensor x = iota_f({3, 4, 5, 2}, -7.f, 0.37f);
  const float* p = x.data<float>();
  Tensor g = eval_op("ReduceSum", 13, {x, axes({0, 2})}, make_attrs({{"keepdims", int64_t{0}}}))[0];
  ASSERT_EQ(g.shape(), (Shape{4, 2}));
  std::vector<float> want(8, 0.f);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 5; ++c)
        for (int d = 0; d < 2; ++d) want[static_cast<size_t>(b * 2 + d)] += p[((a * 4 + b) * 5 + c) * 2 + d];
  expect_near(g, want, 1e-4f);

  Tensor s = eval_op("ReduceMax", 18, {x, axes({0, 1})})[0];
  ASSERT_EQ(s.shape(), (Shape{1, 1, 5, 2}));
  std::vector<float> want2(10, -1e9f);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 4; ++b)
      for (int r = 0; r < 10; ++r) want2[static_cast<size_t>(r)] = std::max(want2[static_cast<size_t>(r)], p[(a * 4 + b) * 10 + r]);
  expect_near(s, want2);
}

TEST(ReduceOps, IntegerAndBoolTypes) {
  Tensor xi = Tensor::from_vector<int64_t>({(int64_t{1} << 60), 1, -3, 7}, {2, 2});
  Tensor s = eval_op("ReduceSum", 13, {xi, axes({1})})[0];
  EXPECT_EQ(s.dtype(), DType::kInt64);
  EXPECT_EQ(s.data<int64_t>()[0], (int64_t{1} << 60) + 1);  // exact, no double rounding
  EXPECT_EQ(s.data<int64_t>()[1], 4);
  Tensor b = Tensor::from_vector<bool>({true, false, false, false}, {2, 2});
  Tensor mx = eval_op("ReduceMax", 20, {b, axes({1})})[0];
  EXPECT_EQ(mx.dtype(), DType::kBool);
  EXPECT_TRUE(mx.data<bool>()[0]);
  EXPECT_FALSE(mx.data<bool>()[1]);
  std::string err = error_message([&] { eval_op("ReduceSum", 13, {b, axes({1})}); });
  EXPECT_NE(err.find("element type bool is not supported"), std::string::npos) << err;
}

TEST(ReduceOps, EmptyReductionGivesIdentity) {
  Tensor x(DType::kFloat32, {2, 0, 3});
  Tensor s = eval_op("ReduceSum", 13, {x, axes({1})})[0];
  EXPECT_EQ(s.shape(), (Shape{2, 1, 3}));
  expect_near(s, std::vector<float>(6, 0.f));
  expect_near(eval_op("ReduceProd", 18, {x, axes({1})})[0], std::vector<float>(6, 1.f));
  Tensor mx = eval_op("ReduceMax", 18, {x, axes({1})})[0];
  EXPECT_TRUE(std::isinf(mx.data<float>()[0]) && mx.data<float>()[0] < 0);
  Tensor mn = eval_op("ReduceMin", 18, {x, axes({1})})[0];
  EXPECT_TRUE(std::isinf(mn.data<float>()[0]) && mn.data<float>()[0] > 0);
}

TEST(ReduceOps, Errors) {
  Tensor x = iota_f({2, 3});
  EXPECT_NE(error_message([&] { eval_op("ReduceSum", 13, {x, axes({2})}); }).find("axis 2 is out of range for rank 2"),
            std::string::npos);
  EXPECT_NE(error_message([&] { eval_op("ReduceSum", 13, {x, axes({1, -1})}); }).find("repeated"), std::string::npos);
  EXPECT_NE(error_message([&] { eval_op("ReduceMean", 18, {x}, make_attrs({{"axes", std::vector<int64_t>{0}}})); })
                .find("is an input, not an attribute"),
            std::string::npos);
  // Non-constant axes: the output shape is unknown.
  Node n = make_node("ReduceSum", 2, 1);
  TensorType xt{DType::kFloat32, {2, 3}}, at{DType::kInt64, {1}};
  try {
    infer_node(n, 13, {&xt, &at}, {nullptr, nullptr});
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_EQ(err.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(err.what()).find("axes (input 1) must be a compile-time constant"), std::string::npos);
  }
  // ...but an empty (non-constant) axes tensor is known to be empty.
  TensorType empty{DType::kInt64, {0}};
  EXPECT_EQ(infer_node(n, 13, {&xt, &empty}, {nullptr, nullptr})[0].shape, (Shape{1, 1}));
}

// --- ArgMax / ArgMin ---------------------------------------------------------------------------

TEST(ArgOps, TiesAndSelectLastIndex) {
  Tensor x = Tensor::from_vector<float>({2, 5, 5, 1, 1, 0}, {2, 3});
  Tensor a = eval_op("ArgMax", 13, {x}, make_attrs({{"axis", int64_t{1}}}))[0];
  EXPECT_EQ(a.shape(), (Shape{2, 1}));
  EXPECT_EQ(a.to_int_vector(), (std::vector<int64_t>{1, 0}));
  Tensor b = eval_op("ArgMax", 13, {x}, make_attrs({{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}))[0];
  EXPECT_EQ(b.shape(), (Shape{2}));
  EXPECT_EQ(b.to_int_vector(), (std::vector<int64_t>{2, 1}));
  Tensor c = eval_op("ArgMin", 13, {x}, make_attrs({{"axis", int64_t{0}}, {"keepdims", int64_t{0}}}))[0];
  EXPECT_EQ(c.to_int_vector(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_NE(error_message([&] { eval_op("ArgMax", 13, {x}, make_attrs({{"axis", int64_t{2}}})); }).find("out of range"),
            std::string::npos);
}

// --- Softmax family ----------------------------------------------------------------------------

TEST(SoftmaxOps, LastAxisAndLargeValues) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 10000, 10001, 10002}, {2, 3});
  float e0 = 1.f / (1 + std::exp(1.f) + std::exp(2.f));
  std::vector<float> want = {e0, e0 * std::exp(1.f), e0 * std::exp(2.f), e0, e0 * std::exp(1.f), e0 * std::exp(2.f)};
  expect_near(eval_op("Softmax", 13, {x})[0], want);
  std::vector<float> lwant;
  for (float w : want) lwant.push_back(std::log(w));
  expect_near(eval_op("LogSoftmax", 13, {x})[0], lwant);
}

TEST(SoftmaxOps, MiddleAxisOpset13VersusCoercedOpset11) {
  Tensor x = iota_f({2, 2, 2}, 0.f, 0.5f);
  // Opset 13, axis 1: each pair (x[o,0,i], x[o,1,i]) differs by 1.
  float lo = 1.f / (1 + std::exp(1.f)), hi = 1.f - lo;
  expect_near(eval_op("Softmax", 13, {x}, make_attrs({{"axis", int64_t{1}}}))[0], {lo, lo, hi, hi, lo, lo, hi, hi});
  // Opset 11, axis 1: coerced to [2, 4], softmax over the 4 trailing elements of each batch.
  std::vector<float> w(4);
  float s = 0;
  for (int i = 0; i < 4; ++i) s += (w[static_cast<size_t>(i)] = std::exp(0.5f * static_cast<float>(i)));
  std::vector<float> want;
  for (int b = 0; b < 2; ++b)
    for (float v : w) want.push_back(v / s);
  expect_near(eval_op("Softmax", 11, {x}, make_attrs({{"axis", int64_t{1}}}))[0], want);
  // Opset 11 default axis is 1; opset 13 default is -1.
  expect_near(eval_op("Softmax", 11, {x})[0], want);
}

TEST(SoftmaxOps, Hardmax) {
  Tensor x = Tensor::from_vector<float>({3, 1, 3, 0, 2, 5}, {2, 3});
  expect_near(eval_op("Hardmax", 13, {x})[0], {1, 0, 0, 0, 0, 1});
  expect_near(eval_op("Hardmax", 13, {x}, make_attrs({{"axis", int64_t{0}}}))[0], {1, 0, 0, 0, 1, 1});
  // Opset 11 with axis 0 coerces to [1, 6]: one hot over all elements (first max wins).
  expect_near(eval_op("Hardmax", 11, {x}, make_attrs({{"axis", int64_t{0}}}))[0], {0, 0, 0, 0, 0, 1});
}

TEST(SoftmaxOps, Errors) {
  Tensor xi = Tensor::from_vector<int32_t>({1, 2}, {2});
  std::string err = error_message([&] { eval_op("Softmax", 13, {xi}); });
  EXPECT_NE(err.find("element type i32 is not supported"), std::string::npos) << err;
  EXPECT_NE(error_message([&] { eval_op("Softmax", 13, {iota_f({2, 2})}, make_attrs({{"axis", int64_t{2}}})); }).find("out of range"),
            std::string::npos);
}

// --- CumSum ------------------------------------------------------------------------------------

TEST(CumSumOps, ExclusiveReverseAndAxis) {
  Tensor x = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor ax1 = Tensor::scalar<int32_t>(1), ax0 = Tensor::scalar<int64_t>(-2);
  expect_near(eval_op("CumSum", 14, {x, ax1})[0], {1, 3, 6, 4, 9, 15});
  expect_near(eval_op("CumSum", 14, {x, ax0})[0], {1, 2, 3, 5, 7, 9});
  expect_near(eval_op("CumSum", 14, {x, ax1}, make_attrs({{"exclusive", int64_t{1}}}))[0], {0, 1, 3, 0, 4, 9});
  expect_near(eval_op("CumSum", 14, {x, ax1}, make_attrs({{"reverse", int64_t{1}}}))[0], {6, 5, 3, 15, 11, 6});
  expect_near(eval_op("CumSum", 14, {x, ax1}, make_attrs({{"reverse", int64_t{1}}, {"exclusive", int64_t{1}}}))[0],
              {5, 3, 0, 11, 6, 0});
  Tensor xi = Tensor::from_vector<int32_t>({1, 2, 3}, {3});
  EXPECT_EQ(eval_op("CumSum", 14, {xi, Tensor::scalar<int32_t>(0)})[0].to_int_vector(), (std::vector<int64_t>{1, 3, 6}));
  EXPECT_NE(error_message([&] { eval_op("CumSum", 14, {x, Tensor::scalar<int32_t>(2)}); }).find("out of range"), std::string::npos);
}

// --- TopK --------------------------------------------------------------------------------------

TEST(TopKOps, LargestSmallestTiesAndOpsets) {
  Tensor x = Tensor::from_vector<float>({3, 1, 3, 2, 0, 5, 5, 1}, {2, 4});
  Tensor k = Tensor::from_vector<int64_t>({2}, {1});
  auto out = eval_op("TopK", 11, {x, k}, {}, 2);
  EXPECT_EQ(out[0].shape(), (Shape{2, 2}));
  expect_near(out[0], {3, 3, 5, 5});
  EXPECT_EQ(out[1].to_int_vector(), (std::vector<int64_t>{0, 2, 1, 2}));  // ties: lower index first
  auto small = eval_op("TopK", 11, {x, k}, make_attrs({{"largest", int64_t{0}}}), 2);
  expect_near(small[0], {1, 2, 0, 1});
  EXPECT_EQ(small[1].to_int_vector(), (std::vector<int64_t>{1, 3, 0, 3}));
  // Opset 1..9: k is an attribute.
  auto v1 = eval_op("TopK", 9, {x}, make_attrs({{"k", int64_t{1}}, {"axis", int64_t{0}}}), 2);
  expect_near(v1[0], {3, 5, 5, 2});
  EXPECT_EQ(v1[1].to_int_vector(), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(TopKOps, Errors) {
  Tensor x = iota_f({2, 3});
  EXPECT_NE(error_message([&] { eval_op("TopK", 11, {x, Tensor::from_vector<int64_t>({4}, {1})}, {}, 2); }).find("out of range"),
            std::string::npos);
  Node n = make_node("TopK", 2, 2);
  TensorType xt{DType::kFloat32, {2, 3}}, kt{DType::kInt64, {1}};
  std::string err = error_message([&] { infer_node(n, 11, {&xt, &kt}, {nullptr, nullptr}); });
  EXPECT_NE(err.find("k (input 1) must be a compile-time constant"), std::string::npos) << err;
}

}  // namespace
}  // namespace korch
