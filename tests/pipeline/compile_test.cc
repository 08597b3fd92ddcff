// compile_model (the whole compiler) on the built-in models: the artifact it writes runs like the
// reference interpreter on both targets, and its verification step (analytic costs: no kernel has
// been through the correctness gate) catches wrong kernels and solves again without them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <sqlite3.h>

#include "codegen/cpu/cpu_backend.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/text_format.h"
#include "ir/tensor_compare.h"
#include "pipeline/compile.h"
#include "profile/in_model.h"
#include "runtime/executable.h"
#include "support/file_io.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

class CompileModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-pipeline-tests", 1);
  }
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("korch_compile_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The artifact in dir_ against the reference interpreter on `g`.
  void expect_runs_like_the_reference(const Graph& g, bool emulate) {
    runtime::LoadOptions lo;
    lo.emulate = emulate;
    auto exe = runtime::Executable::load(dir_.string(), lo);
    std::vector<Tensor> inputs = random_inputs(g, 5);
    std::vector<Tensor> got = exe->run(inputs), want = interpret(g, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(rel_l2_diff(got[i], want[i], 1e-4), "") << exe->output_names()[i];
  }

  fs::path dir_;
};

// Two 512^3 MatMuls: milliseconds a run, three kernel boundaries.
Graph two_matmuls() {
  return parse_graph(R"(graph t (opset 17) {
  input a: f32[512,512]
  input b: f32[512,512]
  %c: f32[512,512] = MatMul(a, b)
  %d: f32[512,512] = Relu(c)
  %e: f32[512,512] = MatMul(d, b)
  output e
})");
}

// n values uniform in [-bound, bound], as a text-format constant ("[a, b, ...]").
std::string uniform_values(std::mt19937_64& rng, int n, float bound) {
  std::uniform_real_distribution<float> u(-bound, bound);
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format("{}{:.4f}", i ? ", " : "", u(rng));
  return "[" + s + "]";
}

CompileOptions analytic(const std::string& target) {
  CompileOptions o;
  o.target = target;
  o.cost = CostSource::kAnalytic;
  o.model_name = "test";
  return o;
}

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

// Breaks every fused kernel that computes an exp (it prints expf and korch_exp_negabs as no-ops), as a generator bug
// would: verification must find them, and the plan solved again must not use them.
class BrokenFusionBackend : public cpu::CpuBackend {
 public:
  EmittedKernel emit(const Graph& g, const KernelCandidate& c, const std::string& variant = "") const override {
    EmittedKernel k = cpu::CpuBackend::emit(g, c, variant);
    if (c.nodes.size() < 2) return k;
    for (const std::string exp : {"expf(", "korch_exp_negabs("})  // a softmax's exp is the second
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
      EXPECT_EQ(sound.emit(r.primitives, c).source.find("expf("), std::string::npos);
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
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM records WHERE generator = 0", -1, &st, nullptr), SQLITE_OK);
  ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int64(st, 0), again.db_hits);  // what the bump found: those records
  sqlite3_finalize(st);
  sqlite3_close(db);
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
  auto count = [&](const char* sql) {
    sqlite3_stmt* st = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(st), SQLITE_ROW);
    const int64_t n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
  };
  EXPECT_EQ(count("SELECT count(*) FROM records WHERE status = 'ok' AND pace < 1"), 0);  // every one probed
  // Half the records as if taken in a slow phase, and a best probe no probe here comes near, so
  // the machine runs at its pace when the next compile looks (that probe becomes the best).
  exec("UPDATE records SET pace = 1.8 WHERE status = 'ok' AND rowid % 2 = 0");
  exec("UPDATE machine_pace SET best = 1.0");
  const int64_t slow = count("SELECT count(*) FROM records WHERE pace > 1.3");
  ASSERT_GT(slow, 0);
  const CompileResult again = compile_model(g, dir_.string(), o);
  EXPECT_EQ(again.measured.retaken_slow, slow);
  EXPECT_EQ(again.measured.measured, slow);  // those, and none pruned
  // What it measured carries the pace it measured at: slow again only where its own probe said so
  // (under ctest -j2 another test's compile slows the probe, which this test does not call load).
  EXPECT_EQ(count("SELECT count(*) FROM records WHERE pace > 1.3"), again.measured.slow_pace);
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

// Every record of a tuning database, as one text (key, time and creation time of each).
std::string all_records(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db,
                               "SELECT group_concat(key || ':' || seconds || ':' || created, ';') FROM "
                               "(SELECT * FROM records ORDER BY key)",
                               -1, &st, nullptr),
            SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL)
    out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

// Multiplies every in-model record of a tuning database by `factor`: the times a machine `factor`
// times slower would have stored.
void scale_in_model_records(const std::string& path, double factor, const std::string& also = "") {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  const std::string sql =
      fmt::format("UPDATE records SET seconds = seconds * {} WHERE device LIKE '%+in-model'{}", factor, also);
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_GT(sqlite3_changes(db), 0);
  sqlite3_close(db);
}

// The sum of a tuning database's in-model records (seconds).
double in_model_sum(const std::string& path) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, "SELECT SUM(seconds) FROM records WHERE device LIKE '%+in-model'", -1, &st, nullptr),
            SQLITE_OK);
  const double sum = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_double(st, 0) : 0;
  sqlite3_finalize(st);
  sqlite3_close(db);
  return sum;
}

// Twelve MatMuls: a plan of at least 8 kernels, so the drift has enough kernels to go by; of
// 160x160 (tens of us each), so none falls under run_drift's 5 us floor on a fast machine (with
// 96x96 the second compile once found too few kernels to go by and reported no drift). Constant
// weights of gain about 0.9 a layer: a random input weight matrix made the chain chaotic (rounding
// amplified to 3e-4 relative L2 over the 12 layers) and its output no test of the kernels.
Graph matmul_chain() {
  std::mt19937_64 rng(11);
  std::string text = fmt::format("graph t (opset 17) {{\n  input x: f32[160,160]\n  const w: f32[160,160] = {}\n",
                                 uniform_values(rng, 160 * 160, 0.2f));
  std::string last = "x";
  for (int i = 0; i < 12; ++i) {
    text += fmt::format("  %m{0}: f32[160,160] = MatMul({1}, w)\n  %r{0}: f32[160,160] = Tanh(m{0})\n", i, last);
    last = fmt::format("r{}", i);
  }
  return parse_graph(text + "  output " + last + "\n}");
}

// The matmul chain compiled once with measured costs into `dir`, its in-model times stored in `db`.
CompileOptions compile_matmul_chain(const Graph& g, const std::string& dir, const std::string& db) {
  const Tensor out = interpret(g, random_inputs(g, 5))[0];  // activations have not vanished
  EXPECT_GT(*std::max_element(out.span<float>().begin(), out.span<float>().end()), 0.05f);
  CompileOptions o;
  o.model_name = "matmul_chain";
  o.measured.db_path = db;
  o.loop_max_spread = 1e9;  // the drift check, not the noise check
  o.loop_max_drift = 1e9;
  o.micro_batch = "off";  // its rows are independent samples: a batch-1 compile would store its own loop's times
  // One kernel per primitive: the second compile runs the plan whose times the first stored. With
  // fusion its first plan, solved on those times, could pick other kernels (a loaded CI machine
  // made it), and a plan with too few stored kernels has nothing to drift from.
  o.orchestrate.candidates.max_primitives = 1;
  CompileResult first = compile_model(g, dir, o);
  EXPECT_TRUE(first.loop.ran);
  EXPECT_EQ(first.loop.rounds.front().drift, 1);  // nothing stored to compare with yet
  EXPECT_FALSE(first.loop.rounds.front().drifted);
  EXPECT_GE(first.orchestration.plan.kernels.size(), 8u);
  EXPECT_GT(in_model_sum(db), 0);
  // Only a drift far beyond run-to-run noise counts from here on (a CI machine running other tests
  // beside this one slows a run 2x): the stored times are moved by a factor of 4 or 8.
  o.loop_max_drift = 0.5;
  return o;
}

// A run whose kernels all ran slower than their stored in-model times (stored as if by a machine
// 4x faster) is taken again, and then, still slower, stores nothing, is not solved again on, and
// predicts in the quieter state the stored times describe. (Not 8x: the MatMuls' stored times
// would fall under run_drift's 5 us floor, leaving too few kernels to tell a drift.)
TEST_F(CompileModel, AnInModelRunSlowerThanItsStoredTimesIsNotStored) {
  const Graph g = matmul_chain();
  CompileOptions o = compile_matmul_chain(g, dir_.string(), dir_.string() + ".db");
  scale_in_model_records(o.measured.db_path, 0.25);
  const std::string stored = all_records(o.measured.db_path);
  CompileResult again = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(again.loop.ran);
  ASSERT_EQ(again.loop.rounds.size(), 1u);  // not solved again
  EXPECT_GT(again.loop.rounds.front().drift, 1.5);
  EXPECT_TRUE(again.loop.rounds.front().drifted);
  EXPECT_FALSE(again.loop.rounds.front().refreshed);
  EXPECT_EQ(all_records(o.measured.db_path), stored);  // nothing stored, nothing replaced
  // Its prediction is its kernel times over the drift.
  EXPECT_GT(again.loop.kept_drift, 1.5);
  EXPECT_LT(again.loop.predicted, again.loop.measured / 1.5);
  EXPECT_EQ(runtime::Executable::load(dir_.string())->manifest().at("closed_loop").at("kept_run_drift").get<double>(),
            again.loop.kept_drift);
  expect_runs_like_the_reference(g, false);

  o.loop_max_drift = 1e9;  // a quiet machine stores again
  compile_model(g, dir_.string(), o);
  EXPECT_NE(all_records(o.measured.db_path), stored);
  fs::remove(o.measured.db_path);
}

// The same slower run, with the machine's pace probed near its best (nothing counts as slow here):
// not a slow phase but the machine as it runs now, so its times replace the stored ones and the
// prediction is its own (not over the drift).
TEST_F(CompileModel, AnInModelRunSlowerAtTheMachinesPaceReplacesTheStoredTimes) {
  const Graph g = matmul_chain();
  CompileOptions o = compile_matmul_chain(g, dir_.string(), dir_.string() + ".db");
  scale_in_model_records(o.measured.db_path, 0.25);
  const double fast = in_model_sum(o.measured.db_path);
  o.measured.pace.enabled = true;
  o.measured.pace.other_load = [] { return 0.0; };
  o.measured.pace.slow = 1e9;
  CompileResult again = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(again.loop.ran);
  ASSERT_EQ(again.loop.rounds.size(), 1u);  // not solved again on a mix of two states
  EXPECT_GT(again.loop.rounds.front().drift, 1.5);
  EXPECT_FALSE(again.loop.rounds.front().drifted);
  EXPECT_TRUE(again.loop.rounds.front().refreshed);
  EXPECT_GT(in_model_sum(o.measured.db_path), 2 * fast);  // replaced
  EXPECT_EQ(again.loop.kept_drift, 1);
  EXPECT_GT(again.loop.kept_pace, 0);
  EXPECT_NEAR(again.loop.predicted, again.loop.measured, 0.5 * again.loop.measured);
  fs::remove(o.measured.db_path);
}

// A run whose kernels all ran faster than their stored in-model times (stored as if by a machine
// 8x slower: another process only ever slows a run down) replaces them and predicts from its own
// times; the next compile finds the machine about as the database describes it.
TEST_F(CompileModel, AnInModelRunFasterThanItsStoredTimesReplacesThem) {
  const Graph g = matmul_chain();
  CompileOptions o = compile_matmul_chain(g, dir_.string(), dir_.string() + ".db");
  scale_in_model_records(o.measured.db_path, 8);
  const double slow = in_model_sum(o.measured.db_path);
  CompileResult again = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(again.loop.ran);
  ASSERT_EQ(again.loop.rounds.size(), 1u);  // not solved again on a mix of two states
  EXPECT_LT(again.loop.rounds.front().drift, 0.5);
  EXPECT_FALSE(again.loop.rounds.front().drifted);
  EXPECT_TRUE(again.loop.rounds.front().refreshed);
  EXPECT_LT(in_model_sum(o.measured.db_path), slow / 2);  // replaced
  EXPECT_EQ(again.loop.kept_drift, 1);
  EXPECT_FALSE(runtime::Executable::load(dir_.string())->manifest().at("closed_loop").contains("kept_run_drift"));
  EXPECT_NEAR(again.loop.predicted, again.loop.measured, 0.5 * again.loop.measured);
  expect_runs_like_the_reference(g, false);

  o.loop_max_drift = 1e9;
  const CompileResult next = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(next.loop.ran);
  EXPECT_GT(next.loop.rounds.front().drift, 0.4);  // nowhere near the 1/8 of the old times
  EXPECT_LT(next.loop.rounds.front().drift, 2.5);
  fs::remove(o.measured.db_path);
}

// The fastest plan an earlier compile stored is run again when it beat this compile's by more than
// noise, but not when it is the very plan this compile kept (one kernel per primitive: the same
// plan every time): that plan's run already says what running it again would.
TEST_F(CompileModel, AnEarlierBestThatIsTheKeptPlanIsNotRunAgain) {
  const Graph g = matmul_chain();
  CompileOptions o = compile_matmul_chain(g, dir_.string(), dir_.string() + ".db");
  o.loop_max_drift = 1e9;
  // The whole-plan record (its note lists the kernels' instances; a kernel's record names a step)
  // made twice as fast as the plan ran.
  scale_in_model_records(o.measured.db_path, 0.5, " AND note LIKE '%,%'");
  std::vector<std::string> lines;
  o.log = [&](const std::string& line) { lines.push_back(line); };
  const CompileResult again = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(again.loop.ran);
  EXPECT_FALSE(again.loop.earlier_plan);
  for (const std::string& line : lines) EXPECT_EQ(line.find("an earlier compile's plan"), std::string::npos) << line;
  fs::remove(o.measured.db_path);
}

// The loop times only the kernels its plans choose, so a kernel whose stored in-model time is far
// too high would never run again. The plan of the isolated costs alone runs once after the rounds
// when no round ran it (its kernels' times are stored as a round's are); when a round ran it (the
// first compile: nothing stored yet), it does not run again.
TEST_F(CompileModel, ThePlanOfTheIsolatedCostsRunsWhenNoRoundRanIt) {
  const Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  CompileOptions o;
  o.model_name = "tiny_convnet";
  o.measured.db_path = dir_.string() + ".db";
  o.loop_max_spread = 1e9;  // the loop's mechanics, not its noise and drift checks
  o.loop_max_drift = 1e9;
  o.micro_batch = "off";
  o.loop_rounds = 1;
  const CompileResult first = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(first.loop.ran);
  EXPECT_EQ(first.loop.rounds.size(), 1u);  // its round 1 ran the plan of the isolated costs
  // A fused kernel of it made to look 1000 times slower in the model: round 1 avoids it. The
  // model's best plan (that same plan, run again when it beat round 1 by more than noise) is
  // forgotten.
  const auto& kernels = first.orchestration.plan.kernels;
  const auto fused =
      std::find_if(kernels.begin(), kernels.end(), [](const PlannedKernel& k) { return k.nodes.size() >= 2; });
  ASSERT_NE(fused, kernels.end());
  scale_in_model_records(o.measured.db_path, 1000,
                         fmt::format(" AND note LIKE '%: step {} of %'", fused - kernels.begin()));
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(o.measured.db_path.c_str(), &db), SQLITE_OK);
  EXPECT_EQ(sqlite3_exec(db, "DELETE FROM records WHERE device LIKE '%+in-model' AND note LIKE '%,%'", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  EXPECT_EQ(sqlite3_changes(db), 1);
  sqlite3_close(db);
  std::vector<std::string> lines;
  o.log = [&](const std::string& line) { lines.push_back(line); };
  const auto contender_ran = [&] {
    return std::any_of(lines.begin(), lines.end(), [](const std::string& line) {
      return line.find("the plan of the isolated costs alone") != std::string::npos;
    });
  };
  // Not beyond the loop's time budget.
  o.loop_budget_s = 0;
  EXPECT_EQ(compile_model(g, dir_.string(), o).loop.rounds.size(), 1u);
  EXPECT_FALSE(contender_ran());
  o.loop_budget_s = CompileOptions{}.loop_budget_s;
  const CompileResult again = compile_model(g, dir_.string(), o);
  ASSERT_TRUE(again.loop.ran);
  // Round 1, maybe the best plan the compile before stored, then the plan of the isolated costs.
  EXPECT_GE(again.loop.rounds.size(), 2u);
  EXPECT_TRUE(contender_ran());
  expect_runs_like_the_reference(g, false);
  // Once per plan: the next compile finds the same plan of the isolated costs and trusts the times
  // its run stored.
  lines.clear();
  compile_model(g, dir_.string(), o);
  EXPECT_FALSE(contender_ran());
  fs::remove(o.measured.db_path);
}

// The closed loop's runs: the per-kernel clock's cost is measured, and one set of runs serves
// for both the whole-run and the per-kernel times only where those clock reads are under 0.1% of
// a run (a few long kernels), not on a model of microseconds.
TEST_F(CompileModel, InModelRunsShareTimedRunsOnlyWhereTheClockIsNegligible) {
  const Graph tiny = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  compile_model(tiny, dir_.string(), analytic("cpu"));
  const InModelRun fast = run_in_model(dir_.string(), 3, 1);
  EXPECT_GT(fast.timer_seconds, 0);
  EXPECT_LT(fast.timer_seconds, 2e-6);
  EXPECT_FALSE(fast.shared_runs) << fast.end_to_end << " s a run";
  fs::remove_all(dir_);

  compile_model(two_matmuls(), dir_.string(), analytic("cpu"));
  // The steps add up to the run. On a loaded machine (ctest -j beside other tests) a run of 10 ms
  // is preempted more often than each of its steps, so the median of whole runs can exceed the sum
  // of the steps' medians by a scheduler slice: a mismatch counts only when every one of a few
  // takes shows it (a kernel missing from the step times shows it in all of them).
  InModelRun slow;
  double steps = 0;
  for (int take = 0; take < 5; ++take) {
    slow = run_in_model(dir_.string(), 3, 1);
    steps = 0;
    for (double s : slow.step_seconds) steps += s;
    if (std::abs(steps - slow.end_to_end) <= 0.25 * slow.end_to_end) break;
  }
  ASSERT_GT(slow.end_to_end, 1e-3) << "the case needs a run of milliseconds";
  EXPECT_TRUE(slow.shared_runs);
  EXPECT_NEAR(steps, slow.end_to_end, 0.25 * slow.end_to_end);
  // The noise check: a spread above the limit is taken again, then marked noisy.
  const InModelRun strict = run_in_model(dir_.string(), 3, 1, 0.0, 1);
  EXPECT_EQ(strict.retakes, 1);
  EXPECT_TRUE(strict.noisy);
  const InModelRun lax = run_in_model(dir_.string(), 3, 1, 1e9, 1);
  EXPECT_EQ(lax.retakes, 0);
  EXPECT_FALSE(lax.noisy);
}

}  // namespace
}  // namespace korch
