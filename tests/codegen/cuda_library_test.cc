// GPU library calls planned on the host (runtime/cuda/cuda_library.h): each description a real
// linear node produces is planned, then the plan is executed by a host model of the library's
// documented semantics (cuBLASLt: column-major operands with op flags and strided batches;
// cuDNN: NCHW cross-correlation with symmetric pads, and backward-data for ConvTranspose) and
// compared with the reference interpreter. What this cannot show (the libraries themselves on a
// GPU) is checked by scripts/gpu_check.sh.
#include "runtime/cuda/cuda_library.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "codegen/cuda/cuda_backend.h"
#include "codegen/linear_match.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "linear_test_util.h"
#include "orchestrate/kernel_candidate.h"

namespace korch::cuda {
namespace {

using cpu::linear_test::attrs;
using cpu::linear_test::Builder;

// The description of the graph's one linear node, slots: src 0, weights 1, result 2.
nlohmann::json describe(Builder& b, ValueId y) {
  b.g.outputs = {y};
  LinearMatchResult m = match_linear(b.g, {0}, {y});
  EXPECT_TRUE(m.ok) << m.reason;
  nlohmann::json d = m.match.desc;
  d["operand_slots"] = {0, 1};
  d["result_slot"] = 2;
  return d;
}

// The graph's inputs (random) and its value by the reference interpreter.
struct Run {
  std::vector<Tensor> inputs;
  Tensor ref;
};
Run reference(Builder& b) {
  Run r;
  std::mt19937_64 rng(7);
  for (ValueId v : b.g.inputs) r.inputs.push_back(random_tensor(b.g.type(v), rng));
  r.ref = interpret(b.g, r.inputs).at(0);
  return r;
}
const float* operand(Builder& b, const Run& r, int k) {  // node input k: a graph input or a weight
  ValueId v = b.g.nodes[0].inputs[static_cast<size_t>(k)];
  for (size_t i = 0; i < b.g.inputs.size(); ++i)
    if (b.g.inputs[i] == v) return r.inputs[i].data<float>();
  return b.g.value(v).constant->data<float>();
}

// cuBLASLt's matmul as documented: C = op(A) op(B), column-major, strided batches.
Tensor host_gemm(const GemmPlan& g, const float* A, const float* B, const Shape& out) {
  const int64_t ra = g.a.transposed ? g.a.cols : g.a.rows, ka = g.a.transposed ? g.a.rows : g.a.cols;
  const int64_t kb = g.b.transposed ? g.b.cols : g.b.rows, cb = g.b.transposed ? g.b.rows : g.b.cols;
  EXPECT_EQ(ra, g.c.rows);
  EXPECT_EQ(cb, g.c.cols);
  EXPECT_EQ(ka, kb);
  Tensor c(TensorType{DType::kFloat32, out});
  float* C = c.data<float>();
  for (int64_t bt = 0; bt < g.batch; ++bt)
    for (int64_t i = 0; i < g.c.rows; ++i)
      for (int64_t j = 0; j < g.c.cols; ++j) {
        double s = 0;
        for (int64_t l = 0; l < ka; ++l) {
          const float a = A[bt * g.a.batch_stride + (g.a.transposed ? l + i * g.a.ld : i + l * g.a.ld)];
          const float v = B[bt * g.b.batch_stride + (g.b.transposed ? j + l * g.b.ld : l + j * g.b.ld)];
          s += static_cast<double>(a) * v;
        }
        C[bt * g.c.batch_stride + i + j * g.c.ld] = static_cast<float>(s);
      }
  return c;
}

void expect_gemm_matches(Builder& b, ValueId y) {
  LibraryPlan p = plan_library_call(describe(b, y));
  ASSERT_TRUE(p.ok()) << p.reason;
  ASSERT_TRUE(p.gemm);
  Run r = reference(b);
  // The library's A is the weights operand (slot 1), its B the src (slot 0).
  EXPECT_EQ(p.gemm->a.slot, 1);
  EXPECT_EQ(p.gemm->b.slot, 0);
  EXPECT_EQ(p.gemm->c.slot, 2);
  Tensor c = host_gemm(*p.gemm, operand(b, r, 1), operand(b, r, 0), r.ref.shape());
  EXPECT_LT(rel_l2_error(c, r.ref), 1e-6);
}

TEST(CudaLibraryPlan, LinearLayerRowsCollapseIntoOneGemm) {
  Builder b;
  ValueId y = b.op("MatMul", {b.input({2, 3, 4, 5}), b.weight({5, 6})});
  expect_gemm_matches(b, y);
  LibraryPlan p = plan_library_call(describe(b, y));
  EXPECT_EQ(p.gemm->batch, 1);
  EXPECT_EQ(p.gemm->m, 24);
}

TEST(CudaLibraryPlan, BatchedAndBroadcastMatMul) {
  Builder b;
  expect_gemm_matches(b, b.op("MatMul", {b.input({4, 3, 5}), b.input({4, 5, 6})}));
  Builder c;
  ValueId y = c.op("MatMul", {c.input({1, 3, 5}), c.input({4, 5, 6})});
  expect_gemm_matches(c, y);
  EXPECT_EQ(plan_library_call(describe(c, y)).gemm->b.batch_stride, 0);  // the broadcast src
  Builder d;
  expect_gemm_matches(d, d.op("MatMul", {d.input({2, 3, 4, 5}), d.input({2, 3, 5, 6})}));
}

TEST(CudaLibraryPlan, EinsumTransposedOperandsAreOpFlags) {
  Attributes bt, at;
  bt.set("equation", std::string("bij,bkj->bik"));  // B read transposed (attention scores)
  at.set("equation", std::string("bji,bjk->bik"));  // A read transposed
  Builder b;
  ValueId y = b.op("Einsum", {b.input({3, 4, 8}), b.input({3, 5, 8})}, bt);
  expect_gemm_matches(b, y);
  EXPECT_TRUE(plan_library_call(describe(b, y)).gemm->a.transposed);
  Builder c;
  ValueId z = c.op("Einsum", {c.input({3, 8, 4}), c.input({3, 8, 5})}, at);
  expect_gemm_matches(c, z);
  EXPECT_TRUE(plan_library_call(describe(c, z)).gemm->b.transposed);
}

TEST(CudaLibraryPlan, BatchDimsWithoutOneStrideAreRefused) {
  Builder b;  // src batch [2,3], weights [1,3]: the weights' stride is 0 on one dim and not the other
  ValueId y = b.op("MatMul", {b.input({2, 3, 4, 5}), b.input({1, 3, 5, 6})});
  LibraryPlan p = plan_library_call(describe(b, y));
  EXPECT_FALSE(p.ok());
  EXPECT_NE(p.reason.find("uniform stride"), std::string::npos) << p.reason;
}

// cuDNN's forward convolution (cross-correlation, symmetric pads, filter [K, C/G, k..]) and its
// backward-data convolution, 2-D, as documented.
Tensor host_conv(const ConvPlan& c, const float* x, const float* w, const Shape& out) {
  Tensor y(TensorType{DType::kFloat32, out});
  float* Y = y.data<float>();
  std::fill(Y, Y + y.numel(), 0.f);
  EXPECT_EQ(c.x.size(), 4u);
  // Forward: `in` [N, Ci, H, W] -> `o` [N, Co, OH, OW]; backward-data swaps the roles of x and y
  // (dy = the src, dx = the dst) with the same filter.
  const std::vector<int>& in = c.transpose ? c.y : c.x;
  const std::vector<int>& o = c.transpose ? c.x : c.y;
  const int G = c.groups, ci_g = in[1] / G, co_g = o[1] / G;
  EXPECT_EQ(c.w[0], o[1]);
  EXPECT_EQ(c.w[1], ci_g);
  for (int n = 0; n < in[0]; ++n)
    for (int co = 0; co < o[1]; ++co)
      for (int oh = 0; oh < o[2]; ++oh)
        for (int ow = 0; ow < o[3]; ++ow)
          for (int cig = 0; cig < ci_g; ++cig)
            for (int kh = 0; kh < c.w[2]; ++kh)
              for (int kw = 0; kw < c.w[3]; ++kw) {
                const int ih = oh * c.strides[0] - c.pads[0] + kh * c.dilations[0];
                const int iw = ow * c.strides[1] - c.pads[1] + kw * c.dilations[1];
                if (ih < 0 || iw < 0 || ih >= in[2] || iw >= in[3]) continue;
                const int ci = co / co_g * ci_g + cig;
                const int64_t wi = ((static_cast<int64_t>(co) * ci_g + cig) * c.w[2] + kh) * c.w[3] + kw;
                const int64_t ii = ((static_cast<int64_t>(n) * in[1] + ci) * in[2] + ih) * in[3] + iw;
                const int64_t oi = ((static_cast<int64_t>(n) * o[1] + co) * o[2] + oh) * o[3] + ow;
                if (c.transpose) Y[ii] += w[wi] * x[oi];  // dx[in] += w * dy[o]
                else Y[oi] += w[wi] * x[ii];
              }
  return y;
}

void expect_conv_matches(Builder& b, ValueId y) {
  LibraryPlan p = plan_library_call(describe(b, y));
  ASSERT_TRUE(p.ok()) << p.reason;
  ASSERT_TRUE(p.conv);
  EXPECT_EQ(p.conv->src_slot, 0);
  EXPECT_EQ(p.conv->weights_slot, 1);
  EXPECT_EQ(p.conv->dst_slot, 2);
  Run r = reference(b);
  Tensor out = host_conv(*p.conv, operand(b, r, 0), operand(b, r, 1), r.ref.shape());
  EXPECT_LT(rel_l2_error(out, r.ref), 1e-6);
}

TEST(CudaLibraryPlan, ConvolutionsMatchTheInterpreter) {
  {
    Builder b;  // 3x3, pad 1, stride 2, dilation 2
    expect_conv_matches(b, b.conv(b.input({1, 4, 9, 9}), {6, 4, 3, 3}, attrs({{"pads", {2, 2, 2, 2}}, {"strides", {2, 2}}, {"dilations", {2, 2}}})));
  }
  {
    Builder b;  // grouped: filter [O, I/G, k..]
    ValueId y = b.conv(b.input({2, 6, 7, 7}), {9, 2, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}, 3));
    expect_conv_matches(b, y);
    LibraryPlan p = plan_library_call(describe(b, y));
    EXPECT_EQ(p.conv->groups, 3);
    EXPECT_EQ(p.conv->w, (std::vector<int>{9, 2, 3, 3}));
  }
  {
    Builder b;  // ConvTranspose k4 s2 p1 (upsampling), grouped
    Attributes a = attrs({{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}}, 2);
    expect_conv_matches(b, b.op("ConvTranspose", {b.input({1, 4, 5, 5}), b.weight({4, 3, 4, 4})}, a));
  }
  {
    Builder b;  // ConvTranspose with output_padding: the floor of cuDNN's shape rule absorbs it
    Attributes a = attrs({{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}, {"output_padding", {1, 1}}});
    ValueId y = b.op("ConvTranspose", {b.input({1, 3, 4, 4}), b.weight({3, 5, 3, 3})}, a);
    expect_conv_matches(b, y);
    EXPECT_EQ(plan_library_call(describe(b, y)).conv->w, (std::vector<int>{3, 5, 3, 3}));
  }
}

TEST(CudaLibraryPlan, OneDimensionalConvGetsAUnitHeight) {
  Builder b;
  ValueId y = b.conv(b.input({1, 3, 20}), {4, 3, 5}, attrs({{"pads", {2, 2}}, {"strides", {2}}}));
  LibraryPlan p = plan_library_call(describe(b, y));
  ASSERT_TRUE(p.ok()) << p.reason;
  EXPECT_EQ(p.conv->x, (std::vector<int>{1, 3, 1, 20}));
  EXPECT_EQ(p.conv->w, (std::vector<int>{4, 3, 1, 5}));
  EXPECT_EQ(p.conv->pads, (std::vector<int>{0, 2}));
  EXPECT_EQ(p.conv->strides, (std::vector<int>{1, 2}));
  expect_conv_matches(b, y);
}

TEST(CudaLibraryPlan, WhatNoCallServesIsRefusedWithTheReason) {
  Builder b;  // SAME_UPPER, 3x3 at stride 2 on an even size: one pad row after, none before
  Attributes a = attrs({{"strides", {2, 2}}});
  a.set("auto_pad", std::string("SAME_UPPER"));
  ValueId y = b.conv(b.input({1, 3, 8, 8}), {4, 3, 3, 3}, a);
  LibraryPlan p = plan_library_call(describe(b, y));
  EXPECT_FALSE(p.ok());
  EXPECT_NE(p.reason.find("asymmetric padding"), std::string::npos) << p.reason;

  nlohmann::json d = describe(b, y);
  d["dtypes"] = {{"src", "u8"}, {"weights", "s8"}, {"dst", "s32"}};
  EXPECT_NE(plan_library_call(d).reason.find("integer"), std::string::npos);
  Builder m;
  d = describe(m, m.op("MatMul", {m.input({4, 8}), m.weight({8, 8})}));
  d["post_ops"] = nlohmann::json::array({{{"type", "eltwise"}, {"alg", "tanh"}, {"alpha", 0.f}, {"beta", 0.f}}});
  EXPECT_NE(plan_library_call(d).reason.find("epilogue eltwise tanh"), std::string::npos) << plan_library_call(d).reason;
  EXPECT_THROW(plan_library_call(nlohmann::json{{"op", "MatMul"}}), Error);
}

// Epilogues: the whole graph (one linear node and what follows it) as one description, operand k
// at slot k and the result after them; the plan's call, then its epilogue as the libraries
// document it (act(alpha * product + residual + bias)), against the interpreter.
struct Described {
  nlohmann::json desc;
  std::vector<ValueId> operands;
};
std::vector<NodeId> all_nodes(const Builder& b) {
  std::vector<NodeId> nodes;
  for (size_t n = 0; n < b.g.nodes.size(); ++n) nodes.push_back(static_cast<NodeId>(n));
  return nodes;
}
Described describe_all(Builder& b, ValueId y) {
  b.g.outputs = {y};
  LinearMatchResult m = match_linear(b.g, all_nodes(b), {y});
  EXPECT_TRUE(m.ok) << m.reason;
  Described d{m.match.desc, m.match.operands};
  d.desc["operand_slots"] = nlohmann::json::array();
  for (size_t k = 0; k < d.operands.size(); ++k) d.desc["operand_slots"].push_back(static_cast<int>(k));
  d.desc["result_slot"] = static_cast<int>(d.operands.size());
  return d;
}
const float* value_of(Builder& b, const Run& r, ValueId v) {
  for (size_t i = 0; i < b.g.inputs.size(); ++i)
    if (b.g.inputs[i] == v) return r.inputs[i].data<float>();
  return b.g.value(v).constant->data<float>();
}
void apply_epilogue(const LibraryEpilogue& e, const std::vector<const float*>& slots, size_t channel_stride,
                    Tensor& out) {
  float* o = out.data<float>();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    double v = e.alpha * o[i];
    if (e.residual) v += slots.at(static_cast<size_t>(e.residual_slot))[i];
    if (e.bias) v += slots.at(static_cast<size_t>(e.bias_slot))[(i / static_cast<int64_t>(channel_stride)) % e.bias_length];
    if (e.act == LibraryEpilogue::Act::kRelu) v = std::max(v, 0.0);
    if (e.act == LibraryEpilogue::Act::kGeluTanh)
      v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    o[i] = static_cast<float>(v);
  }
}
// Plans the graph as one call and checks the host model against the interpreter; returns the plan.
LibraryPlan expect_epilogue_matches(Builder& b, ValueId y) {
  Described d = describe_all(b, y);
  LibraryPlan p = plan_library_call(d.desc);
  EXPECT_TRUE(p.ok()) << p.reason;
  if (!p.ok()) return p;
  Run r = reference(b);
  std::vector<const float*> slots;
  for (ValueId v : d.operands) slots.push_back(value_of(b, r, v));
  Tensor out;
  size_t channel_stride = 1;
  if (p.gemm) {
    out = host_gemm(*p.gemm, slots.at(static_cast<size_t>(p.gemm->a.slot)), slots.at(static_cast<size_t>(p.gemm->b.slot)),
                    r.ref.shape());
  } else {
    out = host_conv(*p.conv, slots.at(static_cast<size_t>(p.conv->src_slot)),
                    slots.at(static_cast<size_t>(p.conv->weights_slot)), r.ref.shape());
    channel_stride = static_cast<size_t>(r.ref.numel() / (r.ref.shape()[0] * r.ref.shape()[1]));
  }
  apply_epilogue(p.epilogue, slots, channel_stride, out);
  EXPECT_LT(rel_l2_error(out, r.ref), 1e-6) << p.epilogue.describe();
  return p;
}

TEST(CudaLibraryPlan, MatMulEpiloguesAreCublasLtsScaleBiasResidualAndActivation) {
  {
    Builder b;  // attention-style scale, a bias, tanh-GELU
    b.g.opset = 20;
    ValueId y = b.op("Mul", {b.op("MatMul", {b.input({2, 5, 16}), b.weight({16, 12})}), b.scalar(0.25f)});
    Attributes tanh;
    tanh.set("approximate", std::string("tanh"));
    ValueId z = b.op("Gelu", {b.op("Add", {y, b.expand_const({1, 1, 12}, {2, 5, 12})})}, tanh);
    LibraryPlan p = expect_epilogue_matches(b, z);
    EXPECT_EQ(p.epilogue.describe(), "x0.25 + bias[12], gelu_tanh");
  }
  {
    Builder b;  // a residual and ReLU, the product divided by a constant
    ValueId y = b.op("Div", {b.op("MatMul", {b.input({6, 8}), b.weight({8, 8})}), b.scalar(4.f)});
    ValueId z = b.op("Relu", {b.op("Add", {b.input({6, 8}), y})});
    LibraryPlan p = expect_epilogue_matches(b, z);
    EXPECT_TRUE(p.epilogue.residual);
    EXPECT_EQ(p.epilogue.act, LibraryEpilogue::Act::kRelu);
  }
}

TEST(CudaLibraryPlan, ConvEpiloguesAreCudnnsFusedConvolution) {
  Builder b;  // bias, residual, ReLU
  ValueId y = b.conv(b.input({1, 4, 6, 6}), {4, 4, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
  ValueId z = b.op("Relu", {b.op("Add", {b.bias(y), b.input({1, 4, 6, 6})})});
  LibraryPlan p = expect_epilogue_matches(b, z);
  EXPECT_EQ(p.epilogue.describe(), "residual + bias[4], relu");
}

TEST(CudaLibraryPlan, EpiloguesNoLibraryAppliesAreRefused) {
  {
    Builder b;  // cuDNN's fused call has no sigmoid
    ValueId y = b.conv(b.input({1, 4, 6, 6}), {4, 4, 1, 1});
    LibraryPlan p = plan_library_call(describe_all(b, b.op("Sigmoid", {b.bias(y)})).desc);
    EXPECT_NE(p.reason.find("epilogue eltwise logistic"), std::string::npos) << p.reason;
  }
  {
    Builder b;  // ONNX's default GELU is the erf form; cuBLASLt's is tanh
    b.g.opset = 20;
    ValueId y = b.op("MatMul", {b.input({4, 8}), b.weight({8, 8})});
    LibraryPlan p = plan_library_call(describe_all(b, b.op("Gelu", {y})).desc);
    EXPECT_NE(p.reason.find("gelu_erf"), std::string::npos) << p.reason;
  }
  {
    Builder b;  // an add after the activation
    ValueId y = b.op("Relu", {b.op("MatMul", {b.input({4, 8}), b.weight({8, 8})})});
    LibraryPlan p = plan_library_call(describe_all(b, b.op("Add", {y, b.input({4, 8})})).desc);
    EXPECT_NE(p.reason.find("after its activation"), std::string::npos) << p.reason;
  }
  {
    Builder b;  // a ConvTranspose: backward-data has no fused form
    ValueId y = b.op("ConvTranspose", {b.input({1, 4, 5, 5}), b.weight({4, 3, 4, 4})},
                     attrs({{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}}));
    LibraryPlan p = plan_library_call(describe_all(b, b.op("Relu", {y})).desc);
    EXPECT_NE(p.reason.find("ConvTranspose with a fused epilogue"), std::string::npos) << p.reason;
  }
}

// With the CUDA backend's rules the linear step stops before what its library cannot apply, and
// the kernel runs that part as generated code: a cuDNN convolution with its bias, then a Sigmoid;
// a GEMM with its bias, then an erf-GELU (cuBLASLt's GELU is the tanh form).
TEST(CudaLibraryPlan, WhatTheLibraryCannotApplyStaysGeneratedCode) {
  auto library = [](const nlohmann::json& d) { return plan_library_call(d).reason; };
  {
    Builder b;
    ValueId biased = b.bias(b.conv(b.input({1, 4, 6, 6}), {4, 4, 1, 1}));
    ValueId s = b.op("Sigmoid", {biased});
    b.g.outputs = {s};
    LinearMatchResult m = match_linear(b.g, all_nodes(b), {s}, library);
    ASSERT_TRUE(m.ok) << m.reason;
    EXPECT_EQ(m.match.result, biased);
    EmittedKernel k = CudaBackend().emit(b.g, make_candidate(b.g, all_nodes(b), false), "");
    EXPECT_TRUE(k.ok) << k.reason;
    EXPECT_FALSE(k.source.empty());  // the Sigmoid
  }
  {
    Builder b;
    ValueId h = b.op("Add", {b.op("MatMul", {b.input({6, 8}), b.weight({8, 8})}), b.expand_const({8}, {6, 8})});
    ValueId e = b.op("Add", {b.op("Erf", {b.op("Div", {h, b.scalar(1.4142135f)})}), b.scalar(1.f)});
    ValueId y = b.op("Mul", {h, e});
    b.g.outputs = {y};
    LinearMatchResult m = match_linear(b.g, all_nodes(b), {y}, library);
    ASSERT_TRUE(m.ok) << m.reason;
    EXPECT_EQ(m.match.result, h);
    EXPECT_EQ(match_linear(b.g, all_nodes(b), {y}).match.result, y);  // oneDNN: gelu_erf post-op
    EmittedKernel k = CudaBackend().emit(b.g, make_candidate(b.g, all_nodes(b), false), "");
    EXPECT_TRUE(k.ok) << k.reason;
  }
}

}  // namespace
}  // namespace korch::cuda
