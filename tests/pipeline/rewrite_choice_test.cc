#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/text_format.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/rewrite_choice.h"
#include "pipeline/pipeline.h"
#include "rewrite/alternatives.h"
#include "support/error.h"

namespace korch {
namespace {

Graph primitives_of(const std::string& builtin) {
  return lower_to_primitives(load_onnx_bytes(builtin_model_bytes(builtin), builtin + ".onnx"));
}

// The cheapest plan over every combination of the graph's alternatives, each combination applied
// with Alternative::apply and solved on its own (overlapping sites do not apply together: skipped).
double brute_force(const Graph& p, CostProvider& cost, const OrchestrateOptions& o, int* combinations) {
  const std::vector<Alternative> alts = find_alternatives(p);
  double best = std::numeric_limits<double>::infinity();
  *combinations = 0;
  for (uint32_t mask = 0; mask < (1u << alts.size()); ++mask) {
    Graph g = p;
    try {
      for (size_t i = 0; i < alts.size(); ++i)
        if (mask & (1u << i)) alts[i].apply(g);
    } catch (const Error&) {
      continue;
    }
    ++*combinations;
    best = std::min(best, orchestrate(g, cost, o).selection.objective);
  }
  return best;
}

// The choice in one program equals the best of solving each variant combination separately: on
// the built-in transformer (five sites of four rules), with two cost models and with and without
// recompute. The program is solved by regions with the sites inside them.
TEST(RewriteChoice, MatchesBruteForceOverVariantCombinations) {
  const Graph p = primitives_of("tiny_transformer");
  ASSERT_EQ(find_alternatives(p).size(), 5u);
  int differs = 0;
  for (const DeviceSpec& spec : {cpu_spec(), h200_spec()})
    for (bool recompute : {true, false}) {
      AnalyticCost cost(spec);
      OrchestrateOptions o;
      o.rel_gap = 0;
      o.allow_recompute = recompute;
      int combinations = 0;
      const double want = brute_force(p, cost, o, &combinations);
      EXPECT_GT(combinations, 8);  // most combinations apply
      o.rewrite_choices = true;
      const RewriteChoiceResult r = orchestrate_with_rewrites(p, cost, o);
      EXPECT_TRUE(r.result.rewrites.exhaustive);
      EXPECT_GT(r.result.rewrites.regions, 1);  // solved by regions, each with its sites
      EXPECT_EQ(r.result.rewrites.offered.size(), 5u);
      EXPECT_NEAR(r.result.rewrites.objective, want, 1e-9 * want) << spec.name << " recompute " << recompute;
      EXPECT_NEAR(r.result.selection.objective, want, 1e-9 * want) << spec.name << " recompute " << recompute;
      const double plain = orchestrate(p, cost, o).selection.objective;
      EXPECT_LE(want, plain * (1 + 1e-12));
      if (want < plain * (1 - 1e-9)) {
        ++differs;
        EXPECT_FALSE(r.result.rewrites.chosen.empty());
      }
      // What each chosen site saved: the best plan without it is no faster.
      ASSERT_EQ(r.result.rewrites.saved.size(), r.result.rewrites.chosen.size());
      for (double saved : r.result.rewrites.saved) EXPECT_GE(saved, -1e-12 * want);
      // The rewritten graph computes what the model computes.
      const std::vector<Tensor> in = random_inputs(p, 5);
      const std::vector<Tensor> a = interpret(p, in), b = interpret(r.graph, in);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) EXPECT_LE(rel_l2_error(b[i], a[i]), 1e-5);
    }
  EXPECT_GT(differs, 0) << "no cost model made a rewrite pay: the test would not see a wrong choice";
}

// Without alternatives (or with choices off) the result is plain orchestration on the same graph.
TEST(RewriteChoice, NoSitesIsPlainOrchestration) {
  const Graph p = parse_graph(R"(graph t (opset 17) {
  input a: f32[8,16]
  input b: f32[16,4]
  %r: f32[8,16] = Relu(a)
  %m: f32[8,4] = MatMul(r, b)
  %y: f32[8,4] = Sigmoid(m)
  output y
}
)");
  ASSERT_TRUE(find_alternatives(p).empty());
  AnalyticCost cost(cpu_spec());
  OrchestrateOptions o;
  o.rewrite_choices = true;
  const RewriteChoiceResult r = orchestrate_with_rewrites(p, cost, o);
  EXPECT_TRUE(r.result.rewrites.chosen.empty());
  EXPECT_EQ(r.graph.nodes.size(), p.nodes.size());
  EXPECT_DOUBLE_EQ(r.result.selection.objective, orchestrate(p, cost, o).selection.objective);
}

// Costs that refuse every kernel with an op the model itself lacks (as when a backend cannot emit
// what a rewrite adds).
class NoNewOps : public CostProvider {
 public:
  NoNewOps(const Graph& p, CostProvider& inner) : inner_(inner) {
    for (const Node& n : p.nodes) ops_.insert(n.op_type);
  }
  std::string name() const override { return "no new ops"; }
  void prepare(const Graph& g, const std::vector<KernelCandidate>& c) override { inner_.prepare(g, c); }
  KernelCost cost(const Graph& g, const KernelCandidate& c) override {
    for (NodeId n : c.nodes)
      if (!ops_.count(g.nodes[static_cast<size_t>(n)].op_type)) {
        ++refused;
        return KernelCost::infeasible("not emitted in this test");
      }
    return inner_.cost(g, c);
  }
  int refused = 0;

 private:
  CostProvider& inner_;
  std::set<std::string> ops_;
};

// A site whose added nodes no kernel computes is ruled out, not taken for nodes every plan needs:
// under a memory budget, the floor every plan peaks at comes from the nodes every plan computes
// (it said "every plan peaks at 9223372036854775807 bytes" for efficientvit_b0 and swin_t).
TEST(RewriteChoice, SitesNoKernelComputesSetNoMemoryFloor) {
  const Graph p = primitives_of("tiny_transformer");
  AnalyticCost inner(cpu_spec());
  NoNewOps cost(p, inner);
  OrchestrateOptions o;
  o.rewrite_choices = true;
  const RewriteChoiceResult free = orchestrate_with_rewrites(p, cost, o);
  ASSERT_GT(cost.refused, 0) << "no site adds an op: the test would not see the floor";
  o.memory_budget = int64_t{1} << 40;
  const RewriteChoiceResult bounded = orchestrate_with_rewrites(p, cost, o);
  EXPECT_NEAR(bounded.result.selection.objective, free.result.selection.objective,
              1e-9 * free.result.selection.objective);
}

// Nodes are known across the variants by name: unnamed nodes (a graph parsed from text, a batch-1
// split of a model) are named first, else they merged in the union graph and left a region without
// candidates ("the kernel selection program is infeasible (0 candidates)").
TEST(RewriteChoice, UnnamedNodesAreNamedFirst) {
  const Graph p = parse_graph(R"(graph t (opset 11) {
  input x: f32[4,6]
  const shape: i64[2] = [4, 6]
  %e: f32[4,6] = Exp(x)
  %s: f32[4,1] = ReduceSum(e) {axes=[1], keepdims=1}
  %b: f32[4,6] = Expand(s, shape)
  %y: f32[4,6] = Div(e, b)
  output y
}
)");
  ASSERT_FALSE(find_alternatives(p).empty());
  AnalyticCost cost(cpu_spec());
  OrchestrateOptions o;
  o.rewrite_choices = true;
  const RewriteChoiceResult r = orchestrate_with_rewrites(p, cost, o);
  std::set<std::string> names;
  for (const Node& n : r.graph.nodes) EXPECT_TRUE(!n.name.empty() && names.insert(n.name).second) << n.name;
  const std::vector<Tensor> in = random_inputs(p, 5);
  EXPECT_LE(rel_l2_error(interpret(r.graph, in)[0], interpret(p, in)[0]), 1e-6);
}

// Costs that answer only the kernels prepare() was given, each known by its primitives in the order
// its graph holds them (as the measured costs key a kernel by the code written for it).
class PreparedOnly : public CostProvider {
 public:
  explicit PreparedOnly(CostProvider& inner) : inner_(inner) {}
  std::string name() const override { return "prepared only"; }
  void prepare(const Graph& g, const std::vector<KernelCandidate>& c) override {
    for (const KernelCandidate& k : c) prepared_.insert(key(g, k));
    inner_.prepare(g, c);
  }
  KernelCost cost(const Graph& g, const KernelCandidate& c) override {
    if (!prepared_.count(key(g, c)))
      return KernelCost::infeasible("not measured (prepare() was not given this kernel)");
    return inner_.cost(g, c);
  }

 private:
  static std::string key(const Graph& g, const KernelCandidate& c) {
    std::string k;
    for (NodeId n : c.nodes) k += g.nodes[static_cast<size_t>(n)].name + ";";
    return k;
  }
  CostProvider& inner_;
  std::set<std::string> prepared_;
};

// Every kernel of the plan on the rewritten graph was given to the provider on that graph, so its
// callers can price P*'s own kernels afterwards (the closed loop's isolated costs were infinite for
// kernels whose primitives the rewritten graph holds in another order than the variant that priced
// them).
TEST(RewriteChoice, TheProviderIsPreparedWithTheRewrittenGraphsKernels) {
  const Graph p = primitives_of("tiny_transformer");
  AnalyticCost inner(cpu_spec());
  PreparedOnly cost(inner);
  OrchestrateOptions o;
  o.rewrite_choices = true;
  const RewriteChoiceResult r = orchestrate_with_rewrites(p, cost, o);
  ASSERT_FALSE(r.result.rewrites.chosen.empty()) << "no site chosen: the test would see only P";
  for (const PlannedKernel& k : r.result.plan.kernels) {
    const KernelCandidate& c = r.result.candidates.candidates.at(static_cast<size_t>(k.candidate));
    EXPECT_TRUE(cost.cost(r.graph, c).feasible()) << k.cost_note;
  }
}

}  // namespace
}  // namespace korch
