// Unit tests for the norm family.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using test::error_message;
using test::eval_op;
using test::make_attrs;
using test::make_node;

Tensor vec(std::vector<float> v) { return test::vec1(v); }

void expect_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<float> g = got.to_float_vector();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
}

// Naive normalization of `n` consecutive values.
std::vector<double> normalize(const std::vector<double>& v, double eps) {
  double m = 0, var = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) var += (x - m) * (x - m);
  var /= static_cast<double>(v.size());
  std::vector<double> out;
  for (double x : v) out.push_back((x - m) / std::sqrt(var + eps));
  return out;
}

TEST(NormOps, BatchNormInference) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor scale = vec({2, 0.5f}), bias = vec({1, -1}), mean = vec({1.5f, 3}), var = vec({0.25f, 4});
  Tensor y = eval_op("BatchNormalization", 15, {x, scale, bias, mean, var}, make_attrs({{"epsilon", 0.f}}))[0];
  // channel 0: (x - 1.5) / 0.5 * 2 + 1; channel 1: (x - 3) / 2 * 0.5 - 1
  expect_close(y, {-1, 3, -1, -0.75, 15, 19, 0, 0.25});
}

TEST(NormOps, BatchNormTrainingUnsupported) {
  Tensor x(DType::kFloat32, {1, 2, 2}), p = vec({1, 1});
  std::string e1 = error_message([&] {
    eval_op("BatchNormalization", 15, {x, p, p, p, p}, make_attrs({{"training_mode", int64_t{1}}}), 3);
  });
  EXPECT_NE(e1.find("training_mode=1 is not supported"), std::string::npos) << e1;
  std::string e2 = error_message([&] { eval_op("BatchNormalization", 9, {x, p, p, p, p}, {}, 5); });
  EXPECT_NE(e2.find("training-mode outputs"), std::string::npos) << e2;
  std::string e3 = error_message([&] { eval_op("BatchNormalization", 15, {x, vec({1, 1, 1}), p, p, p}); });
  EXPECT_NE(e3.find("scale has shape [3], expected [2]"), std::string::npos) << e3;
}

TEST(NormOps, BatchNormNonSpatialOpset7) {
  // spatial=0: per-activation parameters of shape [C, D1].
  Tensor x3 = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor p4 = Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}), zero = Tensor::from_vector<float>({0, 0, 0, 0}, {2, 2});
  Tensor one = Tensor::from_vector<float>({1, 1, 1, 1}, {2, 2});
  Tensor y = eval_op("BatchNormalization", 7, {x3, p4, zero, zero, one},
                      make_attrs({{"spatial", int64_t{0}}, {"epsilon", 0.f}}))[0];
  expect_close(y, {1, 4, 9, 16, 5, 12, 21, 32});
}

TEST(NormOps, InstanceNorm) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 10, 20, 30, 40}, {1, 2, 4});
  Tensor y = eval_op("InstanceNormalization", 6, {x, vec({1, 2}), vec({0, 1})}, make_attrs({{"epsilon", 1e-3f}}))[0];
  std::vector<double> a = normalize({1, 2, 3, 4}, 1e-3), b = normalize({10, 20, 30, 40}, 1e-3);
  expect_close(y, {a[0], a[1], a[2], a[3], 2 * b[0] + 1, 2 * b[1] + 1, 2 * b[2] + 1, 2 * b[3] + 1});
}

TEST(NormOps, LayerNormWithStatsOutputs) {
  Tensor x = Tensor::from_vector<float>({1, 2, 4, 8, -1, 0, 1, 5}, {2, 4});
  Tensor w = vec({1, 2, 1, 0.5f}), b = vec({0, 0, 1, 0});
  auto out = eval_op("LayerNormalization", 17, {x, w, b}, make_attrs({{"epsilon", 1e-5f}}), 3);
  std::vector<double> r0 = normalize({1, 2, 4, 8}, 1e-5), r1 = normalize({-1, 0, 1, 5}, 1e-5);
  expect_close(out[0], {r0[0], 2 * r0[1], r0[2] + 1, 0.5 * r0[3], r1[0], 2 * r1[1], r1[2] + 1, 0.5 * r1[3]});
  EXPECT_EQ(out[1].shape(), (Shape{2, 1}));
  EXPECT_EQ(out[1].dtype(), DType::kFloat32);
  expect_close(out[1], {3.75, 1.25});
  double var0 = (2.75 * 2.75 + 1.75 * 1.75 + 0.25 * 0.25 + 4.25 * 4.25) / 4;
  expect_close(out[2], {1 / std::sqrt(var0 + 1e-5), 1 / std::sqrt((2.25 * 2.25 + 1.25 * 1.25 + 0.25 * 0.25 + 3.75 * 3.75) / 4 + 1e-5)});
}

TEST(NormOps, LayerNormAxis0BroadcastScaleNoBias) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // Scale [3] broadcasts over the normalized shape [2, 3]; B omitted.
  Tensor y = eval_op("LayerNormalization", 17, {x, vec({1, 2, 3})}, make_attrs({{"axis", int64_t{0}}}))[0];
  std::vector<double> r = normalize({1, 2, 3, 4, 5, 6}, 1e-5);
  expect_close(y, {r[0], 2 * r[1], 3 * r[2], r[3], 2 * r[4], 3 * r[5]});
  std::string e = error_message([&] { eval_op("LayerNormalization", 17, {x, vec({1, 2})}); });
  EXPECT_NE(e.find("does not broadcast to the normalized shape [3]"), std::string::npos) << e;
}

TEST(NormOps, GroupNormOpset18PerGroupVersus21PerChannel) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {1, 4, 2});
  std::vector<double> g0 = normalize({1, 2, 3, 4}, 1e-5), g1 = normalize({5, 6, 7, 8}, 1e-5);
  Attributes a = make_attrs({{"num_groups", int64_t{2}}});
  Tensor y18 = eval_op("GroupNormalization", 18, {x, vec({2, 3}), vec({0, 1})}, a)[0];
  expect_close(y18, {2 * g0[0], 2 * g0[1], 2 * g0[2], 2 * g0[3], 3 * g1[0] + 1, 3 * g1[1] + 1, 3 * g1[2] + 1, 3 * g1[3] + 1});
  Tensor y21 = eval_op("GroupNormalization", 21, {x, vec({1, 2, 3, 4}), vec({0, 0, 1, 1})}, a)[0];
  expect_close(y21, {g0[0], g0[1], 2 * g0[2], 2 * g0[3], 3 * g1[0] + 1, 3 * g1[1] + 1, 4 * g1[2] + 1, 4 * g1[3] + 1});
  std::string e = error_message([&] { eval_op("GroupNormalization", 21, {x, vec({2, 3}), vec({0, 1})}, a); });
  EXPECT_NE(e.find("expected [4] (one value per channel in opset 21)"), std::string::npos) << e;
  std::string e2 = error_message([&] {
    eval_op("GroupNormalization", 18, {x, vec({1, 1, 1}), vec({1, 1, 1})}, make_attrs({{"num_groups", int64_t{3}}}));
  });
  EXPECT_NE(e2.find("does not divide"), std::string::npos) << e2;
}

TEST(NormOps, LpNormalization) {
  Tensor x = Tensor::from_vector<float>({3, -4, 0, 0}, {2, 2});
  expect_close(eval_op("LpNormalization", 1, {x})[0], {0.6, -0.8, 0, 0});
  expect_close(eval_op("LpNormalization", 1, {x}, make_attrs({{"p", int64_t{1}}}))[0], {3.0 / 7, -4.0 / 7, 0, 0});
  expect_close(eval_op("LpNormalization", 1, {x}, make_attrs({{"axis", int64_t{0}}}))[0], {1, -1, 0, 0});
  EXPECT_NE(error_message([&] { eval_op("LpNormalization", 1, {x}, make_attrs({{"p", int64_t{3}}})); }).find("p must be 1 or 2"),
            std::string::npos);
}

TEST(NormOps, MeanVarianceNormalization) {
  // Default axes [0, 2, 3]: statistics per channel.
  Tensor x = Tensor::from_vector<float>({1, 2, 10, 30, 3, 4, 20, 40}, {2, 2, 1, 2});
  Tensor y = eval_op("MeanVarianceNormalization", 13, {x})[0];
  std::vector<double> c0 = normalize({1, 2, 3, 4}, 0), c1 = normalize({10, 30, 20, 40}, 0);
  expect_close(y, {c0[0], c0[1], c1[0], c1[1], c0[2], c0[3], c1[2], c1[3]}, 1e-6);
  Tensor z = eval_op("MeanVarianceNormalization", 13, {x}, make_attrs({{"axes", std::vector<int64_t>{-1}}}))[0];
  expect_close(z, {-1, 1, -1, 1, -1, 1, -1, 1}, 1e-6);
}

}  // namespace
}  // namespace korch
