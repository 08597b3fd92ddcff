// MeasuredCost::cost finds a candidate's signature hash from prepare() without hashing it again,
// by the candidate's address. That shortcut must never price another kernel: a candidate changed
// in place, or the same list asked about another graph, is hashed afresh.
#include "profile/measured_cost.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <xmmintrin.h>

#include <filesystem>
#include <map>
#include <string>

#include "codegen/cpu/cpu_backend.h"
#include "codegen/kernel_signature.h"
#include "fission/fission.h"
#include "ir/text_format.h"
#include "orchestrate/kernel_candidate.h"
#include "profile/kernel_check.h"
#include "profile/tuning_db.h"
#include "runtime/cpu/cpu_device.h"
#include "temp_dir.h"

namespace korch {
namespace {

// The compile's own measurement budget: a few milliseconds for each of these tiny kernels.
MeasuredCostOptions quiet(const std::filesystem::path& db) {
  MeasuredCostOptions o;
  o.db_path = db.string();
  o.progress = false;
  return o;
}

// The one-node candidate of p whose node has op type `op`.
size_t single(const Graph& p, const std::vector<KernelCandidate>& cands, const std::string& op) {
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].nodes.size() == 1 && p.nodes[static_cast<size_t>(cands[i].nodes[0])].op_type == op) return i;
  ADD_FAILURE() << "no candidate of " << op << " alone";
  return 0;
}

TEST(MeasuredCostLookup, ACandidateIsPricedAsWhatItHoldsNowAndForTheGraphAsked) {
  korch::testing::TempDir dir("korch_measured_cost");
  const Graph p = fission(parse_graph(R"(graph t (opset 17) {
  input x: f32[64,64]
  input y: f32[64,64]
  %a: f32[64,64] = Exp(x)
  %b: f32[64,64] = MatMul(a, y)
  output b
})"));
  cpu::CpuBackend backend(1);
  CandidateOptions co;
  co.rules = backend.fusion_rules();
  std::vector<KernelCandidate> cands = enumerate_candidates(p, co).candidates;
  const size_t exp = single(p, cands, "Exp"), matmul = single(p, cands, "MatMul");
  ASSERT_NE(exp, matmul);

  MeasuredCost costs(backend, quiet(dir.path() / "tuning.db"));
  costs.prepare(p, cands);
  const KernelCost exp_cost = costs.cost(p, cands[exp]), matmul_cost = costs.cost(p, cands[matmul]);
  ASSERT_TRUE(exp_cost.feasible()) << exp_cost.reason;
  ASSERT_TRUE(matmul_cost.feasible()) << matmul_cost.reason;
  ASSERT_NE(exp_cost.seconds, matmul_cost.seconds);

  // The Exp's slot now holds the MatMul (as a new list over a freed one would): the MatMul's cost.
  const std::vector<KernelCandidate> prepared = cands;
  cands[exp] = prepared[matmul];
  EXPECT_EQ(costs.cost(p, cands[exp]).seconds, matmul_cost.seconds);
  EXPECT_EQ(costs.cost(p, cands[exp]).reason, matmul_cost.reason);
  cands = prepared;

  // A copy of the graph whose Exp became a Tanh: its kernel was never measured.
  Graph q = p;
  q.nodes[static_cast<size_t>(cands[exp].nodes[0])].op_type = "Tanh";
  EXPECT_FALSE(costs.cost(q, cands[exp]).feasible());
  // The copy as it was prices like the original (hashed afresh, same signature).
  Graph same = p;
  EXPECT_EQ(costs.cost(same, cands[exp]).seconds, exp_cost.seconds);
}

// A chain of `n` unary ops over one f32[64,64] input: its candidates hold about n^2/2 distinct
// kernels (every run of consecutive ops).
Graph unary_chain(int n) {
  const char* ops[] = {"Exp", "Tanh", "Sigmoid", "Abs", "Neg", "Sqrt", "Relu", "Sin"};
  std::string text = "graph t (opset 17) {\n  input x: f32[64,64]\n";
  std::string last = "x";
  for (int i = 0; i < n; ++i) {
    text += fmt::format("  %v{}: f32[64,64] = {}({})\n", i, ops[i % 8], last);
    last = fmt::format("v{}", i);
  }
  return fission(parse_graph(text + "  output " + last + "\n}"));
}

// A slow machine (its pace probe far above the best the database holds) is waited for only when
// enough is to be measured for the wait to pay (kKernelsWorthAWait): a handful of kernels is
// measured at once and keeps the slow pace, for a later compile at the machine's pace to measure
// again (a warm vit_b_16 compile waited its whole 60 s for 4 kernels and took 78.5 s).
TEST(MeasuredCostPace, AHandfulOfKernelsIsNotWorthAWaitForTheMachinesPace) {
  korch::testing::TempDir dir("korch_measured_cost_pace");
  cpu::CpuBackend backend(1);
  MeasuredCostOptions o = quiet(dir.path() / "tuning.db");
  o.pace.enabled = true;
  o.pace.max_wait_seconds = 0.3;
  o.pace.retry_seconds = 0.01;
  o.pace.interval_seconds = 0;
  o.pace.other_load = [] { return 0.0; };  // the slow probe is the machine's, whatever ctest runs beside
  // A best probe no probe here comes near: the machine runs slow throughout.
  TuningDb::open(o.db_path)->offer_pace(backend.timing_device()->id(), 1e-12);
  CandidateOptions co;
  co.rules = backend.fusion_rules();
  {
    const Graph few = unary_chain(2);
    const std::vector<KernelCandidate> cands = enumerate_candidates(few, co).candidates;
    MeasuredCost costs(backend, o);
    costs.prepare(few, cands);
    ASSERT_GT(costs.stats().measured, 0);
    ASSERT_LT(costs.stats().measured, static_cast<int64_t>(kKernelsWorthAWait));
    EXPECT_EQ(costs.pace().waited_seconds(), 0);
    EXPECT_EQ(costs.stats().slow_pace, costs.stats().measured);  // stored with the pace they were taken at
  }
  {
    const Graph many = unary_chain(8);
    const std::vector<KernelCandidate> cands = enumerate_candidates(many, co).candidates;
    MeasuredCost costs(backend, o);
    costs.prepare(many, cands);
    ASSERT_GE(costs.stats().measured, static_cast<int64_t>(kKernelsWorthAWait));
    EXPECT_GE(costs.pace().waited_seconds(), 0.3);  // its whole wait budget, the machine still slow
  }
}

// y = Relu(MatMul(x [1, k], w [k, n])) with w a constant (fissioned: MatMul and Relu primitives).
Graph matvec(int64_t k, int64_t n) {
  Graph g;
  const ValueId x = g.add_input("x", TensorType{DType::kFloat32, {1, k}});
  Tensor wt(DType::kFloat32, {k, n});
  float* w = wt.data<float>();
  for (int64_t i = 0; i < k * n; ++i) w[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
  const ValueId wv = g.add_constant("w", std::move(wt));
  const ValueId m = g.add_value("m", TensorType{DType::kFloat32, {1, n}});
  const ValueId y = g.add_value("y", TensorType{DType::kFloat32, {1, n}});
  g.add_node(Node{"mm", "MatMul", "", {x, wv}, {m}, {}});
  g.add_node(Node{"relu", "Relu", "", {m}, {y}, {}});
  g.outputs = {y};
  return fission(g);
}

// The candidate of p that is its MatMul alone.
const KernelCandidate& matmul_alone(const Graph& p, const std::vector<KernelCandidate>& cands) {
  return cands[single(p, cands, "MatMul")];
}

// A CPU device that says which buffers a measurement evicted, and whose "L2" is 64 KB.
class EvictionLog : public cpu::CpuDevice {
 public:
  int64_t cold_constant_bytes() const override { return 64 << 10; }
  void evict(const void* data, int64_t bytes) override {
    evicted.emplace_back(data, bytes);
    cpu::CpuDevice::evict(data, bytes);
  }
  std::vector<std::pair<const void*, int64_t>> evicted;
};

// In a model a weight is read once per run and pushed out of the caches by the rest of the run
// before the next; measured alone and repeated, a kernel finds it where its last call left it
// (efficientvit_b0's 5 MB classifier: 31.6 us so, 150-220 us in the model). Weights of at least
// the device's cold_constant_bytes are evicted before each timed call, with the copies the kernel
// keeps of them (oneDNN's reordered weights); smaller ones are left alone.
TEST(MeasuredCostColdWeights, WeightsPastTheCacheAreEvictedBeforeEachCall) {
  cpu::CpuBackend backend(1);
  CandidateOptions co;
  co.rules = backend.fusion_rules();
  for (const int64_t n : {8, 64}) {  // w: 32 KB (under the 64 KB), 256 KB
    const Graph p = matvec(1024, n);
    const std::vector<KernelCandidate> cands = enumerate_candidates(p, co).candidates;
    const EmittedKernel k = backend.emit(p, matmul_alone(p, cands));
    ASSERT_TRUE(k.ok) << k.reason;
    const std::vector<Tensor> values = reference_values(p, 5);
    EvictionLog dev;
    std::unique_ptr<runtime::DeviceKernel> kernel = dev.make_kernel(k.recipe, nullptr);
    // What MeasuredCost::measures_cold decides on the real device (its test is below), on this one.
    const bool cold =
        constant_input_bytes(p, kernel_arg_inputs(p, matmul_alone(p, cands))) >= dev.cold_constant_bytes();
    EXPECT_EQ(cold, n == 64);
    KernelProbe probe(dev, *kernel, k, p, values, cold);
    ASSERT_EQ(probe.check(1e-4), "");
    probe.evict_constants();
    const ValueId w = p.find_value("w");
    ASSERT_GE(w, 0);
    if (n == 8) {
      EXPECT_FALSE(probe.cold_constants());
      EXPECT_TRUE(dev.evicted.empty());
      continue;
    }
    EXPECT_TRUE(probe.cold_constants());
    ASSERT_FALSE(dev.evicted.empty());
    EXPECT_EQ(dev.evicted[0].first, values[static_cast<size_t>(w)].raw());
    EXPECT_EQ(dev.evicted[0].second, 1024 * n * 4);
    for (const auto& copy : kernel->constant_copies())  // oneDNN's reordered weights, if it made any
      EXPECT_NE(std::find(dev.evicted.begin(), dev.evicted.end(), copy), dev.evicted.end());
  }
}

// The real device's threshold is its L2; a kernel over it is measured cold, says so in its record,
// and has a key of its own (the records taken warm before stay for what they were). A weight of
// 8 MB is past any L2 there is.
TEST(MeasuredCostColdWeights, AKernelMeasuredColdSaysSoUnderAKeyOfItsOwn) {
  korch::testing::TempDir dir("korch_measured_cost_cold");
  cpu::CpuBackend backend(1);
  ASSERT_GT(backend.timing_device()->cold_constant_bytes(), 0);
  CandidateOptions co;
  co.rules = backend.fusion_rules();
  const Graph big = matvec(2048, 1024), small = matvec(64, 16);
  const std::vector<KernelCandidate> big_cands = enumerate_candidates(big, co).candidates;
  const std::vector<KernelCandidate> small_cands = enumerate_candidates(small, co).candidates;
  MeasuredCost costs(backend, quiet(dir.path() / "tuning.db"));
  EXPECT_TRUE(costs.measures_cold(big, matmul_alone(big, big_cands)));
  EXPECT_FALSE(costs.measures_cold(small, matmul_alone(small, small_cands)));
  costs.prepare(big, big_cands);
  const KernelCost cold = costs.cost(big, matmul_alone(big, big_cands));
  ASSERT_TRUE(cold.feasible()) << cold.reason;
  EXPECT_NE(cold.reason.find("weights cold"), std::string::npos) << cold.reason;
  costs.prepare(small, small_cands);
  const KernelCost warm = costs.cost(small, matmul_alone(small, small_cands));
  ASSERT_TRUE(warm.feasible()) << warm.reason;
  EXPECT_EQ(warm.reason.find("weights cold"), std::string::npos) << warm.reason;
}

// A CPU artifact runs with denormal floats flushed (CpuDevice::begin_run, by default), so its
// kernels are timed so too: on an Intel core an operation on a denormal takes a ~100-cycle assist
// that a flushed run never pays (swin_t's masked attention MatMul ran 30x slower). The backend's
// timing device takes the compile's mode, and every timing runs inside it.
class RunModeLog : public cpu::CpuDevice {
 public:
  using cpu::CpuDevice::CpuDevice;
  void begin_run() override {
    ++begun;
    cpu::CpuDevice::begin_run();
    flushed_while_begun = (_mm_getcsr() & 0x8040u) == 0x8040u;
  }
  void end_run() override {
    cpu::CpuDevice::end_run();
    ++ended;
  }
  int begun = 0, ended = 0;
  bool flushed_while_begun = false;
};

class RunModeBackend : public cpu::CpuBackend {
 public:
  explicit RunModeBackend(bool flush) : cpu::CpuBackend(1, flush), device(1, flush) {}
  runtime::Device* timing_device() override { return &device; }
  RunModeLog device;
};

TEST(MeasuredCostRunMode, KernelsAreTimedInTheFloatingPointModeTheirArtifactRuns) {
  for (const bool flush : {true, false}) {
    cpu::CpuBackend plain(1, flush);
    plain.timing_device()->begin_run();
    EXPECT_EQ((_mm_getcsr() & 0x8040u) == 0x8040u, flush);
    plain.timing_device()->end_run();
    EXPECT_EQ(_mm_getcsr() & 0x8040u, 0u);  // put back

    korch::testing::TempDir dir("korch_measured_cost_mode");
    RunModeBackend backend(flush);
    CandidateOptions co;
    co.rules = backend.fusion_rules();
    const Graph g = matvec(64, 16);
    const std::vector<KernelCandidate> cands = enumerate_candidates(g, co).candidates;
    MeasuredCost costs(backend, quiet(dir.path() / "tuning.db"));
    costs.prepare(g, cands);
    ASSERT_TRUE(costs.cost(g, matmul_alone(g, cands)).feasible());
    EXPECT_GT(backend.device.begun, 0);
    EXPECT_EQ(backend.device.begun, backend.device.ended);
    EXPECT_EQ(backend.device.flushed_while_begun, flush);
  }
}

// A linear primitive alone and with its epilogues are timed in alternating rounds, so that which
// of them wins comes from one state of the machine (timed one after the other, seconds apart, this
// VM's phases made mobilenet_v2's 1x1 Conv+bias+Clip 13% dearer than the Conv alone, against 3% in
// the model). A device that logs which kernel each run is of.
class RunLog : public cpu::CpuDevice {
 public:
  using cpu::CpuDevice::CpuDevice;
  std::unique_ptr<runtime::DeviceKernel> make_kernel(const nlohmann::json& recipe,
                                                     std::shared_ptr<runtime::KernelModule> module) override {
    struct Logged : runtime::DeviceKernel {
      std::unique_ptr<runtime::DeviceKernel> inner;
      std::vector<int>* log = nullptr;
      int id = 0;
      void run(const void* const* in, void* const* out) override {
        if (log->empty() || log->back() != id) log->push_back(id);
        inner->run(in, out);
      }
    };
    auto k = std::make_unique<Logged>();
    k->inner = cpu::CpuDevice::make_kernel(recipe, std::move(module));
    k->log = &switches;
    k->id = made++;
    return k;
  }
  std::vector<int> switches;  // kernel ids in the order they ran, one entry per change of kernel
  int made = 0;
};

class RunLogBackend : public cpu::CpuBackend {
 public:
  RunLogBackend() : cpu::CpuBackend(1), device(1, true) {}
  runtime::Device* timing_device() override { return &device; }
  RunLog device;
};

TEST(MeasuredCostGroups, AKernelsEpilogueVariantsAreTimedInAlternatingRounds) {
  korch::testing::TempDir dir("korch_measured_cost_groups");
  RunLogBackend backend;
  CandidateOptions co;
  co.rules = backend.fusion_rules();
  const Graph g = matvec(64, 16);  // MatMul -> Relu
  const std::vector<KernelCandidate> cands = enumerate_candidates(g, co).candidates;
  MeasuredCost costs(backend, quiet(dir.path() / "tuning.db"));
  costs.prepare(g, cands);
  size_t fused = cands.size();
  for (size_t i = 0; i < cands.size(); ++i)
    if (cands[i].linear > 0 && cands[i].nodes.size() == 2 && !cands[i].minimal_outputs) fused = i;
  ASSERT_LT(fused, cands.size());
  ASSERT_TRUE(costs.cost(g, matmul_alone(g, cands)).feasible());
  ASSERT_TRUE(costs.cost(g, cands[fused]).feasible());
  // The Relu alone (a loop kernel: no group) runs once in a stretch; the MatMul alone and the
  // MatMul+Relu take turns, each in kGroupRounds (3) stretches: ids alternate at least 5 times.
  std::map<int, int> stretches;
  for (int id : backend.device.switches) ++stretches[id];
  int alternating = 0;
  for (const auto& [id, n] : stretches) alternating += n >= 3;
  EXPECT_GE(alternating, 2) << fmt::format("{}", fmt::join(backend.device.switches, " "));
}

// A kernel left in flight by a process that died (a crash while its group was checked or timed:
// every kernel of the group is in flight then) is timed alone on the rerun, so the crash is charged
// only to the kernel that crashes again, not to the kernels grouped with it.
TEST(MeasuredCostGroups, KernelsLeftInFlightAreTimedAlone) {
  korch::testing::TempDir dir("korch_measured_cost_in_flight");
  const std::filesystem::path db = dir.path() / "tuning.db";
  const Graph g = matvec(64, 16);
  CandidateOptions co;
  {
    RunLogBackend first;
    co.rules = first.fusion_rules();
    MeasuredCost costs(first, quiet(db));
    costs.prepare(g, enumerate_candidates(g, co).candidates);
  }
  sqlite3* s = nullptr;
  ASSERT_EQ(sqlite3_open(db.string().c_str(), &s), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(s, "UPDATE records SET status = 'inflight', reps = 1", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(s);
  RunLogBackend backend;
  const std::vector<KernelCandidate> cands = enumerate_candidates(g, co).candidates;
  MeasuredCost costs(backend, quiet(db));
  costs.prepare(g, cands);
  ASSERT_TRUE(costs.cost(g, matmul_alone(g, cands)).feasible());
  std::map<int, int> stretches;
  for (int id : backend.device.switches) ++stretches[id];
  ASSERT_GE(stretches.size(), 2u);
  for (const auto& [id, n] : stretches) EXPECT_EQ(n, 1) << fmt::format("{}", fmt::join(backend.device.switches, " "));
}

}  // namespace
}  // namespace korch
