// Unit tests for the linear family: MatMul, Gemm, Conv, ConvTranspose, Einsum.
#include <gtest/gtest.h>

#include <random>

#include "ir/op_registry.h"

namespace korch {
namespace {

Node make_node(const std::string& op, int nin, int nout = 1) {
  Node n;
  n.op_type = op;
  for (int i = 0; i < nin; ++i) n.inputs.push_back(i);
  for (int i = 0; i < nout; ++i) n.outputs.push_back(nin + i);
  return n;
}

Tensor random_tensor(Shape s, unsigned seed, DType dt = DType::kFloat32) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Tensor t(dt, std::move(s));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::kFloat32) t.data<float>()[i] = static_cast<float>(u(rng));
    else t.data<double>()[i] = u(rng);
  }
  return t;
}

Tensor run1(const Node& n, std::vector<const Tensor*> in, int opset = 17) { return eval_node(n, opset, in).at(0); }

void expect_close(const Tensor& got, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.size()));
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.get_as_double(i), want[static_cast<size_t>(i)], tol * (1 + std::fabs(want[static_cast<size_t>(i)])))
        << "at " << i;
}

std::string error_of(const Node& n, std::vector<const Tensor*> in, int opset = 17) {
  try {
    eval_node(n, opset, in);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Naive batched matmul over already broadcast-expanded indices.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, int64_t M, int64_t K, int64_t N, int64_t batch,
                                 bool bcast_b) {
  std::vector<double> out(static_cast<size_t>(batch * M * N));
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a.get_as_double(bi * M * K + i * K + k) * b.get_as_double((bcast_b ? 0 : bi) * K * N + k * N + j);
        out[static_cast<size_t>((bi * M + i) * N + j)] = s;
      }
  return out;
}

TEST(OpsLinear, MatMulBlockedEdges) {
  // Sizes that straddle every blocking boundary of the GEMM.
  for (auto [M, K, N] : {std::tuple{1, 1, 1}, {7, 3, 33}, {130, 260, 40}, {9, 20, 530}, {9, 257, 17}}) {
    Tensor a = random_tensor({M, K}, 1), b = random_tensor({K, N}, 2);
    expect_close(run1(make_node("MatMul", 2), {&a, &b}), naive_matmul(a, b, M, K, N, 1, true));
    Tensor ad = random_tensor({M, K}, 3, DType::kFloat64), bd = random_tensor({K, N}, 4, DType::kFloat64);
    expect_close(run1(make_node("MatMul", 2), {&ad, &bd}), naive_matmul(ad, bd, M, K, N, 1, true), 1e-12);
  }
}

TEST(OpsLinear, MatMulBatchedAndVectors) {
  Tensor a = random_tensor({3, 4, 5}, 5), b = random_tensor({3, 5, 6}, 6), w = random_tensor({5, 6}, 7);
  expect_close(run1(make_node("MatMul", 2), {&a, &b}), naive_matmul(a, b, 4, 5, 6, 3, false));
  expect_close(run1(make_node("MatMul", 2), {&a, &w}), naive_matmul(a, w, 4, 5, 6, 3, true));
  // Broadcast batch dims: [2,1,2,3] x [3,3,2] -> [2,3,2,2].
  Tensor p = random_tensor({2, 1, 2, 3}, 8), q = random_tensor({3, 3, 2}, 9);
  Tensor r = run1(make_node("MatMul", 2), {&p, &q});
  EXPECT_EQ(r.shape(), (Shape{2, 3, 2, 2}));
  EXPECT_NEAR(r.data<float>()[((1 * 3 + 2) * 2 + 1) * 2 + 0],
              p.data<float>()[3 * 3 + 0] * q.data<float>()[12 + 0] + p.data<float>()[3 * 3 + 1] * q.data<float>()[12 + 2] +
                  p.data<float>()[3 * 3 + 2] * q.data<float>()[12 + 4],
              1e-5);
  // 1-D operands.
  Tensor v = Tensor::from_vector<float>({1, 2, 3}, {3}), u = Tensor::from_vector<float>({4, 5, 6}, {3});
  Tensor dot = run1(make_node("MatMul", 2), {&v, &u});
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_EQ(dot.data<float>()[0], 32.f);
  Tensor m = Tensor::from_vector<float>({1, 0, 0, 1, 1, 1}, {2, 3});
  Tensor mv = run1(make_node("MatMul", 2), {&m, &v});
  EXPECT_EQ(mv.shape(), Shape{2});
  expect_close(mv, {1, 6});
  Tensor m2 = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor vm = run1(make_node("MatMul", 2), {&v, &m2});
  EXPECT_EQ(vm.shape(), Shape{2});
  expect_close(vm, {22, 28});
}

TEST(OpsLinear, MatMulIntegerAndErrors) {
  Tensor a = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2}), b = Tensor::from_vector<int32_t>({5, 6, 7, 8}, {2, 2});
  Tensor r = run1(make_node("MatMul", 2), {&a, &b});
  EXPECT_EQ(r, Tensor::from_vector<int32_t>({19, 22, 43, 50}, {2, 2}));
  Tensor c = random_tensor({2, 3}, 1), d = random_tensor({2, 3}, 2);
  EXPECT_NE(error_of(make_node("MatMul", 2), {&c, &d}).find("inner dimensions differ"), std::string::npos);
  EXPECT_NE(error_of(make_node("MatMul", 2), {&a, &c}).find("different types"), std::string::npos);
  Tensor s = Tensor::scalar<float>(1);
  EXPECT_NE(error_of(make_node("MatMul", 2), {&s, &c}).find("rank >= 1"), std::string::npos);
}

TEST(OpsLinear, GemmAttributesAndBias) {
  const int64_t M = 5, K = 7, N = 4;
  Tensor at = random_tensor({K, M}, 1), bt = random_tensor({N, K}, 2), c = random_tensor({1, N}, 3);
  Node n = make_node("Gemm", 3);
  n.attrs.set("transA", int64_t{1});
  n.attrs.set("transB", int64_t{1});
  n.attrs.set("alpha", 0.5f);
  n.attrs.set("beta", 2.0f);
  std::vector<double> want;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += at.get_as_double(k * M + i) * bt.get_as_double(j * K + k);
      want.push_back(0.5 * s + 2.0 * c.get_as_double(j));
    }
  expect_close(run1(n, {&at, &bt, &c}), want);
  // C is optional from opset 11 on, required before.
  Node n2 = make_node("Gemm", 2);
  Tensor a = random_tensor({2, 3}, 4), b = random_tensor({3, 2}, 5);
  EXPECT_EQ(run1(n2, {&a, &b}, 11).shape(), (Shape{2, 2}));
  EXPECT_NE(error_of(n2, {&a, &b}, 9).find("required before opset 11"), std::string::npos);
  Tensor badc = random_tensor({3}, 6);
  EXPECT_NE(error_of(make_node("Gemm", 3), {&a, &b, &badc}).find("cannot be broadcast"), std::string::npos);
  Tensor a3 = random_tensor({1, 2, 3}, 7);
  EXPECT_NE(error_of(n2, {&a3, &b}).find("must be 2-D"), std::string::npos);
}

// Naive direct convolution (2-D, NCHW) in double.
std::vector<double> naive_conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group, int64_t sh, int64_t sw,
                                 int64_t dh, int64_t dw, int64_t ph, int64_t pw, int64_t OH, int64_t OW) {
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), M = w.dim(0), KH = w.dim(2), KW = w.dim(3);
  const int64_t Cg = C / group, Mg = M / group;
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double s = b ? b->get_as_double(m) : 0;
          const int64_t g = m / Mg;
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x.get_as_double(((n * C + g * Cg + c) * H + ih) * W + iw) *
                     w.get_as_double(((m * Cg + c) * KH + kh) * KW + kw);
              }
          out.push_back(s);
        }
  return out;
}

TEST(OpsLinear, Conv2DGroupsStridesDilations) {
  struct Case { int64_t N, C, H, W, M, K, group, s, d, p; };
  for (const Case& c : {Case{2, 4, 9, 11, 6, 3, 2, 2, 1, 1}, Case{1, 3, 10, 10, 8, 3, 1, 1, 2, 2},
                        Case{1, 6, 7, 8, 6, 3, 6, 1, 1, 1} /* depthwise */, Case{2, 16, 5, 5, 12, 1, 1, 1, 1, 0} /* 1x1 */,
                        Case{1, 8, 13, 9, 4, 5, 4, 3, 1, 2}}) {
    Tensor x = random_tensor({c.N, c.C, c.H, c.W}, 11), w = random_tensor({c.M, c.C / c.group, c.K, c.K}, 12);
    Tensor b = random_tensor({c.M}, 13);
    Node n = make_node("Conv", 3);
    n.attrs.set("group", c.group);
    n.attrs.set("strides", std::vector<int64_t>{c.s, c.s});
    n.attrs.set("dilations", std::vector<int64_t>{c.d, c.d});
    n.attrs.set("pads", std::vector<int64_t>{c.p, c.p, c.p, c.p});
    const int64_t ek = (c.K - 1) * c.d + 1;
    const int64_t OH = (c.H + 2 * c.p - ek) / c.s + 1, OW = (c.W + 2 * c.p - ek) / c.s + 1;
    Tensor y = run1(n, {&x, &w, &b});
    ASSERT_EQ(y.shape(), (Shape{c.N, c.M, OH, OW}));
    expect_close(y, naive_conv2d(x, w, &b, c.group, c.s, c.s, c.d, c.d, c.p, c.p, OH, OW));
  }
}

TEST(OpsLinear, ConvAutoPad1D3DAndErrors) {
  Tensor x = random_tensor({1, 2, 7, 6}, 1), w = random_tensor({3, 2, 3, 2}, 2);
  Node n = make_node("Conv", 2);
  n.attrs.set("auto_pad", std::string("SAME_LOWER"));
  n.attrs.set("strides", std::vector<int64_t>{2, 2});
  Tensor y = run1(n, {&x, &w});
  ASSERT_EQ(y.shape(), (Shape{1, 3, 4, 3}));
  // SAME_LOWER: total pad 2 (h: (4-1)*2+3-7) -> 1 before; w: (3-1)*2+2-6 = 0.
  expect_close(y, naive_conv2d(x, w, nullptr, 1, 2, 2, 1, 1, 1, 0, 4, 3));
  // 1-D as a 2-D conv with height 1; 3-D with a depth-1 kernel as 2-D.
  Tensor x1 = random_tensor({1, 2, 9}, 3), w1 = random_tensor({4, 2, 3}, 4);
  Tensor y1 = run1(make_node("Conv", 2), {&x1, &w1});
  expect_close(y1, naive_conv2d(x1.reshaped({1, 2, 1, 9}), w1.reshaped({4, 2, 1, 3}), nullptr, 1, 1, 1, 1, 1, 0, 0, 1, 7));
  Tensor x3 = random_tensor({1, 2, 1, 5, 5}, 5), w3 = random_tensor({2, 2, 1, 3, 3}, 6);
  Tensor y3 = run1(make_node("Conv", 2), {&x3, &w3});
  EXPECT_EQ(y3.shape(), (Shape{1, 2, 1, 3, 3}));
  expect_close(y3, naive_conv2d(x3.reshaped({1, 2, 5, 5}), w3.reshaped({2, 2, 3, 3}), nullptr, 1, 1, 1, 1, 1, 0, 0, 3, 3));
  // Errors.
  Tensor wbad = random_tensor({3, 3, 3, 2}, 7);
  EXPECT_NE(error_of(make_node("Conv", 2), {&x, &wbad}).find("input channels"), std::string::npos);
  Tensor bbad = random_tensor({4}, 8);
  EXPECT_NE(error_of(make_node("Conv", 3), {&x, &w, &bbad}).find("bias B must have shape [3]"), std::string::npos);
  Node nk = make_node("Conv", 2);
  nk.attrs.set("kernel_shape", std::vector<int64_t>{3, 3});
  EXPECT_NE(error_of(nk, {&x, &w}).find("kernel_shape"), std::string::npos);
  Node ns = make_node("Conv", 2);
  ns.attrs.set("strides", std::vector<int64_t>{0, 1});
  EXPECT_NE(error_of(ns, {&x, &w}).find("'strides'"), std::string::npos);
  Node na = make_node("Conv", 2);
  na.attrs.set("auto_pad", std::string("SAME"));
  EXPECT_NE(error_of(na, {&x, &w}).find("auto_pad"), std::string::npos);
  Tensor xi(DType::kInt32, {1, 2, 7, 6}), wi(DType::kInt32, {3, 2, 3, 2});
  try {
    eval_node(make_node("Conv", 2), 17, {&xi, &wi});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

TEST(OpsLinear, ConvFloat16ViaFloat) {
  Tensor x(DType::kFloat16, {1, 1, 3, 3}), w(DType::kFloat16, {1, 1, 2, 2});
  for (int i = 0; i < 9; ++i) x.data<Float16>()[i] = Float16(static_cast<float>(i));
  for (int i = 0; i < 4; ++i) w.data<Float16>()[i] = Float16(1.0f);
  Tensor y = run1(make_node("Conv", 2), {&x, &w});
  EXPECT_EQ(y.dtype(), DType::kFloat16);
  expect_close(y, {8, 12, 20, 24});
}

TEST(OpsLinear, ConvTransposeMatchesScatter) {
  const int64_t N = 1, C = 4, H = 3, W = 4, group = 2, Mg = 3, K = 3, s = 2, p = 1, op = 1;
  Tensor x = random_tensor({N, C, H, W}, 1), w = random_tensor({C, Mg, K, K}, 2), b = random_tensor({Mg * group}, 3);
  Node n = make_node("ConvTranspose", 3);
  n.attrs.set("group", group);
  n.attrs.set("strides", std::vector<int64_t>{s, s});
  n.attrs.set("pads", std::vector<int64_t>{p, p, p, p});
  n.attrs.set("output_padding", std::vector<int64_t>{op, 0});
  const int64_t OH = s * (H - 1) + op + K - 2 * p, OW = s * (W - 1) + K - 2 * p;
  Tensor y = run1(n, {&x, &w, &b});
  ASSERT_EQ(y.shape(), (Shape{N, Mg * group, OH, OW}));
  std::vector<double> want(static_cast<size_t>(Mg * group * OH * OW));
  for (int64_t m = 0; m < Mg * group; ++m)
    for (int64_t i = 0; i < OH * OW; ++i) want[static_cast<size_t>(m * OH * OW + i)] = b.get_as_double(m);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ih = 0; ih < H; ++ih)
      for (int64_t iw = 0; iw < W; ++iw)
        for (int64_t mg = 0; mg < Mg; ++mg)
          for (int64_t kh = 0; kh < K; ++kh)
            for (int64_t kw = 0; kw < K; ++kw) {
              const int64_t oh = ih * s - p + kh, ow = iw * s - p + kw, m = (c / (C / group)) * Mg + mg;
              if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
              want[static_cast<size_t>((m * OH + oh) * OW + ow)] +=
                  x.get_as_double((c * H + ih) * W + iw) * w.get_as_double(((c * Mg + mg) * K + kh) * K + kw);
            }
  expect_close(y, want);
  // Shapes from output_shape and auto_pad.
  Node n2 = make_node("ConvTranspose", 2);
  n2.attrs.set("strides", std::vector<int64_t>{2, 2});
  n2.attrs.set("auto_pad", std::string("SAME_UPPER"));
  Tensor x2 = random_tensor({1, 2, 3, 3}, 4), w2 = random_tensor({2, 1, 3, 3}, 5);
  EXPECT_EQ(run1(n2, {&x2, &w2}).shape(), (Shape{1, 1, 6, 6}));
  Node n3 = make_node("ConvTranspose", 2);
  n3.attrs.set("strides", std::vector<int64_t>{3, 2});
  n3.attrs.set("output_shape", std::vector<int64_t>{10, 8});
  EXPECT_EQ(run1(n3, {&x2, &w2}).shape(), (Shape{1, 1, 10, 8}));
  Tensor wbad = random_tensor({3, 1, 3, 3}, 6);
  EXPECT_NE(error_of(make_node("ConvTranspose", 2), {&x2, &wbad}).find("input channels"), std::string::npos);
}

TEST(OpsLinear, EinsumForms) {
  auto einsum = [](const std::string& eq, std::vector<const Tensor*> in) {
    Node n = make_node("Einsum", static_cast<int>(in.size()));
    n.attrs.set("equation", eq);
    return eval_node(n, 17, in).at(0);
  };
  // Attention-style batched matmul with a transposed operand.
  Tensor q = random_tensor({2, 3, 4, 5}, 1), k = random_tensor({2, 3, 6, 5}, 2);
  Tensor s = einsum("bhid,bhjd->bhij", {&q, &k});
  ASSERT_EQ(s.shape(), (Shape{2, 3, 4, 6}));
  double want = 0;
  for (int d = 0; d < 5; ++d) want += q.get_as_double(((1 * 3 + 2) * 4 + 3) * 5 + d) * k.get_as_double(((1 * 3 + 2) * 6 + 4) * 5 + d);
  EXPECT_NEAR(s.get_as_double(((1 * 3 + 2) * 4 + 3) * 6 + 4), want, 1e-5);
  // Implicit output (alphabetical), transpose, trace, diagonal, sum, ellipsis broadcasting.
  Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_vector<double>({1, 0, 0, 1, 1, 1}, {3, 2});
  expect_close(einsum("ij,jk", {&a, &b}), {4, 5, 10, 11});
  expect_close(einsum("ji", {&a}), {1, 4, 2, 5, 3, 6});
  Tensor sq = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(einsum("ii", {&sq}).shape(), Shape{});
  expect_close(einsum("ii", {&sq}), {5});
  expect_close(einsum("ii->i", {&sq}), {1, 4});
  expect_close(einsum("ij->", {&a}), {21});
  Tensor e = random_tensor({2, 1, 2, 3}, 3, DType::kFloat64), f = random_tensor({4, 3, 2}, 4, DType::kFloat64);
  Tensor g = einsum("...ij,...jk->...ik", {&e, &f});
  EXPECT_EQ(g.shape(), (Shape{2, 4, 2, 2}));
  Tensor ei = Tensor::from_vector<int64_t>({1, 2, 3}, {3});
  EXPECT_EQ(einsum("i,i", {&ei, &ei}), Tensor::scalar<int64_t>(14));
  // Errors.
  Node bad = make_node("Einsum", 2);
  bad.attrs.set("equation", std::string("ij,jk->ik"));
  Tensor c = random_tensor({4, 2}, 5, DType::kFloat64);
  EXPECT_NE(error_of(bad, {&a, &c}).find("inconsistent sizes"), std::string::npos) << error_of(bad, {&a, &c});
  bad.attrs.set("equation", std::string("ij->ik"));
  EXPECT_NE(error_of(make_node("Einsum", 1), {&a}).find("equation"), std::string::npos);
  bad.attrs.set("equation", std::string("ij"));
  EXPECT_NE(error_of(bad, {&a, &b}).find("operands"), std::string::npos);
}

}  // namespace
}  // namespace korch
