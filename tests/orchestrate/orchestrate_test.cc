// Kernel selection against independent oracles on random DAGs:
//   * with recompute: a Dijkstra search over "which values exist so far" (any sequence of kernel
//     runs, each reading only existing values) finds the true optimum; the BLP must match it.
//   * without recompute: the execution-state DP and the BLP restricted to disjoint kernels must
//     agree.
// Plus the kept case where recompute strictly wins under the analytic model, a hand-built
// unschedulable selection that the cycle cut must repair, and the region split (regions.h): on
// graphs with barriers no candidate may cross, solving region by region matches the brute force
// and solving the program whole.
#include "orchestrate/orchestrate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <queue>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "ir/text_format.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/graph_index.h"
#include "orchestrate/regions.h"
#include "runtime/memory_plan.h"
#include "temp_dir.h"

namespace korch {
namespace {

// A random DAG of `n` elementwise primitives over f32[8]: node i reads one or two of {input x,
// earlier nodes}; every node without a consumer is a graph output, plus a few random others.
// views: some unary nodes are Reshapes to the same shape, which the memory plan writes in place
// (runtime/memory_plan.h).
Graph random_dag(int n, uint32_t seed, bool views = false) {
  std::mt19937 rng(seed);
  std::string text = "graph r (opset 17) {\n  input x: f32[8]\n  const shape: i64[1] = [8]\n";
  std::vector<std::string> names = {"x"};
  std::vector<int> uses(static_cast<size_t>(n), 0);
  for (int i = 0; i < n; ++i) {
    const std::string name = fmt::format("v{}", i);
    // Prefer recent values so the graphs have depth, sometimes reach far back for skips.
    auto pick = [&] {
      const int k = static_cast<int>(names.size());
      const int back = std::uniform_int_distribution<int>(0, std::min(k - 1, rng() % 4 == 0 ? k - 1 : 2))(rng);
      return k - 1 - back;
    };
    const int a = pick();
    if (a > 0) ++uses[static_cast<size_t>(a - 1)];
    if (rng() % 2) {
      const int b = pick();
      if (b > 0) ++uses[static_cast<size_t>(b - 1)];
      text += fmt::format("  %{}: f32[8] = {}({}, {})\n", name, rng() % 2 ? "Add" : "Mul", names[static_cast<size_t>(a)],
                          names[static_cast<size_t>(b)]);
    } else if (views && rng() % 3 == 0) {
      text += fmt::format("  %{}: f32[8] = Reshape({}, shape)\n", name, names[static_cast<size_t>(a)]);
    } else {
      text += fmt::format("  %{}: f32[8] = {}({})\n", name, rng() % 2 ? "Relu" : "Neg", names[static_cast<size_t>(a)]);
    }
    names.push_back(name);
  }
  std::string outs;
  for (int i = 0; i < n; ++i)
    if (uses[static_cast<size_t>(i)] == 0 || rng() % 6 == 0) outs += (outs.empty() ? "" : ", ") + names[static_cast<size_t>(i + 1)];
  text += "  output " + outs + "\n}\n";
  return parse_graph(text);
}

// Dijkstra over sets of existing node values (bit i = value of node i). A step runs any candidate
// whose inputs exist and adds its outputs. Exact for plans with recompute (running a kernel twice
// never helps, so sets of kernels and sequences of runs reach the same optimum).
double brute_force_optimum(const Graph& g, const std::vector<KernelCandidate>& cands, const std::vector<double>& costs) {
  const int n = static_cast<int>(g.nodes.size());
  auto bit = [&](ValueId v) { return uint32_t{1} << g.value(v).producer; };
  uint32_t goal = 0;
  for (ValueId v : g.outputs) goal |= bit(v);
  std::vector<uint32_t> need(cands.size(), 0), give(cands.size(), 0);
  for (size_t i = 0; i < cands.size(); ++i) {
    for (ValueId v : cands[i].inputs)
      if (!is_free_value(g, v)) need[i] |= bit(v);
    for (ValueId v : cands[i].outputs) give[i] |= bit(v);
  }
  std::vector<double> dist(size_t{1} << n, std::numeric_limits<double>::infinity());
  using Item = std::pair<double, uint32_t>;
  std::priority_queue<Item, std::vector<Item>, std::greater<>> q;
  dist[0] = 0;
  q.push({0, 0});
  while (!q.empty()) {
    auto [d, s] = q.top();
    q.pop();
    if (d > dist[s]) continue;
    if ((s & goal) == goal) return d;
    for (size_t i = 0; i < cands.size(); ++i) {
      if ((need[i] & s) != need[i] || (give[i] & ~s) == 0 || !std::isfinite(costs[i])) continue;
      const uint32_t t = s | give[i];
      if (d + costs[i] < dist[t]) {
        dist[t] = d + costs[i];
        q.push({dist[t], t});
      }
    }
  }
  return std::numeric_limits<double>::infinity();
}

std::vector<double> random_costs(const std::vector<KernelCandidate>& cands, uint32_t seed) {
  // Costs that reward fusion on average (sublinear in size) but vary enough that recompute,
  // minimal output sets and odd partitions all get chosen somewhere.
  std::mt19937 rng(seed);
  std::vector<double> c;
  for (const KernelCandidate& k : cands)
    c.push_back(std::round(std::uniform_real_distribution<double>(2, 6)(rng) * std::sqrt(k.nodes.size()) +
                           static_cast<double>(k.outputs.size())));
  return c;
}

CandidateOptions unbounded() {
  CandidateOptions o;
  o.max_primitives = 64;
  o.max_fanout = 64;
  return o;
}

OrchestrateOptions exact(bool recompute) {
  OrchestrateOptions o;
  o.allow_recompute = recompute;
  o.time_limit_s = 30;
  return o;
}

TEST(Orchestrate, BlpMatchesBruteForceWithRecompute) {
  int seeds = 0, recompute_won = 0, cuts = 0;
  for (uint32_t seed = 1; seed <= 360; ++seed) {
    const int n = 3 + static_cast<int>(seed % 10);  // 3..12 primitives
    const Graph g = random_dag(n, seed, seed > 300);  // the last 60 with views written in place
    const CandidateSet cs = enumerate_candidates(g, unbounded());
    const std::vector<double> costs = random_costs(cs.candidates, seed * 7919u);
    const double truth = brute_force_optimum(g, cs.candidates, costs);
    ASSERT_TRUE(std::isfinite(truth)) << "seed " << seed;
    OrchestrateOptions opt = exact(true);
    opt.dp_state_limit = seed % 2 ? 100000 : 0;  // with and without the warm start
    const Selection sel = select_kernels(g, cs.candidates, costs, opt);
    ASSERT_EQ(sel.solve.status, SolveStatus::kOptimal) << "seed " << seed;
    ASSERT_NEAR(sel.objective, truth, 1e-6) << "seed " << seed << "\n" << print_graph(g);
    const KernelPlan plan = make_plan(g, cs.candidates, sel.order, costs, {});
    ASSERT_NO_THROW(verify_plan(g, plan)) << "seed " << seed;
    EXPECT_NEAR(plan.total_seconds(), truth, 1e-6) << "seed " << seed;
    const DpResult dp = shortest_path_over_states(g, cs.candidates, costs, 1000000);
    ASSERT_TRUE(dp.completed && dp.feasible);
    EXPECT_LE(truth, dp.cost + 1e-9);
    recompute_won += truth < dp.cost - 1e-9;
    cuts += sel.cycle_cuts;
    ++seeds;
  }
  // The instances must exercise what they test: recompute has to win somewhere.
  EXPECT_GT(recompute_won, 10) << "of " << seeds << " seeds";
  RecordProperty("recompute_won", recompute_won);
  RecordProperty("cycle_cuts", cuts);
}

// Barriers as the CPU's epilogue rule makes them: a candidate that holds a barrier node and one of
// its predecessors is unusable (infinite cost), so every barrier's inputs are region boundaries.
std::vector<double> with_barriers(const Graph& g, const std::vector<KernelCandidate>& cands, std::vector<double> costs,
                                  uint32_t seed) {
  std::mt19937 rng(seed);
  const GraphIndex gi(g);
  std::vector<bool> barrier(g.nodes.size());
  for (size_t i = 0; i < barrier.size(); ++i) barrier[i] = rng() % 3 == 0;
  for (size_t i = 0; i < cands.size(); ++i)
    for (NodeId v : cands[i].nodes)
      for (NodeId p : gi.preds[static_cast<size_t>(v)])
        if (barrier[static_cast<size_t>(v)] && std::binary_search(cands[i].nodes.begin(), cands[i].nodes.end(), p))
          costs[i] = std::numeric_limits<double>::infinity();
  return costs;
}

// --dump-blp writes a big region's program and, beside it, which primitives each of its candidate
// variables holds (for solver experiments on the region alone).
TEST(Orchestrate, DumpedRegionNamesItsCandidates) {
  korch::testing::TempDir dir("korch-dump-blp");
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    const Graph g = random_dag(26, seed + 900);
    const CandidateSet cs = enumerate_candidates(g, unbounded());
    const std::vector<double> costs = with_barriers(g, cs.candidates, random_costs(cs.candidates, seed), seed);
    OrchestrateOptions opt = exact(true);
    opt.time_limit_s = 5;
    opt.dump_blp_path = (dir.path() / fmt::format("p{}.lp", seed)).string();
    const Selection sel = select_kernels(g, cs.candidates, costs, opt);
    if (sel.regions < 2) continue;
    for (int r = 1; r <= sel.regions; ++r) {
      std::ifstream names(fmt::format("{}.region{}.candidates.txt", opt.dump_blp_path, r));
      if (!names) continue;
      std::ifstream lp(fmt::format("{}.region{}.lp", opt.dump_blp_path, r));
      ASSERT_TRUE(lp.good());
      const std::string program((std::istreambuf_iterator<char>(lp)), std::istreambuf_iterator<char>());
      int lines = 0;
      for (std::string line; std::getline(names, line); ++lines) {
        const std::string var = line.substr(0, line.find(' '));
        EXPECT_EQ(var, fmt::format("k{}", lines));
        EXPECT_NE(program.find(" " + var + " "), std::string::npos) << var << " is not in the program";
        std::istringstream nodes(line.substr(line.find(':') + 1));
        int count = 0;
        for (std::string name; nodes >> name; ++count) EXPECT_NE(name.find('#'), std::string::npos) << name;  // unnamed: op#id
        EXPECT_GT(count, 0) << line;
      }
      EXPECT_GE(lines, 1000);  // only big regions are dumped alone
      return;
    }
  }
  FAIL() << "no seed gave a region big enough to be dumped";
}

// Every plan as (cost, peak intermediate bytes): without recompute every partition of the
// primitives into full-output candidates, with recompute every subset of the candidates (small
// lists only) that covers every primitive and writes every output; unschedulable ones and those
// with an unusable (infinite-cost) candidate left out.
std::vector<std::pair<double, int64_t>> every_plan(const Graph& g, const std::vector<KernelCandidate>& cands,
                                                    const std::vector<double>& costs, bool recompute) {
  std::vector<std::pair<double, int64_t>> plans;
  auto add = [&](const std::vector<int>& chosen) {
    const ScheduleResult s = schedule(g, cands, chosen);
    if (!s.ok) return;
    double cost = 0;
    for (int c : chosen) cost += costs[static_cast<size_t>(c)];
    plans.emplace_back(cost, plan_peak_bytes(g, cands, s.order));
  };
  const size_t n = g.nodes.size();
  if (!recompute) {
    std::vector<int> chosen;
    std::vector<bool> covered(n);
    std::function<void()> go = [&] {
      const auto u = std::find(covered.begin(), covered.end(), false);
      if (u == covered.end()) return add(chosen);
      const NodeId node = static_cast<NodeId>(u - covered.begin());
      for (size_t i = 0; i < cands.size(); ++i) {
        const KernelCandidate& c = cands[i];
        if (c.minimal_outputs || !std::isfinite(costs[i]) || !std::binary_search(c.nodes.begin(), c.nodes.end(), node))
          continue;
        if (std::any_of(c.nodes.begin(), c.nodes.end(), [&](NodeId x) { return covered[static_cast<size_t>(x)]; }))
          continue;
        for (NodeId x : c.nodes) covered[static_cast<size_t>(x)] = true;
        chosen.push_back(static_cast<int>(i));
        go();
        chosen.pop_back();
        for (NodeId x : c.nodes) covered[static_cast<size_t>(x)] = false;
      }
    };
    go();
    return plans;
  }
  KORCH_CHECK(cands.size() <= 20);
  for (uint32_t mask = 1; mask < (uint32_t{1} << cands.size()); ++mask) {
    std::vector<int> chosen;
    std::vector<bool> covered(n);
    std::set<ValueId> written;
    bool usable = true;
    for (size_t i = 0; i < cands.size(); ++i)
      if (mask >> i & 1) {
        usable = usable && std::isfinite(costs[i]);
        chosen.push_back(static_cast<int>(i));
        for (NodeId x : cands[i].nodes) covered[static_cast<size_t>(x)] = true;
        written.insert(cands[i].outputs.begin(), cands[i].outputs.end());
      }
    if (!usable || std::find(covered.begin(), covered.end(), false) != covered.end()) continue;
    if (std::any_of(g.outputs.begin(), g.outputs.end(), [&](ValueId v) { return !written.count(v); })) continue;
    add(chosen);
  }
  return plans;
}

// A memory budget: the cheapest plan whose arena fits, against every plan; no plan fitting is an
// error. Budgets: just under the unconstrained optimum's peak, the least peak, and under it.
TEST(Orchestrate, MemoryBudgetMatchesBruteForce) {
  int tightened = 0, infeasible = 0, with_recompute = 0, with_pieces = 0;
  for (uint32_t seed = 1; seed <= 220; ++seed) {
    // 3..8 primitives; from seed 151 with views written in place (their inputs share a buffer)
    const Graph g = random_dag(3 + static_cast<int>(seed % 6), seed + 9000, seed > 150);
    with_pieces += !runtime::in_place_nodes(g).empty();
    const CandidateSet cs = enumerate_candidates(g, unbounded());
    // Half the seeds with barriers, so that some intermediates cannot be fused away.
    std::vector<double> costs = random_costs(cs.candidates, seed * 104729u);
    if (seed % 2) costs = with_barriers(g, cs.candidates, costs, seed);
    const bool recompute = seed % 3 == 0 && cs.candidates.size() <= 14;
    with_recompute += recompute;
    const auto plans = every_plan(g, cs.candidates, costs, recompute);
    ASSERT_FALSE(plans.empty()) << "seed " << seed;
    const auto best = *std::min_element(plans.begin(), plans.end());
    int64_t least = best.second;
    for (const auto& p : plans) least = std::min(least, p.second);
    for (int64_t budget : {best.second - 1, least, least - 1}) {
      if (budget < 0) continue;  // -1 means no budget
      SCOPED_TRACE(fmt::format("seed {}, budget {} (unconstrained peak {}, least {})", seed, budget, best.second, least));
      double truth = std::numeric_limits<double>::infinity();
      for (const auto& p : plans)
        if (p.second <= budget) truth = std::min(truth, p.first);
      OrchestrateOptions opt = exact(recompute);
      opt.memory_budget = budget;
      if (!std::isfinite(truth)) {
        EXPECT_THROW(select_kernels(g, cs.candidates, costs, opt), Error);
        ++infeasible;
        continue;
      }
      const Selection sel = select_kernels(g, cs.candidates, costs, opt);
      EXPECT_NEAR(sel.objective, truth, 1e-6);
      EXPECT_LE(sel.peak_bytes, budget);
      EXPECT_EQ(plan_peak_bytes(g, cs.candidates, sel.order), sel.peak_bytes);
      tightened += truth > best.first + 1e-9;
    }
  }
  // The budgets must bind: a costlier plan chosen for memory, and budgets no plan meets.
  EXPECT_GT(tightened, 20);
  EXPECT_GT(infeasible, 20);
  EXPECT_GT(with_recompute, 10);
  EXPECT_GT(with_pieces, 15);
  RecordProperty("tightened", tightened);
  RecordProperty("infeasible", infeasible);
}

TEST(Orchestrate, RegionsMatchBruteForceAndTheWholeProgram) {
  int split = 0, loose_split = 0;
  for (uint32_t seed = 1; seed <= 200; ++seed) {
    const int n = 4 + static_cast<int>(seed % 9);  // 4..12 primitives
    const Graph g = random_dag(n, seed + 5000);
    const CandidateSet cs = enumerate_candidates(g, unbounded());
    const std::vector<double> costs =
        with_barriers(g, cs.candidates, random_costs(cs.candidates, seed * 15485863u), seed);
    const double truth = brute_force_optimum(g, cs.candidates, costs);
    ASSERT_TRUE(std::isfinite(truth)) << "seed " << seed;
    for (bool recompute : {true, false}) {
      OrchestrateOptions opt = exact(recompute);
      opt.dp_state_limit = seed % 2 ? 100000 : 0;
      const Selection by_region = select_kernels(g, cs.candidates, costs, opt);
      opt.split_regions = false;
      const Selection whole = select_kernels(g, cs.candidates, costs, opt);
      ASSERT_EQ(by_region.solve.status, SolveStatus::kOptimal) << "seed " << seed;
      ASSERT_NEAR(by_region.objective, whole.objective, 1e-6) << "seed " << seed << "\n" << print_graph(g);
      if (recompute) {
        ASSERT_NEAR(by_region.objective, truth, 1e-6) << "seed " << seed << "\n" << print_graph(g);
      }
      const KernelPlan plan = make_plan(g, cs.candidates, by_region.order, costs, {});
      ASSERT_NO_THROW(verify_plan(g, plan)) << "seed " << seed;
      EXPECT_NEAR(plan.total_seconds(), by_region.objective, 1e-6) << "seed " << seed;
      if (recompute) split += by_region.regions > 1;
    }
    // With a gap allowed, the regions share it: the whole stays within it of the optimum.
    OrchestrateOptions loose = exact(true);
    loose.rel_gap = 0.05;
    const Selection near = select_kernels(g, cs.candidates, costs, loose);
    EXPECT_LE(near.objective, truth * 1.05 + 1e-9) << "seed " << seed;
    EXPECT_LE(near.solve.bound, truth + 1e-9) << "seed " << seed;
    EXPECT_LE(near.solve.gap, 0.05 + 1e-12) << "seed " << seed;
    // Split, every region here is small enough to be solved to its optimum, leaving the gap to the
    // big regions (none here): a region that stopped at its share would spend what they need.
    if (near.regions > 1) {
      EXPECT_NEAR(near.objective, truth, 1e-6) << "seed " << seed;
      ++loose_split;
    }
  }
  EXPECT_GT(loose_split, 50);
  EXPECT_GT(split, 100) << "the barriers must split most graphs for the test to mean anything";
  RecordProperty("split", split);
}

// Regions small enough to solve exactly are solved exactly even when a gap is allowed. Region 1:
// p1, p2, p3 (pairs 1.0, alone 0.8 each) and q (20; with p1, 20.79): LP bound at most 21.5 (every
// pair at one half), optimum 21.79 ({p1,q} and {p2,p3}), warm start 22.4 (one kernel per
// primitive): within 5% of the bound, so a region allowed its own 5% may stop at the warm start.
TEST(Orchestrate, SmallRegionsAreSolvedExactlyUnderAGap) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[8]
  input y: f32[8]
  %p1: f32[8] = Relu(x)
  %p2: f32[8] = Neg(x)
  %p3: f32[8] = Exp(x)
  %q: f32[8] = Abs(x)
  %r: f32[8] = Neg(y)
  output p1, p2, p3, q, r
})");
  std::vector<KernelCandidate> cands;
  std::vector<double> costs;
  const std::vector<std::pair<std::vector<NodeId>, double>> kernels = {
      {{0}, 0.8}, {{1}, 0.8}, {{2}, 0.8}, {{3}, 20}, {{4}, 1}, {{0, 1}, 1}, {{1, 2}, 1}, {{0, 2}, 1}, {{0, 3}, 20.79}};
  for (const auto& [nodes, cost] : kernels) {
    cands.push_back(make_candidate(g, nodes, false));
    costs.push_back(cost);
  }
  OrchestrateOptions opt = exact(true);
  opt.dp_state_limit = 0;  // the warm start is one kernel per primitive
  const Selection best = select_kernels(g, cands, costs, opt);
  ASSERT_EQ(best.regions, 2);
  ASSERT_NEAR(best.objective, 22.79, 1e-9);
  opt.rel_gap = 0.05;
  const Selection loose = select_kernels(g, cands, costs, opt);
  EXPECT_NEAR(loose.objective, 22.79, 1e-9);
  EXPECT_EQ(loose.solve.gap, 0.0);
}

// x -> Relu a -> Neg b -> Exp c.
Graph chain_of_three() {
  return parse_graph(R"(graph t (opset 17) {
  input x: f32[8]
  %a: f32[8] = Relu(x)
  %b: f32[8] = Neg(a)
  %c: f32[8] = Exp(b)
  output c
})");
}

// A fused kernel that costs no less than its primitives one by one is left out (dominated), and
// the optimum is unchanged: a -> b -> c, fusions of two cost their parts' sum, of three a little
// more; only the singletons remain.
TEST(Orchestrate, FusionsNoCheaperThanTheirPrimitivesAreLeftOut) {
  const Graph g = chain_of_three();
  const CandidateSet cs = enumerate_candidates(g, unbounded());
  std::vector<double> costs;
  int fused = 0;
  for (const KernelCandidate& k : cs.candidates) {
    costs.push_back(static_cast<double>(k.nodes.size()) + (k.nodes.size() == 3 ? 0.01 : 0.0));
    fused += k.nodes.size() > 1;
  }
  ASSERT_GT(fused, 2);
  for (bool recompute : {true, false}) {
    const Selection sel = select_kernels(g, cs.candidates, costs, exact(recompute));
    EXPECT_EQ(sel.dominated, fused);
    EXPECT_NEAR(sel.objective, 3.0, 1e-9);
    EXPECT_NEAR(sel.objective, brute_force_optimum(g, cs.candidates, costs), 1e-9);
    EXPECT_EQ(sel.order.size(), 3u);
  }
}

// With recompute, a kernel is left out when one more primitive makes a candidate that costs no more,
// reads nothing new (x is a graph input: free) and writes what it wrote: {b, c} reads a, {a, b, c}
// computes a from x itself at a lower cost. The optimum stays; without recompute nothing changes.
TEST(Orchestrate, KernelsThatOneMorePrimitiveMakesCheaperAreLeftOut) {
  const Graph g = chain_of_three();
  const CandidateSet cs = enumerate_candidates(g, unbounded());
  std::vector<double> costs;
  for (const KernelCandidate& k : cs.candidates) costs.push_back(k.nodes.size() == 1 ? 1.0 : k.nodes.size() == 2 ? 1.9 : 1.5);
  const Selection with = select_kernels(g, cs.candidates, costs, exact(true));
  const Selection without = select_kernels(g, cs.candidates, costs, exact(false));
  EXPECT_EQ(with.dominated, without.dominated + 1);  // {b, c}; {a, b} writes b, which {a, b, c} does not
  EXPECT_NEAR(with.objective, 1.5, 1e-9);
  EXPECT_NEAR(without.objective, 1.5, 1e-9);
}

// The larger candidate must not read a value the smaller does not: {a, b, d} costs what {a, b} costs
// but reads e, which the optimum {a, b} + {e, d} never writes, so {a, b} stays.
TEST(Orchestrate, SupersetThatReadsMoreDoesNotDominate) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[8]
  %a: f32[8] = Relu(x)
  %b: f32[8] = Neg(a)
  %e: f32[8] = Exp(x)
  %d: f32[8] = Add(b, e)
  output b, d
})");
  const CandidateSet cs = enumerate_candidates(g, unbounded());
  std::vector<double> costs;
  for (const KernelCandidate& k : cs.candidates) {
    std::string names;
    for (NodeId n : k.nodes) names += g.value(g.nodes[static_cast<size_t>(n)].outputs[0]).name;
    costs.push_back(names.size() == 1 ? 10.0 : names == "ab" || names == "abd" || names == "ed" ? 3.0 : 20.0);
  }
  const Selection sel = select_kernels(g, cs.candidates, costs, exact(true));
  EXPECT_NEAR(sel.objective, 6.0, 1e-9);
  EXPECT_NEAR(sel.objective, brute_force_optimum(g, cs.candidates, costs), 1e-9);
}

// On random graphs whose kernels cost by the values they read (so taking in a primitive that reads
// the graph input often pays), the optimum with recompute equals brute force with the superset
// dominance leaving kernels out.
TEST(Orchestrate, SupersetDominanceKeepsTheOptimum) {
  int left_out = 0;
  for (uint32_t seed = 1; seed <= 240; ++seed) {
    const Graph g = random_dag(3 + static_cast<int>(seed % 10), seed + 7000);
    const CandidateSet cs = enumerate_candidates(g, unbounded());
    std::mt19937 rng(seed);
    std::vector<double> costs;
    for (const KernelCandidate& k : cs.candidates) {
      int reads = 0;
      for (ValueId v : k.inputs) reads += !is_free_value(g, v);
      costs.push_back(1.0 + 0.5 * reads + 0.1 * static_cast<double>(k.nodes.size()) +
                      0.01 * static_cast<double>(rng() % 10) + (k.minimal_outputs ? -0.05 : 0.0));
    }
    if (seed % 2) costs = random_costs(cs.candidates, seed * 104729u);  // supersets cheaper at random
    const double truth = brute_force_optimum(g, cs.candidates, costs);
    const Selection with = select_kernels(g, cs.candidates, costs, exact(true));
    ASSERT_EQ(with.solve.status, SolveStatus::kOptimal) << "seed " << seed;
    ASSERT_NEAR(with.objective, truth, 1e-6) << "seed " << seed << "\n" << print_graph(g);
    const KernelPlan plan = make_plan(g, cs.candidates, with.order, costs, {});
    ASSERT_NO_THROW(verify_plan(g, plan)) << "seed " << seed;
    left_out += with.dominated - select_kernels(g, cs.candidates, costs, exact(false)).dominated;
  }
  EXPECT_GT(left_out, 50);  // the instances exercise the rule
}

// The state search stops at its time limit as it does at its state limit.
TEST(Orchestrate, StateSearchStopsAtItsTimeLimit) {
  // 16 independent chains of 3: 4^16 downsets, far more than a microsecond allows.
  std::string text = "graph w (opset 17) {\n  input x: f32[8]\n";
  std::string outs;
  for (int b = 0; b < 16; ++b) {
    text += fmt::format("  %a{0}: f32[8] = Relu(x)\n  %b{0}: f32[8] = Neg(a{0})\n  %c{0}: f32[8] = Relu(b{0})\n", b);
    outs += (b ? ", c" : "c") + std::to_string(b);
  }
  const Graph g = parse_graph(text + "  output " + outs + "\n}\n");
  const CandidateSet cs = enumerate_candidates(g, unbounded());
  const std::vector<double> costs(cs.candidates.size(), 1.0);
  const DpResult r = shortest_path_over_states(g, cs.candidates, costs, 100'000'000, 0, 1e-6);
  EXPECT_FALSE(r.completed);
  EXPECT_LT(r.seconds, 5.0);
}

// The windowed search is measured from the first node not yet run that is not a source: a source
// numbered first (a broadcast constant, say) that only the last primitive reads waits for it, and
// must not pin the window to the start. A chain of 10 runs with a window of 3.
TEST(Orchestrate, WindowedSearchPassesSourcesThatWaitForTheirReader) {
  std::string text = "graph w (opset 17) {\n  input x: f32[8]\n  %s: f32[8] = Relu(x)\n  %a0: f32[8] = Neg(x)\n";
  for (int i = 1; i < 10; ++i) text += fmt::format("  %a{}: f32[8] = Exp(a{})\n", i, i - 1);
  const Graph g = parse_graph(text + "  %y: f32[8] = Add(a9, s)\n  output y\n}\n");
  CandidateOptions small;
  small.max_primitives = 2;
  const CandidateSet cs = enumerate_candidates(g, small);
  std::vector<double> costs;
  for (const KernelCandidate& k : cs.candidates) costs.push_back(k.nodes.size() == 1 ? 1.0 : 1.5);
  const DpResult exact = shortest_path_over_states(g, cs.candidates, costs, 1'000'000);
  const DpResult windowed = shortest_path_over_states(g, cs.candidates, costs, 1'000'000, 3);
  ASSERT_TRUE(exact.completed && exact.feasible);
  ASSERT_TRUE(windowed.feasible);
  EXPECT_NEAR(windowed.cost, exact.cost, 1e-9);  // pairs all along the chain: the window loses nothing here
}

// The header's example: a -> b -> Conv -> c where the Conv takes epilogues only: two regions, the
// first writes b's value for the second, which reads it as a free input.
TEST(Orchestrate, RegionsSplitWhereNoCandidateCrosses) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[8]
  %a: f32[8] = Relu(x)
  %b: f32[8] = Neg(a)
  %c: f32[8] = Relu(b)
  %d: f32[8] = Neg(c)
  output d
})");
  // Candidates over node ids: {0} {1} {0,1} {2} {2,3} {3}; nothing joins 1 and 2.
  std::vector<KernelCandidate> cands;
  for (std::vector<NodeId> nodes : std::vector<std::vector<NodeId>>{{0}, {1}, {0, 1}, {2}, {2, 3}, {3}})
    cands.push_back(make_candidate(g, nodes, false));
  const std::vector<SelectionRegion> regions = split_into_regions(g, cands, std::vector<bool>(cands.size(), true));
  ASSERT_EQ(regions.size(), 2u);
  EXPECT_EQ(regions[0].nodes, (std::vector<NodeId>{0, 1}));
  EXPECT_EQ(regions[1].nodes, (std::vector<NodeId>{2, 3}));
  EXPECT_EQ(regions[0].candidates, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(regions[1].candidates, (std::vector<int>{3, 4, 5}));
  const ValueId b = g.find_value("b"), d = g.find_value("d");
  EXPECT_EQ(regions[0].graph.outputs, (std::vector<ValueId>{b}));
  EXPECT_EQ(regions[1].graph.outputs, (std::vector<ValueId>{d}));
  EXPECT_TRUE(is_free_value(regions[1].graph, b));
  EXPECT_EQ(regions[1].local_candidates[1].nodes, (std::vector<NodeId>{0, 1}));  // {2,3} renumbered
  // One candidate across the boundary joins everything.
  cands.push_back(make_candidate(g, {1, 2}, false));
  EXPECT_EQ(split_into_regions(g, cands, std::vector<bool>(cands.size(), true)).size(), 1u);
  // Unusable, it does not.
  std::vector<bool> usable(cands.size(), true);
  usable.back() = false;
  EXPECT_EQ(split_into_regions(g, cands, usable).size(), 2u);
}

TEST(Orchestrate, DpMatchesDisjointBlp) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    const int n = 3 + static_cast<int>(seed % 10);
    const Graph g = random_dag(n, seed + 1000);
    CandidateOptions co = unbounded();
    co.offer_minimal_outputs = seed % 3 != 0;  // the disjoint BLP must ignore minimal variants
    const CandidateSet cs = enumerate_candidates(g, co);
    // Half the seeds with barriers, so that some intermediates cannot be fused away.
    std::vector<double> costs = random_costs(cs.candidates, seed * 104729u);
    if (seed % 2) costs = with_barriers(g, cs.candidates, costs, seed);
    const DpResult dp = shortest_path_over_states(g, cs.candidates, costs, 1000000);
    ASSERT_TRUE(dp.completed && dp.feasible) << "seed " << seed;
    OrchestrateOptions opt = exact(false);
    opt.dp_state_limit = 0;  // no warm start: the BLP finds it on its own
    const Selection sel = select_kernels(g, cs.candidates, costs, opt);
    ASSERT_NEAR(sel.objective, dp.cost, 1e-6) << "seed " << seed << "\n" << print_graph(g);
    // The DP's own plan is valid and disjoint.
    const ScheduleResult s = schedule(g, cs.candidates, dp.chosen);
    ASSERT_TRUE(s.ok);
    std::vector<int> times(g.nodes.size(), 0);
    for (int c : dp.chosen)
      for (NodeId id : cs.candidates[static_cast<size_t>(c)].nodes) ++times[static_cast<size_t>(id)];
    for (int t : times) EXPECT_EQ(t, 1) << "seed " << seed;
    EXPECT_NO_THROW(verify_plan(g, make_plan(g, cs.candidates, s.order, costs, {})));
  }
}

// Enumeration: every connected convex set within the caps, each once, against a brute-force
// listing over all node subsets.
TEST(Orchestrate, EnumerationFindsEveryConnectedConvexSet) {
  for (uint32_t seed = 1; seed <= 60; ++seed) {
    const int n = 3 + static_cast<int>(seed % 10);
    const Graph g = random_dag(n, seed + 5000);
    CandidateOptions co = unbounded();
    co.max_primitives = 2 + static_cast<int>(seed % 5);
    co.max_fanout = 1 + static_cast<int>(seed % 3);
    co.offer_minimal_outputs = false;
    const CandidateSet cs = enumerate_candidates(g, co);
    std::set<std::vector<NodeId>> got;
    for (const KernelCandidate& c : cs.candidates) EXPECT_TRUE(got.insert(c.nodes).second) << "duplicate";
    const GraphIndex gi(g);
    std::set<std::vector<NodeId>> want;
    for (uint32_t mask = 1; mask < (1u << n); ++mask) {
      std::vector<NodeId> s;
      for (int i = 0; i < n; ++i)
        if (mask >> i & 1) s.push_back(i);
      if (static_cast<int>(s.size()) > co.max_primitives) continue;
      auto in = [&](NodeId v) { return (mask >> v & 1) != 0; };
      // connected (undirected, inside s)
      uint32_t seen = 1u << s[0];
      for (bool grew = true; grew;) {
        grew = false;
        for (NodeId v : s)
          if (seen >> v & 1)
            for (const auto* l : {&gi.preds[static_cast<size_t>(v)], &gi.succs[static_cast<size_t>(v)]})
              for (NodeId u : *l)
                if (in(u) && !(seen >> u & 1)) seen |= 1u << u, grew = true;
      }
      if (seen != mask) continue;
      // convex: no node outside s is both reachable from s and reaches s
      bool convex = true;
      for (int w = 0; w < n && convex; ++w) {
        if (in(w)) continue;
        std::vector<bool> from(static_cast<size_t>(n)), to(static_cast<size_t>(n));
        for (int v = 0; v < n; ++v)
          for (NodeId p : gi.preds[static_cast<size_t>(v)]) from[static_cast<size_t>(v)] = from[static_cast<size_t>(v)] || in(p) || from[static_cast<size_t>(p)];
        for (int v = n - 1; v >= 0; --v)
          for (NodeId u : gi.succs[static_cast<size_t>(v)]) to[static_cast<size_t>(v)] = to[static_cast<size_t>(v)] || in(u) || to[static_cast<size_t>(u)];
        convex = !(from[static_cast<size_t>(w)] && to[static_cast<size_t>(w)]);
      }
      if (!convex) continue;
      bool fan_ok = true;
      for (NodeId v : s) {
        int k = 0;
        for (NodeId u : gi.succs[static_cast<size_t>(v)]) k += in(u);
        fan_ok &= k <= co.max_fanout;
      }
      if (fan_ok) want.insert(s);
    }
    EXPECT_EQ(got, want) << "seed " << seed << "\n" << print_graph(g);
  }
}

// Kept case: a cheap elementwise e feeding two chains, kernels capped at 4 primitives. Without
// recompute e is written once and read back by the second chain; with recompute each chain's
// kernel computes e itself from x and e never touches memory. Under the analytic H200 model these
// kernels are memory- and launch-bound (recomputing Exp costs far less than writing and reading
// e back), so recompute is strictly cheaper. Under cpu_spec() fused elementwise chains are
// compute-bound at 10 G op/s and recomputing does not pay.
TEST(Orchestrate, RecomputeStrictlyWinsOnSplitChains) {
  const Graph g = parse_graph(R"(
graph split (opset 17) {
  input x: f32[1048576]
  %e: f32[1048576] = Exp(x)
  %c1: f32[1048576] = Relu(e)
  %c2: f32[1048576] = Neg(c1)
  %c3: f32[1048576] = Sqrt(c2)
  %d1: f32[1048576] = Neg(e)
  %d2: f32[1048576] = Relu(d1)
  %d3: f32[1048576] = Abs(d2)
  output c3, d3
}
)");
  AnalyticCost cost(h200_spec());
  OrchestrateOptions opt;
  opt.candidates.max_primitives = 4;
  const OrchestrateResult with = orchestrate(g, cost, opt);
  opt.allow_recompute = false;
  opt.candidates.offer_minimal_outputs = false;
  const OrchestrateResult without = orchestrate(g, cost, opt);
  EXPECT_EQ(with.selection.solve.status, SolveStatus::kOptimal);
  EXPECT_LT(with.plan.total_seconds(), without.plan.total_seconds() * 0.95);
  ASSERT_EQ(with.plan.kernels.size(), 2u);
  for (const PlannedKernel& k : with.plan.kernels) {
    EXPECT_EQ(k.nodes.size(), 4u);
    EXPECT_EQ(k.nodes.front(), 0) << "each kernel computes e itself";
    EXPECT_EQ(k.outputs.size(), 1u) << "and writes only its chain's end";
  }
  // The no-recompute optimum is what the state search finds too.
  EXPECT_NEAR(without.plan.total_seconds(), with.selection.dp.cost, 1e-12);
}

// The selection {A = {a, d}, B = {c, b}} for a->b, c->b, c->d, a->d is cheapest and satisfies
// every BLP row, but A needs c (from B) and B needs a (from A). The cycle cut must exclude it.
TEST(Orchestrate, CycleCutRepairsUnschedulableSelection) {
  const Graph g = parse_graph(R"(
graph cyc (opset 17) {
  input x: f32[8]
  %a: f32[8] = Relu(x)
  %c: f32[8] = Neg(x)
  %b: f32[8] = Add(a, c)
  %d: f32[8] = Mul(a, c)
  output b, d
}
)");
  // Nodes: a=0, c=1, b=2, d=3.
  std::vector<KernelCandidate> cands;
  for (NodeId i = 0; i < 4; ++i) cands.push_back(make_candidate(g, {i}, false));
  cands.push_back(make_candidate(g, {0, 3}, false));  // A: writes a (read by b) and d
  cands.push_back(make_candidate(g, {1, 2}, false));  // B: writes c (read by d) and b
  std::vector<double> costs = {10, 10, 10, 10, 4, 4};
  const ScheduleResult bad = schedule(g, cands, {4, 5});
  ASSERT_FALSE(bad.ok);
  EXPECT_EQ(bad.blocked.size(), 2u);
  OrchestrateOptions opt;
  opt.dp_state_limit = 0;
  const Selection sel = select_kernels(g, cands, costs, opt);
  EXPECT_GE(sel.cycle_cuts, 1);
  // Best schedulable: {c}, A, B (B recomputes c): 10 + 4 + 4.
  EXPECT_NEAR(sel.objective, 18, 1e-9);
  EXPECT_NEAR(sel.objective, brute_force_optimum(g, cands, costs), 1e-9);
  EXPECT_TRUE(schedule(g, cands, sel.order).ok);
}

TEST(Orchestrate, VerifierRejectsBrokenPlans) {
  const Graph g = random_dag(6, 42);
  const CandidateSet cs = enumerate_candidates(g, unbounded());
  const std::vector<double> costs(cs.candidates.size(), 1.0);
  const Selection sel = select_kernels(g, cs.candidates, costs, exact(true));
  KernelPlan plan = make_plan(g, cs.candidates, sel.order, costs, {});
  ASSERT_NO_THROW(verify_plan(g, plan));
  KernelPlan reversed = plan;
  std::reverse(reversed.kernels.begin(), reversed.kernels.end());
  if (plan.kernels.size() > 1) {
    EXPECT_THROW(verify_plan(g, reversed), Error);
  }
  KernelPlan dropped = plan;
  dropped.kernels.pop_back();
  EXPECT_THROW(verify_plan(g, dropped), Error);
  KernelPlan nonconvex;
  // a -> b -> c as kernel {a, c} without b: not convex.
  const Graph chain = parse_graph(R"(
graph ch (opset 17) {
  input x: f32[8]
  %a: f32[8] = Relu(x)
  %b: f32[8] = Neg(a)
  %c: f32[8] = Abs(b)
  output c
}
)");
  // Values: x = 0, a = 1, b = 2, c = 3.
  nonconvex.kernels.push_back({-1, {0, 1}, {0}, {2}, 1, ""});
  nonconvex.kernels.push_back({-1, {0, 2}, {0, 2}, {3}, 1, ""});
  EXPECT_THROW(verify_plan(chain, nonconvex), Error);
}

}  // namespace
}  // namespace korch
