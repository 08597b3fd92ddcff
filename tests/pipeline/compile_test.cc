// compile_model (the whole compiler) on the built-in models: the artifact it writes runs like the
// reference interpreter on both targets, and its verification step (analytic costs: no kernel has
// been through the correctness gate) catches wrong kernels and solves again without them.
#include "pipeline/compile.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "codegen/cpu/cpu_backend.h"
#include "compile_test_util.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/text_format.h"
#include "profile/in_model.h"
#include "runtime/executable.h"
#include "support/file_io.h"

namespace korch {
namespace {

using namespace korch::testing;
namespace fs = std::filesystem;

// A kernel that is the reference interpreter (an opaque op) is not counted as checked: checking it
// would compare the interpreter with itself.
TEST_F(CompileModel, ReferenceKernelsAreNotReportedAsChecked) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,16]
  const k: i64[1] = [3]
  %r: f32[4,16] = Relu(x)
  %v: f32[4,3], %i: i64[4,3] = TopK(r, k) {axis=1}
  %y: f32[4,3] = Neg(v)
  output y, i
})");
  const CompileResult r = compile_model(g, dir_.string(), analytic("cpu"));
  ASSERT_TRUE(r.verify.ran);
  EXPECT_EQ(r.verify.reference, 1);
  EXPECT_EQ(r.verify.kernels + r.verify.reference, static_cast<int64_t>(r.kernels.size()));
  EXPECT_GE(r.verify.kernels, 1);  // Relu and Neg are generated, and checked
  expect_runs_like_the_reference(g, false);
}

// An LSTM between generated kernels is a oneDNN library call on the CPU (checked against the
// reference like every generated kernel), reading its input from one kernel and feeding Y and Y_h
// to others; the CUDA backend still runs it in the interpreter.
TEST_F(CompileModel, RecurrentOpsRunAsCheckedLibraryCallsOnTheCpu) {
  std::mt19937_64 rng(3);
  auto values = [&](int n) { return uniform_values(rng, n, 0.4f); };
  const Graph g = parse_graph(fmt::format(R"(graph t (opset 17) {{
  input x: f32[6,2,8]
  const w: f32[2,64,8] = {}
  const r: f32[2,64,16] = {}
  const b: f32[2,128] = {}
  %a: f32[6,2,8] = Tanh(x)
  %y: f32[6,2,2,16], %yh: f32[2,2,16] = LSTM(a, w, r, b) {{direction="bidirectional", hidden_size=16}}
  %z: f32[6,2,2,16] = Relu(y)
  %h: f32[2,2,16] = Neg(yh)
  output z, h
}})",
                                          values(2 * 64 * 8), values(2 * 64 * 16), values(2 * 128)));
  const CompileResult r = compile_model(g, dir_.string(), analytic("cpu"));
  ASSERT_TRUE(r.verify.ran);
  EXPECT_EQ(r.verify.reference, 0);
  EXPECT_EQ(r.verify.kernels, static_cast<int64_t>(r.kernels.size()));
  EXPECT_TRUE(r.verify.failures.empty());
  expect_runs_like_the_reference(g, false);
  fs::remove_all(dir_);
  const CompileResult rc = compile_model(g, dir_.string(), analytic("cuda"));
  EXPECT_EQ(rc.verify.reference, 1);
  expect_runs_like_the_reference(g, true);
}

// Two 3x3 convolutions on [1,16,14,14] with seeded weights; `epilogue`: a per-channel Mul and a
// Sigmoid between them.
Graph two_convolutions(bool epilogue) {
  std::mt19937_64 rng(5);
  auto values = [&](int n) { return uniform_values(rng, n, 0.2f); };
  const std::string w1 = values(16 * 16 * 9), w2 = values(16 * 16 * 9);
  const std::string scale = epilogue ? fmt::format("  const s: f32[1,16,1,1] = {}\n", values(16)) : "";
  const std::string between = epilogue ? "  %b: f32[1,16,14,14] = Mul(a, s)\n  %c: f32[1,16,14,14] = Sigmoid(b)\n" : "";
  return parse_graph(fmt::format(R"(graph t (opset 17) {{
  input x: f32[1,16,14,14]
  const w1: f32[16,16,3,3] = {}
  const w2: f32[16,16,3,3] = {}
{}  %a: f32[1,16,14,14] = Conv(x, w1) {{kernel_shape=[3,3], pads=[1,1,1,1]}}
{}  %y: f32[1,16,14,14] = Conv({}, w2) {{kernel_shape=[3,3], pads=[1,1,1,1]}}
  output y
}})",
                                 w1, w2, scale, between, epilogue ? "c" : "a"));
}

// Two 3x3 convolutions back to back: oneDNN runs both in a blocked layout, so the first one's
// result passes to the second in that layout (a handoff) and the run makes two reorders (the
// input into the blocked layout, the output out of it) instead of four; `korch bench` reports
// both counts (Executable::reorders_per_run).
TEST_F(CompileModel, ConvolutionsHandTheirLayoutOnAndReordersAreCounted) {
  const Graph g = two_convolutions(false);
  CompileOptions o = analytic("cpu");
  o.layout = "nchw";  // as the model has it (the channels-last pass would remove these reorders)
  const CompileResult r = compile_model(g, dir_.string(), o);
  ASSERT_EQ(r.kernels.size(), 2u);
  const int64_t tensor_bytes = 16 * 14 * 14 * 4;
  {
    auto exe = runtime::Executable::load(dir_.string());
    EXPECT_EQ(exe->layout_handoffs(), 1);
    EXPECT_EQ(exe->reorders_per_run().count, 2);
    EXPECT_EQ(exe->reorders_per_run().bytes, 2 * tensor_bytes);
  }
  setenv("KORCH_NO_LAYOUT_HANDOFF", "1", 1);
  auto plain = runtime::Executable::load(dir_.string());
  unsetenv("KORCH_NO_LAYOUT_HANDOFF");
  EXPECT_EQ(plain->layout_handoffs(), 0);
  EXPECT_EQ(plain->reorders_per_run().count, 4);
  EXPECT_EQ(plain->reorders_per_run().bytes, 4 * tensor_bytes);
  std::vector<Tensor> inputs = random_inputs(g, 5);
  EXPECT_EQ(rel_l2_diff(plain->run(inputs)[0], interpret(g, inputs)[0], 1e-4), "");
  expect_runs_like_the_reference(g, false);
}

// The same two convolutions with channels-last activations (rewrite/channels_last.h): the graph
// keeps one layout change at the input and one at the output (Transpose primitives, priced like any
// other), and where oneDNN has a jit kernel for NHWC (brgconv on AVX-512, jit:avx2) the
// convolutions run on the user's NHWC memory: no reorder and no handoff in the run.
TEST_F(CompileModel, ChannelsLastConvolutionsRunWithoutReorders) {
  const Graph g = two_convolutions(true);
  CompileOptions o = analytic("cpu");
  o.layout = "channels-last";
  const CompileResult r = compile_model(g, dir_.string(), o);
  EXPECT_EQ(r.meta.layout, "channels-last");
  int transposes = 0, convs = 0;
  for (const Node& n : r.primitives.nodes) {
    transposes += n.op_type == "Transpose";
    convs += n.op_type == "Conv" && n.attrs.get_int("channels_last", 0) == 1;
  }
  EXPECT_EQ(transposes, 2);
  EXPECT_EQ(convs, 2);
  expect_runs_like_the_reference(g, false);
  const bool runs_nhwc = cpu::CpuBackend(2).prefers_channels_last();
  if (runs_nhwc) {
    auto exe = runtime::Executable::load(dir_.string());
    EXPECT_EQ(exe->reorders_per_run().count, 0);
    EXPECT_EQ(exe->layout_handoffs(), 0);
  }
  // --layout auto: channels-last exactly where oneDNN runs NHWC convolutions with a jit kernel.
  fs::remove_all(dir_);
  o.layout = "auto";
  EXPECT_EQ(compile_model(g, dir_.string(), o).meta.layout, runs_nhwc ? "channels-last" : "nchw");
  // The CUDA emulator runs the same channels-last convolutions (oneDNN stands in for cuDNN there).
  fs::remove_all(dir_);
  o.target = "cuda";
  compile_model(g, dir_.string(), o);
  expect_runs_like_the_reference(g, true);
}

TEST_F(CompileModel, BothTargetsWriteArtifactsThatRunLikeTheReference) {
  for (const std::string& name : builtin_model_names()) {
    Graph g = load_onnx_bytes(builtin_model_bytes(name), name + ".onnx");
    for (const char* target : {"cpu", "cuda"}) {
      SCOPED_TRACE(name + " on " + target);
      CompileResult r = compile_model(g, dir_.string(), analytic(target));
      EXPECT_EQ(r.target, target);
      EXPECT_TRUE(r.verify.ran);
      EXPECT_EQ(r.verify.kernels, static_cast<int64_t>(r.kernels.size()));
      EXPECT_TRUE(r.verify.failures.empty());
      EXPECT_EQ(r.verify.device, std::string(target) == "cpu" ? "cpu" : "cuda-emulator");
      expect_runs_like_the_reference(g, std::string(target) == "cuda");
      fs::remove_all(dir_);
    }
  }
}

// A CPU artifact runs with denormal floats flushed to zero (CompileOptions::flush_denormals: x86
// FTZ/DAZ), and the calling thread's floating-point mode is as it was after the run; told to keep
// them, it runs IEEE gradual underflow, as the reference interpreter does.
TEST_F(CompileModel, CpuArtifactsFlushDenormalsUnlessToldToKeepThem) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[256]
  %y: f32[256] = Add(x, x)
  %z: f32[256] = Mul(y, y)
  output y
  output z
})");
  Tensor x(TensorType{DType::kFloat32, {256}});
  for (int64_t i = 0; i < 256; ++i) x.span<float>()[static_cast<size_t>(i)] = i % 2 ? 1e-39f : 1e-20f;
  const std::vector<Tensor> want = interpret(g, {x});
  ASSERT_GT(want[0].span<float>()[1], 0.f);  // 2e-39: a denormal the reference keeps
  ASSERT_GT(want[1].span<float>()[0], 0.f);  // 4e-40: a denormal product of normal floats
  for (const bool flush : {true, false}) {
    SCOPED_TRACE(flush);
    CompileOptions o = analytic("cpu");
    o.flush_denormals = flush;
    compile_model(g, dir_.string(), o);
    auto exe = runtime::Executable::load(dir_.string());
    EXPECT_EQ(exe->manifest().at("denormals"), flush ? "flush" : "keep");
#if defined(__x86_64__)
    const unsigned csr = _mm_getcsr();
    const std::vector<Tensor> got = exe->run({x});
    EXPECT_EQ(_mm_getcsr(), csr);
    for (size_t i = 0; i < 256; ++i) {
      // Read as zero (DAZ), and a product under 2^-126 written as zero (FTZ).
      EXPECT_EQ(got[0].span<float>()[i], flush && i % 2 ? 0.f : want[0].span<float>()[i]) << i;
      EXPECT_EQ(got[1].span<float>()[i], flush ? 0.f : want[1].span<float>()[i]) << i;
    }
#endif
  }
}

// Concats laid out as their inputs and views (runtime/memory_plan.h): the kernels before them (a
// convolution among them) write into the graph output, the Concat and Flatten kernels cost
// nothing and copy nothing, and the artifact runs like the reference on both targets. y is read by
// a convolution (which takes no loop prologue) and by o, o by the Flatten, a graph output.
TEST_F(CompileModel, ConcatInputsAreWrittenInPlace) {
  std::mt19937_64 rng(3);
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[1,16,4,4]
  const w: f32[16,32,1,1] = )" + uniform_values(rng, 16 * 32, 0.3f) + R"(
  %a: f32[1,16,4,4] = Relu(x)
  %b: f32[1,16,4,4] = Sigmoid(x)
  %y: f32[1,32,4,4] = Concat(a, b) {axis=1}
  %c: f32[1,16,4,4] = Conv(y, w) {kernel_shape=[1, 1]}
  %o: f32[1,48,4,4] = Concat(y, c) {axis=1}
  %f: f32[1,768] = Flatten(o)
  output f
})");
  for (const char* target : {"cpu", "cuda"}) {
    SCOPED_TRACE(target);
    CompileOptions o = analytic(target);
    o.layout = "nchw";  // channels-last would make these Concats interleave their inputs
    CompileResult r = compile_model(g, dir_.string(), o);
    int in_place = 0;
    for (const PlannedKernel& k : r.orchestration.plan.kernels)
      for (NodeId n : k.nodes)
        if (const std::string& op = r.primitives.nodes[static_cast<size_t>(n)].op_type;
            op == "Concat" || op == "Flatten" || op == "Reshape") {
          ++in_place;
          EXPECT_EQ(k.nodes.size(), 1u);
          EXPECT_EQ(k.seconds, 0);
        }
    EXPECT_EQ(in_place, 3);
    EXPECT_TRUE(r.verify.failures.empty());  // run alone, each Concat copies its inputs
    const std::string program = read_file_bytes((dir_ / "program.json").string());
    size_t pieces = 0;
    for (size_t at = 0; (at = program.find("\"kind\":\"piece\"", at)) != std::string::npos; ++at) ++pieces;
    EXPECT_EQ(pieces, 5u);  // a, b, y, c and o lie in f
    EXPECT_EQ(r.memory.arena_bytes, 0);  // nothing else to hold
    expect_runs_like_the_reference(g, std::string(target) == "cuda");
    // Each run returns fresh output tensors: the pieces follow them, run after run.
    runtime::LoadOptions lo;
    lo.emulate = std::string(target) == "cuda";
    auto exe = runtime::Executable::load(dir_.string(), lo);
    for (uint64_t seed : {6, 7}) {
      const std::vector<Tensor> in = random_inputs(g, seed);
      EXPECT_EQ(rel_l2_diff(exe->run(in)[0], interpret(g, in)[0], 1e-4), "") << "run with seed " << seed;
    }
    fs::remove_all(dir_);
  }
}

// Breaks every fused kernel that computes an exp (it prints korch_exp and korch_exp_negabs as no-ops), as a generator
// bug would: verification must find them, and the plan solved again must not use them.
class BrokenFusionBackend : public cpu::CpuBackend {
 public:
  EmittedKernel emit(const Graph& g, const KernelCandidate& c, const std::string& variant = "") const override {
    EmittedKernel k = cpu::CpuBackend::emit(g, c, variant);
    if (c.nodes.size() < 2) return k;
    for (const std::string exp : {"korch_exp(", "korch_exp_negabs("})  // a softmax's exp is the second
      for (size_t p; (p = k.source.find(exp)) != std::string::npos;) k.source.replace(p, exp.size(), "(");
    return k;
  }
};

TEST_F(CompileModel, VerificationReplacesKernelsThatFailTheReference) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_transformer"), "tiny_transformer.onnx");
  BrokenFusionBackend broken;
  CompileOptions o = analytic("cpu");
  o.backend = &broken;
  CompileResult r = compile_model(g, dir_.string(), o);
  ASSERT_FALSE(r.verify.failures.empty()) << "the broken softmax kernels went unnoticed";
  EXPECT_GT(r.verify.rounds, 1);
  EXPECT_GT(r.verify.gate_failures, 0);  // the other fused variants of the broken softmax were caught too
  const cpu::CpuBackend sound;
  for (const PlannedKernel& pk : r.orchestration.plan.kernels) {
    const KernelCandidate& c = r.orchestration.candidates.candidates.at(static_cast<size_t>(pk.candidate));
    if (c.nodes.size() >= 2) {
      EXPECT_EQ(sound.emit(r.primitives, c).source.find("korch_exp("), std::string::npos);
      EXPECT_EQ(sound.emit(r.primitives, c).source.find("korch_exp_negabs("), std::string::npos);
    }
  }
  expect_runs_like_the_reference(g, false);
}

// Measured costs close the loop: the plan runs in the model, its kernels keep their in-model times
// (recorded in the tuning database) and the predicted latency is theirs; the unfused baseline is
// measured the same way, and a second compile starts from the records. Behaviour, not speed: the
// numbers are only required to be there and consistent.
TEST_F(CompileModel, MeasuredCostsCloseTheLoop) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  CompileOptions o;
  o.model_name = "tiny_convnet";
  o.measured.db_path = (dir_.string() + ".db");
  // The loop's mechanics, not its noise and drift checks (NoisyInModelRuns..., AnInModelRunOnA
  // DriftingMachine... below): beside other tests a run may be noisy or drift (this model's kernels
  // take microseconds), and such a run stores nothing for the second compile to load.
  o.loop_max_spread = 1e9;
  o.loop_max_drift = 1e9;
  CompileResult r = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(r.loop.ran);
  ASSERT_FALSE(r.loop.rounds.empty());
  EXPECT_LE(static_cast<int>(r.loop.rounds.size()), o.loop_rounds);
  EXPECT_GE(r.loop.kept, 1);
  EXPECT_GT(r.loop.measured, 0);
  EXPECT_GT(r.loop.unfused_measured, 0);
  EXPECT_GT(r.loop.plan_beside_unfused, 0);
  EXPECT_DOUBLE_EQ(r.orchestration.unfused_seconds, r.loop.unfused_measured);
  double sum = 0;
  for (const PlannedKernel& k : r.orchestration.plan.kernels) {
    EXPECT_NE(k.cost_note.find("in-model"), std::string::npos) << k.cost_note;
    sum += k.seconds;
  }
  EXPECT_DOUBLE_EQ(sum, r.loop.predicted);
  // The kernels' times add up to the kept run's whole-run median (in the state the prediction
  // describes) unless the two were more than 10% apart.
  EXPECT_GE(r.loop.to_whole_runs, 0.9);
  EXPECT_LE(r.loop.to_whole_runs, 1.1);
  if (r.loop.to_whole_runs != 1) {
    EXPECT_NEAR(r.loop.predicted, r.loop.measured * r.loop.kept_scale, 1e-9);
  }
  auto exe = runtime::Executable::load(dir_.string());
  EXPECT_DOUBLE_EQ(exe->manifest().at("plan_seconds").get<double>(), r.loop.predicted);
  EXPECT_DOUBLE_EQ(exe->manifest().at("measured_seconds").get<double>(), r.loop.measured);
  exe.reset();
  expect_runs_like_the_reference(g, false);

  CompileResult again = compile_model(g, dir_.string(), o);
  EXPECT_GE(again.loop.loaded, static_cast<int64_t>(r.orchestration.plan.kernels.size()));
  EXPECT_EQ(again.measured.measured, 0);  // every isolated measurement came from the database
  fs::remove(o.measured.db_path);
}

// With the machine's pace probed (profile/pace.h), the kept plan's run carries the pace it ran at,
// and the manifest says it beside the times it gave.
TEST_F(CompileModel, TheKeptRunCarriesTheMachinesPace) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  CompileOptions o;
  o.model_name = "tiny_convnet";
  o.measured.db_path = (dir_.string() + ".db");
  o.measured.pace.enabled = true;
  o.measured.pace.other_load = [] { return 0.0; };
  o.loop_max_spread = 1e9;
  o.loop_max_drift = 1e9;
  o.loop_rounds = 1;
  o.micro_batch = "off";
  const CompileResult r = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(r.loop.ran);
  EXPECT_GE(r.loop.kept_pace, 1.0);  // over the fastest probe the database has, which this compile set
  auto exe = runtime::Executable::load(dir_.string());
  EXPECT_DOUBLE_EQ(exe->manifest().at("closed_loop").at("kept_run_pace").get<double>(), r.loop.kept_pace);
  exe.reset();
  fs::remove(o.measured.db_path);
}

// tiny_convnet's isolated-cost compile against the tuning database `db`.
CompileOptions tiny_convnet_options(const std::string& db) {
  CompileOptions o;
  o.model_name = "tiny_convnet";
  o.measured.db_path = db;
  o.close_loop = false;
  o.micro_batch = "off";
  return o;
}

// tiny_convnet compiled on measured isolated costs (no closed loop) with the CPU backend, then with
// `changed`, whose tuning keys differ for some kernels: the second compile measures those again and
// finds the others in the database (`db`), and a third measures nothing. The second's counts.
MeasuredCostStats recompile_with(Backend& changed, const fs::path& dir, const std::string& db) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  CompileOptions o = tiny_convnet_options(db);
  const CompileResult first = compile_model(g, dir.string(), o);
  EXPECT_EQ(compile_model(g, dir.string(), o).measured.measured, 0);  // all from the database
  o.backend = &changed;
  const CompileResult again = compile_model(g, dir.string(), o);
  EXPECT_GT(again.measured.measured, 0);
  EXPECT_GT(again.measured.db_hits, 0);
  EXPECT_LT(again.measured.measured, first.measured.measured);  // not everything
  EXPECT_EQ(compile_model(g, dir.string(), o).measured.measured, 0);
  return again.measured;
}

// A library step's revision keys the tuning records of the kernels it runs and no others: with the
// linear step's revision bumped, a compile measures its convolution kernels again and finds the
// generated ones in the database.
class LinearStepBumped : public cpu::CpuBackend {
 public:
  std::string step_revision(const Graph& g, const KernelCandidate& c) const override {
    return c.linear > 0 ? "|linear step r999" : cpu::CpuBackend::step_revision(g, c);
  }
};

TEST_F(CompileModel, ALibraryStepRevisionMeasuresItsKernelsAgainAndNoOthers) {
  EXPECT_EQ(cpu::CpuBackend().step_revision(Graph{}, KernelCandidate{}),
            "");  // revision 0: the records as stored before
  LinearStepBumped bumped;
  recompile_with(bumped, dir_, dir_.string() + ".db");
  fs::remove(dir_.string() + ".db");
}

// The converse: a generator bump measures the kernels with generated code again and keeps the
// records of the oneDNN calls alone (Backend::measured_generator), whose code the step revision keys.
class GeneratorBumped : public cpu::CpuBackend {
 public:
  int generator_version() const override { return cpu::kCpuGeneratorVersion + 1000; }
};

TEST_F(CompileModel, AGeneratorBumpKeepsTheLibraryCallsTimes) {
  const std::string path = dir_.string() + ".db";
  GeneratorBumped bumped;
  const MeasuredCostStats again = recompile_with(bumped, dir_, path);
  const std::vector<double> n = db_column(path, "SELECT count(*) FROM records WHERE generator = 0");
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(n[0]), again.db_hits);  // what the bump found: those records
  fs::remove(path);
}

// Records taken while the machine ran slower than its pace (profile/pace.h) are measured again by
// a compile that finds it at its pace, and only those.
TEST_F(CompileModel, RecordsTakenOnASlowMachineAreMeasuredAgainAtItsPace) {
  const std::string path = dir_.string() + ".db";
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  CompileOptions o = tiny_convnet_options(path);
  o.measured.pace.enabled = true;
  o.measured.pace.other_load = [] { return 0.0; };  // a slow probe is the machine's, whatever ctest runs beside
  // One graph: every compile asks for the same kernels (the rewrite variants a compile explores
  // follow the costs, so a variant graph's kernels may be asked for by one compile and not the next).
  o.orchestrate.rewrite_choices = false;
  const CompileResult first = compile_model(g, dir_.string(), o);
  ASSERT_GT(first.measured.measured, 0);
  EXPECT_EQ(first.measured.retaken_slow, 0);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto exec = [&](const char* sql) { ASSERT_EQ(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql; };
  auto count = [&](const std::string& sql) {
    const std::vector<double> n = db_column(path, sql);
    EXPECT_EQ(n.size(), 1u) << sql;
    return n.empty() ? int64_t{-1} : static_cast<int64_t>(n[0]);
  };
  EXPECT_EQ(count("SELECT count(*) FROM records WHERE status = 'ok' AND pace < 1"), 0);  // every one probed
  // Half the records as if taken in a slow phase, and a best probe no probe here comes near, so
  // the machine runs at its pace when the next compile looks (that probe becomes the best).
  exec("UPDATE records SET pace = 1.8 WHERE status = 'ok' AND rowid % 2 = 0");
  exec("UPDATE machine_pace SET best = 1.0");
  const int64_t slow = count("SELECT count(*) FROM records WHERE pace > 1.3");
  ASSERT_GT(slow, 0);
  o.measured.retake_budget_seconds = -1;  // every one (below: a few per compile)
  const CompileResult again = compile_model(g, dir_.string(), o);
  EXPECT_EQ(again.measured.retaken_slow, slow);
  EXPECT_EQ(again.measured.measured, slow);  // those, and none pruned
  // What it measured carries the pace it measured at: slow again only where its own probe said so
  // (under ctest -j2 another test's compile slows the probe, which this test does not call load).
  EXPECT_EQ(count("SELECT count(*) FROM records WHERE pace > 1.3"), again.measured.slow_pace);
  // Only what retake_budget_seconds allows per compile, the longest first: the next compile at the
  // machine's pace takes the next.
  exec("UPDATE records SET pace = 1.8 WHERE status = 'ok'");
  exec("UPDATE machine_pace SET best = 1.0");
  const int64_t all = count("SELECT count(*) FROM records WHERE pace > 1.3");
  ASSERT_GT(all, 2);
  // The two longest records' times.
  const std::vector<double> longest =
      db_column(path, "SELECT seconds FROM records WHERE status = 'ok' ORDER BY seconds DESC LIMIT 2");
  ASSERT_EQ(longest.size(), 2u);
  // A budget for those two and not a third (each estimated at 30 ms or more).
  o.measured.retake_budget_seconds = retake_estimate_seconds(longest[0]) + retake_estimate_seconds(longest[1]) + 0.01;
  CompileLog log;
  log.attach(o);
  const CompileResult limited = compile_model(g, dir_.string(), o);
  EXPECT_EQ(limited.measured.retaken_slow, 2);
  EXPECT_EQ(limited.measured.measured, 2);
  EXPECT_EQ(count("SELECT count(*) FROM records WHERE pace = 1.8"), all - 2);  // the others keep theirs
  // The longest record was among them: it no longer holds the slow phase's pace.
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM records WHERE pace = 1.8 AND seconds = {:.17g}", longest[0])), 0);
  EXPECT_TRUE(log.said(fmt::format("{} kernels were measured while the machine ran slow: the 2 longest", all)))
      << log.text();
  sqlite3_close(db);
  fs::remove(path);
}

// A time kept in the database for later compiles (a kernel's in-model time, the best plan) is
// never one from a noisy run: with every run counted noisy, none is stored, and the loop does not
// solve again on them. The unfused baseline is never stored: every compile times it beside its
// plan.
TEST_F(CompileModel, NoisyInModelRunsAreNotStoredAsWholePlanTimes) {
  const Graph g = two_matmuls();  // runs of milliseconds: their spread is more than jitter
  CompileOptions o;
  o.model_name = "two_matmuls";
  o.measured.db_path = (dir_.string() + ".db");
  o.loop_max_spread = 0;  // every run's spread is above it
  o.loop_max_drift = 1e9;  // the noise check, not the drift check
  o.loop_rounds = 1;
  CompileResult r = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(r.loop.ran);
  EXPECT_TRUE(r.loop.unfused_noisy);
  for (const auto& round : r.loop.rounds) EXPECT_TRUE(round.noisy);
  o.loop_max_spread = 1e9;
  CompileResult again = compile_model(g, dir_.string(), o);
  EXPECT_EQ(again.loop.loaded, 0);  // no kernel's in-model time was stored
  EXPECT_FALSE(again.loop.unfused_noisy);
  CompileResult third = compile_model(g, dir_.string(), o);
  EXPECT_GT(third.loop.loaded, 0);  // a quiet run's are
  // Timed again in each compile (a stored time would come back to the last bit).
  EXPECT_NE(third.loop.unfused_measured, again.loop.unfused_measured);
  EXPECT_NE(third.loop.plan_beside_unfused, again.loop.plan_beside_unfused);
  fs::remove(o.measured.db_path);
}

// Two artifacts timed side by side: alternating rounds of whole runs, as korch bench times them.
// The unfused plan of two MatMuls does the same work in one kernel more, so their times lie within
// a few times of each other (a generous band: the test runs beside others).
TEST_F(CompileModel, SideBySideRunsTimeBothArtifacts) {
  compile_model(two_matmuls(), dir_.string(), analytic("cpu"));
  const fs::path unfused = dir_.string() + "-unfused";
  CompileOptions u = analytic("cpu");
  u.unfused = true;
  compile_model(two_matmuls(), unfused.string(), u);
  const SideBySide s = run_side_by_side(dir_.string(), unfused.string(), 1, 2, 0.2);
  EXPECT_GE(s.runs, 4);  // at least 2 a round
  EXPECT_GT(s.a, 0);
  EXPECT_GT(s.b, 0);
  EXPECT_GE(s.spread_a, 0);
  EXPECT_LT(s.a, 3 * s.b);
  EXPECT_LT(s.b, 3 * s.a);
  fs::remove_all(unfused);
}

}  // namespace
}  // namespace korch
