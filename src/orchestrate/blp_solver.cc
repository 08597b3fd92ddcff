// solve_blp(): validation, the fallback order (CBC, CBC with dual simplex forced, GLPK),
// verification of every returned assignment, and the warm start as a safety net.
#include "orchestrate/blp_solver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "orchestrate/blp_solver_internal.h"
#include "support/error.h"

namespace korch {

const char* solve_status_name(SolveStatus s) {
  switch (s) {
    case SolveStatus::kOptimal: return "optimal";
    case SolveStatus::kFeasible: return "feasible";
    case SolveStatus::kInfeasible: return "infeasible";
    case SolveStatus::kNoSolution: return "no solution";
  }
  return "?";
}

namespace {

using blp_internal::Attempt;
using blp_internal::AttemptOptions;
using Clock = std::chrono::steady_clock;

// Solvers abort (GLPK) or misbehave (CBC) on malformed input, so reject it up front. A NaN or
// infinite cost typically comes from a failed measurement, which is the caller's to fix.
void validate(const Blp& blp, const SolveOptions& o) {
  const int n = blp.num_vars();
  if (blp.var_names.size() != blp.objective.size())
    fail("invalid BLP: {} variable names for {} objective coefficients", blp.var_names.size(), n);
  for (int j = 0; j < n; ++j)
    if (!std::isfinite(blp.objective[static_cast<size_t>(j)]))
      fail("invalid BLP: variable '{}' has cost {}", blp.var_names[static_cast<size_t>(j)],
           blp.objective[static_cast<size_t>(j)]);
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (const BlpRow& r : blp.rows) {
    if (std::isnan(r.lo) || std::isnan(r.hi)) fail("invalid BLP: row '{}' has a NaN bound", r.name);
    for (const auto& [j, a] : r.terms) {
      if (j < 0 || j >= n) fail("invalid BLP: row '{}' uses variable {} of {}", r.name, j, n);
      if (!std::isfinite(a)) fail("invalid BLP: row '{}' has coefficient {}", r.name, a);
      if (seen[static_cast<size_t>(j)])
        fail("invalid BLP: row '{}' lists variable '{}' twice", r.name, blp.var_names[static_cast<size_t>(j)]);
      seen[static_cast<size_t>(j)] = 1;
    }
    for (const auto& [j, a] : r.terms) seen[static_cast<size_t>(j)] = 0;
  }
  if (!(o.time_limit_s > 0)) fail("solver time limit must be positive, got {}", o.time_limit_s);
  if (!(o.rel_gap >= 0)) fail("solver relative gap must be >= 0, got {}", o.rel_gap);
}

// Rows that no solver needs to see to decide: a row whose bounds cross, or an empty row whose
// bounds exclude 0, makes the BLP infeasible. Returns the offending row's name, or "".
std::string trivially_infeasible_row(const Blp& blp) {
  for (const BlpRow& r : blp.rows) {
    if (r.lo > r.hi + 1e-9) return r.name;
    bool empty = true;
    for (const auto& [j, a] : r.terms) empty = empty && a == 0;
    if (empty && (r.lo > 1e-9 || r.hi < -1e-9)) return r.name;
  }
  return "";
}

std::vector<double> rounded(const std::vector<double>& x) {
  std::vector<double> r(x.size());
  for (size_t j = 0; j < x.size(); ++j) r[j] = x[j] > 0.5 ? 1.0 : 0.0;
  return r;
}

// What a solver's raw assignment gets wrong: how many values are fractional, and the first row
// its rounding `x` violates.
std::string violation(const Blp& blp, const std::vector<double>& raw, const std::vector<double>& x) {
  int fractional = 0;
  for (double v : raw) fractional += std::min(std::fabs(v), std::fabs(v - 1)) > 1e-6;
  const int i = blp.violated_row(x);
  if (i < 0) return fmt::format("{} fractional values", fractional);
  const BlpRow& r = blp.rows[static_cast<size_t>(i)];
  return fmt::format("{} fractional values; row '{}' sums to {:g} outside [{:g}, {:g}]", fractional, r.name,
                     blp.row_sum(static_cast<size_t>(i), x), r.lo, r.hi);
}

void set_gap(SolveResult& r) {
  if (r.bound > r.objective) r.bound = r.objective;  // a solver's bound within its tolerance
  r.gap = (r.objective - r.bound) / std::max(std::fabs(r.objective), 1e-12);
  if (r.gap < 1e-9) {
    r.gap = 0;
    r.bound = r.objective;
  }
}

struct Step {
  const char* name;
  bool glpk;
  bool force_dual;
};

}  // namespace

SolveResult solve_blp(const Blp& blp, const SolveOptions& options) {
  validate(blp, options);
  const Clock::time_point start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  SolveResult result;
  auto note = [&](std::string line) {
    if (options.verbose) std::fprintf(stderr, "korch blp: %s\n", line.c_str());
    result.log.push_back(std::move(line));
  };

  if (const std::string row = trivially_infeasible_row(blp); !row.empty()) {
    result.status = SolveStatus::kInfeasible;
    result.solver = "trivial";
    note(fmt::format("trivial: row '{}' cannot be satisfied", row));
    result.seconds = elapsed();
    return result;
  }
  if (blp.num_vars() == 0) {  // every row is empty and admits 0 (checked above)
    result.status = SolveStatus::kOptimal;
    result.solver = "trivial";
    note("trivial: no variables, optimal objective 0");
    result.seconds = elapsed();
    return result;
  }

  const std::vector<double>* warm = nullptr;
  if (!options.warm_start.empty()) {
    if (blp.feasible(options.warm_start))
      warm = &options.warm_start;
    else
      note("warm start ignored: not a feasible 0/1 assignment of this BLP");
  }

  std::vector<Step> steps;
  if (options.solver != SolverChoice::kGlpk) {
    // Large programs solved to a gap start with the dual simplex. CBC checks its time limit only
    // between nodes, not inside the root LP, and on YOLOv4's detection head (34k variables,
    // measured costs, 0.5% gap) Clp's default root solve (Idiot crash, then primal) made the
    // whole solve 8-10 s of a warm compile, the dual 3.5-4.2 s: its root LP (1.8 s) meets the gap.
    // Not to gap 0: on the analytic program of the same head (47k variables) the dual attempt went
    // on to branch and twice returned a fractional assignment as finished (checked below; the
    // retry then starts from scratch, 37-52 s in all against 20 s).
    if (blp.num_vars() >= blp_internal::kLargeProgramVariables && (options.rel_gap > 0 || options.abs_gap > 0)) {
      steps.push_back({"cbc-dual", false, true});
      steps.push_back({"cbc-retry", false, false});
    } else {
      steps.push_back({"cbc", false, false});
      steps.push_back({"cbc-dual-retry", false, true});
    }
  }
  if (options.solver != SolverChoice::kCbc) steps.push_back({"glpk", true, false});

  bool decided = false;
  for (size_t s = 0; s < steps.size() && !decided; ++s) {
    const Step& step = steps[s];
    // A fallback gets what is left of the budget, but never less than a sliver: it only runs
    // when the previous solver failed, usually within its first second.
    AttemptOptions ao;
    ao.time_limit_s = std::max(options.time_limit_s - elapsed(), std::min(1.0, options.time_limit_s));
    ao.rel_gap = options.rel_gap;
    ao.abs_gap = options.abs_gap;
    ao.warm_start = warm;
    ao.verbose = options.verbose;
    ao.force_dual = step.force_dual;
    const double t0 = elapsed();
    Attempt a = step.glpk ? blp_internal::solve_with_glpk(blp, ao) : blp_internal::solve_with_cbc(blp, ao);
    const double dt = elapsed() - t0;
    if (!a.error.empty()) {
      note(fmt::format("{}: failed after {:.3f} s: {}", step.name, dt, a.error));
      continue;
    }
    std::vector<double> x = rounded(a.x);
    if (!a.x.empty() && !blp.feasible(x)) {
      note(fmt::format("{}: returned an assignment that violates the BLP ({}: {}); discarded", step.name,
                       violation(blp, a.x, x), a.detail));
      continue;
    }
    if (a.x.empty() && a.status == SolveStatus::kNoSolution && !a.stopped_by_limit) {
      note(fmt::format("{}: stopped without a solution or a proof ({})", step.name, a.detail));
      continue;
    }
    decided = true;
    result.solver = step.name;
    result.status = a.status;
    result.x = std::move(x);
    if (!result.x.empty()) {
      result.objective = blp.evaluate(result.x);
      result.bound = a.has_bound ? a.bound : -std::numeric_limits<double>::infinity();
      if (a.status == SolveStatus::kOptimal && (!a.has_bound || (options.rel_gap == 0 && options.abs_gap == 0)))
        result.bound = result.objective;
      set_gap(result);
    } else if (a.has_bound) {
      result.bound = a.bound;
    }
    note(fmt::format("{}: {} objective {:.9g} bound {:.9g} gap {:.3g} in {:.3f} s ({})", step.name,
                     solve_status_name(result.status), result.objective, result.bound, result.gap, dt,
                     a.detail));
  }
  if (!decided) note("every solver failed");

  // The warm start is a feasible answer we already hold: never return something worse.
  if (warm != nullptr && (result.x.empty() || blp.evaluate(*warm) < result.objective - 1e-9)) {
    if (result.status == SolveStatus::kInfeasible)
      note("solver claimed infeasible, but the warm start is feasible; returning the warm start");
    else
      note("returning the warm start: the solver found nothing better");
    const double bound = result.x.empty() ? -std::numeric_limits<double>::infinity() : result.bound;
    result.x = *warm;
    result.objective = blp.evaluate(*warm);
    result.bound = bound;
    result.status = SolveStatus::kFeasible;
    if (result.solver.empty()) result.solver = "warm-start";
    set_gap(result);
  }
  result.seconds = elapsed();
  return result;
}

}  // namespace korch
