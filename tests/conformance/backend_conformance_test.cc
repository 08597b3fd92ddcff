// Backend conformance (in the style of ggml's test-backend-ops): one table of kernels, each run
// through the backend interface on every backend (codegen/backend.h: emit -> translation unit ->
// compile for the backend's check device -> device kernel) and compared with the reference
// interpreter, the oracle, at 1e-4 relative L2 (profile/kernel_check.h).
//
// The table: every loop primitive alone and the fused chains fission produces (the loop-kernel
// table, tests/codegen/loop_cases.h), linear primitives alone and with epilogues, an opaque op
// run by the reference interpreter, and every single-primitive kernel of the built-in models.
// Backends: cpu (this CPU) and cuda (the host emulator: no GPU here). A case a backend does not
// emit must say why, and only epilogue refusals are allowed (a linear step's library refusing it
// whole; an epilogue the library lacks, such as an erf GELU after cuBLASLt, whose GELU is the tanh
// form, runs as generated code after the call); every emitted kernel must match the reference.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "codegen/backend.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/random.h"
#include "loop_cases.h"
#include "pipeline/pipeline.h"
#include "profile/kernel_check.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/cpu/cpu_lstm_batch1.h"

namespace korch::testing {
namespace {

struct Case {
  std::string family, name;
  std::shared_ptr<const Graph> g;
  KernelCandidate c;
};

Case whole(std::string family, LoopCase lc) { return {std::move(family), std::move(lc.name), lc.g, std::move(lc.c)}; }

ValueId weight(GraphBuilder& b, Shape s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return b.constant(random_tensor({DType::kFloat32, std::move(s)}, rng));
}

std::vector<Case> linear_cases() {
  std::vector<Case> cs;
  auto add = [&](const std::string& name, const std::function<ValueId(GraphBuilder&)>& f) {
    GraphBuilder b;
    ValueId y = f(b);
    cs.push_back(whole("linear", whole_graph_case(name, b.finish({y}))));
  };
  add("Conv3x3", [](GraphBuilder& b) {
    return b.node("Conv", {b.f32("x", {1, 8, 12, 12}), weight(b, {16, 8, 3, 3}, 1)},
                  attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
  });
  add("ConvDepthwiseStride2", [](GraphBuilder& b) {
    return b.node("Conv", {b.f32("x", {1, 8, 12, 12}), weight(b, {8, 1, 3, 3}, 2)},
                  attrs({{"group", int64_t{8}}, {"strides", std::vector<int64_t>{2, 2}}}));
  });
  add("ConvTranspose", [](GraphBuilder& b) {
    return b.node("ConvTranspose", {b.f32("x", {1, 8, 6, 6}), weight(b, {8, 4, 2, 2}, 3)},
                  attrs({{"strides", std::vector<int64_t>{2, 2}}}));
  });
  add("MatMul", [](GraphBuilder& b) { return b.node("MatMul", {b.f32("x", {3, 7, 32}), weight(b, {32, 24}, 4)}); });
  add("MatMulBatched", [](GraphBuilder& b) {
    return b.node("MatMul", {b.f32("x", {2, 5, 16}), b.f32("y", {2, 16, 9})});
  });
  add("ConvBiasRelu", [](GraphBuilder& b) {
    ValueId y = b.node("Conv", {b.f32("x", {1, 8, 10, 10}), weight(b, {16, 8, 1, 1}, 5)});
    ValueId bias = b.node("Expand", {weight(b, {1, 16, 1, 1}, 6), b.ints({1, 16, 10, 10})});
    return b.node("Relu", {b.node("Add", {y, bias})});
  });
  add("MatMulGelu", [](GraphBuilder& b) {
    ValueId y = b.node("MatMul", {b.f32("x", {4, 32}), weight(b, {32, 32}, 7)});
    return b.node("Gelu", {y});
  });
  // The epilogues cuBLASLt and cuDNN apply: a scale, a bias, a residual, then ReLU / tanh-GELU.
  add("MatMulScaleBiasGeluTanh", [](GraphBuilder& b) {
    ValueId y = b.node("MatMul", {b.f32("x", {2, 6, 32}), weight(b, {32, 24}, 8)});
    ValueId s = b.node("Mul", {y, b.constant(Tensor::scalar(0.125f))});
    ValueId bias = b.node("Expand", {weight(b, {1, 1, 24}, 9), b.ints({2, 6, 24})});
    Attributes tanh;
    tanh.set("approximate", std::string("tanh"));
    return b.node("Gelu", {b.node("Add", {s, bias})}, tanh);
  });
  add("MatMulResidualRelu", [](GraphBuilder& b) {
    ValueId y = b.node("MatMul", {b.f32("x", {8, 16}), weight(b, {16, 16}, 10)});
    return b.node("Relu", {b.node("Add", {y, b.f32("r", {8, 16})})});
  });
  add("ConvBiasResidualRelu", [](GraphBuilder& b) {
    ValueId y = b.node("Conv", {b.f32("x", {1, 8, 10, 10}), weight(b, {8, 8, 3, 3}, 11)},
                       attrs({{"pads", std::vector<int64_t>{1, 1, 1, 1}}}));
    ValueId bias = b.node("Expand", {weight(b, {1, 8, 1, 1}, 12), b.ints({1, 8, 10, 10})});
    return b.node("Relu", {b.node("Add", {b.node("Add", {y, bias}), b.f32("r", {1, 8, 10, 10})})});
  });
  add("ConvBiasSigmoid", [](GraphBuilder& b) {  // no cuDNN epilogue: generated code after the call on cuda
    ValueId y = b.node("Conv", {b.f32("x", {1, 8, 10, 10}), weight(b, {16, 8, 1, 1}, 13)});
    ValueId bias = b.node("Expand", {weight(b, {1, 16, 1, 1}, 14), b.ints({1, 16, 10, 10})});
    return b.node("Sigmoid", {b.node("Add", {y, bias})});
  });
  return cs;
}

std::vector<Case> opaque_cases() {
  GraphBuilder b(17);
  ValueId x = b.f32("x", {3, 20});
  std::vector<ValueId> tk = b.node_n("TopK", {x, b.ints({5})}, attrs({{"axis", int64_t{1}}}), 2);
  return {whole("opaque", whole_graph_case("TopK", b.finish({tk[0], tk[1]})))};
}

// LSTM / GRU / RNN: on the CPU a oneDNN RNN primitive per direction (codegen/rnn_match.h), with
// the variants ONNX allows that the library call takes (directions, initial states, peepholes,
// layout 1, unused outputs, linear_before_reset, activations); `fallback` marks the ones it
// refuses, which run in the reference interpreter on every backend.
struct RnnCase {
  Case c;
  bool fallback = false;
};

std::vector<RnnCase> rnn_cases() {
  std::vector<RnnCase> cs;
  const int64_t T = 5, I = 8;
  struct Spec {
    std::string name, op, direction = "forward";
    int64_t batch = 3, hidden = 16, seq = 5;
    bool bias = true, h0 = false, c0 = false, peephole = false;
    size_t outputs = 3;  // Y, Y_h, Y_c as far as the op has them
    int64_t layout = 0, lbr = 0, seq_lens = -1;
    std::vector<std::string> activations;
    bool clip = false, fallback = false;
  };
  std::vector<Spec> specs = {
      {.name = "LSTM", .op = "LSTM"},
      {.name = "LSTMReverseInitialStates", .op = "LSTM", .direction = "reverse", .h0 = true, .c0 = true},
      {.name = "LSTMBidirectionalPeephole",
       .op = "LSTM",
       .direction = "bidirectional",
       .h0 = true,
       .c0 = true,
       .peephole = true},
      {.name = "LSTMNoBiasOnlyY", .op = "LSTM", .bias = false, .outputs = 1},
      {.name = "LSTMLayout1Bidirectional",
       .op = "LSTM",
       .direction = "bidirectional",
       .h0 = true,
       .c0 = true,
       .layout = 1},
      {.name = "LSTMFullSequenceLens", .op = "LSTM", .seq_lens = T},
      {.name = "LSTMInitialHOnlyFinalHOnly", .op = "LSTM", .direction = "bidirectional", .h0 = true, .outputs = 2},
      {.name = "GRU", .op = "GRU", .h0 = true},
      {.name = "GRULinearBeforeResetBidirectional", .op = "GRU", .direction = "bidirectional", .h0 = true, .lbr = 1},
      {.name = "RNNTanh", .op = "RNN", .h0 = true},
      {.name = "RNNReluSigmoidBidirectional",
       .op = "RNN",
       .direction = "bidirectional",
       .activations = {"Relu", "Sigmoid"}},
      // Batch 1: LSTMs run by Korch's batch-1 kernel (runtime/cpu/cpu_lstm_batch1.h) where the build
      // has it; hidden sizes off its 16-unit blocks and a longer sequence too.
      {.name = "LSTMBatch1", .op = "LSTM", .batch = 1},
      {.name = "LSTMBatch1ReverseInitialStates",
       .op = "LSTM",
       .direction = "reverse",
       .batch = 1,
       .h0 = true,
       .c0 = true},
      {.name = "LSTMBatch1BidirectionalPeephole",
       .op = "LSTM",
       .direction = "bidirectional",
       .batch = 1,
       .hidden = 20,
       .h0 = true,
       .c0 = true,
       .peephole = true},
      {.name = "LSTMBatch1Layout1BidirectionalLong",
       .op = "LSTM",
       .direction = "bidirectional",
       .batch = 1,
       .hidden = 40,
       .seq = 23,
       .h0 = true,
       .layout = 1},
      {.name = "LSTMBatch1NoBiasOnlyY", .op = "LSTM", .batch = 1, .hidden = 7, .bias = false, .outputs = 1},
      {.name = "LSTMClip", .op = "LSTM", .clip = true, .fallback = true},
      {.name = "LSTMShortSequenceLens", .op = "LSTM", .seq_lens = T - 2, .fallback = true},
  };
  uint64_t seed = 100;
  for (const Spec& s : specs) {
    const int64_t D = s.direction == "bidirectional" ? 2 : 1, G = s.op == "LSTM" ? 4 : s.op == "GRU" ? 3 : 1;
    const int64_t N = s.batch, H = s.hidden, T = s.seq;
    GraphBuilder b(17);
    std::mt19937_64 rng(seed++);
    std::uniform_real_distribution<float> u(-0.4f, 0.4f);
    auto small = [&](Shape shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng);
      return b.constant(Tensor::from_vector<float>(v, std::move(shape)));
    };
    const Shape state = s.layout == 0 ? Shape{D, N, H} : Shape{N, D, H};
    std::vector<ValueId> in = {b.f32("x", s.layout == 0 ? Shape{T, N, I} : Shape{N, T, I}),
                               small({D, G * H, I}),
                               small({D, G * H, H}),
                               s.bias ? small({D, 2 * G * H}) : kNoValue,
                               s.seq_lens >= 0 ? b.constant(Tensor::from_vector<int32_t>(
                                                     std::vector<int32_t>(N, static_cast<int32_t>(s.seq_lens)), {N}))
                                               : kNoValue,
                               s.h0 ? b.f32("h0", state) : kNoValue};
    if (s.op == "LSTM") {
      in.push_back(s.c0 ? b.f32("c0", state) : kNoValue);
      in.push_back(s.peephole ? small({D, 3 * H}) : kNoValue);
    }
    while (!in.empty() && in.back() == kNoValue) in.pop_back();
    Attributes a = attrs({{"hidden_size", H}, {"direction", s.direction}, {"layout", s.layout}});
    if (s.op == "GRU") a.set("linear_before_reset", s.lbr);
    if (!s.activations.empty()) a.set("activations", s.activations);
    if (s.clip) a.set("clip", 0.5f);
    const std::vector<ValueId> out = b.node_n(s.op, in, a, s.op == "LSTM" ? 3 : 2);
    const std::vector<ValueId> outputs(out.begin(),
                                       out.begin() + static_cast<std::ptrdiff_t>(std::min(s.outputs, out.size())));
    cs.push_back({whole("rnn", whole_graph_case(s.name, b.finish(outputs))), s.fallback});
  }
  return cs;
}

// onnxruntime's DynamicQuantizeLSTM (int8/uint8 W and R, X and each Ht-1 quantized on the fly):
// on the CPU its own step (runtime/cpu/cpu_quant_lstm_step.h), which runs the reference's
// arithmetic and must give its bits exactly. Odd K (a padded row pair), 4H off the 64-column
// blocks, batches of 1 and 3, per-direction and per-column scales, uint8 weights with a zero point.
std::vector<Case> quant_lstm_cases() {
  struct Spec {
    std::string name, direction;
    int64_t T, N, I, H;
    bool w_signed, r_signed, per_column, bias, states, peephole;
  };
  const std::vector<Spec> specs = {
      {"DynamicQuantizeLSTMBidirectional", "bidirectional", 6, 1, 25, 20, true, true, false, true, true, false},
      {"DynamicQuantizeLSTMUint8PerColumnBatch3", "forward", 5, 3, 16, 33, false, false, true, false, false, true},
      {"DynamicQuantizeLSTMReverseMixed", "reverse", 7, 1, 8, 16, false, true, true, true, true, false},
  };
  std::vector<Case> cs;
  uint64_t seed = 300;
  for (const Spec& s : specs) {
    const int64_t D = s.direction == "bidirectional" ? 2 : 1, G = 4 * s.H;
    GraphBuilder b(17);
    std::mt19937_64 rng(seed++);
    auto quantized = [&](bool is_signed, Shape shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      if (is_signed) {
        std::uniform_int_distribution<int> u(-127, 127);
        std::vector<int8_t> v(static_cast<size_t>(n));
        for (int8_t& x : v) x = static_cast<int8_t>(u(rng));
        return b.constant(Tensor::from_vector<int8_t>(v, std::move(shape)));
      }
      std::uniform_int_distribution<int> u(0, 255);
      std::vector<uint8_t> v(static_cast<size_t>(n));
      for (uint8_t& x : v) x = static_cast<uint8_t>(u(rng));
      return b.constant(Tensor::from_vector<uint8_t>(v, std::move(shape)));
    };
    auto floats = [&](Shape shape, float lo, float hi) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::uniform_real_distribution<float> u(lo, hi);
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) x = u(rng);
      return b.constant(Tensor::from_vector<float>(v, std::move(shape)));
    };
    auto zero_points = [&](bool is_signed, Shape shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      if (is_signed)
        return b.constant(
            Tensor::from_vector<int8_t>(std::vector<int8_t>(static_cast<size_t>(n), 0), std::move(shape)));
      return b.constant(
          Tensor::from_vector<uint8_t>(std::vector<uint8_t>(static_cast<size_t>(n), 128), std::move(shape)));
    };
    const Shape scale_shape = s.per_column ? Shape{D, G} : Shape{D};
    // Scales that keep the gates' pre-activations within a few units.
    const float w_scale = 1.5f / (128.f * std::sqrt(static_cast<float>(s.I))),
                r_scale = 1.5f / (128.f * std::sqrt(static_cast<float>(s.H)));
    std::vector<ValueId> in = {b.f32("x", {s.T, s.N, s.I}),
                               quantized(s.w_signed, {D, s.I, G}),
                               quantized(s.r_signed, {D, s.H, G}),
                               s.bias ? floats({D, 2 * G}, -0.5f, 0.5f) : kNoValue,
                               kNoValue,
                               s.states ? b.f32("h0", {D, s.N, s.H}) : kNoValue,
                               s.states ? b.f32("c0", {D, s.N, s.H}) : kNoValue,
                               s.peephole ? floats({D, 3 * s.H}, -0.5f, 0.5f) : kNoValue,
                               floats(scale_shape, 0.5f * w_scale, 1.5f * w_scale),
                               zero_points(s.w_signed, scale_shape),
                               floats(scale_shape, 0.5f * r_scale, 1.5f * r_scale),
                               zero_points(s.r_signed, scale_shape)};
    Attributes a = attrs({{"hidden_size", s.H}, {"direction", s.direction}});
    const std::vector<ValueId> out = b.node_n("DynamicQuantizeLSTM", in, a, 3, "com.microsoft");
    cs.push_back(whole("rnn", whole_graph_case(s.name, b.finish(out))));
  }
  return cs;
}

// Every primitive of the built-in models as a kernel of its own.
std::vector<Case> model_cases() {
  std::vector<Case> cs;
  for (const std::string& name : builtin_model_names()) {
    auto p = std::make_shared<const Graph>(lower_to_primitives(load_onnx_bytes(builtin_model_bytes(name), name, {})));
    for (size_t n = 0; n < p->nodes.size(); ++n)
      cs.push_back({"model:" + name, fmt::format("{}#{} {}", name, n, p->nodes[n].op_type), p,
                    make_candidate(*p, {static_cast<NodeId>(n)}, false)});
  }
  return cs;
}

struct Outcome {
  bool emitted = false;
  std::string reason;  // not emitted: why
  std::string diff;    // emitted: "" when it matches the reference
};

// Runs every case on `backend`'s check device, many kernels per translation unit.
std::vector<Outcome> run_on(Backend& backend, const std::vector<Case>& cases) {
  std::vector<Outcome> out(cases.size());
  std::vector<EmittedKernel> emitted(cases.size());
  std::vector<std::vector<size_t>> units;
  for (size_t i = 0; i < cases.size(); ++i) {
    emitted[i] = backend.emit(*cases[i].g, cases[i].c);
    out[i].emitted = emitted[i].ok;
    out[i].reason = emitted[i].reason;
    if (!emitted[i].ok || emitted[i].source.empty()) continue;
    if (units.empty() || units.back().size() >= 150) units.emplace_back();
    units.back().push_back(i);
  }
  runtime::Device& dev = *backend.check_device();
  std::vector<std::string> sources;
  for (const auto& u : units) {
    std::vector<const EmittedKernel*> ks;
    for (size_t i : u) ks.push_back(&emitted[i]);
    sources.push_back(backend.translation_unit(ks));
  }
  std::vector<CompiledUnit> compiled = backend.compile(sources, dev);
  std::vector<std::shared_ptr<runtime::KernelModule>> module_of(cases.size());
  for (size_t u = 0; u < units.size(); ++u)
    for (size_t i : units[u]) module_of[i] = compiled[u].module;
  std::map<const Graph*, std::vector<Tensor>> values;  // reference values per graph, once
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!out[i].emitted) continue;
    const Graph& g = *cases[i].g;
    auto [it, fresh] = values.try_emplace(&g);
    if (fresh) it->second = reference_values(g, 1234 + i);
    try {
      std::unique_ptr<runtime::DeviceKernel> kernel = dev.make_kernel(emitted[i].recipe, module_of[i]);
      KernelProbe probe(dev, *kernel, emitted[i], g, it->second);
      out[i].diff = probe.check(1e-4);
    } catch (const Error& e) {
      out[i].diff = e.what();
    }
  }
  return out;
}

TEST(BackendConformance, EveryCaseOnEveryBackendMatchesTheReference) {
  if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-conformance-tests", 1);
  std::vector<Case> cases;
  for (auto& lc : op_cases()) cases.push_back(whole("loop:op", std::move(lc)));
  for (auto& lc : chain_cases()) cases.push_back(whole("loop:chain", std::move(lc)));
  for (auto& c : linear_cases()) cases.push_back(std::move(c));
  for (auto& c : opaque_cases()) cases.push_back(std::move(c));
  for (auto& c : rnn_cases()) cases.push_back(std::move(c.c));
  for (auto& c : quant_lstm_cases()) cases.push_back(std::move(c));
  for (auto& c : model_cases()) cases.push_back(std::move(c));

  const std::vector<std::string> names = {"cpu", "cuda"};
  std::map<std::string, std::vector<Outcome>> results;
  for (const std::string& name : names) {
    std::unique_ptr<Backend> backend = make_backend(name);
    results[name] = run_on(*backend, cases);
    ASSERT_EQ(results[name].size(), cases.size());
  }
  // Per family: cases emitted and passed on each backend (a readable table in the log).
  std::map<std::string, std::map<std::string, std::pair<int, int>>> table;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const std::string& name : names) {
      const Outcome& o = results[name][i];
      auto& cell = table[cases[i].family][name];
      cell.first += o.emitted;
      cell.second += o.emitted && o.diff.empty();
      EXPECT_TRUE(!o.emitted || o.diff.empty()) << name << " " << cases[i].name << ": " << o.diff;
    }
    // Loop kernels, single primitives and opaque ops are every backend's: only a library may
    // refuse a case (a linear primitive with an epilogue its library does not apply).
    const bool library_may_refuse = cases[i].family == "linear";
    for (const std::string& name : names) {
      const Outcome& o = results[name][i];
      if (o.emitted || (!results["cpu"][i].emitted && !results["cuda"][i].emitted)) continue;
      if (library_may_refuse) {
        EXPECT_NE(o.reason.find("epilogue"), std::string::npos) << name << " " << cases[i].name << ": " << o.reason;
      } else {
        ADD_FAILURE() << name << " does not emit " << cases[i].name << " which another backend does: " << o.reason;
      }
    }
  }
  // The CUDA backend runs the epilogues its libraries apply in the call and the others (a Sigmoid
  // after cuDNN, an erf-GELU after cuBLASLt) as generated code after it: every case is emitted.
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& n = cases[i].name;
    if (n == "ConvBiasRelu" || n == "MatMulScaleBiasGeluTanh" || n == "MatMulResidualRelu" ||
        n == "ConvBiasResidualRelu" || n == "ConvBiasSigmoid" || n == "MatMulGelu") {
      EXPECT_TRUE(results["cuda"][i].emitted) << n << ": " << results["cuda"][i].reason;
    }
  }
  std::string summary = "backend conformance (emitted / passed):\n";
  for (const auto& [family, row] : table) {
    summary += fmt::format("  {:<26}", family);
    for (const std::string& name : names)
      summary += fmt::format(" {} {}/{}", name, row.at(name).first, row.at(name).second);
    summary += "\n";
  }
  std::printf("%s", summary.c_str());
  // The table is not vacuous: every family runs on both backends.
  for (const auto& [family, row] : table)
    for (const std::string& name : names) EXPECT_GT(row.at(name).second, 0) << family << " on " << name;
}

// A bidirectional RNN runs its two directions side by side, one thread each, when it has two:
// the same numbers as one thread running them in turn (each direction is one thread's work either
// way), and the reference's. Fails if the directions share a scratchpad or a stream.
// Runs recurrent case `rc` on the CPU three times, each checked against the reference at 1e-4;
// returns the last outputs.
std::vector<Tensor> run_rnn_case(Backend& cpu, const RnnCase& rc, const std::string& what) {
  const Graph& g = *rc.c.g;
  const EmittedKernel k = cpu.emit(g, rc.c.c);
  EXPECT_TRUE(k.ok && k.source.empty()) << rc.c.name << ": " << k.reason;
  if (!k.ok) return {};
  const std::vector<Tensor> values = reference_values(g, 77);
  runtime::Device& dev = *cpu.check_device();
  std::unique_ptr<runtime::DeviceKernel> kernel = dev.make_kernel(k.recipe, nullptr);
  KernelProbe probe(dev, *kernel, k, g, values);
  for (int rep = 0; rep < 3; ++rep) EXPECT_EQ(probe.check(1e-4), "") << rc.c.name << " " << what;
  // The step's own copies of the weights (oneDNN's layout, or the batch-1 kernel's blocks): what a
  // measurement with cold weights evicts besides the ONNX tensors.
  if (!rc.fallback) {
    const std::vector<std::pair<const void*, int64_t>> copies = kernel->constant_copies();
    EXPECT_FALSE(copies.empty()) << rc.c.name;
    for (const auto& [data, bytes] : copies) EXPECT_TRUE(data != nullptr && bytes > 0) << rc.c.name;
  }
  return probe.outputs();
}

TEST(BackendConformance, BidirectionalRecurrencesRunTheirDirectionsSideBySide) {
  if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-conformance-tests", 1);
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  const int threads_before = cpu::cpu_threads();
  int checked = 0;
  for (const RnnCase& rc : rnn_cases()) {
    if (rc.fallback || rc.c.name.find("idirectional") == std::string::npos) continue;
    std::vector<std::vector<Tensor>> outs;
    for (int threads : {1, 2}) {
      cpu::set_cpu_threads(threads);
      outs.push_back(run_rnn_case(*cpu, rc, fmt::format("on {} threads", threads)));
    }
    ASSERT_EQ(outs[0].size(), outs[1].size());
    for (size_t o = 0; o < outs[0].size(); ++o)
      EXPECT_EQ(0, std::memcmp(outs[0][o].raw(), outs[1][o].raw(), outs[0][o].nbytes()))
          << rc.c.name << " output " << o;
    ++checked;
  }
  cpu::set_cpu_threads(threads_before);
  EXPECT_GE(checked, 4);
}

// The batch-1 LSTM kernel on each instruction set it has (AVX-512 where the CPU has it, else
// AVX2): on an AVX-512 CPU the table above runs only the AVX-512 path.
TEST(BackendConformance, Batch1LstmMatchesTheReferenceOnEveryInstructionSet) {
  if (!cpu::batch1_lstm_available()) GTEST_SKIP() << "no batch-1 LSTM kernel in this build (AVX2/FMA)";
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  int checked = 0;
  for (const RnnCase& rc : rnn_cases()) {
    if (rc.c.name.find("Batch1") == std::string::npos) continue;
    for (bool avx512 : {true, false}) {
      cpu::batch1_lstm_allow_avx512(avx512);
      run_rnn_case(*cpu, rc, avx512 ? "(AVX-512 allowed)" : "(AVX2)");
    }
    ++checked;
  }
  cpu::batch1_lstm_allow_avx512(true);
  EXPECT_GE(checked, 5);
}

// The CPU's DynamicQuantizeLSTM step gives the reference's bits exactly (tolerance 0), on one
// thread and on two (its directions side by side), and its outputs are not degenerate.
TEST(BackendConformance, DynamicQuantizeLstmStepReproducesTheReferenceExactly) {
  if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-conformance-tests", 1);
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  runtime::Device& dev = *cpu->check_device();
  const int threads_before = cpu::cpu_threads();
  for (const Case& c : quant_lstm_cases()) {
    const EmittedKernel k = cpu->emit(*c.g, c.c);
    ASSERT_TRUE(k.ok) << c.name << ": " << k.reason;
    ASSERT_TRUE(k.recipe.contains("linear")) << c.name << " is not the CPU step: " << k.recipe.dump().substr(0, 300);
    EXPECT_EQ(k.recipe["linear"].value("op", ""), "DynamicQuantizeLSTM") << c.name;
    const std::vector<Tensor> values = reference_values(*c.g, 91);
    for (ValueId v : k.outputs) {
      const Tensor& t = values[static_cast<size_t>(v)];
      double sq = 0;
      for (int64_t i = 0; i < t.numel(); ++i) sq += t.get_as_double(i) * t.get_as_double(i);
      EXPECT_GT(std::sqrt(sq / static_cast<double>(t.numel())), 0.05) << c.name << ": a vanishing output";
    }
    for (int threads : {1, 2}) {
      cpu::set_cpu_threads(threads);
      std::unique_ptr<runtime::DeviceKernel> kernel = dev.make_kernel(k.recipe, nullptr);
      KernelProbe probe(dev, *kernel, k, *c.g, values);
      EXPECT_EQ(probe.check(0.0), "") << c.name << " on " << threads << " threads";
      EXPECT_FALSE(kernel->constant_copies().empty())
          << c.name << ": its widened weights, which a cold measurement evicts";
    }
  }
  cpu::set_cpu_threads(threads_before);
}

// The rnn family above passes on the CPU as library calls, not as the interpreter checked against
// itself: each supported case is a oneDNN step, each refused one the reference op.
TEST(BackendConformance, RecurrentOpsAreLibraryCallsOnTheCpu) {
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  for (const RnnCase& rc : rnn_cases()) {
    const EmittedKernel k = cpu->emit(*rc.c.g, rc.c.c);
    ASSERT_TRUE(k.ok) << rc.c.name << ": " << k.reason;
    EXPECT_EQ(k.runs_reference(), rc.fallback) << rc.c.name << ": " << k.recipe.dump();
    EXPECT_EQ(k.recipe.contains("linear"), !rc.fallback) << rc.c.name;
  }
}

}  // namespace
}  // namespace korch::testing
