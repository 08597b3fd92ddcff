// Shared between blp_solver.cc (the driver: validation, fallback order, verification) and the two
// solver adapters. Not part of the public interface.
#pragma once

#include <string>
#include <vector>

#include "orchestrate/blp.h"
#include "orchestrate/blp_solver.h"

namespace korch::blp_internal {

// Bounds at or beyond this magnitude mean "no bound" (Clp treats >= 1e30 as infinite too, and
// callers write 1e300 for it).
inline constexpr double kInfinity = 1e30;

// Programs from this many variables on are "large" for CBC (blp_solver.cc, blp_solver_cbc.cc): its
// first attempt solves LPs by the dual simplex, and the probing and zero-half cut generators stay off.
inline constexpr int kLargeProgramVariables = 10000;

struct AttemptOptions {
  double time_limit_s = 30;
  double rel_gap = 0;
  double abs_gap = 0;
  const std::vector<double>* warm_start = nullptr;  // verified feasible by the driver, or null
  bool verbose = false;
  bool force_dual = false;  // CBC only: dual simplex for every LP (works around Clp's dualize bug)
};

// What one solver run produced, before the driver rounds and verifies it.
struct Attempt {
  std::string error;          // non-empty: the solver failed (exception, bad return code)
  SolveStatus status = SolveStatus::kNoSolution;
  std::vector<double> x;      // raw column values; empty without a solution
  bool has_bound = false;
  double bound = 0;           // best proven lower bound when has_bound
  bool stopped_by_limit = false;  // ran out of time (so "no solution" is an answer, not a failure)
  std::string detail;         // solver-specific status words for the log
};

Attempt solve_with_cbc(const Blp& blp, const AttemptOptions& options);
Attempt solve_with_glpk(const Blp& blp, const AttemptOptions& options);

}  // namespace korch::blp_internal
