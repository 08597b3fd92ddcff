// Timing of the linear step on model shapes: plain (NCHW) vs blocked (oneDNN's choice + reorders)
// src/dst layouts for Conv, and GFLOP/s. Not a test: disabled, run by hand with
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=passive build/tests/korch_linear_tests
//       --gtest_also_run_disabled_tests --gtest_filter='*LinearBench*'
// It prints one line per shape and format: median of 30 runs after 5 warm-up runs, wall and
// process CPU time (run with OMP_WAIT_POLICY=passive so that idle threads do not spin); GF/s
// are per CPU-second (the work's efficiency, which the other processes on a shared machine do
// not distort; with N idle cores the wall time approaches cpu / N).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "codegen/linear_match.h"
#include "runtime/cpu/cpu_linear_step.h"
#include "codegen/kernel_signature.h"
#include "linear_test_util.h"
#include "orchestrate/kernel_candidate.h"

namespace korch::cpu {
namespace {

using namespace linear_test;

struct Timing {
  double ms = 0;      // wall-clock median
  double cpu_ms = 0;  // process CPU time median: the work done, robust to other processes'
                      // load on a shared machine (run with OMP_WAIT_POLICY=passive so that
                      // idle OpenMP threads do not spin it up)
  std::string impl;
};

double process_cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
}

double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// One kernel (all of b's nodes) ready to run as a linear step with `format`.
struct Prepared {
  std::unique_ptr<LinearStep> step;
  std::vector<Tensor> keep;
  std::vector<void*> args;
  std::vector<double> times, cpu_times;
};

Prepared prepare(Builder& b, const std::string& format) {
  Graph& g = b.g;
  g.outputs = {g.nodes.back().outputs[0]};
  std::vector<NodeId> all;
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i) all.push_back(i);
  KernelCandidate c = make_candidate(g, all, false);
  LinearMatchResult m = match_linear(g, c.nodes, c.outputs);
  EXPECT_TRUE(m.ok) << m.reason;
  const std::vector<ValueId> args = kernel_arg_inputs(g, c);
  nlohmann::json desc = m.match.desc;
  desc["format"] = format;
  std::vector<int> slots;
  for (ValueId v : m.match.operands) slots.push_back(static_cast<int>(std::find(args.begin(), args.end(), v) - args.begin()));
  desc["operand_slots"] = slots;
  desc["result_slot"] = static_cast<int>(args.size());
  Prepared p;
  p.keep.reserve(args.size() + 1);
  for (ValueId v : args) {
    p.keep.push_back(g.value(v).is_constant() ? *g.value(v).constant : random_tensor(g.type(v), b.rng));
    p.args.push_back(p.keep.back().raw());
  }
  p.keep.emplace_back(g.type(m.match.result));
  p.args.push_back(p.keep.back().raw());
  p.step = LinearStep::create(desc);
  return p;
}

// Runs the prepared steps round-robin (so that load from other processes hits them alike):
// 5 warm-up rounds, then `runs` timed rounds; returns each one's median.
std::vector<Timing> time_interleaved(std::vector<Prepared>& ps, int runs = 30) {
  for (int i = 0; i < 5; ++i)
    for (auto& p : ps) p.step->run(p.args.data());
  for (int i = 0; i < runs; ++i)
    for (auto& p : ps) {
      const double c0 = process_cpu_ms();
      auto t0 = std::chrono::steady_clock::now();
      p.step->run(p.args.data());
      p.times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      p.cpu_times.push_back(process_cpu_ms() - c0);
    }
  std::vector<Timing> out;
  for (auto& p : ps) out.push_back({median(p.times), median(p.cpu_times), p.step->implementation()});
  return out;
}

struct ConvShape {
  const char* name;
  Shape x, w;
  int64_t stride, pad, group;
};

TEST(LinearBench, DISABLED_ConvPlainVsBlocked) {
  const ConvShape shapes[] = {
      {"resnet18 3x3 64c 56x56", {1, 64, 56, 56}, {64, 64, 3, 3}, 1, 1, 1},
      {"resnet18 3x3 128c 28x28", {1, 128, 28, 28}, {128, 128, 3, 3}, 1, 1, 1},
      {"resnet18 3x3 256c 14x14", {1, 256, 14, 14}, {256, 256, 3, 3}, 1, 1, 1},
      {"resnet18 3x3 512c 7x7", {1, 512, 7, 7}, {512, 512, 3, 3}, 1, 1, 1},
      {"resnet18 3x3 s2 64->128", {1, 64, 56, 56}, {128, 64, 3, 3}, 2, 1, 1},
      {"resnet18 1x1 s2 64->128", {1, 64, 56, 56}, {128, 64, 1, 1}, 2, 0, 1},
      {"resnet50 1x1 256->64 56x56", {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, 1},
      {"resnet50 1x1 64->256 56x56", {1, 64, 56, 56}, {256, 64, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 24->144 56x56", {1, 24, 56, 56}, {144, 24, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 960->160 7x7", {1, 960, 7, 7}, {160, 960, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 160->960 7x7", {1, 160, 7, 7}, {960, 160, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 320->1280 7x7", {1, 320, 7, 7}, {1280, 320, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 64->384 14x14", {1, 64, 14, 14}, {384, 64, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 384->64 14x14", {1, 384, 14, 14}, {64, 384, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 576->96 14x14", {1, 576, 14, 14}, {96, 576, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 32->192 28x28", {1, 32, 28, 28}, {192, 32, 1, 1}, 1, 0, 1},
      {"mnv2 1x1 192->32 28x28", {1, 192, 28, 28}, {32, 192, 1, 1}, 1, 0, 1},
      {"resnet50 1x1 1024->256 14", {1, 1024, 14, 14}, {256, 1024, 1, 1}, 1, 0, 1},
      {"resnet50 1x1 512->2048 7", {1, 512, 7, 7}, {2048, 512, 1, 1}, 1, 0, 1},
      {"resnet18 1x1 s2 256->512", {1, 256, 14, 14}, {512, 256, 1, 1}, 2, 0, 1},
      {"mnv2 dw3x3 32c 112x112", {1, 32, 112, 112}, {32, 1, 3, 3}, 1, 1, 32},
      {"mnv2 dw3x3 144c 56x56", {1, 144, 56, 56}, {144, 1, 3, 3}, 1, 1, 144},
      {"mnv2 dw3x3 s2 96c 112", {1, 96, 112, 112}, {96, 1, 3, 3}, 2, 1, 96},
      {"mnv2 dw3x3 576c 14x14", {1, 576, 14, 14}, {576, 1, 3, 3}, 1, 1, 576},
      {"mnv2 dw3x3 960c 7x7", {1, 960, 7, 7}, {960, 1, 3, 3}, 1, 1, 960},
      {"mnv2 stem 3x3 s2 3->32", {1, 3, 224, 224}, {32, 3, 3, 3}, 2, 1, 1},
      {"resnet stem 7x7 s2 3->64", {1, 3, 224, 224}, {64, 3, 7, 7}, 2, 3, 1},
      {"candy 9x9 3->32 232", {1, 3, 232, 232}, {32, 3, 9, 9}, 1, 0, 1},
      {"candy 9x9 32->3 232", {1, 32, 232, 232}, {3, 32, 9, 9}, 1, 0, 1},
      {"candy 3x3 128c 58x58", {1, 128, 58, 58}, {128, 128, 3, 3}, 1, 0, 1},
      {"resnext 3x3 g32 128c 56", {1, 128, 56, 56}, {128, 4, 3, 3}, 1, 1, 32},
  };
  std::printf("%-28s %9s %9s %9s %9s %8s %8s  %s | %s\n", "shape", "plain ms", "block ms", "plain cpu", "block cpu",
              "GF/cpu-s P", "GF/cpu-s B", "plain impl", "blocked impl");
  for (const ConvShape& s : shapes) {
    double flops = 0;
    std::vector<Prepared> ps;
    for (int f = 0; f < 2; ++f) {
      Builder b;
      Attributes a = attrs({{"strides", {s.stride, s.stride}}, {"pads", {s.pad, s.pad, s.pad, s.pad}}}, s.group);
      ValueId y = b.conv(b.input(s.x), s.w, a);
      flops = 2.0 * static_cast<double>(b.g.type(y).numel()) * static_cast<double>(s.w[1] * s.w[2] * s.w[3]);
      b.op("Relu", {b.bias(y)});
      ps.push_back(prepare(b, f == 0 ? "plain" : "blocked"));
    }
    std::vector<Timing> t = time_interleaved(ps);
    std::printf("%-28s %9.3f %9.3f %9.3f %9.3f %8.1f %8.1f  %s | %s\n", s.name, t[0].ms, t[1].ms, t[0].cpu_ms, t[1].cpu_ms,
                flops / t[0].cpu_ms * 1e-6, flops / t[1].cpu_ms * 1e-6, t[0].impl.c_str(), t[1].impl.c_str());
  }
}

// Epilogue cost: the same conv with bias+Relu, + a residual Add (full-tensor binary post-op), and
// + SiLU, blocked.
TEST(LinearBench, DISABLED_ConvEpilogues) {
  for (int c : {64, 256}) {
    const int64_t hw = c == 64 ? 56 : 14;
    std::vector<Prepared> ps;
    for (int k = 0; k < 4; ++k) {
      Builder b;
      ValueId y = b.conv(b.input({1, c, hw, hw}), {c, c, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
      if (k == 1) y = b.op("Relu", {b.bias(y)});
      if (k == 2) y = b.op("Relu", {b.op("Add", {b.bias(y), b.input({1, c, hw, hw})})});
      if (k == 3) {
        y = b.bias(y);
        b.op("Mul", {y, b.op("Sigmoid", {y})});
      }
      ps.push_back(prepare(b, "blocked"));
    }
    std::vector<Timing> t = time_interleaved(ps);
    const char* names[] = {"none", "bias+relu", "bias+residual+relu", "bias+silu"};
    for (int k = 0; k < 4; ++k)
      std::printf("3x3 %dc %ldx%ld %-20s %8.3f ms %8.3f cpu-ms  %s\n", c, static_cast<long>(hw), static_cast<long>(hw),
                  names[k], t[static_cast<size_t>(k)].ms, t[static_cast<size_t>(k)].cpu_ms,
                  t[static_cast<size_t>(k)].impl.c_str());
  }
}

Attributes attrs_to(int64_t onnx_type) {  // Cast's `to`: 1 float, 2 uint8
  Attributes a;
  a.set("to", onnx_type);
  return a;
}

// An int8 convolution (QDQ resnet18 shapes) with fission's epilogues absorbed step by step: the
// int32 accumulator alone, output scales (f32 dst), + per-channel bias, + the QuantizeLinear tail
// (uint8 dst, the next convolution's input), blocked.
TEST(LinearBench, DISABLED_Int8Epilogues) {
  for (int c : {64, 256}) {
    const int64_t hw = c == 64 ? 56 : 14;
    std::vector<Prepared> ps;
    for (int k = 0; k < 4; ++k) {
      Builder b;
      ValueId x = b.g.add_input("x", {DType::kUInt8, {1, c, hw, hw}});
      ValueId w = b.g.add_constant("w", random_tensor({DType::kInt8, {c, c, 3, 3}}, b.rng));
      ValueId zp = b.g.add_constant("zp", Tensor::scalar<uint8_t>(120));
      ValueId y = b.op("ConvInteger", {x, w, zp}, attrs({{"pads", {1, 1, 1, 1}}}));
      if (k >= 1) y = b.op("Mul", {b.op("Cast", {y}, attrs_to(1)), b.scalar(0.0004f)});
      if (k >= 2) y = b.bias(y);
      if (k >= 3) {
        y = b.op("Round", {b.op("Div", {y, b.scalar(0.05f)})});
        y = b.op("Clip", {b.op("Add", {y, b.scalar(128.f)}), b.scalar(0.f), b.scalar(255.f)});
        b.op("Cast", {y}, attrs_to(2));
      }
      ps.push_back(prepare(b, "blocked"));
    }
    std::vector<Timing> t = time_interleaved(ps);
    const char* names[] = {"int32", "scales (f32)", "scales+bias (f32)", "scales+bias+quantize (u8)"};
    for (int k = 0; k < 4; ++k)
      std::printf("int8 3x3 %dc %ldx%ld %-26s %8.3f ms %8.3f cpu-ms  %s\n", c, static_cast<long>(hw), static_cast<long>(hw),
                  names[k], t[static_cast<size_t>(k)].ms, t[static_cast<size_t>(k)].cpu_ms,
                  t[static_cast<size_t>(k)].impl.c_str());
  }
}

// Which implementation oneDNN picks for each broadcast shape of a binary post-op operand.
TEST(LinearBench, DISABLED_BroadcastImpls) {
  const Shape conv_shapes[] = {{1, 32, 1, 1}, {1, 1, 14, 14}, {1, 32, 14, 14}, {1, 1, 1, 14}, {1, 1, 1, 1}};
  for (const Shape& bs : conv_shapes)
    for (const char* alg : {"Add", "Mul"}) {
      Builder b;
      ValueId y = b.conv(b.input({1, 32, 14, 14}), {32, 32, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
      y = b.op("Relu", {y});
      b.op(alg, {y, shape_numel(bs) == shape_numel(b.g.type(y).shape) ? b.input(bs) : b.op("Expand", {b.input(bs), b.ints({1, 32, 14, 14})})});
      std::vector<NodeId> all;
      for (NodeId i = 0; i < static_cast<NodeId>(b.g.nodes.size()); ++i) all.push_back(i);
      b.g.outputs = {b.g.nodes.back().outputs[0]};
      KernelCandidate c = make_candidate(b.g, all, false);
      const bool absorbed = match_linear(b.g, c.nodes, c.outputs).match.result == b.g.outputs[0];
      for (const char* f : {"plain", "blocked"}) {
        Prepared p = prepare(b, f);
        std::printf("conv %s %-14s %-8s %s%s\n", alg, shape_str(bs).c_str(), f, absorbed ? "" : "not absorbed; ",
                    p.step->implementation().c_str());
      }
    }
  const Shape mm_shapes[] = {{1, 64}, {50, 1}, {50, 64}, {4, 1, 64}, {4, 50, 1}, {1, 50, 64}, {4, 50, 64}};
  for (const Shape& bs : mm_shapes)
    for (bool batched : {false, true}) {
      Builder b;
      ValueId y = b.op("MatMul", {b.input({4, 50, 32}), batched ? b.input({4, 32, 64}) : b.weight({32, 64})});
      Shape full = {4, 50, 64};
      b.op("Add", {y, shape_numel(bs) == 4 * 50 * 64 ? b.input(bs) : b.op("Expand", {b.input(bs), b.ints(full)})});
      std::vector<NodeId> all;
      for (NodeId i = 0; i < static_cast<NodeId>(b.g.nodes.size()); ++i) all.push_back(i);
      b.g.outputs = {b.g.nodes.back().outputs[0]};
      KernelCandidate c = make_candidate(b.g, all, false);
      auto m = match_linear(b.g, c.nodes, c.outputs);
      if (m.match.absorbed.empty()) { std::printf("matmul %-12s batched=%d: not absorbed\n", shape_str(bs).c_str(), batched); continue; }
      Prepared p = prepare(b, "auto");
      std::printf("matmul %-12s batched=%d %s\n", shape_str(bs).c_str(), batched, p.step->implementation().c_str());
    }
}

// Which implementation oneDNN picks for each eltwise post-op (a slow fallback would be a reason
// not to absorb the op).
TEST(LinearBench, DISABLED_EltwiseImpls) {
  const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Softplus", "Mish", "HardSwish",
                       "HardSigmoid", "Elu", "LeakyRelu", "Neg", "Reciprocal", "Gelu", "Clip"};
  for (const char* op : ops)
    for (int mm = 0; mm < 2; ++mm) {
      Builder b;
      b.g.opset = 20;  // Gelu
      ValueId y = mm ? b.op("MatMul", {b.input({50, 32}), b.weight({32, 64})})
                     : b.conv(b.input({1, 32, 14, 14}), {32, 32, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
      if (std::string(op) == "Clip") b.op(op, {y, b.scalar(0.f), b.scalar(6.f)});
      else b.op(op, {y});
      Prepared p = prepare(b, "auto");
      std::printf("%-6s %-12s %s\n", mm ? "matmul" : "conv", op, p.step->implementation().c_str());
    }
}

TEST(LinearBench, DISABLED_MatMul) {
  struct MM { const char* name; Shape a, b; bool const_b; };
  const MM shapes[] = {
      {"vit mlp1 197x768 x 768x3072", {1, 197, 768}, {768, 3072}, true},
      {"vit mlp2 197x3072 x 3072x768", {1, 197, 3072}, {3072, 768}, true},
      {"vit qkv 197x768 x 768x2304", {1, 197, 768}, {768, 2304}, true},
      {"attn QK^T 12x197x64 x 12x64x197", {1, 12, 197, 64}, {1, 12, 64, 197}, false},
      {"attn AV 12x197x197 x 12x197x64", {1, 12, 197, 197}, {1, 12, 197, 64}, false},
      {"bert 128x768 x 768x768", {128, 768}, {768, 768}, true},
      {"vit mlp2 + bias + residual", {1, 197, 3072}, {3072, 768}, true},
  };
  for (int e = 0; e < 2; ++e) {  // maxvit_t's Einsum attention, 1x64x2 windows of 49 tokens
    Builder b;
    ValueId y = e == 0 ? b.op("Einsum", {b.input({1, 64, 2, 49, 32}), b.input({1, 64, 2, 49, 32})}, [] {
      Attributes a; a.set("equation", std::string("BGHID,BGHJD->BGHIJ")); return a; }())
                       : b.op("Einsum", {b.input({1, 64, 2, 49, 49}), b.input({1, 64, 2, 49, 32})}, [] {
      Attributes a; a.set("equation", std::string("BGHIJ,BGHJD->BGHID")); return a; }());
    (void)y;
    std::vector<Prepared> ps;
    ps.push_back(prepare(b, "auto"));
    Timing t = time_interleaved(ps)[0];
    const double flops = 2.0 * 64 * 2 * 49 * 49 * 32;
    std::printf("%-34s %8.3f ms %8.3f cpu-ms %8.1f GF/cpu-s  %s\n", e == 0 ? "maxvit einsum q.k^T" : "maxvit einsum attn.v",
                t.ms, t.cpu_ms, flops / t.cpu_ms * 1e-6, t.impl.c_str());
  }
  for (const MM& s : shapes) {
    Builder b;
    ValueId y = b.op("MatMul", {b.input(s.a), s.const_b ? b.weight(s.b) : b.input(s.b)});
    const Shape ys = b.g.type(y).shape;
    if (s.const_b) y = b.op("Add", {y, b.expand_const({ys.back()}, ys)});
    if (std::string(s.name).find("residual") != std::string::npos) b.op("Add", {b.input(ys), y});
    std::vector<Prepared> ps;
    ps.push_back(prepare(b, "auto"));
    Timing t = time_interleaved(ps)[0];
    double flops = 2.0 * static_cast<double>(shape_numel(ys)) * static_cast<double>(s.a.back());
    std::printf("%-34s %8.3f ms %8.3f cpu-ms %8.1f GF/cpu-s  %s\n", s.name, t.ms, t.cpu_ms, flops / t.cpu_ms * 1e-6,
                t.impl.c_str());
  }
}

}  // namespace
}  // namespace korch::cpu
