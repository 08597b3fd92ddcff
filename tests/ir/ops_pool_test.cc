// Unit tests for the pool family: MaxPool, AveragePool, LpPool, Global*Pool.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/op_registry.h"

namespace korch {
namespace {

Node pool_node(const std::string& op, std::vector<int64_t> kernel, int nout = 1) {
  Node n;
  n.op_type = op;
  n.inputs = {0};
  for (int i = 0; i < nout; ++i) n.outputs.push_back(1 + i);
  if (!kernel.empty()) n.attrs.set("kernel_shape", kernel);
  return n;
}

Tensor iota(Shape s) {
  Tensor t(DType::kFloat32, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

std::vector<float> values(const Tensor& t) { return t.to_float_vector(); }

std::string error_of(const Node& n, const Tensor& x, int opset = 17) {
  try {
    eval_node(n, opset, {&x});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(OpsPool, MaxPoolIndicesAndStorageOrder) {
  Tensor x = Tensor::from_vector<float>({1, 5, 3, 2, 9, 4, 7, 0, 8, 6, 1, 2}, {1, 1, 3, 4});
  Node n = pool_node("MaxPool", {2, 2}, 2);
  n.attrs.set("strides", std::vector<int64_t>{1, 2});
  auto out = eval_node(n, 12, {&x});
  EXPECT_EQ(out[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(out[0]), (std::vector<float>{9, 7, 9, 7}));
  EXPECT_EQ(out[1], Tensor::from_vector<int64_t>({4, 6, 4, 6}, {1, 1, 2, 2}));
  n.attrs.set("storage_order", int64_t{1});
  out = eval_node(n, 12, {&x});
  // Column-major index of (h, w) is h + w * H.
  EXPECT_EQ(out[1], Tensor::from_vector<int64_t>({1 + 0 * 3, 1 + 2 * 3, 1 + 0 * 3, 1 + 2 * 3}, {1, 1, 2, 2}));
  // Second image/channel offsets the flat index.
  Tensor x2 = iota({2, 1, 2, 2});
  auto o2 = eval_node(pool_node("MaxPool", {2, 2}, 2), 12, {&x2});
  EXPECT_EQ(o2[1], Tensor::from_vector<int64_t>({3, 7}, {2, 1, 1, 1}));
}

TEST(OpsPool, MaxPoolCeilModePadsDilations) {
  Tensor x = iota({1, 1, 5, 5});
  Node n = pool_node("MaxPool", {2, 2});
  n.attrs.set("strides", std::vector<int64_t>{2, 2});
  EXPECT_EQ(eval_node(n, 12, {&x})[0].shape(), (Shape{1, 1, 2, 2}));
  n.attrs.set("ceil_mode", int64_t{1});
  Tensor y = eval_node(n, 12, {&x})[0];
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 3}));
  EXPECT_EQ(values(y), (std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
  // Ceil mode never starts a window entirely in the right padding.
  Tensor x2 = iota({1, 1, 2, 2});
  Node c = pool_node("MaxPool", {1, 1});
  c.attrs.set("strides", std::vector<int64_t>{2, 2});
  c.attrs.set("pads", std::vector<int64_t>{0, 0, 1, 1});
  c.attrs.set("ceil_mode", int64_t{1});
  EXPECT_EQ(eval_node(c, 12, {&x2})[0].shape(), (Shape{1, 1, 1, 1}));
  Tensor x4 = iota({1, 1, 4, 4});
  Node d = pool_node("MaxPool", {2, 2});
  d.attrs.set("dilations", std::vector<int64_t>{2, 2});
  EXPECT_EQ(values(eval_node(d, 12, {&x4})[0]), (std::vector<float>{10, 11, 14, 15}));
  Node s = pool_node("MaxPool", {3, 3});
  s.attrs.set("auto_pad", std::string("SAME_UPPER"));
  s.attrs.set("strides", std::vector<int64_t>{2, 2});
  EXPECT_EQ(values(eval_node(s, 12, {&x})[0]), (std::vector<float>{6, 8, 9, 16, 18, 19, 21, 23, 24}));
}

TEST(OpsPool, MaxPoolInt8AndErrors) {
  Tensor x = Tensor::from_vector<int8_t>({-5, -3, -7, -1}, {1, 1, 2, 2});
  EXPECT_EQ(eval_node(pool_node("MaxPool", {2, 2}, 1), 12, {&x})[0], Tensor::from_vector<int8_t>({-1}, {1, 1, 1, 1}));
  Tensor f = iota({1, 1, 4, 4});
  EXPECT_NE(error_of(pool_node("MaxPool", {}), f).find("kernel_shape"), std::string::npos);
  EXPECT_NE(error_of(pool_node("MaxPool", {2}), f).find("expected 2"), std::string::npos);
  EXPECT_NE(error_of(pool_node("MaxPool", {5, 5}), f).find("exceeds"), std::string::npos);
  Tensor r2 = iota({4, 4});
  EXPECT_NE(error_of(pool_node("MaxPool", {2}), r2).find("rank >= 3"), std::string::npos);
  Tensor xi = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {1, 1, 2, 2});
  try {
    eval_node(pool_node("AveragePool", {2, 2}), 17, {&xi});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

TEST(OpsPool, AveragePoolCountIncludePad) {
  Tensor x = iota({1, 1, 3, 3});
  Node n = pool_node("AveragePool", {2, 2});
  n.attrs.set("pads", std::vector<int64_t>{1, 1, 0, 0});
  EXPECT_EQ(values(eval_node(n, 11, {&x})[0]), (std::vector<float>{0, 0.5f, 1.5f, 1.5f, 2, 3, 4.5f, 5, 6}));
  n.attrs.set("count_include_pad", int64_t{1});
  EXPECT_EQ(values(eval_node(n, 11, {&x})[0]), (std::vector<float>{0, 0.25f, 0.75f, 0.75f, 2, 3, 2.25f, 5, 6}));
  // Ceil mode: the part of a window beyond the explicit padding is never counted.
  Node c = pool_node("AveragePool", {2});
  c.attrs.set("strides", std::vector<int64_t>{2});
  c.attrs.set("ceil_mode", int64_t{1});
  c.attrs.set("count_include_pad", int64_t{1});
  Tensor x1 = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {1, 1, 5});
  EXPECT_EQ(values(eval_node(c, 19, {&x1})[0]), (std::vector<float>{1.5f, 3.5f, 5}));
  // Dilations (opset 19) and 3-D.
  Node d = pool_node("AveragePool", {2, 1, 1});
  d.attrs.set("dilations", std::vector<int64_t>{2, 1, 1});
  Tensor x3 = iota({1, 1, 3, 1, 2});
  EXPECT_EQ(values(eval_node(d, 19, {&x3})[0]), (std::vector<float>{2, 3}));
}

TEST(OpsPool, LpPoolAndGlobals) {
  Tensor x = Tensor::from_vector<float>({3, -4, 0, 1, 2, 2}, {1, 2, 3});
  Node lp = pool_node("LpPool", {2});
  EXPECT_EQ(values(eval_node(lp, 18, {&x})[0]), (std::vector<float>{5, 4, std::sqrt(5.f), std::sqrt(8.f)}));
  lp.attrs.set("p", int64_t{1});
  EXPECT_EQ(values(eval_node(lp, 18, {&x})[0]), (std::vector<float>{7, 4, 3, 4}));
  lp.attrs.set("p", int64_t{0});
  EXPECT_NE(error_of(lp, x).find("'p'"), std::string::npos);
  Node gap = pool_node("GlobalAveragePool", {});
  Tensor g = eval_node(gap, 17, {&x})[0];
  EXPECT_EQ(g.shape(), (Shape{1, 2, 1}));
  EXPECT_NEAR(values(g)[0], -1.f / 3, 1e-6);
  EXPECT_EQ(values(eval_node(pool_node("GlobalMaxPool", {}), 17, {&x})[0]), (std::vector<float>{3, 2}));
  EXPECT_EQ(values(eval_node(pool_node("GlobalLpPool", {}), 17, {&x})[0]), (std::vector<float>{5, 3}));
  Tensor xd = Tensor::from_vector<double>({1, 2, 3, 4}, {1, 1, 2, 2});
  Tensor gd = eval_node(gap, 17, {&xd})[0];
  EXPECT_EQ(gd, Tensor::from_vector<double>({2.5}, {1, 1, 1, 1}));
  Tensor h(DType::kFloat16, {1, 1, 2});
  h.data<Float16>()[0] = Float16(1.f);
  h.data<Float16>()[1] = Float16(2.f);
  EXPECT_EQ(values(eval_node(gap, 17, {&h})[0]), (std::vector<float>{1.5f}));
}

}  // namespace
}  // namespace korch
