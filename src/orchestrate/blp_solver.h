// Solver adapters for Blp: COIN-OR CBC through its C++ API, GLPK (glp_intopt) as the fallback.
//
// solve_blp() tries CBC first. Clp 1.17 can throw CoinError from its initial solve on some
// instances (see shared/environment-notes.md): the adapter catches it, retries once with the
// dual simplex forced, and if CBC still fails, solves with GLPK. Every attempt is recorded in
// SolveResult::log so the plan can say which solver produced it and why.
#pragma once

#include <string>
#include <vector>

#include "orchestrate/blp.h"

namespace korch {

enum class SolveStatus {
  kOptimal,     // proven optimal within rel_gap
  kFeasible,    // stopped at the time limit with an incumbent; `gap` says how far from proven
  kInfeasible,  // proven infeasible
  kNoSolution,  // stopped (time limit / error) without any feasible assignment
};
const char* solve_status_name(SolveStatus s);

enum class SolverChoice { kAuto, kCbc, kGlpk };

struct SolveOptions {
  double time_limit_s = 30;
  double rel_gap = 0;                 // stop when (objective - bound) / |objective| <= rel_gap
  double abs_gap = 0;                 // or when objective - bound <= abs_gap (CBC only; GLPK ignores it)
  std::vector<double> warm_start;     // a feasible 0/1 assignment, or empty
  SolverChoice solver = SolverChoice::kAuto;
  bool verbose = false;               // solver log to stderr
};

struct SolveResult {
  SolveStatus status = SolveStatus::kNoSolution;
  std::vector<double> x;              // rounded to exactly 0.0 / 1.0; empty without a solution
  double objective = 0;               // of x
  double bound = 0;                   // best proven lower bound
  double gap = 0;                     // (objective - bound) / max(|objective|, 1e-12); 0 if optimal
  double seconds = 0;                 // wall time over all attempts
  std::string solver;                 // "cbc", "cbc-dual-retry", "cbc-dual", "cbc-retry", "glpk"
  std::vector<std::string> log;       // one line per attempt (what failed and why)
};

SolveResult solve_blp(const Blp& blp, const SolveOptions& options);

}  // namespace korch
