// Unit tests for the quantized linear ops: MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv.
// The ONNX node tests cover per-tensor uint8/int8 cases; these cover per-channel / per-row /
// per-column zero points and scales, mixed int8/uint8 operands, saturation and ties.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <random>

#include "ir/op_registry.h"
#include "op_test_util.h"

namespace korch {
namespace {

using test::make_attrs;
using test::vec1;

template <typename T>
Tensor random_q(Shape s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(std::numeric_limits<T>::min(), std::numeric_limits<T>::max());
  Tensor t(dtype_of<T>::value, std::move(s));
  for (T& v : t.span<T>()) v = static_cast<T>(u(rng));
  return t;
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int64_t>(t.get_as_double(i)));
  return v;
}

std::vector<Tensor> run(const std::string& op, int opset, const std::vector<const Tensor*>& in, Attributes attrs = {}) {
  Node n = test::make_node(op, in.size(), 1, std::move(attrs));
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i]) n.inputs[i] = kNoValue;
  return test::eval_node_checked(n, opset, in);
}

// Direct 2-D convolution of (x - xzp) and (w - wzp[m]) with explicit pads, strides, dilations and groups.
std::vector<int64_t> naive_conv(const Tensor& x, const Tensor& w, int64_t xzp, const std::vector<int64_t>& wzp,
                                int64_t group, std::array<int64_t, 4> pads, std::array<int64_t, 2> st,
                                std::array<int64_t, 2> dl, Shape* out_shape) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), M = w.dim(0), Cg = w.dim(1), KH = w.dim(2),
                KW = w.dim(3);
  const int64_t OH = (H + pads[0] + pads[2] - ((KH - 1) * dl[0] + 1)) / st[0] + 1;
  const int64_t OW = (W + pads[1] + pads[3] - ((KW - 1) * dl[1] + 1)) / st[1] + 1;
  *out_shape = {N, M, OH, OW};
  std::vector<int64_t> y;
  const int64_t Mg = M / group;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          int64_t acc = 0;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * st[0] - pads[0] + kh * dl[0], iw = ow * st[1] - pads[1] + kw * dl[1];
                const int64_t ci = (m / Mg) * Cg + c;
                // Padding holds the zero point: it contributes nothing.
                const int64_t xv = ih < 0 || ih >= H || iw < 0 || iw >= W
                                       ? 0
                                       : static_cast<int64_t>(x.get_as_double(((n * C + ci) * H + ih) * W + iw)) - xzp;
                const int64_t wv =
                    static_cast<int64_t>(w.get_as_double(((m * Cg + c) * KH + kh) * KW + kw)) - wzp[static_cast<size_t>(m)];
                acc += xv * wv;
              }
          y.push_back(acc);
        }
  return y;
}

TEST(QuantLinearOps, ConvIntegerPerChannelWeightZeroPointInt8AndUint8) {
  // uint8 x, int8 w, per output channel w_zero_point, groups, pads, strides and dilations.
  Tensor x = random_q<uint8_t>({2, 4, 7, 6}, 1);
  Tensor w = random_q<int8_t>({6, 2, 3, 2}, 2);
  Tensor xzp = Tensor::scalar<uint8_t>(131);
  const std::vector<int64_t> wz = {-3, 0, 7, -128, 127, 1};
  Tensor wzp(DType::kInt8, {6});
  for (size_t i = 0; i < wz.size(); ++i) wzp.data<int8_t>()[i] = static_cast<int8_t>(wz[i]);
  Attributes a = make_attrs({{"group", int64_t{2}},
                             {"pads", std::vector<int64_t>{1, 0, 2, 1}},
                             {"strides", std::vector<int64_t>{2, 1}},
                             {"dilations", std::vector<int64_t>{1, 2}}});
  Tensor y = run("ConvInteger", 10, {&x, &w, &xzp, &wzp}, a)[0];
  Shape want_shape;
  std::vector<int64_t> want = naive_conv(x, w, 131, wz, 2, {1, 0, 2, 1}, {2, 1}, {1, 2}, &want_shape);
  EXPECT_EQ(y.dtype(), DType::kInt32);
  EXPECT_EQ(y.shape(), want_shape);
  EXPECT_EQ(ints(y), want);

  // int8 x, uint8 w, scalar w_zero_point, SAME_UPPER; a 1-element [1] zero point is per tensor.
  Tensor x8 = random_q<int8_t>({1, 3, 5, 5}, 3);
  Tensor wu = random_q<uint8_t>({2, 3, 3, 3}, 4);
  Tensor xz8 = Tensor::scalar<int8_t>(-5);
  Tensor wzu = Tensor::from_vector<uint8_t>({200}, {1});
  Tensor y2 = run("ConvInteger", 10, {&x8, &wu, &xz8, &wzu}, make_attrs({{"auto_pad", std::string("SAME_UPPER")}}))[0];
  std::vector<int64_t> want2 = naive_conv(x8, wu, -5, {200, 200}, 1, {1, 1, 1, 1}, {1, 1}, {1, 1}, &want_shape);
  EXPECT_EQ(y2.shape(), want_shape);
  EXPECT_EQ(ints(y2), want2);

  // No zero points at all.
  Tensor y3 = run("ConvInteger", 10, {&x8, &wu})[0];
  EXPECT_EQ(ints(y3), naive_conv(x8, wu, 0, {0, 0}, 1, {0, 0, 0, 0}, {1, 1}, {1, 1}, &want_shape));

  // A per-channel zero point must have one element per output channel.
  Tensor bad = Tensor::from_vector<int8_t>({1, 2, 3}, {3});
  test::expect_node_error(test::make_node("ConvInteger", 4, 1, a), 10, {&x, &w, &xzp, &bad}, ErrorCode::kInvalid,
                          "w_zero_point must be per tensor or per output channel");
}

TEST(QuantLinearOps, MatMulIntegerPerRowAndPerColumnZeroPoints) {
  // int8 A [2, 3, 4] with a per-row zero point [3] (one per row of each matrix), uint8 B [4, 5] with
  // a per-column zero point [5]: batched x shared B.
  Tensor A = random_q<int8_t>({2, 3, 4}, 5);
  Tensor B = random_q<uint8_t>({4, 5}, 6);
  Tensor az = Tensor::from_vector<int8_t>({-128, 0, 17}, {3});
  Tensor bz = Tensor::from_vector<uint8_t>({0, 255, 128, 3, 77}, {5});
  Tensor y = run("MatMulInteger", 10, {&A, &B, &az, &bz})[0];
  EXPECT_EQ(y.shape(), (Shape{2, 3, 5}));
  std::vector<int64_t> want;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t m = 0; m < 3; ++m)
      for (int64_t n = 0; n < 5; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < 4; ++k)
          acc += (static_cast<int64_t>(A.data<int8_t>()[(b * 3 + m) * 4 + k]) - az.data<int8_t>()[m]) *
                 (static_cast<int64_t>(B.data<uint8_t>()[k * 5 + n]) - bz.data<uint8_t>()[n]);
        want.push_back(acc);
      }
  EXPECT_EQ(ints(y), want);

  // The same per-row zero point as an N-D [..., M, 1] tensor gives the same result.
  Tensor az3 = Tensor::from_vector<int8_t>({-128, 0, 17}, {1, 3, 1});
  EXPECT_EQ(ints(run("MatMulInteger", 10, {&A, &B, &az3, &bz})[0]), want);

  // uint8 values v with zero point 128 equal int8 values v - 128 with zero point 0.
  Tensor Au = random_q<uint8_t>({3, 4}, 7), Ai(DType::kInt8, {3, 4});
  for (int64_t i = 0; i < 12; ++i) Ai.data<int8_t>()[i] = static_cast<int8_t>(Au.data<uint8_t>()[i] - 128);
  Tensor z128 = Tensor::scalar<uint8_t>(128);
  EXPECT_EQ(ints(run("MatMulInteger", 10, {&Au, &B, &z128})[0]), ints(run("MatMulInteger", 10, {&Ai, &B})[0]));

  // A per-row zero point of the wrong length, and one that varies along K, are invalid.
  Tensor az4 = Tensor::from_vector<int8_t>({1, 2, 3, 4}, {1, 1, 4});
  test::expect_node_error(test::make_node("MatMulInteger", 3, 1), 10, {&A, &B, &az4}, ErrorCode::kInvalid,
                          "neither per tensor nor per row");
}

// QLinearMatMul of 1x1 matrices: y = saturate(round(a * b * a_scale * b_scale / y_scale) + y_zp).
template <typename Q>
int64_t qmatmul1(int a, float as, int b, float bs, float ys, int yzp) {
  Tensor ta = Tensor::from_vector<uint8_t>({static_cast<uint8_t>(a)}, {1, 1});
  Tensor tb = Tensor::from_vector<uint8_t>({static_cast<uint8_t>(b)}, {1, 1});
  Tensor s_a = Tensor::scalar<float>(as), s_b = Tensor::scalar<float>(bs), s_y = Tensor::scalar<float>(ys);
  Tensor z = Tensor::scalar<uint8_t>(0);
  Tensor yz = Tensor::scalar<Q>(static_cast<Q>(yzp));
  Tensor y = run("QLinearMatMul", 10, {&ta, &s_a, &z, &tb, &s_b, &z, &s_y, &yz})[0];
  EXPECT_EQ(y.dtype(), dtype_of<Q>::value);
  return ints(y)[0];
}

TEST(QuantLinearOps, QLinearMatMulSaturatesAndRoundsHalfToEven) {
  // A y_scale small enough to clip: 200 * 200 * 1e-2 = 400 > 255; int8 output clips to 127 and -128.
  EXPECT_EQ(qmatmul1<uint8_t>(200, 0.1f, 200, 0.1f, 1.f, 0), 255);
  EXPECT_EQ(qmatmul1<uint8_t>(200, 0.1f, 200, 0.1f, 1e-3f, 10), 255);
  EXPECT_EQ(qmatmul1<int8_t>(200, 0.1f, 200, 0.1f, 1.f, 0), 127);
  EXPECT_EQ(qmatmul1<int8_t>(200, 0.1f, 200, 0.1f, 1.f, -30), 127);
  // Negative results clip at the bottom: (a - zp) < 0 through a uint8 zero point.
  {
    Tensor a = Tensor::from_vector<uint8_t>({0}, {1, 1}), b = Tensor::from_vector<uint8_t>({255}, {1, 1});
    Tensor s = Tensor::scalar<float>(1.f), az = Tensor::scalar<uint8_t>(255), bz = Tensor::scalar<uint8_t>(0);
    Tensor yu = Tensor::scalar<uint8_t>(3), yi = Tensor::scalar<int8_t>(3);
    EXPECT_EQ(ints(run("QLinearMatMul", 10, {&a, &s, &az, &b, &s, &bz, &s, &yu})[0])[0], 0);
    EXPECT_EQ(ints(run("QLinearMatMul", 10, {&a, &s, &az, &b, &s, &bz, &s, &yi})[0])[0], -128);
  }
  // Ties round to even before the zero point is added: 1 * 1 * 0.5 = 0.5 -> 0, 3 * 0.5 = 1.5 -> 2,
  // 5 * 0.5 = 2.5 -> 2, 7 * 0.5 = 3.5 -> 4; with an odd zero point 11, 0.5 -> 0 + 11 = 11.
  EXPECT_EQ(qmatmul1<uint8_t>(1, 0.5f, 1, 1.f, 1.f, 0), 0);
  EXPECT_EQ(qmatmul1<uint8_t>(3, 0.5f, 1, 1.f, 1.f, 0), 2);
  EXPECT_EQ(qmatmul1<uint8_t>(5, 0.5f, 1, 1.f, 1.f, 0), 2);
  EXPECT_EQ(qmatmul1<uint8_t>(7, 0.5f, 1, 1.f, 1.f, 0), 4);
  EXPECT_EQ(qmatmul1<uint8_t>(1, 0.5f, 1, 1.f, 1.f, 11), 11);
  EXPECT_EQ(qmatmul1<uint8_t>(5, 1.f, 1, 1.f, 2.f, 11), 13);
  EXPECT_EQ(qmatmul1<int8_t>(3, 1.f, 1, 1.f, 2.f, -1), 1);
}

TEST(QuantLinearOps, QLinearMatMulPerColumnScalesAndHalfScales) {
  // b per column: scale and zero point [N]; a per row [M]; opset 21 float16 scales.
  Tensor a = Tensor::from_vector<uint8_t>({10, 20, 30, 40}, {2, 2});
  Tensor b = Tensor::from_vector<int8_t>({1, -2, 3, 4, 5, -6}, {2, 3});
  Tensor as = Tensor::from_vector<float>({0.5f, 0.25f}, {2});
  Tensor az = Tensor::from_vector<uint8_t>({10, 0}, {2});
  Tensor bs = Tensor::from_vector<float>({1.f, 2.f, 4.f}, {3});
  Tensor bz = Tensor::from_vector<int8_t>({0, 1, -1}, {3});
  Tensor ys = Tensor::scalar<float>(1.f);
  Tensor yz = Tensor::scalar<int8_t>(0);
  Tensor y = run("QLinearMatMul", 21, {&a, &as, &az, &b, &bs, &bz, &ys, &yz})[0];
  // Row 0: a - 10 = [0, 10]; row 1: [30, 40]. b - bz columns: [1, 4], [-3, 4], [4, -5].
  // acc = [[40, 40, -50], [190, 70, -80]]; times a_scale[m] * b_scale[n]:
  // row 0 * 0.5 * [1, 2, 4] = [20, 40, -100]; row 1 * 0.25 * [1, 2, 4] = [47.5 -> 48, 35, -80].
  EXPECT_EQ(ints(y), (std::vector<int64_t>{20, 40, -100, 48, 35, -80}));

  // float16 scales: the multiplier is rounded to float16 (0.1 * 0.1 / 0.01 = 1.00098 in float16 steps).
  Tensor h = Tensor::scalar<Float16>(Float16(0.1f)), hy = Tensor::scalar<Float16>(Float16(0.01f));
  Tensor a1 = Tensor::from_vector<uint8_t>({100}, {1, 1}), b1 = Tensor::from_vector<uint8_t>({2}, {1, 1});
  Tensor z = Tensor::scalar<uint8_t>(0);
  Tensor yh = run("QLinearMatMul", 21, {&a1, &h, &z, &b1, &h, &z, &hy, &z})[0];
  const float p = static_cast<float>(Float16(static_cast<float>(Float16(0.1f)) * static_cast<float>(Float16(0.1f))));
  const float m = static_cast<float>(Float16(p / static_cast<float>(Float16(0.01f))));
  EXPECT_EQ(ints(yh)[0], static_cast<int64_t>(std::nearbyint(200.0 * m)));
  // Float16 scales need opset 21.
  test::expect_node_error(test::make_node("QLinearMatMul", 8, 1), 10, {&a1, &h, &z, &b1, &h, &z, &hy, &z},
                          ErrorCode::kUnsupported, "scale element type f16 is not supported");
}

TEST(QuantLinearOps, QLinearConvPerChannelScaleAndBias) {
  Tensor x = random_q<uint8_t>({1, 2, 5, 5}, 8);
  Tensor w = random_q<int8_t>({3, 2, 3, 3}, 9);
  Tensor xs = Tensor::scalar<float>(0.02f), xz = Tensor::scalar<uint8_t>(128);
  Tensor ws = Tensor::from_vector<float>({0.001f, 0.002f, 0.0005f}, {3});
  const std::vector<int64_t> wzv = {0, -4, 9};
  Tensor wz = Tensor::from_vector<int8_t>({0, -4, 9}, {3});
  Tensor ys = Tensor::scalar<float>(0.01f), yz = Tensor::scalar<int8_t>(-7);
  Tensor bias = Tensor::from_vector<int32_t>({1000, -20000, 7}, {3});
  Attributes a = make_attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"strides", std::vector<int64_t>{2, 2}}});
  Tensor y = run("QLinearConv", 10, {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &bias}, a)[0];
  Shape s;
  std::vector<int64_t> acc = naive_conv(x, w, 128, wzv, 1, {1, 1, 1, 1}, {2, 2}, {1, 1}, &s);
  EXPECT_EQ(y.shape(), s);
  EXPECT_EQ(y.dtype(), DType::kInt8);
  const int64_t per = s[2] * s[3];
  std::vector<int64_t> want;
  int clipped = 0;
  for (size_t i = 0; i < acc.size(); ++i) {
    const int64_t m = static_cast<int64_t>(i) / per;
    const double mult = static_cast<double>(0.02f * ws.data<float>()[m] / 0.01f);
    const double v = std::nearbyint(static_cast<double>(acc[i] + bias.data<int32_t>()[m]) * mult) - 7;
    clipped += v < -128 || v > 127;
    want.push_back(static_cast<int64_t>(std::clamp(v, -128.0, 127.0)));
  }
  EXPECT_EQ(ints(y), want);
  EXPECT_GT(clipped, 0);  // channel 1's bias drives it into saturation
  // The bias must be int32 [M].
  Tensor fb = Tensor::from_vector<float>({1, 2, 3}, {3});
  test::expect_node_error(test::make_node("QLinearConv", 9, 1, a), 10, {&x, &xs, &xz, &w, &ws, &wz, &ys, &yz, &fb},
                          ErrorCode::kInvalid, "bias B must be int32");
}

}  // namespace
}  // namespace korch
