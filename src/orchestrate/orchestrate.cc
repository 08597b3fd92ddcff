#include "orchestrate/orchestrate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <set>

#include "orchestrate/dominance.h"
#include "orchestrate/graph_index.h"
#include "orchestrate/regions.h"
#include "orchestrate/rewrite_sites.h"
#include "support/clock.h"
#include "support/error.h"

namespace korch {

namespace {

// A cycle of blocked kernels: kernel[t] reads needs[t], which kernel[t + 1] (cyclically) writes.
// Walk from a blocked kernel to a blocked writer of one of its missing inputs until a kernel repeats.
void add_cycle_cut(const Graph& g, const std::vector<KernelCandidate>& candidates,
                   const std::set<int>& selected, const std::vector<int>& blocked, OrchestrationBlp& m,
                   int cut_index) {
  std::set<int> blocked_set(blocked.begin(), blocked.end());
  std::vector<int> walk;
  std::vector<ValueId> needs;
  std::map<int, size_t> pos;
  int k = blocked.front();
  while (!pos.count(k)) {
    pos[k] = walk.size();
    walk.push_back(k);
    // Some input of k is missing; follow the first one to a blocked writer of it.
    int next = -1;
    ValueId need = kNoValue;
    for (ValueId v : candidates[static_cast<size_t>(k)].inputs) {
      if (is_free_value(g, v)) continue;
      // v is missing when every selected writer of it is blocked (an unblocked one ran).
      int first_blocked = -1;
      bool missing = true;
      for (int var : m.writers[static_cast<size_t>(v)]) {
        const int w = m.candidate_of_var[static_cast<size_t>(var)];
        if (!selected.count(w)) continue;
        if (!blocked_set.count(w)) missing = false;
        else if (first_blocked < 0) first_blocked = w;
      }
      if (missing && first_blocked >= 0) {
        next = first_blocked;
        need = v;
        break;
      }
    }
    KORCH_CHECK(next >= 0);
    needs.push_back(need);
    k = next;
  }
  const size_t start = pos[k];
  std::vector<int> cycle(walk.begin() + static_cast<long>(start), walk.end());
  std::vector<ValueId> cycle_needs(needs.begin() + static_cast<long>(start), needs.end());
  std::set<int> in_cycle(cycle.begin(), cycle.end());
  std::map<int, double> coef;
  for (int c : cycle) coef[m.var_of_candidate[static_cast<size_t>(c)]] += 1;
  for (ValueId v : cycle_needs)
    for (int var : m.writers[static_cast<size_t>(v)])
      if (!in_cycle.count(m.candidate_of_var[static_cast<size_t>(var)])) coef[var] -= 1;
  std::vector<std::pair<int, double>> terms;
  for (const auto& [var, a] : coef)
    if (a != 0) terms.emplace_back(var, a);
  m.blp.add_row(fmt::format("cycle_{}", cut_index), std::move(terms), -std::numeric_limits<double>::infinity(),
                static_cast<double>(cycle.size()) - 1);
}

// The rows of rewrite choices (rewrite_choice.h): one y_s per site, the live rows relaxed by the
// sites that remove a node or add it, kernels tied to their variant, overlapping sites exclusive.
void add_site_rows(const RewriteSites& sites, const std::vector<KernelCandidate>& candidates,
                   const std::vector<std::vector<int>>& covering, bool allow_recompute, OrchestrationBlp& m) {
  const double inf = std::numeric_limits<double>::infinity();
  for (int s = 0; s < sites.count; ++s) {
    m.site_var.push_back(m.blp.add_var(fmt::format("y{}", s), 0.0));
    m.candidate_of_var.push_back(-1);
  }
  auto y = [&](int site) { return m.site_var[static_cast<size_t>(site)]; };
  for (size_t id = 0; id < covering.size(); ++id) {
    std::vector<std::pair<int, double>> terms;
    for (int var : covering[id]) terms.emplace_back(var, 1.0);
    const int added = sites.added_by[id];
    if (added >= 0) {  // covered when (and, without recompute, once when) the site is chosen
      terms.emplace_back(y(added), -1.0);
      m.blp.add_row(fmt::format("live_{}", id), std::move(terms), 0, allow_recompute ? inf : 0.0);
      continue;
    }
    for (int site : sites.removed_by[id]) terms.emplace_back(y(site), 1.0);
    m.blp.add_row(fmt::format("live_{}", id), std::move(terms), 1, allow_recompute ? inf : 1.0);
  }
  for (size_t var = 0; var < m.candidate_of_var.size(); ++var) {
    const int c = m.candidate_of_var[var];
    if (c < 0) continue;
    std::set<int> removes, adds;
    for (NodeId id : candidates[static_cast<size_t>(c)].nodes) {
      const int added = sites.added_by[static_cast<size_t>(id)];
      if (added >= 0) adds.insert(added);
      for (int site : sites.removed_by[static_cast<size_t>(id)]) removes.insert(site);
    }
    const int x = static_cast<int>(var);
    for (int site : removes) m.blp.add_row(fmt::format("off_{}_{}", x, site), {{x, 1.0}, {y(site), 1.0}}, -inf, 1);
    for (int site : adds) m.blp.add_row(fmt::format("on_{}_{}", x, site), {{x, 1.0}, {y(site), -1.0}}, -inf, 0);
  }
  for (const std::vector<int>& set : sites.exclusive) {
    std::vector<std::pair<int, double>> terms;
    for (int site : set) terms.emplace_back(y(site), 1.0);
    m.blp.add_row(fmt::format("sites_{}", fmt::join(set, "_")), std::move(terms), -inf,
                  static_cast<double>(set.size()) - 1);
  }
}

}  // namespace

OrchestrationBlp build_orchestration_blp(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                         const std::vector<double>& costs, bool allow_recompute,
                                         const RewriteSites* sites) {
  KORCH_CHECK(costs.size() == candidates.size());
  KORCH_CHECK(!sites || (sites->removed_by.size() == g.nodes.size() && sites->added_by.size() == g.nodes.size()));
  OrchestrationBlp m;
  m.var_of_candidate.assign(candidates.size(), -1);
  m.writers.resize(g.values.size());
  std::vector<std::vector<int>> covering(g.nodes.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const KernelCandidate& c = candidates[i];
    if (!usable_candidate(c, costs[i], allow_recompute)) continue;
    const int var = m.blp.add_var(fmt::format("k{}", i), costs[i]);
    m.candidate_of_var.push_back(static_cast<int>(i));
    m.var_of_candidate[i] = var;
    for (ValueId v : c.outputs) m.writers[static_cast<size_t>(v)].push_back(var);
    for (NodeId id : c.nodes) covering[static_cast<size_t>(id)].push_back(var);
  }
  const double inf = std::numeric_limits<double>::infinity();
  auto sum_of = [](const std::vector<int>& vars) {
    std::vector<std::pair<int, double>> t;
    for (int v : vars) t.emplace_back(v, 1.0);
    return t;
  };
  std::set<ValueId> outputs_done;
  for (ValueId v : g.outputs) {
    if (is_free_value(g, v) || !outputs_done.insert(v).second) continue;
    m.blp.add_row(fmt::format("out_{}", v), sum_of(m.writers[static_cast<size_t>(v)]), 1, inf);
  }
  // Input rows through one materialisation variable per value read across kernels:
  //   m_v <= sum(writers of v),   x_j <= m_v for each kernel j reading v.
  // The same LP relaxation as x_j <= sum(writers of v) per (j, v) (m_v in [0, 1] adds no bound),
  // with the writer list stored once per value instead of once per reader: on segment-sized
  // instances that is most of the nonzeros.
  const int kernel_vars = m.blp.num_vars();
  std::vector<int>& materialised = m.materialised;
  materialised.assign(g.values.size(), -1);
  for (int var = 0; var < kernel_vars; ++var) {
    const KernelCandidate& c = candidates[static_cast<size_t>(m.candidate_of_var[static_cast<size_t>(var)])];
    for (ValueId v : c.inputs) {
      if (is_free_value(g, v)) continue;
      int& mv = materialised[static_cast<size_t>(v)];
      if (mv < 0) {
        mv = m.blp.add_var(fmt::format("m{}", v), 0.0);
        m.candidate_of_var.push_back(-1);
        auto terms = sum_of(m.writers[static_cast<size_t>(v)]);
        terms.emplace_back(mv, -1.0);
        m.blp.add_row(fmt::format("write_{}", v), std::move(terms), 0, inf);
      }
      m.blp.add_row(fmt::format("read_{}_{}", var, v), {{mv, 1.0}, {var, -1.0}}, 0, inf);
    }
  }
  if (!sites) {
    for (size_t id = 0; id < g.nodes.size(); ++id)
      m.blp.add_row(fmt::format("live_{}", id), sum_of(covering[id]), 1, allow_recompute ? inf : 1.0);
  } else {
    add_site_rows(*sites, candidates, covering, allow_recompute, m);
  }
  // Need rows, one per edge p -> c through a value v that some kernel reads:
  //   m_v + sum(kernels containing both p and c) >= 1.
  // Valid: c is computed by some kernel; if none of those contains p, that kernel reads v, so v is
  // materialised. The read rows alone only give m_v >= x_j for each reader j separately; this row
  // makes m_v at least c's total coverage by kernels that read v. It cuts off LP points that cover
  // c with many small-weight readers of v, but on YOLOv4's detection head (~1000 fractional
  // candidates at 0.01) it moved the bound only from 386.316 to 386.321: that gap has another cause.
  const GraphIndex gi(g);
  for (size_t v = 0; v < g.values.size(); ++v) {
    const int mv = materialised[v];
    if (mv < 0) continue;
    const NodeId p = g.values[v].producer;
    if (sites && (p < 0 || sites->added_by[static_cast<size_t>(p)] >= 0)) continue;  // P's edges only
    for (NodeId c : gi.consumers[v]) {
      if (sites && sites->added_by[static_cast<size_t>(c)] >= 0) continue;
      std::vector<int> both;
      std::set_intersection(covering[static_cast<size_t>(p)].begin(), covering[static_cast<size_t>(p)].end(),
                            covering[static_cast<size_t>(c)].begin(), covering[static_cast<size_t>(c)].end(),
                            std::back_inserter(both));
      if (both.size() == covering[static_cast<size_t>(c)].size()) continue;  // every kernel of c holds p
      auto terms = sum_of(both);
      terms.emplace_back(mv, 1.0);
      // With rewrite choices, only while no site that removes p or c is chosen: such a site may
      // leave c uncomputed, or write v by another node, in c's kernel.
      if (sites) {
        std::set<int> off(sites->removed_by[static_cast<size_t>(c)].begin(), sites->removed_by[static_cast<size_t>(c)].end());
        off.insert(sites->removed_by[static_cast<size_t>(p)].begin(), sites->removed_by[static_cast<size_t>(p)].end());
        for (int site : off) terms.emplace_back(m.site_var[static_cast<size_t>(site)], 1.0);
      }
      m.blp.add_row(fmt::format("need_{}_{}", v, c), std::move(terms), 1, inf);
    }
  }
  return m;
}

namespace {

// Shares of a region's time limit for the state searches: where the states explode (parallel
// branches multiply them) the solver makes better use of the time.
constexpr double kExactSearchShare = 0.15, kWindowedSearchShare = 0.05;
// Regions with this many candidates report their phases and have their program dumped alone.
constexpr size_t kBigRegion = 1000;
// Regions with this many candidates may stop at the relative gap (select_kernels).
constexpr size_t kGapRegion = 250;
constexpr double kInf = std::numeric_limits<double>::infinity();

void write_lp(const std::string& path, const Blp& blp) {
  std::ofstream f(path);
  f << to_lp_text(blp);
  if (!f) fail_io("cannot write {}", path);
}

// Beside a dumped program: one line per candidate variable, "k<i> <cost>: <node> <node> ..." (a node
// without a name as <op>#<id in the region>), so
// that a solver experiment can say which kernels a fractional or chosen variable stands for.
void write_candidate_names(const std::string& path, const Graph& g, const std::vector<KernelCandidate>& candidates,
                           const std::vector<double>& scaled) {
  std::ofstream f(path);
  for (size_t i = 0; i < candidates.size(); ++i) {
    f << 'k' << i << ' ' << scaled[i] << (candidates[i].minimal_outputs ? " minimal" : "") << ':';
    for (NodeId n : candidates[i].nodes) {
      const Node& node = g.nodes[static_cast<size_t>(n)];
      f << ' ' << (node.name.empty() ? fmt::format("{}#{}", node.op_type, n) : node.name);
    }
    f << '\n';
  }
  if (!f) fail_io("cannot write {}", path);
}

// One region's selection (regions.h): the state search, the BLP with its warm start, cycle cuts.
// `scaled` are the costs the solver sees (dominated variants infinite), `scale` their factor.
Selection select_in_region(const Graph& g, const std::vector<KernelCandidate>& candidates,
                           const std::vector<double>& costs, const std::vector<double>& scaled, double scale,
                           const OrchestrateOptions& options, double time_limit_s, double rel_gap,
                           double abs_gap, const std::function<void(const std::string&)>& say) {
  const auto t0 = std::chrono::steady_clock::now();
  Selection sel;
  OrchestrationBlp m = build_orchestration_blp(g, candidates, scaled, options.allow_recompute, options.rewrite_sites);
  sel.variables = m.blp.num_vars();

  // Warm start: the no-recompute optimum when the state search finishes, else one kernel per
  // primitive (always a valid plan when every singleton can be emitted).
  std::vector<int> warm_kernels;
  if (options.dp_state_limit > 0) {
    sel.dp = shortest_path_over_states(g, candidates, costs, options.dp_state_limit, 0,
                                       kExactSearchShare * time_limit_s);
    say(sel.dp.completed
            ? fmt::format("no-recompute optimum over {} execution states: {:.6g} ({:.2f} s)", sel.dp.states,
                          sel.dp.cost, sel.dp.seconds)
            : fmt::format("execution states: stopped after {} ({:.1f} s; limits {} states, {:.1f} s)", sel.dp.states,
                          sel.dp.seconds, options.dp_state_limit, kExactSearchShare * time_limit_s));
    if (sel.dp.feasible) {
      warm_kernels = sel.dp.chosen;
      sel.warm_start = "no-recompute optimum";
    } else {
      // Too many states for the exact search: a windowed one (heuristic) still gives the solver a
      // good incumbent, which matters on big degenerate programs (YOLOv4). Narrow to wide: a
      // wider window searches a superset of states (its plan is no worse), and once one stops at
      // a limit a wider one would too (YOLOv4's detection head: 6 finishes in milliseconds, 12
      // and 24 each spent their whole share, 2.4 s, before they were tried narrow-first).
      double best = std::numeric_limits<double>::infinity();
      for (int window = 6; window <= 24; window *= 2) {
        DpResult w = shortest_path_over_states(g, candidates, costs, options.dp_state_limit, window,
                                               kWindowedSearchShare * time_limit_s);
        if (!w.feasible) break;
        if (w.cost >= best) continue;
        best = w.cost;
        warm_kernels = w.chosen;
        sel.warm_start = fmt::format("windowed no-recompute search (window {})", window);
        say(fmt::format("warm start: {} ({} states, {:.6g})", sel.warm_start, w.states, w.cost));
      }
    }
  }
  if (warm_kernels.empty()) {
    sel.warm_start = "one kernel per primitive";
    for (size_t i = 0; i < candidates.size(); ++i)
      if (candidates[i].nodes.size() == 1 && !candidates[i].minimal_outputs && m.var_of_candidate[i] >= 0 &&
          (!options.rewrite_sites || options.rewrite_sites->added_by[static_cast<size_t>(candidates[i].nodes[0])] < 0))
        warm_kernels.push_back(static_cast<int>(i));  // (with rewrite choices: no site chosen)
  }
  std::vector<double> warm(static_cast<size_t>(m.blp.num_vars()), 0.0);
  for (int c : warm_kernels) {
    warm[static_cast<size_t>(m.var_of_candidate[static_cast<size_t>(c)])] = 1.0;
    for (ValueId v : candidates[static_cast<size_t>(c)].inputs)
      if (m.materialised[static_cast<size_t>(v)] >= 0) warm[static_cast<size_t>(m.materialised[static_cast<size_t>(v)])] = 1.0;
  }
  if (!m.blp.feasible(warm)) warm.clear();

  int64_t lowest_over = std::numeric_limits<int64_t>::max();  // the lowest peak of a plan over the memory budget
  for (int round = 0;; ++round) {
    SolveOptions so;
    so.time_limit_s = std::max(1.0, time_limit_s - since(t0));
    so.rel_gap = rel_gap;
    so.abs_gap = abs_gap;
    so.warm_start = warm;
    so.solver = options.solver;
    so.verbose = options.verbose;
    SolveResult r = solve_blp(m.blp, so);
    r.objective /= scale;
    r.bound /= scale;
    sel.rows = static_cast<int64_t>(m.blp.rows.size());
    if (r.status == SolveStatus::kInfeasible && options.memory_budget >= 0)
      fail("{}", sel.memory_cuts ? fmt::format("no plan keeps its intermediates within the memory budget of {} bytes: all {} "
                                         "plans of kernels that each fit peak above it, the lowest at {} bytes",
                                         options.memory_budget, sel.memory_cuts, lowest_over)
                           : fmt::format("no plan keeps its intermediates within the memory budget of {} bytes: the "
                                         "kernels that each fit in it make no plan",
                                         options.memory_budget));
    if (r.status == SolveStatus::kInfeasible)
      fail("no plan exists: the kernel selection program is infeasible ({} candidates)", candidates.size());
    if (r.x.empty() && options.memory_budget >= 0)
      fail("no plan within the memory budget of {} bytes found in the {} s time limit ({} cheaper plan{} over it "
           "excluded{})",
           options.memory_budget, options.time_limit_s, sel.memory_cuts, sel.memory_cuts == 1 ? "" : "s",
           sel.memory_cuts ? fmt::format(", the lowest peak among them {} bytes", lowest_over) : "");
    if (r.x.empty()) {
      if (!sel.dp.feasible)
        fail("the solver found no plan within {} s and the no-recompute search did not finish: {}",
             options.time_limit_s, fmt::join(r.log, "; "));
      sel.solve = std::move(r);
      sel.order = sel.dp.chosen;
      sel.objective = sel.dp.cost;
      sel.source = "dp";
      return sel;
    }
    std::vector<int> chosen;
    for (int var = 0; var < m.blp.num_vars(); ++var)
      if (r.x[static_cast<size_t>(var)] > 0.5 && m.candidate_of_var[static_cast<size_t>(var)] >= 0)
        chosen.push_back(m.candidate_of_var[static_cast<size_t>(var)]);
    ScheduleResult s = schedule(g, candidates, chosen);
    if (s.ok && options.memory_budget >= 0) {
      sel.peak_bytes = plan_peak_bytes(g, candidates, s.order);
      if (sel.peak_bytes > options.memory_budget) {
        lowest_over = std::min(lowest_over, sel.peak_bytes);
        if (sel.memory_cuts + 1 >= options.max_memory_cuts || since(t0) >= time_limit_s)
          fail("no plan within the memory budget of {} bytes among the {} cheapest plans ({}; the lowest peak among "
               "them {} bytes)",
               options.memory_budget, sel.memory_cuts + 1,
               sel.memory_cuts + 1 >= options.max_memory_cuts ? "the limit on plans tried"
                                                              : fmt::format("the {} s time limit", time_limit_s),
               lowest_over);
        // No-good cut: this selection, and only it, is excluded.
        std::vector<std::pair<int, double>> terms;
        const std::set<int> in_plan(chosen.begin(), chosen.end());
        for (int var = 0; var < m.blp.num_vars(); ++var)
          if (const int c = m.candidate_of_var[static_cast<size_t>(var)]; c >= 0)
            terms.emplace_back(var, in_plan.count(c) ? 1.0 : -1.0);
        m.blp.add_row(fmt::format("memory_{}", sel.memory_cuts), std::move(terms), -kInf,
                      static_cast<double>(chosen.size()) - 1);
        ++sel.memory_cuts;
        if (!warm.empty() && !m.blp.feasible(warm)) warm.clear();
        continue;
      }
    }
    if (s.ok) {
      sel.solve = std::move(r);
      sel.order = std::move(s.order);
      sel.objective = sel.solve.objective;
      sel.source = "blp";
      return sel;
    }
    say(fmt::format("selection has a dependency cycle among {} kernels: adding cut {}", s.blocked.size(), round + 1));
    add_cycle_cut(g, candidates, std::set<int>(chosen.begin(), chosen.end()), s.blocked, m, round);
    ++sel.cycle_cuts;
  }
}

// "a in 3 regions, b in 1" for the distinct strings of a list (one string when they agree).
std::string tally(const std::vector<std::string>& items) {
  std::map<std::string, int> count;
  for (const std::string& s : items) ++count[s];
  if (count.size() == 1) return count.begin()->first;
  std::vector<std::string> parts;
  for (const auto& [s, k] : count) parts.push_back(fmt::format("{} in {} region{}", s, k, k == 1 ? "" : "s"));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

Selection select_kernels(const Graph& g, const std::vector<KernelCandidate>& candidates,
                         const std::vector<double>& costs, const OrchestrateOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  // Solvers compare objective values with absolute tolerances around 1e-6..1e-9; costs in seconds
  // (microsecond kernels) would fall under them and a worse plan would pass as optimal. Scale so
  // the most expensive kernel costs 1000.
  double max_cost = 0;
  for (double c : costs)
    if (std::isfinite(c)) max_cost = std::max(max_cost, c);
  const double scale = max_cost > 0 ? 1000.0 / max_cost : 1.0;
  std::vector<double> scaled(costs.size());
  for (size_t i = 0; i < costs.size(); ++i) scaled[i] = costs[i] * scale;
  const bool budget = options.memory_budget >= 0;
  // The dominance passes do not hold for memory: a budget keeps every candidate.
  const int64_t dominated =
      budget ? 0 : leave_out_dominated(g, candidates, scaled, options.allow_recompute, options.rewrite_sites);
  OrchestrateOptions whole = options;
  std::string memory_floor;  // under a budget: the least peak any plan can have, for the errors
  if (budget) {
    // A kernel whose own step holds more than the budget is left out; a primitive that only such
    // kernels compute makes every plan peak above it.
    std::vector<int64_t> least(g.nodes.size(), std::numeric_limits<int64_t>::max());
    const std::map<ValueId, ValueId> holders = possible_holders(g);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!usable_candidate(candidates[i], scaled[i], options.allow_recompute)) continue;
      const int64_t b = step_bytes(g, candidates[i], holders);
      for (NodeId n : candidates[i].nodes) least[static_cast<size_t>(n)] = std::min(least[static_cast<size_t>(n)], b);
      if (b > options.memory_budget) scaled[i] = std::numeric_limits<double>::infinity();
    }
    // With rewrite choices, a node a site adds or removes is computed only under some choices:
    // it sets no floor (an added node no kernel can compute only rules its site out).
    if (options.rewrite_sites)
      for (size_t n = 0; n < least.size(); ++n)
        if (options.rewrite_sites->optional(static_cast<NodeId>(n))) least[n] = 0;
    const auto worst = std::max_element(least.begin(), least.end());
    if (worst != least.end()) {
      const Node& n = g.nodes[static_cast<size_t>(worst - least.begin())];
      memory_floor = fmt::format("every plan peaks at {} bytes or more (each kernel that computes {} ({}) holds that "
                                 "much at once)",
                                 *worst, n.name, n.op_type);
      if (*worst > options.memory_budget)
        fail("no plan keeps its intermediates within the memory budget of {} bytes: {}", options.memory_budget,
             memory_floor);
    }
    whole.split_regions = false;  // the arena is the whole plan's
    whole.dp_state_limit = 0;     // the state search knows nothing of memory
  }
  if (options.rewrite_sites) whole.dp_state_limit = 0;  // the state search knows nothing of rewrite sites
  // The state searches see the same candidates.
  std::vector<double> searched(costs);
  for (size_t i = 0; i < costs.size(); ++i)
    if (!std::isfinite(scaled[i])) searched[i] = scaled[i];
  if (!options.dump_blp_path.empty())
    write_lp(options.dump_blp_path,
             build_orchestration_blp(g, candidates, scaled, options.allow_recompute, options.rewrite_sites).blp);

  const std::vector<bool> usable = usable_candidates(candidates, scaled, options.allow_recompute);
  std::vector<SelectionRegion> regions;
  if (whole.split_regions) regions = split_into_regions(g, candidates, usable, options.rewrite_sites);
  if (regions.size() <= 1) {
    Selection sel;
    try {
      sel = select_in_region(g, candidates, searched, scaled, scale, whole, options.time_limit_s, options.rel_gap, 0,
                             say);
    } catch (const Error& e) {
      if (memory_floor.empty()) throw;
      throw Error(e.code(), fmt::format("{}; {}", e.what(), memory_floor));  // how far down plans can go
    }
    sel.dominated = dominated;
    return sel;
  }
  size_t largest = 0;
  for (size_t r = 0; r < regions.size(); ++r)
    if (regions[r].candidates.size() > regions[largest].candidates.size()) largest = r;
  say(fmt::format("{} independent regions (no candidate crosses between them); the largest has {} primitives and {} "
                  "candidates",
                  regions.size(), regions[largest].nodes.size(), regions[largest].candidates.size()));

  // Smallest first, so that the time limit is left to the regions that need it.
  std::vector<size_t> by_size(regions.size());
  std::iota(by_size.begin(), by_size.end(), size_t{0});
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    return regions[a].candidates.size() < regions[b].candidates.size();
  });
  // The relative gap is the whole program's: a region of kGapRegion candidates or more may stop
  // at rel_gap of its own objective, and one of kBigRegion or more also at an absolute gap of what
  // the regions solved before it leave unused (rel_gap times their objectives, less their gaps; CBC
  // stops at the larger), so the sum of the regions' gaps stays within rel_gap of the sum of their
  // objectives. Smaller regions are solved to their optimum (milliseconds each; allowed their own
  // gap, one could stop at its warm start). Only the big regions get the slack: were the others
  // given it, they would spend what the hard regions need (YOLOv4: 146 small regions stopped at
  // root nodes 3-9% from their bounds, leaving the detection head none, and it ran to the time
  // limit). Without their own gap, a region of YOLOv4 (806 candidates, 858 columns) whose root
  // bound was 0.36% below its optimum branched for 6.4 s of a warm compile.
  double solved_objective = 0, gap_used = 0;
  std::vector<Selection> parts(regions.size());
  for (size_t r : by_size) {
    const SelectionRegion& reg = regions[r];
    std::vector<double> c, s;
    for (int i : reg.candidates) {
      c.push_back(searched[static_cast<size_t>(i)]);
      s.push_back(scaled[static_cast<size_t>(i)]);
    }
    // Only the regions big enough to take a while report their phases.
    const bool big = reg.candidates.size() >= kBigRegion;
    auto region_say = [&](const std::string& line) {
      if (big) say(fmt::format("region {}/{} ({} primitives): {}", r + 1, regions.size(), reg.nodes.size(), line));
    };
    OrchestrateOptions in_region = whole;
    if (options.rewrite_sites) in_region.rewrite_sites = &reg.sites;
    if (!options.dump_blp_path.empty() && big) {  // as their solver sees them (for solver experiments)
      write_lp(fmt::format("{}.region{}.lp", options.dump_blp_path, r + 1),
               build_orchestration_blp(reg.graph, reg.local_candidates, s, options.allow_recompute,
                                       in_region.rewrite_sites)
                   .blp);
      write_candidate_names(fmt::format("{}.region{}.candidates.txt", options.dump_blp_path, r + 1), reg.graph,
                            reg.local_candidates, s);
    }
    const double slack = std::max(0.0, options.rel_gap * solved_objective - gap_used) * scale;
    parts[r] = select_in_region(reg.graph, reg.local_candidates, c, s, scale, in_region,
                                std::max(1.0, options.time_limit_s - since(t0)),
                                reg.candidates.size() >= kGapRegion ? options.rel_gap : 0, big ? slack : 0, region_say);
    solved_objective += parts[r].objective;
    if (parts[r].source == "blp") gap_used += std::max(0.0, parts[r].objective - parts[r].solve.bound);
    else gap_used += parts[r].objective;  // no bound from the solver: count the whole objective
  }

  // The whole selection: the regions' plans in region order, and their statistics summed.
  Selection sel;
  sel.dominated = dominated;
  sel.regions = static_cast<int>(regions.size());
  sel.dp.completed = sel.dp.feasible = true;
  sel.solve.status = SolveStatus::kOptimal;
  std::vector<std::string> sources, warm_starts, solvers;
  for (size_t r = 0; r < regions.size(); ++r) {
    const Selection& p = parts[r];
    for (int k : p.order) sel.order.push_back(regions[r].candidates[static_cast<size_t>(k)]);
    for (int k : p.dp.chosen) sel.dp.chosen.push_back(regions[r].candidates[static_cast<size_t>(k)]);
    sel.objective += p.objective;
    sel.dp.completed = sel.dp.completed && p.dp.completed;
    sel.dp.feasible = sel.dp.feasible && p.dp.feasible;
    sel.dp.cost += p.dp.cost;
    sel.dp.states += p.dp.states;
    sel.dp.seconds += p.dp.seconds;
    if (p.source != "blp" || p.solve.status != SolveStatus::kOptimal) sel.solve.status = SolveStatus::kFeasible;
    sel.solve.bound += p.source == "blp" ? p.solve.bound : 0;
    sel.solve.seconds += p.solve.seconds;
    for (const std::string& line : p.solve.log) sel.solve.log.push_back(fmt::format("region {}: {}", r + 1, line));
    sel.cycle_cuts += p.cycle_cuts;
    sel.variables += p.variables;
    sel.rows += p.rows;
    sources.push_back(p.source);
    warm_starts.push_back(p.warm_start);
    solvers.push_back(p.solve.solver);
  }
  sel.solve.objective = sel.objective;
  sel.solve.gap = std::max(0.0, (sel.objective - sel.solve.bound) / std::max(std::abs(sel.objective), 1e-12));
  sel.source = tally(sources);
  sel.warm_start = tally(warm_starts);
  sel.solve.solver = tally(solvers);
  return sel;
}

OrchestrateResult orchestrate(const Graph& g, CostProvider& provider, const OrchestrateOptions& options) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  OrchestrateResult out;
  auto t0 = std::chrono::steady_clock::now();
  out.candidates = enumerate_candidates(g, options.candidates);
  out.enumerate_s = since(t0);
  const CandidateSet& cs = out.candidates;
  say(fmt::format("{} primitives: {} candidate kernels from {} convex subgraphs{} ({:.2f} s)", g.nodes.size(),
                  cs.candidates.size(), cs.connected_sets,
                  cs.scalar_primitives ? fmt::format("; {} scalar primitives fuse only within their own group "
                                                     "({} groups offered whole)",
                                                     cs.scalar_primitives, cs.scalar_groups)
                                       : "",
                  out.enumerate_s));
  return select_with_costs(g, std::move(out), provider, options, true);
}

OrchestrateResult reorchestrate(const Graph& g, OrchestrateResult previous, CostProvider& provider,
                                const OrchestrateOptions& options) {
  OrchestrateResult out;
  out.candidates = std::move(previous.candidates);
  out.rewrites = std::move(previous.rewrites);
  out.enumerate_s = 0;
  return select_with_costs(g, std::move(out), provider, options, false);
}

OrchestrateResult select_with_costs(const Graph& g, OrchestrateResult out, CostProvider& provider,
                                    const OrchestrateOptions& options, bool prepare) {
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  auto t0 = std::chrono::steady_clock::now();
  out.costs = fill_cost_table(g, out.candidates.candidates, provider, prepare);
  out.cost_s = since(t0);
  std::vector<double> seconds;
  std::vector<std::string> notes;
  for (size_t i = 0; i < out.costs.costs.size(); ++i) {
    const KernelCost& k = out.costs.costs[i];
    seconds.push_back(k.seconds);
    notes.push_back(k.reason);
    if (!k.feasible()) {
      ++out.infeasible;
      ++out.infeasible_reasons[k.reason];
    } else if (out.candidates.candidates[i].nodes.size() == 1 && !out.candidates.candidates[i].minimal_outputs) {
      out.unfused_seconds += k.seconds;
    }
  }
  say(fmt::format("costs from {}: {} candidates, {} cannot be emitted ({:.2f} s)", provider.name(),
                  seconds.size(), out.infeasible, out.cost_s));
  out.greedy = greedy_fusion_cost(g, out.candidates.candidates, seconds);

  t0 = std::chrono::steady_clock::now();
  out.selection = select_kernels(g, out.candidates.candidates, seconds, options);
  out.select_s = since(t0);
  out.plan = make_plan(g, out.candidates.candidates, out.selection.order, seconds, notes);
  verify_plan(g, out.plan);
  return out;
}

}  // namespace korch
