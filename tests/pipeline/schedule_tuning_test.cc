// Schedule tuning in measured costs (profile/measured_cost.h, step 7): every schedule of a CUDA
// loop kernel (Backend::schedule_variants) is checked and timed, the fastest is kept in the tuning
// database with its name, and the plan's kernels are emitted with it. A GPU times them for real;
// here the CUDA backend times them on its host emulator, which exercises the same driver.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "codegen/cuda/cuda_backend.h"
#include "codegen/kernel_signature.h"
#include "fission/fission.h"
#include "ir/text_format.h"
#include "orchestrate/kernel_candidate.h"
#include "pipeline/compile.h"
#include "profile/measured_cost.h"
#include "profile/tuning_db.h"
#include "support/file_io.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

// The CUDA backend with its kernels timed on the emulator (no GPU here).
class EmulatorTimedCudaBackend : public cuda::CudaBackend {
 public:
  runtime::Device* timing_device() override { return check_device(); }
};

// Every schedule but the default computes exp wrongly, as a generator bug in one schedule would.
class BrokenSchedulesBackend : public EmulatorTimedCudaBackend {
 public:
  EmittedKernel emit(const Graph& g, const KernelCandidate& c, const std::string& variant = "") const override {
    EmittedKernel k = EmulatorTimedCudaBackend::emit(g, c, variant);
    const std::vector<std::string> names = schedule_variants(g, c);
    if (variant.empty() || names.empty() || variant == names.front()) return k;
    for (size_t p; (p = k.source.find("expf(")) != std::string::npos;) k.source.replace(p, 5, "(");
    return k;
  }
};

// Softmax rows and a pointwise tail: row kernels and pointwise stages, each with several schedules.
Graph softmax_graph() {
  return parse_graph(R"(graph t (opset 17) {
  input x: f32[64,512]
  %s: f32[64,512] = Softmax(x) {axis=-1}
  %y: f32[64,512] = Mul(s, x)
  output y
})");
}

class ScheduleTuning : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = fs::temp_directory_path() /
          ("korch_schedules_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
           std::to_string(getpid()) + ".db");
    fs::remove(db_);
    p_ = fission(softmax_graph());
    CandidateOptions co;
    co.rules = cuda::CudaBackend().fusion_rules();
    candidates_ = enumerate_candidates(p_, co).candidates;
  }
  void TearDown() override {
    for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db_.string() + suffix);
  }
  MeasuredCostOptions options() const {
    MeasuredCostOptions o;
    o.db_path = db_.string();
    o.schedule_min_seconds = 0;  // every kernel with more than one schedule
    o.progress = false;
    o.measure.warmup_seconds = 0;
    o.measure.min_reps = 3;
    o.measure.min_seconds = 0;
    o.measure.max_seconds = 0.05;
    o.measure.max_remeasures = 0;
    return o;
  }

  fs::path db_;
  Graph p_;
  std::vector<KernelCandidate> candidates_;
};

TEST_F(ScheduleTuning, TheFastestCheckedScheduleIsKeptAndStored) {
  EmulatorTimedCudaBackend backend;
  MeasuredCost costs(backend, options());
  costs.prepare(p_, candidates_);
  EXPECT_GT(costs.stats().schedules_timed, 0);
  EXPECT_EQ(costs.stats().schedules_failed, 0);
  auto db = TuningDb::open(db_.string());
  int tuned = 0;
  for (const KernelCandidate& c : candidates_) {
    const KernelCost k = costs.cost(p_, c);
    const std::vector<std::string> names = backend.schedule_variants(p_, c);
    if (!k.feasible() || names.size() < 2) {
      EXPECT_EQ(k.variant, "");
      continue;
    }
    ++tuned;
    ASSERT_NE(std::find(names.begin(), names.end(), k.variant), names.end()) << k.variant;
    const EmittedKernel e = backend.emit(p_, c, k.variant);
    ASSERT_TRUE(e.ok) << e.reason;
    EXPECT_EQ(e.variant, k.variant);
    EXPECT_NE(e.source.find("schedule " + k.variant), std::string::npos);
    const std::string key = make_tuning_key(content_hash(kernel_signature(p_, c)), costs.device(), backend.generator_version());
    std::optional<TuningRecord> r = db->get(key);
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->variant, k.variant);
    EXPECT_DOUBLE_EQ(r->seconds, k.seconds);
    EXPECT_NE(r->note.find(fmt::format("fastest of {} schedules", names.size())), std::string::npos) << r->note;
  }
  EXPECT_GT(tuned, 0);

  // A second compile reads the choices back and times nothing.
  MeasuredCost again(backend, options());
  again.prepare(p_, candidates_);
  EXPECT_EQ(again.stats().measured, 0);
  EXPECT_EQ(again.stats().schedules_timed, 0);
  for (const KernelCandidate& c : candidates_) EXPECT_EQ(again.cost(p_, c).variant, costs.cost(p_, c).variant);
}

TEST_F(ScheduleTuning, AScheduleThatFailsTheGateIsNeverChosen) {
  BrokenSchedulesBackend backend;
  MeasuredCost costs(backend, options());
  costs.prepare(p_, candidates_);
  EXPECT_GT(costs.stats().schedules_failed, 0) << "the broken schedules went unnoticed";
  bool saw_exp = false;
  for (const KernelCandidate& c : candidates_) {
    const std::vector<std::string> names = backend.schedule_variants(p_, c);
    if (names.size() < 2) continue;
    const EmittedKernel dflt = backend.emit(p_, c);
    if (dflt.source.find("expf(") == std::string::npos) continue;
    saw_exp = true;
    const KernelCost k = costs.cost(p_, c);
    if (k.feasible()) {
      EXPECT_EQ(k.variant, names.front()) << describe_candidate(p_, c);
    }
  }
  EXPECT_TRUE(saw_exp);
  ASSERT_FALSE(costs.stats().failures.empty());
  EXPECT_NE(costs.stats().failures.front().find("schedule '"), std::string::npos) << costs.stats().failures.front();
}

// A process that died while timing schedules left the record in flight: the default's time is
// used and the schedules are not timed again (they may be what crashed it).
TEST_F(ScheduleTuning, AScheduleThatCrashedIsNotTimedAgain) {
  EmulatorTimedCudaBackend backend;
  MeasuredCostOptions o = options();
  o.tune_schedules = false;
  MeasuredCost first(backend, o);
  first.prepare(p_, candidates_);
  EXPECT_EQ(first.stats().schedules_timed, 0);
  int in_flight = 0;
  {
    auto db = TuningDb::open(db_.string());
    for (const KernelCandidate& c : candidates_) {
      if (backend.schedule_variants(p_, c).size() < 2) continue;
      std::optional<TuningRecord> r =
          db->get(make_tuning_key(content_hash(kernel_signature(p_, c)), first.device(), backend.generator_version()));
      if (!r || r->status != TuningStatus::kOk || r->variant == TuningRecord::kVariantInFlight) continue;
      EXPECT_EQ(r->variant, "");  // measured, not tuned
      r->variant = TuningRecord::kVariantInFlight;
      db->put(*r);
      ++in_flight;
    }
  }
  ASSERT_GT(in_flight, 0);
  MeasuredCost second(backend, options());
  second.prepare(p_, candidates_);
  EXPECT_EQ(second.stats().schedule_crashes, in_flight);
  EXPECT_EQ(second.stats().schedules_timed, 0);
  for (const KernelCandidate& c : candidates_) EXPECT_EQ(second.cost(p_, c).variant, "");
}

// compile_model emits each planned kernel with the schedule its cost was measured with, and the
// artifact (checked on the emulator by the compile's verification) carries it.
TEST_F(ScheduleTuning, ThePlanIsEmittedWithItsSchedules) {
  EmulatorTimedCudaBackend backend;
  const fs::path dir = fs::temp_directory_path() / ("korch_schedules_artifact_" + std::to_string(getpid()));
  fs::remove_all(dir);
  CompileOptions o;
  o.backend = &backend;
  o.target = "cuda";
  o.model_name = "softmax";
  o.measured = options();
  o.close_loop = false;  // the closed loop runs the artifact on a GPU
  CompileResult r = compile_model(softmax_graph(), dir.string(), o);
  EXPECT_TRUE(r.verify.failures.empty());
  ASSERT_EQ(r.kernels.size(), r.orchestration.plan.kernels.size());
  const std::string cu = read_file_bytes((dir / "kernels" / "kernels.cu").string());
  int named = 0;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const auto ci = static_cast<size_t>(r.orchestration.plan.kernels[i].candidate);
    const std::string& want = r.orchestration.costs.costs.at(ci).variant;
    EXPECT_EQ(r.kernels[i].variant, want);
    if (want.empty()) continue;
    ++named;
    EXPECT_NE(cu.find("schedule " + want), std::string::npos) << want;
  }
  EXPECT_GT(named, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace korch
