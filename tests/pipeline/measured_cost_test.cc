// MeasuredCost::cost finds a candidate's signature hash from prepare() without hashing it again,
// by the candidate's address. That shortcut must never price another kernel: a candidate changed
// in place, or the same list asked about another graph, is hashed afresh.
#include "profile/measured_cost.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "codegen/cpu/cpu_backend.h"
#include "fission/fission.h"
#include "ir/text_format.h"
#include "orchestrate/kernel_candidate.h"
#include "profile/tuning_db.h"
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

}  // namespace
}  // namespace korch
