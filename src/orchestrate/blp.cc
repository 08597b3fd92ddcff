#include "orchestrate/blp.h"

#include <cmath>

#include <fmt/format.h>

#include "support/error.h"

namespace korch {

int Blp::add_var(std::string name, double cost) {
  var_names.push_back(std::move(name));
  objective.push_back(cost);
  return num_vars() - 1;
}

int Blp::add_row(std::string name, std::vector<std::pair<int, double>> terms, double lo, double hi) {
  for (const auto& [j, a] : terms) KORCH_CHECK(j >= 0 && j < num_vars());
  rows.push_back({std::move(name), std::move(terms), lo, hi});
  return static_cast<int>(rows.size()) - 1;
}

double Blp::evaluate(const std::vector<double>& x) const {
  KORCH_CHECK(x.size() == objective.size());
  double s = 0;
  for (size_t j = 0; j < x.size(); ++j) s += objective[j] * x[j];
  return s;
}

bool Blp::feasible(const std::vector<double>& x) const {
  if (x.size() != objective.size()) return false;
  for (double v : x)
    if (std::fabs(v) > 1e-6 && std::fabs(v - 1) > 1e-6) return false;
  return violated_row(x) < 0;
}

double Blp::row_sum(size_t i, const std::vector<double>& x) const {
  double s = 0;
  for (const auto& [j, a] : rows[i].terms) s += a * x[static_cast<size_t>(j)];
  return s;
}

int Blp::violated_row(const std::vector<double>& x) const {
  for (size_t i = 0; i < rows.size(); ++i) {
    const double s = row_sum(i, x);
    if (s < rows[i].lo - 1e-6 || s > rows[i].hi + 1e-6) return static_cast<int>(i);
  }
  return -1;
}

namespace {

void append_terms(std::string& out, const std::vector<std::pair<int, double>>& terms,
                  const std::vector<std::string>& names) {
  int on_line = 0;
  for (const auto& [j, a] : terms) {
    if (on_line++ == 8) {  // LP readers cap line length; wrap long rows
      out += "\n   ";
      on_line = 1;
    }
    out += fmt::format(" {} {:.17g} {}", a < 0 ? '-' : '+', std::fabs(a), names[static_cast<size_t>(j)]);
  }
  if (terms.empty()) out += " 0 " + (names.empty() ? std::string("x") : names[0]);
}

}  // namespace

std::string to_lp_text(const Blp& blp) {
  std::string out = "\\ Korch kernel orchestration BLP\nMinimize\n obj:";
  std::vector<std::pair<int, double>> obj;
  for (int j = 0; j < blp.num_vars(); ++j) obj.emplace_back(j, blp.objective[static_cast<size_t>(j)]);
  append_terms(out, obj, blp.var_names);
  out += "\nSubject To\n";
  for (const BlpRow& r : blp.rows) {
    const bool has_lo = std::isfinite(r.lo), has_hi = std::isfinite(r.hi);
    if (has_lo && has_hi && r.lo == r.hi) {
      out += " " + r.name + ":";
      append_terms(out, r.terms, blp.var_names);
      out += fmt::format(" = {:.17g}\n", r.lo);
      continue;
    }
    if (has_lo) {
      out += " " + r.name + (has_hi ? "_lo:" : ":");
      append_terms(out, r.terms, blp.var_names);
      out += fmt::format(" >= {:.17g}\n", r.lo);
    }
    if (has_hi) {
      out += " " + r.name + (has_lo ? "_hi:" : ":");
      append_terms(out, r.terms, blp.var_names);
      out += fmt::format(" <= {:.17g}\n", r.hi);
    }
  }
  out += "Binary\n";
  for (const std::string& n : blp.var_names) out += " " + n + "\n";
  out += "End\n";
  return out;
}

}  // namespace korch
