// Unit tests for the rnn family (LSTM, GRU, RNN).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using OptT = std::optional<Tensor>;
using test::error_message;
using test::make_attrs;

// Runs `op` with inputs (std::nullopt = omitted) and `n_out` outputs; outputs listed in `omit_out` are kNoValue.
std::vector<Tensor> run(const std::string& op, int opset, const std::vector<OptT>& in, Attributes attrs, size_t n_out,
                        std::vector<size_t> omit_out = {}) {
  Node n;
  n.name = op;
  n.op_type = op;
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < in.size(); ++i) {
    n.inputs.push_back(in[i] ? static_cast<ValueId>(i) : kNoValue);
    ptrs.push_back(in[i] ? &*in[i] : nullptr);
  }
  for (size_t i = 0; i < n_out; ++i) {
    bool omit = std::find(omit_out.begin(), omit_out.end(), i) != omit_out.end();
    n.outputs.push_back(omit ? kNoValue : static_cast<ValueId>(in.size() + i));
  }
  n.attrs = std::move(attrs);
  return eval_node(n, opset, ptrs);
}

Tensor f32(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }

void expect_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-5) {
  std::vector<float> g = got.to_float_vector();
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], want[i], tol) << "at " << i;
}

double sigm(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Deterministic pseudo-random values in [-1, 1).
Tensor rnd(Shape s, uint32_t seed) {
  Tensor t(DType::kFloat32, s);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = static_cast<float>((seed >> 8) & 0xffff) / 32768.f - 1.f;
  }
  return t;
}

TEST(RnnOps, SimpleRnnForward) {
  Tensor x = f32({1, -2}, {2, 1, 1});
  Tensor w = f32({0.5f}, {1, 1, 1}), r = f32({0.3f}, {1, 1, 1}), b = f32({0.1f, 0.2f}, {1, 2});
  auto out = run("RNN", 17, {x, w, r, b}, make_attrs({{"hidden_size", int64_t{1}}}), 2);
  double h1 = std::tanh(0.5 * 1 + 0.3);
  double h2 = std::tanh(0.5 * -2 + 0.3 * h1 + 0.3);
  EXPECT_EQ(out[0].shape(), (Shape{2, 1, 1, 1}));
  EXPECT_EQ(out[1].shape(), (Shape{1, 1, 1}));
  expect_close(out[0], {h1, h2});
  expect_close(out[1], {h2});
}

TEST(RnnOps, ReverseWithSequenceLensAndInitialH) {
  // batch 2, seq 3; batch 1 has length 2. Reverse runs t = len-1 .. 0.
  Tensor x = f32({1, 10, 2, 20, 3, 30}, {3, 2, 1});
  Tensor w = f32({1}, {1, 1, 1}), r = f32({0.5f}, {1, 1, 1});
  Tensor lens = Tensor::from_vector<int32_t>({3, 2}, {2});
  Tensor h0 = f32({0.1f, -0.1f}, {1, 2, 1});
  auto out = run("RNN", 14, {x, w, r, std::nullopt, lens, h0},
                 make_attrs({{"direction", std::string("reverse")}, {"activations", std::vector<std::string>{"Affine"}},
                             {"activation_alpha", std::vector<float>{2.f}}, {"activation_beta", std::vector<float>{1.f}}}),
                 2);
  auto f = [](double v) { return 2 * v + 1; };
  // batch 0: t=2,1,0
  double a2 = f(3 + 0.5 * 0.1), a1 = f(2 + 0.5 * a2), a0 = f(1 + 0.5 * a1);
  // batch 1: t=1,0 ; t=2 is padding
  double b1 = f(20 + 0.5 * -0.1), b0 = f(10 + 0.5 * b1);
  expect_close(out[0], {a0, b0, a1, b1, a2, 0.0}, 1e-4);
  expect_close(out[1], {a0, b0}, 1e-4);
}

TEST(RnnOps, ActivationAlphaConsumedOnlyByFunctionsThatTakeIt) {
  // Bidirectional: forward Tanh (takes no alpha), reverse LeakyRelu consumes alpha[0].
  Tensor x = f32({-1}, {1, 1, 1});
  Tensor w = f32({1, 1}, {2, 1, 1}), r = f32({0, 0}, {2, 1, 1});
  auto out = run("RNN", 17, {x, w, r},
                 make_attrs({{"direction", std::string("bidirectional")},
                             {"activations", std::vector<std::string>{"Tanh", "LeakyRelu"}},
                             {"activation_alpha", std::vector<float>{0.5f}}}),
                 2);
  expect_close(out[0], {std::tanh(-1.0), -0.5});
}

TEST(RnnOps, GruLinearBeforeReset) {
  Tensor x = f32({0.5f, -1}, {2, 1, 1});
  Tensor w = f32({0.2f, -0.3f, 0.7f}, {1, 3, 1});     // z, r, h
  Tensor r = f32({0.4f, 0.6f, -0.5f}, {1, 3, 1});
  Tensor b = f32({0.1f, 0.0f, 0.2f, 0.05f, -0.1f, 0.3f}, {1, 6});
  for (int lbr = 0; lbr <= 1; ++lbr) {
    double h = 0;
    std::vector<double> ys;
    for (double xv : {0.5, -1.0}) {
      double z = sigm(0.2 * xv + 0.4 * h + 0.1 + 0.05);
      double rr = sigm(-0.3 * xv + 0.6 * h + 0.0 - 0.1);
      double hh = lbr ? std::tanh(0.7 * xv + rr * (-0.5 * h + 0.3) + 0.2) : std::tanh(0.7 * xv + -0.5 * (rr * h) + 0.3 + 0.2);
      h = (1 - z) * hh + z * h;
      ys.push_back(h);
    }
    auto out = run("GRU", 17, {x, w, r, b}, make_attrs({{"linear_before_reset", int64_t{lbr}}}), 2);
    expect_close(out[0], ys);
    expect_close(out[1], {h});
  }
}

TEST(RnnOps, LstmPeepholesAndCellOutput) {
  Tensor x = f32({1, -0.5f}, {2, 1, 1});
  Tensor w = f32({0.1f, 0.2f, 0.3f, 0.4f}, {1, 4, 1});  // i, o, f, c
  Tensor r = f32({-0.1f, 0.5f, 0.2f, 0.3f}, {1, 4, 1});
  Tensor b = f32({0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f}, {1, 8});
  Tensor h0 = f32({0.2f}, {1, 1, 1}), c0 = f32({-0.3f}, {1, 1, 1});
  Tensor p = f32({0.5f, -0.4f, 0.25f}, {1, 3});  // i, o, f
  for (int input_forget = 0; input_forget <= 1; ++input_forget) {
    double h = 0.2, c = -0.3;
    std::vector<double> ys;
    for (double xv : {1.0, -0.5}) {
      double i = sigm(0.1 * xv - 0.1 * h + 0.06 + 0.5 * c);
      double f = input_forget ? 1 - i : sigm(0.3 * xv + 0.2 * h + 0.10 + 0.25 * c);
      double g = std::tanh(0.4 * xv + 0.3 * h + 0.12);
      c = f * c + i * g;
      double o = sigm(0.2 * xv + 0.5 * h + 0.08 - 0.4 * c);
      h = o * std::tanh(c);
      ys.push_back(h);
    }
    auto out = run("LSTM", 17, {x, w, r, b, std::nullopt, h0, c0, p},
                   make_attrs({{"input_forget", int64_t{input_forget}}}), 3);
    expect_close(out[0], ys);
    expect_close(out[1], {h});
    expect_close(out[2], {c});
  }
}

TEST(RnnOps, ClipBoundsGatePreActivations) {
  Tensor x = f32({10}, {1, 1, 1});
  Tensor w = f32({1}, {1, 1, 1}), r = f32({0}, {1, 1, 1});
  auto out = run("RNN", 17, {x, w, r},
                 make_attrs({{"clip", 2.f}, {"activations", std::vector<std::string>{"Relu"}}}), 1);
  expect_close(out[0], {2.0});
}

// layout=1 ([batch, seq, ...]) must give the transposes of layout=0, and omitted outputs must be fine.
TEST(RnnOps, LayoutOneMatchesLayoutZeroBidirectional) {
  const int64_t S = 3, N = 2, I = 3, H = 2;
  Tensor x0 = rnd({S, N, I}, 1), w = rnd({2, 4 * H, I}, 2), r = rnd({2, 4 * H, H}, 3), b = rnd({2, 8 * H}, 4);
  Tensor h0 = rnd({2, N, H}, 5), c0 = rnd({2, N, H}, 6);
  Tensor lens = Tensor::from_vector<int32_t>({3, 1}, {2});
  Tensor x1(DType::kFloat32, {N, S, I}), h1(DType::kFloat32, {N, 2, H}), c1(DType::kFloat32, {N, 2, H});
  for (int64_t s = 0; s < S; ++s)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < I; ++i) x1.data<float>()[(n * S + s) * I + i] = x0.data<float>()[(s * N + n) * I + i];
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < H; ++k) {
        h1.data<float>()[(n * 2 + d) * H + k] = h0.data<float>()[(d * N + n) * H + k];
        c1.data<float>()[(n * 2 + d) * H + k] = c0.data<float>()[(d * N + n) * H + k];
      }
  Attributes a0 = make_attrs({{"direction", std::string("bidirectional")}, {"hidden_size", H}});
  Attributes a1 = a0;
  a1.set("layout", int64_t{1});
  auto o0 = run("LSTM", 17, {x0, w, r, b, lens, h0, c0}, a0, 3);
  auto o1 = run("LSTM", 17, {x1, w, r, b, lens, h1, c1}, a1, 3);
  ASSERT_EQ(o1[0].shape(), (Shape{N, S, 2, H}));
  ASSERT_EQ(o1[1].shape(), (Shape{N, 2, H}));
  const float* y0 = o0[0].data<float>();
  const float* y1 = o1[0].data<float>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < H; ++k)
          EXPECT_FLOAT_EQ(y0[((s * 2 + d) * N + n) * H + k], y1[((n * S + s) * 2 + d) * H + k]);
  for (int o = 1; o <= 2; ++o)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < H; ++k)
          EXPECT_FLOAT_EQ(o0[o].data<float>()[(d * N + n) * H + k], o1[o].data<float>()[(n * 2 + d) * H + k]);
  // Padding past batch 1's length is zero; its reverse Y_h is the value at t=0, forward Y_h too.
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t k = 0; k < H; ++k) {
      EXPECT_EQ(y0[((1 * 2 + d) * N + 1) * H + k], 0.f);
      EXPECT_EQ(y0[((0 * 2 + d) * N + 1) * H + k], o0[1].data<float>()[(d * N + 1) * H + k]);
    }
  // Y omitted, only Y_c requested.
  auto oc = run("LSTM", 17, {x0, w, r, b, lens, h0, c0}, a0, 3, {0, 1});
  EXPECT_TRUE(oc[2] == o0[2]);
}

TEST(RnnOps, Float64ComputesInDouble) {
  Tensor x = Tensor::from_vector<double>({0.25}, {1, 1, 1});
  Tensor w = Tensor::from_vector<double>({0.1, 0.2, 0.3}, {1, 3, 1});
  Tensor r = Tensor::from_vector<double>({0, 0, 0}, {1, 3, 1});
  auto out = run("GRU", 7, {x, w, r}, {}, 1);
  ASSERT_EQ(out[0].dtype(), DType::kFloat64);
  double z = sigm(0.025), hh = std::tanh(0.075);
  EXPECT_NEAR(out[0].data<double>()[0], (1 - z) * hh, 1e-15);
}

TEST(RnnOps, Errors) {
  Tensor x = f32({1, 2}, {2, 1, 1});
  Tensor w = f32({1}, {1, 1, 1}), r = f32({1}, {1, 1, 1});
  EXPECT_NE(error_message([&] { run("RNN", 17, {x, w, r}, make_attrs({{"direction", std::string("sideways")}}), 1); })
                .find("direction must be forward, reverse or bidirectional"),
            std::string::npos);
  EXPECT_NE(error_message([&] { run("GRU", 17, {x, w, r}, {}, 1); }).find("W must have shape [1,3,1], got [1,1,1]"),
            std::string::npos);
  EXPECT_NE(error_message([&] { run("RNN", 17, {x, w, r}, make_attrs({{"hidden_size", int64_t{4}}}), 1); })
                .find("hidden_size is 4"),
            std::string::npos);
  EXPECT_NE(error_message([&] { run("RNN", 17, {x, w, r}, make_attrs({{"activations", std::vector<std::string>{"Gelu"}}}), 1); })
                .find("activation function 'Gelu' is not supported"),
            std::string::npos);
  EXPECT_NE(error_message([&] {
              run("RNN", 17, {x, w, r}, make_attrs({{"activations", std::vector<std::string>{"Tanh", "Tanh", "Tanh"}}}), 1);
            }).find("activations has 3 entries; expected 1"),
            std::string::npos);
  Tensor bad_lens = Tensor::from_vector<int32_t>({3}, {1});
  EXPECT_NE(error_message([&] { run("RNN", 17, {x, w, r, std::nullopt, bad_lens}, {}, 1); })
                .find("sequence_lens[0] = 3 is outside [0, 2]"),
            std::string::npos);
  EXPECT_NE(error_message([&] { run("RNN", 17, {x, w, r}, {}, 3); }).find("RNN has at most 2 outputs"), std::string::npos);
  Tensor x2 = f32({1, 2}, {2, 1});
  EXPECT_NE(error_message([&] { run("LSTM", 17, {x2, w, r}, {}, 1); }).find("X must have rank 3"), std::string::npos);
  Tensor xi = Tensor::from_vector<int32_t>({1}, {1, 1, 1});
  EXPECT_NE(error_message([&] { run("RNN", 17, {xi, w, r}, {}, 1); }).find("element type i32 is not supported"),
            std::string::npos);
}

}  // namespace
}  // namespace korch
