// Micro-batching (pipeline/micro_batch.h): which models split into independent samples, and the
// artifact that runs the batch-1 plan once per sample.
#include "pipeline/micro_batch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

#include "codegen/backend.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/text_format.h"
#include "pipeline/compile.h"
#include "runtime/executable.h"
#include "support/file_io.h"
#include "temp_dir.h"

namespace korch {
namespace {

std::string values(std::mt19937_64& rng, int n) {
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  std::string s;
  for (int i = 0; i < n; ++i) s += fmt::format("{}{:.4f}", i ? ", " : "", u(rng));
  return "[" + s + "]";
}

// A small CNN at batch 4 whose flatten is a Reshape to the constant [4, -1], as exporters fold it.
Graph conv_net() {
  std::mt19937_64 rng(1);
  return parse_graph(fmt::format(R"(graph t (opset 17) {{
  input x: f32[4,3,8,8]
  const w: f32[5,3,3,3] = {}
  const s: i64[2] = [4, -1]
  const v: f32[5,2] = {}
  %c: f32[4,5,8,8] = Conv(x, w) {{kernel_shape=[3, 3], pads=[1, 1, 1, 1]}}
  %r: f32[4,5,8,8] = Relu(c)
  %p: f32[4,5,1,1] = GlobalAveragePool(r)
  %f: f32[4,5] = Reshape(p, s)
  %y: f32[4,2] = MatMul(f, v)
  output y
}})",
                                 values(rng, 5 * 3 * 9), values(rng, 10)));
}

TEST(SplitBatch, AConvNetRunsOneSampleAtATime) {
  const BatchSplit s = split_batch(conv_net());
  ASSERT_TRUE(s.micro) << s.why_not;
  EXPECT_EQ(s.batches, 4);
  EXPECT_EQ(s.micro->type(s.micro->inputs[0]).shape, (Shape{1, 3, 8, 8}));
  EXPECT_EQ(s.micro->type(s.micro->outputs[0]).shape, (Shape{1, 2}));  // the folded [4, -1] became [1, -1]
}

TEST(SplitBatch, MicroBatchesOfTwo) {
  const BatchSplit s = split_batch(conv_net(), 2);
  ASSERT_TRUE(s.micro) << s.why_not;
  EXPECT_EQ(s.micro->type(s.micro->inputs[0]).shape, (Shape{2, 3, 8, 8}));
  EXPECT_EQ(s.micro->type(s.micro->outputs[0]).shape, (Shape{2, 2}));
  EXPECT_FALSE(split_batch(conv_net(), 3).micro);  // 3 does not divide 4
  EXPECT_FALSE(split_batch(conv_net(), 4).micro);  // the whole batch is no micro-batch
}

// Heads folded into the batch ([N, S, H*D] -> [N*H, S, D], as batch-first attention exports do).
TEST(SplitBatch, AReshapeThatFoldsHeadsIntoTheBatch) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,3,6]
  const s: i64[3] = [8, 3, 3]
  const b: i64[3] = [4, 3, 6]
  %h: f32[8,3,3] = Reshape(x, s)
  %e: f32[8,3,3] = Exp(h)
  %y: f32[4,3,6] = Reshape(e, b)
  output y
})");
  const BatchSplit s = split_batch(g, 2);
  ASSERT_TRUE(s.micro) << s.why_not;
  EXPECT_EQ(s.micro->type(s.micro->outputs[0]).shape, (Shape{2, 3, 6}));
}

TEST(SplitBatch, AReductionOverTheBatchIsRefused) {
  const BatchSplit s = split_batch(parse_graph(R"(graph t (opset 17) {
  input x: f32[4,6]
  const a: i64[1] = [0]
  %m: f32[1,6] = ReduceMean(x, a) {keepdims=1}
  %y: f32[4,6] = Sub(x, m)
  output y
})"));
  EXPECT_FALSE(s.micro);
  EXPECT_NE(s.why_not.find("not independent"), std::string::npos) << s.why_not;
}

TEST(SplitBatch, ABatchThatMovesOffTheLeadingAxisIsRefused) {
  const BatchSplit s = split_batch(parse_graph(R"(graph t (opset 17) {
  input x: f32[4,3,5]
  %y: f32[3,4,5] = Transpose(x) {perm=[1, 0, 2]}
  output y
})"));
  EXPECT_FALSE(s.micro);
  EXPECT_NE(s.why_not.find("does not lead with the batch"), std::string::npos) << s.why_not;
}

TEST(SplitBatch, BatchOneHasNothingToSplit) {
  const BatchSplit s = split_batch(parse_graph(R"(graph t (opset 17) {
  input x: f32[1,6]
  %y: f32[1,6] = Relu(x)
  output y
})"));
  EXPECT_FALSE(s.micro);
  EXPECT_EQ(s.batches, 1);
}

class MicroBatchCompile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-pipeline-tests", 1);
  }
  // The artifact in dir against the reference interpreter on the batch-4 model.
  static void expect_runs_like_the_reference(const Graph& g, const std::string& dir) {
    auto exe = runtime::Executable::load(dir);
    ASSERT_EQ(exe->input_types()[0], g.type(g.inputs[0]));  // the model's batch, whatever runs inside
    const std::vector<Tensor> inputs = random_inputs(g, 3);
    const std::vector<Tensor> got = exe->run(inputs), want = interpret(g, inputs);
    EXPECT_EQ(rel_l2_diff(got[0], want[0], 1e-4), "");
  }
  // conv_net() compiled into dir_ with analytic costs and `micro_batch` = mode.
  CompileResult compile_analytic(const std::string& mode) {
    CompileOptions o;
    o.cost = CostSource::kAnalytic;
    o.micro_batch = mode;
    return compile_model(conv_net(), dir_.path().string(), o);
  }
  static nlohmann::json manifest_of(const std::string& dir) {
    return nlohmann::json::parse(read_file_bytes((std::filesystem::path(dir) / "manifest.json").string()));
  }
  testing::TempDir dir_{"korch-micro-batch"};
};

TEST_F(MicroBatchCompile, OnRunsTheBatchOnePlanOncePerSample) {
  const CompileResult r = compile_analytic("on");
  ASSERT_TRUE(r.micro.chosen) << r.micro.why_not;
  EXPECT_EQ(r.micro.batches, 4);
  EXPECT_EQ(r.primitives.type(r.primitives.inputs[0]).shape[0], 1);
  const auto manifest = manifest_of(dir_.path().string());
  EXPECT_EQ(manifest.at("micro_batches").get<int>(), 4);
  EXPECT_DOUBLE_EQ(manifest.at("plan_seconds").get<double>(), 4 * r.orchestration.plan.total_seconds());
  auto exe = runtime::Executable::load(dir_.path().string());
  EXPECT_EQ(exe->micro_batches(), 4);
  expect_runs_like_the_reference(conv_net(), dir_.path().string());
}

TEST_F(MicroBatchCompile, AutoWithoutMeasuredCostsKeepsTheWholeBatch) {
  const CompileResult r = compile_analytic("auto");  // analytic: nothing to time the two plans with
  EXPECT_TRUE(r.micro.trials.empty());
  EXPECT_EQ(runtime::Executable::load(dir_.path().string())->micro_batches(), 1);
  expect_runs_like_the_reference(conv_net(), dir_.path().string());
}

// "auto" with measured costs times both plans side by side and keeps either; both run correctly.
TEST_F(MicroBatchCompile, AutoTimesBothPlans) {
  const Graph g = conv_net();
  CompileOptions o;
  o.measured.db_path = (dir_.path() / "tuning.db").string();
  const std::string out = (dir_.path() / "a.korch").string();
  const CompileResult r = compile_model(g, out, o);
  ASSERT_EQ(r.micro.trials.size(), 1u) << r.micro.why_not;  // micro-batches of 4 are the whole batch: only 1 is tried
  const MicroBatchReport::Trial& t = r.micro.trials[0];
  EXPECT_EQ(t.size, 1);
  EXPECT_GT(t.seconds, 0);
  EXPECT_GT(t.against, 0);
  EXPECT_EQ(t.kept, !t.noisy && t.seconds < 0.97 * t.against);
  EXPECT_EQ(r.micro.chosen, t.kept);
  EXPECT_EQ(runtime::Executable::load(out)->micro_batches(), r.micro.chosen ? 4 : 1);
  const auto manifest = manifest_of(out);
  EXPECT_EQ(manifest.at("micro_batch").at("trials").size(), 1u);  // chosen or not, the trial is on record
  // With its times (written into the manifest after the trial), and a chosen plan's time per micro-batch.
  EXPECT_DOUBLE_EQ(manifest.at("micro_batch").at("trials").at(0).at("seconds").get<double>(), t.seconds);
  EXPECT_DOUBLE_EQ(manifest.at("micro_batch").at("trials").at(0).at("against_seconds").get<double>(), t.against);
  EXPECT_EQ(manifest.at("micro_batch").contains("plan_seconds_per_micro_batch"), r.micro.chosen);
  if (r.micro.chosen) {
    EXPECT_DOUBLE_EQ(manifest.at("micro_batch").at("micro_s").get<double>(), t.seconds);
  }
  expect_runs_like_the_reference(g, out);
  // Nothing of the batch-1 compile is left beside the artifact.
  for (const auto& e : std::filesystem::directory_iterator(dir_.path()))
    EXPECT_EQ(e.path().filename().string().find(".micro-"), std::string::npos) << e.path();
}

TEST_F(MicroBatchCompile, ANumberIsTheMicroBatchSize) {
  const CompileResult r = compile_analytic("2");
  ASSERT_TRUE(r.micro.chosen) << r.micro.why_not;
  EXPECT_EQ(r.micro.size, 2);
  EXPECT_EQ(r.micro.runs(), 2);
  EXPECT_EQ(r.primitives.type(r.primitives.inputs[0]).shape[0], 2);
  EXPECT_EQ(runtime::Executable::load(dir_.path().string())->micro_batches(), 2);
  expect_runs_like_the_reference(conv_net(), dir_.path().string());
  EXPECT_THROW(compile_analytic("two"), Error);
}

// Every time in a micro-batched artifact's manifest is one model run's: its batch-k plan's times
// (the closed loop's included) times the runs.
TEST_F(MicroBatchCompile, AMicroBatchedManifestGivesWholeRunTimes) {
  const Graph g = conv_net();
  CompileOptions o;
  o.measured.db_path = (dir_.path() / "tuning.db").string();
  o.micro_batch = "2";
  const std::string out = (dir_.path() / "m.korch").string();
  const CompileResult r = compile_model(g, out, o);
  ASSERT_TRUE(r.micro.chosen) << r.micro.why_not;
  ASSERT_TRUE(r.loop.ran);
  const auto m = manifest_of(out);
  EXPECT_DOUBLE_EQ(m.at("plan_seconds").get<double>(), 2 * r.orchestration.plan.total_seconds());
  EXPECT_DOUBLE_EQ(m.at("measured_seconds").get<double>(), 2 * r.loop.measured);
  const auto& loop = m.at("closed_loop");
  EXPECT_DOUBLE_EQ(loop.at("plan_beside_unfused_s").get<double>(), 2 * r.loop.plan_beside_unfused);
  EXPECT_DOUBLE_EQ(loop.at("unfused_measured_s").get<double>(), 2 * r.loop.unfused_measured);
  EXPECT_DOUBLE_EQ(loop.at("rounds").at(0).at("measured_s").get<double>(), 2 * r.loop.rounds.at(0).measured);
  expect_runs_like_the_reference(g, out);
}

// A micro-batch whose compile fails leaves the batch-N artifact as it was; an I/O error still ends
// the compile.
TEST(ChooseMicroBatches, AFailingMicroBatchLeavesTheWholeBatch) {
  const Graph g = conv_net();
  CompileResult r;
  r.meta.model = "whole";
  MicroBatchSteps steps;
  steps.compile = [](const Graph&, const std::string&, int64_t k) -> CompileResult {
    fail("no kernel at batch {}", k);
  };
  steps.write = [](CompileResult&, const std::string&) {};
  std::vector<std::string> said;
  choose_micro_batches(g, "/nonexistent/out", {1}, false, 2, 0.15, r, steps,
                       [&](const std::string& s) { said.push_back(s); });
  EXPECT_FALSE(r.micro.chosen);
  EXPECT_EQ(r.meta.model, "whole");
  EXPECT_NE(r.micro.why_not.find("no kernel at batch 1"), std::string::npos) << r.micro.why_not;
  ASSERT_FALSE(said.empty());
  EXPECT_NE(said.back().find("failed"), std::string::npos) << said.back();
  steps.compile = [](const Graph&, const std::string&, int64_t) -> CompileResult { fail_io("disk full"); };
  EXPECT_THROW(choose_micro_batches(g, "/nonexistent/out", {1}, false, 2, 0.15, r, steps, [](const std::string&) {}),
               Error);
}

// The loader takes program.json's micro_batches as it is: buffers of one micro-batch, runs that take
// micro_batches of them (and refuses a count below 1).
TEST_F(MicroBatchCompile, TheLoaderRunsAProgramsMicroBatches) {
  const Graph g = conv_net();
  CompileOptions o;
  o.cost = CostSource::kAnalytic;
  o.micro_batch = "off";
  compile_model(g, dir_.path().string(), o);
  const std::string program = (dir_.path() / "program.json").string();
  auto j = nlohmann::json::parse(read_file_bytes(program));
  j["micro_batches"] = 3;  // the batch-4 plan, three times: a batch of 12
  write_file_bytes(program, j.dump());
  auto exe = runtime::Executable::load(dir_.path().string());
  ASSERT_EQ(exe->input_types()[0].shape, (Shape{12, 3, 8, 8}));
  std::mt19937_64 rng(4);
  const Tensor x = random_tensor(exe->input_types()[0], rng);
  const Tensor y = exe->run({x})[0];
  ASSERT_EQ(y.shape(), (Shape{12, 2}));
  for (int64_t m = 0; m < 3; ++m) {  // each run of 4 against the reference on those 4
    Tensor xm(DType::kFloat32, {4, 3, 8, 8}), ym(DType::kFloat32, {4, 2});
    std::memcpy(xm.raw(), x.raw() + m * xm.nbytes(), xm.nbytes());
    std::memcpy(ym.raw(), y.raw() + m * ym.nbytes(), ym.nbytes());
    EXPECT_EQ(rel_l2_diff(ym, interpret(g, {xm})[0], 1e-4), "") << "micro-batch " << m;
  }
  j["micro_batches"] = 0;
  write_file_bytes(program, j.dump());
  EXPECT_THROW(runtime::Executable::load(dir_.path().string()), Error);
}

// The record of trials that lost says why each lost: a faster trial in noisy runs is not "the
// batch-N plan was faster" (a batch-16 mobilenet_v2 compile said so of 79.3 ms against 98.3 ms).
TEST(MicroBatchWhyNot, SaysWhyEachTrialLost) {
  MicroBatchReport m;
  m.batches = 16;
  m.trials.push_back({4, 0.0793, 0.0983, 0, true, false});   // faster, noisy
  m.trials.push_back({1, 0.1157, 0.1026, 0, false, false});  // slower
  m.trials.push_back({2, 0.1010, 0.1026, 0, false, false});  // within the noise
  m.trials.push_back({8, 0.0900, 0.0800, 4, true, false});   // slower than a micro-batched plan, noisy
  const std::string why = micro_batch_why_not(m);
  EXPECT_NE(why.find("4 runs of the batch-4 plan 79300.0 us against the batch-16 plan 98300.0 us: faster, but in "
                     "runs too noisy to trust"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("16 runs of the batch-1 plan 115700.0 us against the batch-16 plan 102600.0 us: slower"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("8 runs of the batch-2 plan 101000.0 us against the batch-16 plan 102600.0 us: not faster "
                     "beyond the noise"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("2 runs of the batch-8 plan 90000.0 us against 4 runs of the batch-4 plan 80000.0 us: not "
                     "faster (noisy runs)"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("was faster"), std::string::npos) << why;
  EXPECT_TRUE(micro_batch_why_not(MicroBatchReport{}).empty());
}

// What "auto" trials decided is kept per model, device and generator: a decision is recalled, a
// noisy one or one timed while the machine ran slow is not kept, --redo and another model or set of
// sizes find nothing.
TEST(MicroBatchMemory, KeepsADecisionAndOnlyADecision) {
  testing::TempDir dir{"korch-micro-memory"};
  const std::string db = (dir.path() / "tuning.db").string();
  const Graph g = conv_net();
  const MicroBatchMemory memory(db, "cpu:test:2t", 7, g, {4, 1}, "o", false);
  EXPECT_FALSE(memory.recall());
  MicroBatchReport m;
  m.batches = 4;
  m.trials.push_back({1, 0.002, 0.003, 0, true, false});  // faster, but noisy: no decision
  EXPECT_EQ(memory.remember(m, 1.0), "a trial's runs stayed noisy");
  EXPECT_FALSE(memory.recall());
  m.trials[0] = {1, 0.002, 0.003, 0, false, true};
  m.size = 1;
  m.chosen = true;
  m.whole_s = 0.003;
  m.micro_s = 0.002;
  EXPECT_NE(memory.remember(m, 1.6).find("1.60x slower"), std::string::npos);  // a slow phase's
  EXPECT_FALSE(memory.recall());
  EXPECT_EQ(memory.remember(m, 1.05), "");
  const std::optional<MicroBatchReport> back = memory.recall();
  ASSERT_TRUE(back);
  EXPECT_GT(back->recalled, 0);
  EXPECT_TRUE(back->chosen);
  EXPECT_EQ(back->size, 1);
  EXPECT_EQ(back->runs(), 4);
  EXPECT_DOUBLE_EQ(back->micro_s, 0.002);
  ASSERT_EQ(back->trials.size(), 1u);
  EXPECT_TRUE(back->trials[0].kept);
  // Micro-batches of 4 that beat the whole batch in quiet runs stand when the batch-1 trial after
  // them stayed noisy (a warm yolox_nano compile at batch 16 timed its three plans again each time);
  // a noisy trial beside a whole batch kept is still no decision.
  MicroBatchReport four;
  four.batches = 16;
  four.trials.push_back({4, 0.117, 0.128, 0, false, true});
  four.trials.push_back({1, 0.126, 0.132, 4, true, false});
  four.size = 4;
  four.chosen = true;
  EXPECT_TRUE(MicroBatchMemory::decided(four));
  four.trials[0].kept = false;
  four.trials[0].noisy = true;
  four.chosen = false;
  EXPECT_FALSE(MicroBatchMemory::decided(four));
  four.trials[0] = {4, 0.117, 0.128, 0, false, true};
  four.chosen = true;
  four.trials[1] = {1, 0.100, 0.117, 4, true, false};  // batch 1 faster in noisy runs: 4 stays chosen
  EXPECT_TRUE(MicroBatchMemory::decided(four));
  EXPECT_FALSE(MicroBatchMemory(db, "cpu:test:2t", 7, g, {4, 1}, "o", true).recall());   // redo
  EXPECT_FALSE(MicroBatchMemory(db, "cpu:test:2t", 8, g, {4, 1}, "o", false).recall());  // another generator
  EXPECT_FALSE(MicroBatchMemory(db, "cpu:test:4t", 7, g, {4, 1}, "o", false).recall());  // another device
  EXPECT_FALSE(MicroBatchMemory(db, "cpu:test:2t", 7, g, {4, 1}, "p", false).recall());  // other options
  EXPECT_FALSE(MicroBatchMemory(db, "cpu:test:2t", 7, g, {2}, "o", false).recall());     // other sizes
  Graph other = conv_net();
  other.nodes[1].op_type = "Sigmoid";
  EXPECT_FALSE(MicroBatchMemory(db, "cpu:test:2t", 7, other, {4, 1}, "o", false).recall());
}

// A compile that finds an earlier decision compiles only the plan it chose and times no trial; one
// that kept the whole batch compiles that alone; --redo times the trials again.
TEST_F(MicroBatchCompile, AnEarlierDecisionIsCompiledWithoutTrials) {
  const Graph g = conv_net();
  CompileOptions o;
  o.measured.db_path = (dir_.path() / "tuning.db").string();
  std::vector<std::string> said;
  o.log = [&](const std::string& s) { said.push_back(s); };
  auto backend = make_backend("cpu", {});
  const MicroBatchMemory memory(o.measured.db_path, backend->timing_device()->id(), backend->generator_version(), g,
                                micro_batch_sizes("auto"), plan_options_text(o), false);
  const auto timed_a_trial = [&] {
    return std::any_of(said.begin(), said.end(),
                       [](const std::string& s) { return s.find("in alternating runs") != std::string::npos; });
  };
  MicroBatchReport m;
  m.batches = 4;
  m.trials.push_back({1, 0.002, 0.003, 0, false, true});
  m.size = 1;
  m.chosen = true;
  m.whole_s = 0.003;
  m.micro_s = 0.002;
  ASSERT_EQ(memory.remember(m, 0), "");  // pace unknown: kept
  const std::string out = (dir_.path() / "a.korch").string();
  CompileResult r = compile_model(g, out, o);
  EXPECT_FALSE(timed_a_trial());
  ASSERT_TRUE(r.micro.chosen);
  EXPECT_GT(r.micro.recalled, 0);
  EXPECT_EQ(r.primitives.type(r.primitives.inputs[0]).shape[0], 1);  // the batch-1 plan alone was compiled
  EXPECT_EQ(runtime::Executable::load(out)->micro_batches(), 4);
  auto manifest = manifest_of(out);
  EXPECT_GT(manifest.at("micro_batch").at("recalled_from_unix_time").get<int64_t>(), 0);
  EXPECT_DOUBLE_EQ(manifest.at("micro_batch").at("trials").at(0).at("seconds").get<double>(), 0.002);
  expect_runs_like_the_reference(g, out);

  // The whole batch decided: the batch-4 plan, with the earlier trial on record.
  m.chosen = false;
  m.size = 1;
  m.trials[0] = {1, 0.004, 0.003, 0, false, false};
  m.why_not = micro_batch_why_not(m);
  ASSERT_EQ(memory.remember(m, 0), "");
  said.clear();
  r = compile_model(g, out, o);
  EXPECT_FALSE(timed_a_trial());
  EXPECT_FALSE(r.micro.chosen);
  EXPECT_GT(r.micro.recalled, 0);
  EXPECT_EQ(runtime::Executable::load(out)->micro_batches(), 1);
  manifest = manifest_of(out);
  EXPECT_GT(manifest.at("micro_batch").at("recalled_from_unix_time").get<int64_t>(), 0);
  EXPECT_NE(manifest.at("micro_batch").at("why_not").get<std::string>().find("slower"), std::string::npos);
  expect_runs_like_the_reference(g, out);

  // Other options that shape the plans (here the layout): no decision for them; the trial runs.
  o.layout = "nchw";
  said.clear();
  r = compile_model(g, out, o);
  EXPECT_TRUE(timed_a_trial());
  EXPECT_EQ(r.micro.recalled, 0);
  o.layout = "auto";

  // --redo: the trial runs again.
  o.measured.redo = true;
  said.clear();
  r = compile_model(g, out, o);
  EXPECT_TRUE(timed_a_trial());
  EXPECT_EQ(r.micro.recalled, 0);
  expect_runs_like_the_reference(g, out);
}

}  // namespace
}  // namespace korch
