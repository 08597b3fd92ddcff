// Kernel orchestration: the provably cheapest set of kernels for a primitive graph.
//
//   enumerate_candidates  convex subgraphs (kernel_candidate.h)
//   fill_cost_table       one cost per candidate from a CostProvider (kernel_cost.h)
//   build_orchestration_blp
//       one binary x_j per candidate with a finite cost, minimise sum(cost_j x_j), subject to
//         output rows   each graph output is written by a selected kernel
//         input rows    x_j <= sum of the selected writers of each value kernel j reads
//                       (recompute allowed: a value may be written by several kernels, a primitive
//                       computed by several), stated through a variable m_v per value
//                       ("materialised"): x_j <= m_v <= sum(writers of v)
//         live rows     each primitive is inside some selected kernel. Valid (every primitive is
//                       live after dead-code elimination, so some kernel must compute it) and what
//                       makes the LP relaxation tight: without them x_j = 1/2 chains satisfy the
//                       input rows at half the cost, and CBC could not close the gap on a
//                       300-primitive instance in 120 s (shared/environment-notes.md).
//       without recompute the live rows are equalities and only full-output candidates take part.
//   split_into_regions   the program separates exactly where no candidate crosses (regions.h):
//       each region is solved alone (state search, BLP, cycle cuts) and the plans are joined in
//       region order; the objective and the bound are the regions' sums.
//   shortest_path_over_states   the optimal no-recompute plan (state_dp.h), when the number of
//       states stays under a limit: the BLP's warm start, and its fallback if no solver answers.
//   memory budget (options.memory_budget): the cheapest plan whose arena (plan_peak_bytes) is
//       within it. Exact, by lazy cuts: a candidate whose own step holds more than the budget
//       (step_bytes) is left out (valid: every plan running it peaks above); each solved plan over
//       the budget gets a no-good cut
//         sum_{K in plan} x_K - sum_{K not in plan} x_K <= |plan| - 1
//       (it excludes that selection alone) and the program is solved again, up to
//       max_memory_cuts times. The arena depends on the whole plan, so the program is solved
//       whole (no regions, no state search) and without the dominance passes (a dominated kernel
//       may hold less memory than the one that dominates it).
//   rewrite choices (rewrite_choice.h): orchestrate_with_rewrites poses the same program over the
//       union of a graph's rewrite variants, with a 0/1 variable per rewrite site (rewrite_sites).
//   solve_blp, then schedule(); an unschedulable selection (kernel_plan.h) gets a cycle cut
//         sum_{K in cycle} x_K - sum_{P writes a value the cycle needs, P not in cycle} x_P <= |cycle| - 1
//       (valid: in any schedule, the cycle's first kernel reads its value from a writer outside the
//       cycle) and is solved again.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/blp.h"
#include "orchestrate/blp_solver.h"
#include "orchestrate/greedy_fusion.h"
#include "orchestrate/kernel_candidate.h"
#include "orchestrate/kernel_cost.h"
#include "orchestrate/kernel_plan.h"
#include "orchestrate/state_dp.h"

namespace korch {

struct RewriteSites;  // rewrite_choice.h

struct OrchestrateOptions {
  CandidateOptions candidates;
  bool allow_recompute = true;
  double time_limit_s = 60;         // for the solver, over all cycle-cut rounds
  double rel_gap = 0;
  int64_t dp_state_limit = 200'000; // 0 skips the DP
  bool split_regions = true;        // solve the independent regions one by one (false: as one program)
  SolverChoice solver = SolverChoice::kAuto;
  bool verbose = false;
  std::string dump_blp_path;  // when set, the whole program (scaled costs) is written as LP text, and
                              // each region of 1000+ candidates as <path>.region<N>.lp
  std::function<void(const std::string&)> progress;  // one line per phase; may be empty
  // A bound on the plan's peak intermediate memory (plan_peak_bytes: the runtime's arena), in
  // bytes; -1: none. See select_kernels.
  int64_t memory_budget = -1;
  int max_memory_cuts = 200;  // plans over the budget excluded before giving up
  // Set by orchestrate_with_rewrites (rewrite_choice.h): the graph is its union of rewrite
  // variants, and the program gets a choice variable per site. Solved whole, without state search.
  const RewriteSites* rewrite_sites = nullptr;
  // orchestrate_with_rewrites: offer find_alternatives' rewrites as choices (false: plain
  // orchestrate on the graph as given).
  bool rewrite_choices = true;
};

// The BLP for a candidate list and its costs, with the variable -> candidate map.
struct OrchestrationBlp {
  Blp blp;
  std::vector<int> candidate_of_var;   // -1 for the materialisation variables m_v
  std::vector<int> var_of_candidate;  // -1 when the candidate takes no part
  std::vector<std::vector<int>> writers;  // per value: vars whose kernel writes it
  std::vector<int> materialised;          // per value: its m_v variable, -1 if no kernel reads it
  std::vector<int> site_var;              // per rewrite site: its y_s variable (rewrite_choice.h)
};
OrchestrationBlp build_orchestration_blp(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                         const std::vector<double>& costs, bool allow_recompute,
                                         const RewriteSites* sites = nullptr);

struct Selection {
  std::vector<int> order;   // selected candidates in execution order
  double objective = 0;
  SolveResult solve;
  DpResult dp;
  int cycle_cuts = 0;
  int64_t dominated = 0;    // minimal-output variants left out: their full variant costs no more
  int regions = 1;          // independent regions solved one by one (regions.h)
  int64_t variables = 0, rows = 0;
  std::string source;       // "blp" or "dp" (the solver gave no plan)
  std::string warm_start;   // what the solver was started from
  int memory_cuts = 0;       // plans over the memory budget excluded
  int64_t peak_bytes = -1;   // plan_peak_bytes of the selection (computed under a memory budget)
};
// Solves for the cheapest schedulable selection. Throws korch::Error when there is none.
Selection select_kernels(const Graph& g, const std::vector<KernelCandidate>& candidates,
                         const std::vector<double>& costs, const OrchestrateOptions& options);

// What orchestrate_with_rewrites (rewrite_choice.h) offered and chose; empty when nothing was offered.
struct RewriteReport {
  struct Site {
    std::string rule, description;
    std::vector<std::string> nodes;  // the nodes it replaces
  };
  std::vector<Site> offered;
  std::vector<int> chosen;      // indices into offered
  std::vector<std::string> chosen_rules() const {  // the rule of each chosen site, in order
    std::vector<std::string> rules;
    for (int i : chosen) rules.push_back(offered.at(static_cast<size_t>(i)).rule);
    return rules;
  }
  int variant_graphs = 0;       // graphs whose candidates entered the program
  bool exhaustive = false;      // every combination of compatible sites among them
  int64_t candidates = 0;       // candidates of the program (over all variants)
  std::vector<std::string> skipped;  // variant graphs left out, with why
  double objective = 0;         // the program's plan (seconds), before P*'s own solve
  int regions = 1;              // independent regions the program was solved in (regions.h)
  double gap = 0, solve_seconds = 0;  // the program's, as its solver reported them
  SolveStatus status = SolveStatus::kOptimal;
  // Per chosen site: how much slower the best plan without it is (seconds; the site's region of
  // the program solved again with that site's kernels left out); NaN where the time for these
  // solves ran out, or under a memory budget.
  std::vector<double> saved;
};

struct OrchestrateResult {
  CandidateSet candidates;
  CostTable costs;
  int64_t infeasible = 0;                    // candidates with infinite cost
  std::map<std::string, int64_t> infeasible_reasons;
  Selection selection;
  KernelPlan plan;
  double unfused_seconds = 0;  // one kernel per primitive (each singleton with all its outputs); with rewrite
                               // choices, of the graph before them (orchestrate_with_rewrites)
  GreedyFusion greedy;         // the rule-based fuser's plan on the same costs (greedy_fusion.h)
  RewriteReport rewrites;      // the rewrites offered and chosen (rewrite_choice.h)
  double enumerate_s = 0, cost_s = 0, select_s = 0;
};
OrchestrateResult orchestrate(const Graph& g, CostProvider& provider, const OrchestrateOptions& options);

// The same candidates with costs asked again (without CostProvider::prepare: the provider has
// seen them) and selected again: for costs that changed after a plan ran (the closed loop).
OrchestrateResult reorchestrate(const Graph& g, OrchestrateResult previous, CostProvider& provider,
                                const OrchestrateOptions& options);

// Costs (prepare: call CostProvider::prepare first) and selection for out.candidates.
OrchestrateResult select_with_costs(const Graph& g, OrchestrateResult out, CostProvider& provider,
                                    const OrchestrateOptions& options, bool prepare);

}  // namespace korch
