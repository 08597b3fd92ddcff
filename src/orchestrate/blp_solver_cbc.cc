// CBC adapter (COIN-OR CBC 2.10 C++ API) and write_mps (CoinUtils' MPS writer).
//
// We drive CBC through CbcMain0/CbcMain1, the same code path as the `cbc` binary, rather than a
// bare CbcModel::branchAndBound: that path adds CBC's tuned standard setup (integer preprocessing,
// probing/Gomory/knapsack/clique/flow/MIR/two-mir cuts, feasibility pump, RINS, diving...) which a
// bare branchAndBound lacks, and which is what makes orchestration BLPs solve at the root node.
// The parameter block (CbcSolverUsefulData) is per call, so no CBC state leaks between solves.
#include <cstdlib>
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinError.hpp>
#include <CoinMpsIO.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "orchestrate/blp_solver_internal.h"
#include "support/error.h"

namespace korch {
namespace blp_internal {
namespace {

double coin_bound(double v) {
  if (v <= -kInfinity) return -COIN_DBL_MAX;
  if (v >= kInfinity) return COIN_DBL_MAX;
  return v;
}

// Row-ordered constraint matrix (zero coefficients dropped) plus row bounds. Built from CSR
// arrays in one go: appending rows one at a time regrows the matrix and is quadratic.
struct CoinRows {
  CoinPackedMatrix matrix;
  std::vector<double> lo, hi;
};

CoinRows coin_rows(const Blp& blp) {
  CoinRows r;
  std::vector<int> idx, len;
  std::vector<double> val;
  std::vector<CoinBigIndex> start;
  for (const BlpRow& row : blp.rows) {
    start.push_back(static_cast<CoinBigIndex>(idx.size()));
    for (const auto& [j, a] : row.terms)
      if (a != 0) {
        idx.push_back(j);
        val.push_back(a);
      }
    len.push_back(static_cast<int>(idx.size() - static_cast<size_t>(start.back())));
    r.lo.push_back(coin_bound(row.lo));
    r.hi.push_back(coin_bound(row.hi));
  }
  start.push_back(static_cast<CoinBigIndex>(idx.size()));
  r.matrix = CoinPackedMatrix(false, blp.num_vars(), static_cast<int>(blp.rows.size()),
                              static_cast<CoinBigIndex>(idx.size()), val.data(), idx.data(), start.data(),
                              len.data());
  return r;
}

int no_callback(CbcModel*, int) { return 0; }

Attempt run_cbc(const Blp& blp, const AttemptOptions& o) {
  const int n = blp.num_vars();
  const int log_level = o.verbose ? 1 : 0;
  CoinRows rows = coin_rows(blp);
  OsiClpSolverInterface lp;
  lp.messageHandler()->setLogLevel(log_level);
  lp.getModelPtr()->messageHandler()->setLogLevel(log_level);
  std::vector<double> col_lo(static_cast<size_t>(n), 0.0), col_hi(static_cast<size_t>(n), 1.0);
  lp.loadProblem(rows.matrix, col_lo.data(), col_hi.data(), blp.objective.data(), rows.lo.data(),
                 rows.hi.data());
  for (int j = 0; j < n; ++j) lp.setInteger(j);

  CbcModel model(lp);  // clones lp
  model.setLogLevel(log_level);
  model.messageHandler()->setLogLevel(log_level);
  model.solver()->messageHandler()->setLogLevel(log_level);
  CbcSolverUsefulData data;
  data.noPrinting_ = !o.verbose;
  data.useSignalHandler_ = false;  // leave SIGINT to the host program
  CbcMain0(model, data);
  if (o.warm_start != nullptr) {
    // The driver checked feasibility; CbcMain1 maps it through preprocessing and uses its
    // objective as the initial cutoff.
    model.setBestSolution(o.warm_start->data(), n, blp.evaluate(*o.warm_start), false);
  }
  const std::string sec = fmt::format("{}", std::max(o.time_limit_s, 0.01));
  const std::string ratio = fmt::format("{}", std::max(o.rel_gap, 0.0));
  const std::string allowable = fmt::format("{}", std::max(o.abs_gap, 0.0));
  std::vector<const char*> argv = {"korch", "-log", o.verbose ? "1" : "0", "-slog",
                                   o.verbose ? "1" : "0", "-timeMode", "elapsed", "-sec",
                                   sec.c_str(), "-ratio", ratio.c_str()};
  if (o.abs_gap > 0) {
    argv.push_back("-allowableGap");
    argv.push_back(allowable.c_str());
  }
  // CBC 2.10.8 segfaults in CglPreProcess::postProcess when the time limit stops it before the
  // preprocessed model is solved (seen on YOLOv4: 35k columns, 45 s limit) — a crash no catch can
  // turn into an error. Without preprocessing the same instances solve in comparable time
  // (segformer 6.2 -> 9.5 s, yolox 6.1 -> 1.6 s, swin_t 5.7 -> 7.6 s).
  argv.push_back("-preprocess");
  argv.push_back("off");
  // Orchestration LPs are highly degenerate (many candidates tie: launch-bound kernels with equal
  // bytes). Clp's cost perturbation makes the LP solves several times faster (segformer_b0 11.3 ->
  // 1.0 s, swin_t 8.0 -> 3.4 s, yolox_nano 1.6 -> 0.3 s). The feasibility pump is off: on YOLOv4
  // its LP re-solves ignored the time limit for minutes, and the dive heuristics find the
  // incumbents here anyway.
  for (const char* a : {"-perturb", "on", "-feas", "off"}) argv.push_back(a);
  // On large programs two cut generators cost the most and gave nothing: on YOLOv4's detection
  // head (47k columns, analytic costs) probing ran 3.9 s and zero-half 11.5 s for 14 cuts that
  // took the root bound from 384.8 to 2.6e10 (numerically invalid; the solution CBC then
  // returned violated the BLP). With both off, the same attempt returns a valid plan.
  if (blp.num_vars() >= kLargeProgramVariables)
    for (const char* a : {"-probingCuts", "off", "-zeroHalfCuts", "off"}) argv.push_back(a);
  if (o.force_dual) argv.push_back("-dualS");  // initial LP by dual simplex: no automatic dualize
  // Experiment hook: extra CBC arguments, space-separated (e.g. "-preprocess off").
  std::vector<std::string> extra;
  if (const char* e = std::getenv("KORCH_CBC_ARGS")) {
    std::string s(e), w;
    for (char ch : s + " ") {
      if (ch == ' ') { if (!w.empty()) extra.push_back(w); w.clear(); } else w += ch;
    }
  }
  for (const std::string& a : extra) argv.push_back(a.c_str());
  argv.push_back("-solve");
  argv.push_back("-quit");
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, no_callback, data);

  Attempt a;
  const int status = model.status(), secondary = model.secondaryStatus();
  a.detail = fmt::format("status {} secondary {}, {} nodes", status, secondary, model.getNodeCount());
  const double* best = model.bestSolution();
  if (best != nullptr && model.getMinimizationObjValue() < 1e50) a.x.assign(best, best + n);
  a.stopped_by_limit = status == 1;
  const double bound = model.getBestPossibleObjValue();
  if (std::isfinite(bound) && std::fabs(bound) < 1e50) {
    a.has_bound = true;
    a.bound = bound;
  }
  if (!a.x.empty())
    a.status = model.isProvenOptimal() ? SolveStatus::kOptimal : SolveStatus::kFeasible;
  else if (model.isProvenInfeasible())
    a.status = SolveStatus::kInfeasible;
  else
    a.status = SolveStatus::kNoSolution;
  return a;
}

}  // namespace

Attempt solve_with_cbc(const Blp& blp, const AttemptOptions& options) {
  try {
    return run_cbc(blp, options);
  } catch (const CoinError& e) {
    Attempt a;
    a.error = fmt::format("CoinError in {}::{}: {}", e.className(), e.methodName(), e.message());
    return a;
  } catch (const std::exception& e) {
    Attempt a;
    a.error = fmt::format("exception: {}", e.what());
    return a;
  }
}

}  // namespace blp_internal

void write_mps(const Blp& blp, const std::string& path) {
  const int n = blp.num_vars();
  blp_internal::CoinRows rows = blp_internal::coin_rows(blp);
  std::vector<double> col_lo(static_cast<size_t>(n), 0.0), col_hi(static_cast<size_t>(n), 1.0);
  std::vector<char> integer(static_cast<size_t>(n), 1);
  std::vector<std::string> row_names;
  for (const BlpRow& r : blp.rows) row_names.push_back(r.name);
  CoinMpsIO mps;
  mps.messageHandler()->setLogLevel(0);
  mps.setMpsData(rows.matrix, COIN_DBL_MAX, col_lo.data(), col_hi.data(), blp.objective.data(),
                 integer.data(), rows.lo.data(), rows.hi.data(), blp.var_names, row_names);
  // CoinFileOutput throws CoinError when the file cannot be opened; a failed write shows up as a
  // nonzero return or as a missing file.
  int rc = 0;
  try {
    rc = mps.writeMps(path.c_str(), /*compression=*/0, /*formatType=*/1 /* free, full precision */);
  } catch (const CoinError& e) {
    fail_io("cannot write MPS file '{}': {}", path, e.message());
  }
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (rc != 0 || f == nullptr) fail_io("cannot write MPS file '{}' (writer returned {})", path, rc);
  std::fclose(f);
}

}  // namespace korch
