// InModelCosts: in-model times replace isolated costs per kernel instance, unrun candidates are
// scaled by their class's in-model / isolated ratio, and the records persist in the tuning
// database (a second provider over the same file starts from them).
#include "profile/in_model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "ir/primitive.h"
#include "profile/scripted_device.h"
#include "temp_dir.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

// Isolated costs: 10 us per node, linear kernels 100 us.
class FixedCost : public CostProvider {
 public:
  std::string name() const override { return "fixed"; }
  KernelCost cost(const Graph&, const KernelCandidate& c) override {
    return {(c.linear ? 100e-6 : 10e-6) * static_cast<double>(c.nodes.size()), "fixed"};
  }
};

KernelCandidate cand(std::vector<NodeId> nodes, std::vector<ValueId> outputs, int linear = 0) {
  KernelCandidate c;
  c.nodes = std::move(nodes);
  c.outputs = std::move(outputs);
  c.linear = linear;
  return c;
}

// Ten inputs (values 0-9) and Relu nodes n0..n3 (node ids 0-3) writing values 10-13 (names out0..);
// with `first`, one more node ahead of them (every id after it shifts by one).
Graph relus(bool first = false) {
  Graph g;
  const TensorType t{DType::kFloat32, {4}};
  for (int i = 0; i < 10; ++i) g.add_input(fmt::format("in{}", i), t);
  auto relu = [&](const std::string& name, ValueId in, const std::string& out) {
    Node n;
    n.name = name;
    n.op_type = "Relu";
    n.inputs = {in};
    n.outputs = {g.add_value(out, t)};
    g.add_node(std::move(n));
  };
  if (first) relu("first", 9, "first_out");
  for (int i = 0; i < 4; ++i) relu(fmt::format("n{}", i), i, fmt::format("out{}", i));
  return g;
}

class InModelTest : public ::testing::Test {
 protected:
  std::string db() const { return (dir_ / "tuning.db").string(); }
  testing::TempDir tmp_{"korch-in-model"};
  const fs::path& dir_ = tmp_.path();
  Graph g_ = relus();
  FixedCost fixed_;
};

TEST_F(InModelTest, InstancesReplaceTheirCostsAndScaleTheRestOfTheirClass) {
  const std::vector<KernelCandidate> cs = {cand({0}, {10}), cand({1}, {11}), cand({0, 1}, {11}), cand({0, 1}, {10, 11}),
                                           cand({2}, {12}, 1), cand({3}, {13}, 1)};
  InModelCosts m(fixed_, db(), "cpu:test", 3, "model-a");
  m.prepare(g_, cs);
  EXPECT_EQ(m.loaded(), 0);
  EXPECT_NEAR(m.cost(g_, cs[0]).seconds, 10e-6, 1e-12);  // nothing run yet: isolated, unscaled
  EXPECT_NE(m.instance(g_, cs[2]), m.instance(g_, cs[3]));     // same nodes, other outputs: another kernel
  // By names: the same kernel in a graph where every id has moved (another rewrite variant).
  EXPECT_EQ(m.instance(relus(true), cand({1, 2}, {12})), m.instance(g_, cand({0, 1}, {11})));
  EXPECT_NE(m.instance(relus(true), cand({0, 1}, {11})), m.instance(g_, cand({0, 1}, {11})));

  m.record(g_, cs[0], 20e-6, "step 0");  // loop kernels ran 2x slower in the model
  m.record(g_, cs[4], 150e-6, "step 1");  // linear ones 1.5x
  EXPECT_NEAR(m.cost(g_, cs[0]).seconds, 20e-6, 1e-12);
  EXPECT_NE(m.cost(g_, cs[0]).reason.find("in-model"), std::string::npos);
  EXPECT_NEAR(m.scale(CostClass::kLoop), 2.0, 1e-12);
  EXPECT_NEAR(m.scale(CostClass::kLinear), 1.5, 1e-12);
  EXPECT_NEAR(m.cost(g_, cs[1]).seconds, 20e-6, 1e-12);   // 10 us x 2
  EXPECT_NEAR(m.cost(g_, cs[3]).seconds, 40e-6, 1e-12);   // 20 us x 2
  EXPECT_NEAR(m.cost(g_, cs[5]).seconds, 150e-6, 1e-12);  // 100 us x 1.5
}

// Kernels measured with their weights cold (MeasuredCost::measures_cold) run faster in the model,
// where a weight may still sit in the last-level cache, while the rest run slower: a class of
// their own, scaled only by their own ratios.
TEST_F(InModelTest, KernelsMeasuredWithColdWeightsAreAClassOfTheirOwn) {
  const std::vector<KernelCandidate> cs = {cand({0}, {10}, 1), cand({1}, {11}, 1), cand({2}, {12}, 1),
                                           cand({3}, {13}, 1)};
  InModelCosts m(fixed_, db(), "cpu:test", 3, "model-a");
  m.classify_cold([](const Graph&, const KernelCandidate& c) { return c.nodes.front() >= 2; });
  m.prepare(g_, cs);
  EXPECT_EQ(m.cost_class(g_, cs[0]), CostClass::kLinear);
  EXPECT_EQ(m.cost_class(g_, cs[2]), CostClass::kColdConstants);
  m.record(g_, cs[0], 150e-6, "step 0");  // warm-measured linear kernels: 1.5x in the model
  EXPECT_NEAR(m.cost(g_, cs[1]).seconds, 150e-6, 1e-12);
  EXPECT_NEAR(m.cost(g_, cs[3]).seconds, 100e-6, 1e-12);  // its class has no ratio yet: as measured
  m.record(g_, cs[2], 40e-6, "step 2");                   // cold-measured: 0.4x
  EXPECT_NEAR(m.scale(CostClass::kColdConstants), 0.4, 1e-12);
  EXPECT_NEAR(m.scale(CostClass::kLinear), 1.5, 1e-12);
  EXPECT_NEAR(m.cost(g_, cs[3]).seconds, 40e-6, 1e-12);
  EXPECT_NEAR(m.cost(g_, cs[1]).seconds, 150e-6, 1e-12);
}

// An unrun kernel whose linear primitive a recorded kernel of its class ran (the same MatMul with
// an epilogue) is scaled by that kernel's ratio, not the class's median: the primitive meets the
// same data and neighbours in the model whichever kernel runs it (mobilenet_v2: its 1x1
// convolutions ran 1.25x their isolated times where its first layers ran 1.4-2.6x).
TEST_F(InModelTest, AKernelOverARunLinearPrimitiveTakesThatKernelsRatio) {
  Graph g;
  const TensorType t{DType::kFloat32, {4, 8}}, w{DType::kFloat32, {8, 8}};
  const ValueId x = g.add_input("x", t);
  const ValueId w1 = g.add_constant("w1", Tensor(w)), w2 = g.add_constant("w2", Tensor(w));
  const ValueId m1 = g.add_value("m1", t), r1 = g.add_value("r1", t), m2 = g.add_value("m2", t);
  g.add_node(Node{"mm1", "MatMul", "", {x, w1}, {m1}, {}});
  g.add_node(Node{"relu", "Relu", "", {m1}, {r1}, {}});
  g.add_node(Node{"mm2", "MatMul", "", {r1, w2}, {m2}, {}});
  g.outputs = {m2};
  ASSERT_EQ(primitive_kind(g, g.nodes[0]), PrimitiveKind::kLinear);
  const std::vector<KernelCandidate> cs = {cand({0}, {m1}, 1), cand({0, 1}, {r1}, 1), cand({2}, {m2}, 1),
                                           cand({1}, {r1})};
  InModelCosts m(fixed_, db(), "cpu:test", 3, "model-a");
  m.prepare(g, cs);
  m.record(g, cs[0], 150e-6, "step 0");  // mm1 alone: 1.5x its isolated 100 us
  m.record(g, cs[2], 300e-6, "step 2");  // mm2: 3x (its class's median now)
  EXPECT_NEAR(m.scale(CostClass::kLinear), 3.0, 1e-12);
  const KernelCost fused = m.cost(g, cs[1]);  // isolated 200 us
  EXPECT_NEAR(fused.seconds, 300e-6, 1e-12);
  EXPECT_NE(fused.reason.find("ran its mm1"), std::string::npos) << fused.reason;
  EXPECT_NEAR(m.cost(g, cs[3]).seconds, 10e-6, 1e-12);  // a loop kernel: its own class (nothing run)
}

TEST_F(InModelTest, RecordsPersistPerModelAndDevice) {
  const std::vector<KernelCandidate> cs = {cand({0}, {10}), cand({1}, {11})};
  {
    InModelCosts m(fixed_, db(), "cpu:test", 3, "model-a");
    m.prepare(g_, cs);
    m.record(g_, cs[1], 33e-6, "step 1");
  }
  InModelCosts again(fixed_, db(), "cpu:test", 3, "model-a");
  again.prepare(g_, cs);
  EXPECT_EQ(again.loaded(), 1);
  EXPECT_NEAR(again.cost(g_, cs[1]).seconds, 33e-6, 1e-12);
  EXPECT_NEAR(again.cost(g_, cs[0]).seconds, 10e-6 * 3.3, 1e-12);  // scaled by the loaded ratio

  InModelCosts other_model(fixed_, db(), "cpu:test", 3, "model-b");
  other_model.prepare(g_, cs);
  EXPECT_EQ(other_model.loaded(), 0);
  InModelCosts other_generator(fixed_, db(), "cpu:test", 4, "model-a");
  other_generator.prepare(g_, cs);
  EXPECT_EQ(other_generator.loaded(), 0);
  InModelCosts redo(fixed_, db(), "cpu:test", 3, "model-a", /*redo=*/true);
  redo.prepare(g_, cs);
  EXPECT_EQ(redo.loaded(), 0);
  EXPECT_NEAR(redo.cost(g_, cs[1]).seconds, 10e-6, 1e-12);
}

// The kept plan's kernel-by-kernel run against its side-by-side runs: agreeing runs are kept
// untouched; a disagreeing one is taken again and the faster (quiet) run kept.
InModelRun timed(double seconds, bool noisy = false, double pace = 0) {
  InModelRun r;
  r.end_to_end = seconds;
  r.step_seconds = {seconds / 2, seconds / 2};
  r.noisy = noisy;
  r.pace = pace;
  r.slow = pace > 1.3;
  return r;
}

// A library step's revision (Backend::step_revision) is part of the instance: a bumped step's
// in-model records are not loaded; the others are.
TEST_F(InModelTest, AStepRevisionKeysItsInstances) {
  const std::vector<KernelCandidate> cs = {cand({0}, {10}), cand({2}, {12}, 1)};
  InModelCosts m(fixed_, db(), "cpu:test", 3, "model-a");
  m.prepare(g_, cs);
  m.record(g_, cs[0], 20e-6, "step 0");
  m.record(g_, cs[1], 150e-6, "step 1");
  InModelCosts same(fixed_, db(), "cpu:test", 3, "model-a");
  same.key_by_step_revision([](const Graph&, const KernelCandidate&) { return std::string(); });
  same.prepare(g_, cs);
  EXPECT_EQ(same.loaded(), 2);  // an empty revision keys as before
  InModelCosts bumped(fixed_, db(), "cpu:test", 3, "model-a");
  bumped.key_by_step_revision([](const Graph&, const KernelCandidate& c) {
    return c.linear > 0 ? std::string("|linear step r1") : std::string();
  });
  bumped.prepare(g_, cs);
  EXPECT_EQ(bumped.loaded(), 1);
  EXPECT_TRUE(bumped.has(g_, cs[0]));
  EXPECT_FALSE(bumped.has(g_, cs[1]));
}

// A record taken while the machine ran slow is left out when it runs at its pace now (the closed
// loop takes it again), counted once however many graphs prepare() is given, and still known to
// have been stored (a warm compile's share, LoopReport::warm_share).
TEST_F(InModelTest, RecordsTakenSlowAreLeftOutAtThePaceButStillCountAsStored) {
  const std::vector<KernelCandidate> cs = {cand({0}, {10}), cand({1}, {11}), cand({2}, {12})};
  auto db = TuningDb::open(this->db());
  PaceOptions po;
  po.enabled = true;
  po.other_load = [] { return 0.0; };
  testing::ScriptedDevice dev({10});  // every probe at the machine's best
  MachinePace pace(dev, *db, "cpu:test", po);
  {
    InModelCosts m(fixed_, this->db(), "cpu:test", 3, "model-a");
    m.prepare(g_, cs);
    m.set_run_pace(2.0);  // a slow phase
    m.record(g_, cs[0], 20e-6, "step 0");
    m.set_run_pace(1.0);
    m.record(g_, cs[1], 20e-6, "step 1");
  }
  InModelCosts m(fixed_, this->db(), "cpu:test", 3, "model-a");
  m.use_pace(&pace);
  m.prepare(g_, cs);
  m.prepare(g_, cs);  // another rewrite variant of the same kernels
  EXPECT_EQ(m.loaded(), 1);
  EXPECT_EQ(m.left_slow(), 1);
  EXPECT_FALSE(m.has(g_, cs[0]));
  EXPECT_TRUE(m.stored(g_, cs[0]));
  EXPECT_NEAR(m.cost(g_, cs[0]).seconds, 20e-6, 1e-12);  // isolated 10 us, scaled by cs[1]'s ratio
  EXPECT_TRUE(m.has(g_, cs[1]));
  EXPECT_TRUE(m.stored(g_, cs[1]));
  EXPECT_FALSE(m.stored(g_, cs[2]));
}

SideBySide beside(double a, double b) {
  SideBySide s;
  s.a = a;
  s.b = b;
  s.runs = 10;
  return s;
}

TEST(ChooseKeptRound, OneRoundNeedsNoSideBySide) {
  const KeptRound k = choose_kept_round({0.010}, 0.97, [](size_t) -> SideBySide {
    ADD_FAILURE() << "not needed";
    return {};
  });
  EXPECT_EQ(k.round, 0u);
  EXPECT_FALSE(k.timed_beside);
}

TEST(ChooseKeptRound, ALaterRoundWithinNoiseIsNotTimed) {
  const KeptRound k = choose_kept_round({0.010, 0.0099, 0.0102}, 0.97, [](size_t) -> SideBySide {
    ADD_FAILURE() << "not needed";
    return {};
  });
  EXPECT_EQ(k.round, 0u);
  EXPECT_EQ(k.candidate, 0u);
}

TEST(ChooseKeptRound, AFasterLaterRoundIsKeptWhenItWinsBesideTheFirst) {
  size_t asked = 99;
  const KeptRound k = choose_kept_round({0.0938, 0.1012, 0.0680}, 0.97, [&](size_t c) {
    asked = c;
    return beside(0.0650, 0.0700);
  });
  EXPECT_EQ(asked, 2u);
  EXPECT_TRUE(k.timed_beside);
  EXPECT_EQ(k.candidate, 2u);
  EXPECT_EQ(k.round, 2u);
}

// The segformer_b0 case: round 3 ran fastest only because the machine left a slow phase; beside
// the first round's plan it is no faster, so the first round's plan stays.
TEST(ChooseKeptRound, ALaterRoundFasterOnlyByThePhaseIsNotKept) {
  const KeptRound k = choose_kept_round({0.0938, 0.1012, 0.0680}, 0.97, [](size_t) { return beside(0.0690, 0.0685); });
  EXPECT_TRUE(k.timed_beside);
  EXPECT_EQ(k.candidate, 2u);
  EXPECT_EQ(k.round, 0u);
}

TEST(RunDrift, TheMedianTellsADriftAndTheTotalHowMuchTimeItCost) {
  // A slow phase: ten memory-bound kernels of 10 us ran 3x their stored times, two GEMMs of 200 us
  // kept theirs (transformer_encoder: 3.02 by the median, 1.33 in time).
  std::vector<std::pair<double, double>> pairs(10, {30e-6, 10e-6});
  pairs.push_back({200e-6, 200e-6});
  pairs.push_back({200e-6, 200e-6});
  const RunDrift d = run_drift(pairs, 12);
  EXPECT_DOUBLE_EQ(d.median, 3.0);
  EXPECT_DOUBLE_EQ(d.total, (10 * 30e-6 + 400e-6) / (10 * 10e-6 + 400e-6));  // 1.4
  // Uniformly slower: both say the same.
  const RunDrift u = run_drift(std::vector<std::pair<double, double>>(9, {15e-6, 10e-6}), 9);
  EXPECT_DOUBLE_EQ(u.median, 1.5);
  EXPECT_DOUBLE_EQ(u.total, 1.5);
  // Too few stored to go by: under 8 kernels, or under half the plan.
  EXPECT_DOUBLE_EQ(run_drift(std::vector<std::pair<double, double>>(7, {30e-6, 10e-6}), 7).median, 1);
  EXPECT_DOUBLE_EQ(run_drift(std::vector<std::pair<double, double>>(8, {30e-6, 10e-6}), 17).total, 1);
}

TEST(SettleInModelRun, AgreeingRunsAreNotTakenAgain) {
  int retakes = 0;
  const SettledRun s = settle_in_model_run(timed(0.0105), 0.0100, 0.10, [&] {
    ++retakes;
    return timed(0.009);
  });
  EXPECT_EQ(retakes, 0);
  EXPECT_FALSE(s.retaken);
  EXPECT_TRUE(s.agrees);
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.0105);
}

TEST(SettleInModelRun, ARunFromASlowPhaseIsReplacedByTheFasterRetake) {
  // segformer_b0's cold compile: 93.9 ms kernel by kernel, 66.2 ms beside the unfused plan.
  const SettledRun s = settle_in_model_run(timed(0.0939), 0.0662, 0.10, [] { return timed(0.0671); });
  EXPECT_TRUE(s.retaken);
  EXPECT_TRUE(s.kept_retake);
  EXPECT_TRUE(s.agrees);
  EXPECT_DOUBLE_EQ(s.first, 0.0939);
  EXPECT_DOUBLE_EQ(s.retake, 0.0671);
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.0671);
  EXPECT_DOUBLE_EQ(s.run.step_seconds[0], 0.0671 / 2);
}

TEST(SettleInModelRun, AFasterFirstRunStaysWhenTheMachineSlowedAfterIt) {
  const SettledRun s = settle_in_model_run(timed(0.066), 0.094, 0.10, [] { return timed(0.095); });
  EXPECT_TRUE(s.retaken);
  EXPECT_FALSE(s.kept_retake);
  EXPECT_FALSE(s.agrees);  // said: the predicted latency is rough
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.066);
  EXPECT_DOUBLE_EQ(s.scale, 1);  // the kernel-by-kernel run was the faster state
}

TEST(SettleInModelRun, BothKernelByKernelRunsSlowerThanTheWholeRunsAreScaledToThem) {
  // efficientnet_b0 on a fresh database: 10.42 and 10.57 ms kernel by kernel, 6.64 ms beside.
  const SettledRun s = settle_in_model_run(timed(0.01042), 0.00664, 0.10, [] { return timed(0.01057); });
  EXPECT_TRUE(s.retaken);
  EXPECT_FALSE(s.kept_retake);
  EXPECT_FALSE(s.agrees);
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.01042);
  EXPECT_DOUBLE_EQ(s.scale, 0.00664 / 0.01042);
  // Runs that agree (or a retake that agrees) keep their own times.
  EXPECT_DOUBLE_EQ(settle_in_model_run(timed(0.0939), 0.0662, 0.10, [] { return timed(0.0671); }).scale, 1);
  // A kept run that stayed noisy is scaled too: whatever disturbed it only slowed it, so the faster
  // whole runs are nearer the quiet machine (mobilenet_v3_small: 2365 us kernel by kernel, both
  // noisy, beside whole runs of 1357 us).
  EXPECT_DOUBLE_EQ(settle_in_model_run(timed(0.090, true), 0.066, 0.10, [] { return timed(0.091, true); }).scale,
                   0.066 / 0.090);
}

TEST(SettleInModelRun, NoisyRunsDoNotWinOnSpeed) {
  // A faster but noisy retake does not replace a quiet run ...
  SettledRun s = settle_in_model_run(timed(0.090), 0.066, 0.10, [] { return timed(0.060, /*noisy=*/true); });
  EXPECT_FALSE(s.kept_retake);
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.090);
  EXPECT_TRUE(s.retake_noisy);  // the log says so, not "the first run kept (the faster)"
  EXPECT_EQ(s.kept_because().rfind("the first run kept (the second, though faster, stayed noisy", 0), 0u)
      << s.kept_because();
  // ... and a quiet retake replaces a noisy first run even when slower.
  s = settle_in_model_run(timed(0.050, /*noisy=*/true), 0.066, 0.10, [] { return timed(0.068); });
  EXPECT_TRUE(s.kept_retake);
  EXPECT_EQ(s.kept_because(), "the second run kept (the quieter)");
  EXPECT_FALSE(s.run.noisy);
  EXPECT_TRUE(s.agrees);
  // Of two noisy runs, the faster: whatever disturbed them only slowed them (mobilenet_v3_small:
  // 1321 us and 974 us kernel by kernel, 1151 us beside the unfused plan).
  s = settle_in_model_run(timed(0.001321, true), 0.001151, 0.10, [] { return timed(0.000974, true); });
  EXPECT_TRUE(s.kept_retake);
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.000974);
  EXPECT_EQ(s.kept_because(), "the second run kept (the faster)");
}

TEST(SettleInModelRun, AQuietRetakeInASlowPhaseDoesNotReplaceANoisyRunAtThePace) {
  // segformer_b0: a noisy first run at the machine's pace (68.7 ms), 112 ms beside the unfused plan
  // and a quiet retake in a slow phase (110 ms); bench at the pace then measured 74.5 ms.
  SettledRun s = settle_in_model_run(timed(0.0687, true, 1.05), 0.112, 0.10, [] { return timed(0.110, false, 1.6); });
  EXPECT_TRUE(s.retaken);
  EXPECT_FALSE(s.kept_retake);
  EXPECT_DOUBLE_EQ(s.run.end_to_end, 0.0687);
  EXPECT_TRUE(s.retake_slow);
  // With the first run's pace unknown, or both in the slow phase, the quiet one is kept as before.
  s = settle_in_model_run(timed(0.0687, true), 0.112, 0.10, [] { return timed(0.110, false, 1.6); });
  EXPECT_TRUE(s.kept_retake);
  s = settle_in_model_run(timed(0.0687, true, 1.5), 0.112, 0.10, [] { return timed(0.110, false, 1.6); });
  EXPECT_TRUE(s.kept_retake);
  // A faster quiet retake is kept whatever the paces say.
  s = settle_in_model_run(timed(0.0939, false, 1.05), 0.0662, 0.10, [] { return timed(0.0671, false, 1.6); });
  EXPECT_TRUE(s.kept_retake);
}

}  // namespace
}  // namespace korch
