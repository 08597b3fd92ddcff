// The binary linear program as plain data, before any solver sees it.
//
// Kernel orchestration is posed as: minimise sum(c_j x_j) over binary x, subject to rows
// lo <= sum(a_ij x_j) <= hi. The model is built by orchestrate.cc, printed by to_lp_text() (CPLEX LP
// format, readable by CBC, GLPK, HiGHS, Gurobi...) or write_mps(), and solved by a thin adapter in
// blp_solver.h. Keeping it data means a test can hand-build one, and a person can read the exact
// program that was solved (`korch compile --dump-blp FILE.lp`).
#pragma once

#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace korch {

struct BlpRow {
  std::string name;                          // LP-format identifier: [A-Za-z_][A-Za-z0-9_.]*
  std::vector<std::pair<int, double>> terms;  // (variable index, coefficient); indices distinct
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
};

struct Blp {
  std::vector<std::string> var_names;  // LP-format identifiers, one per binary variable
  std::vector<double> objective;       // minimised; same length as var_names
  std::vector<BlpRow> rows;

  int add_var(std::string name, double cost);
  // Adds lo <= sum(terms) <= hi and returns its index.
  int add_row(std::string name, std::vector<std::pair<int, double>> terms, double lo, double hi);
  int num_vars() const { return static_cast<int>(objective.size()); }
  // Objective of an assignment; and whether it satisfies every row (tolerance 1e-6).
  double evaluate(const std::vector<double>& x) const;
  bool feasible(const std::vector<double>& x) const;
  // sum(terms) of row i at x; the index of the first row whose bounds x breaks (1e-6 tolerance), or -1.
  double row_sum(size_t i, const std::vector<double>& x) const;
  int violated_row(const std::vector<double>& x) const;
};

// CPLEX LP text: "Minimize", "Subject To" (a ranged row becomes two rows), "Binary", "End".
std::string to_lp_text(const Blp& blp);
// Free MPS via CoinUtils' writer; throws korch::Error (kIo) when the file cannot be written.
void write_mps(const Blp& blp, const std::string& path);

}  // namespace korch
