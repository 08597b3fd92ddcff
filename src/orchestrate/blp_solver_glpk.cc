// GLPK adapter (glp_intopt with its MIP presolver), the fallback when CBC fails.
//
// GLPK reports misuse by printing and calling abort(). The driver validates the BLP first
// (indices in range and distinct, bounds ordered, numbers finite), and every GLPK call here runs
// under glp_error_hook, which longjmps back so that an unexpected GLPK error becomes a failed
// attempt instead of killing the process. The guarded region is plain C-style code: no C++ object
// with a destructor lives across the setjmp, so the longjmp skips nothing that needs cleaning up.
#include <glpk.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <csetjmp>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "orchestrate/blp_solver_internal.h"

namespace korch::blp_internal {
namespace {

// The problem in GLPK's 1-based arrays, built before entering the guarded region.
struct GlpkInput {
  int n = 0, m = 0;
  std::vector<double> cost;                 // [1..n]
  std::vector<int> row_type;                // [1..m] GLP_FR/LO/UP/DB/FX
  std::vector<double> row_lo, row_hi;       // [1..m]
  std::vector<int> row_start;               // [1..m+1] into idx/val; idx/val 1-based per row
  std::vector<int> idx;                     // idx[row_start[i]-1 .. ] with a dummy slot before
  std::vector<double> val;
  glp_iocp parm;
};

struct GlpkOutput {
  int ret = 0;            // glp_intopt return code
  int mip_status = 0;     // glp_mip_status
  int crashed = 0;        // GLPK called its error hook
  int has_bound = 0;
  double bound = 0;       // best node bound seen by the callback
  double* x = nullptr;    // [0..n-1], caller-owned
};

std::jmp_buf g_glpk_jump;  // thread safety is not required (blp_solver.h)

void on_glpk_error(void*) { std::longjmp(g_glpk_jump, 1); }

// Records the best local bound of the active tree; after glp_intopt the tree is gone.
void on_glpk_tree(glp_tree* tree, void* info) {
  auto* out = static_cast<GlpkOutput*>(info);
  const int best = glp_ios_best_node(tree);
  if (best != 0) {
    out->has_bound = 1;
    out->bound = glp_ios_node_bound(tree, best);
  }
}

// Everything GLPK does, under the error hook. Returns normally in both cases; `out->crashed`
// says whether GLPK failed (its environment is then freed, taking the problem object with it).
void run_guarded(const GlpkInput* in, GlpkOutput* out) {
  glp_prob* volatile lp = nullptr;
  glp_error_hook(on_glpk_error, nullptr);
  if (setjmp(g_glpk_jump) != 0) {
    glp_error_hook(nullptr, nullptr);
    out->crashed = 1;
    glp_free_env();  // GLPK's documented recovery after its error hook; frees `lp` too
    return;
  }
  lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  if (in->n > 0) glp_add_cols(lp, in->n);
  if (in->m > 0) glp_add_rows(lp, in->m);
  for (int j = 1; j <= in->n; ++j) {
    glp_set_col_kind(lp, j, GLP_BV);
    glp_set_obj_coef(lp, j, in->cost[static_cast<size_t>(j)]);
  }
  for (int i = 1; i <= in->m; ++i) {
    const size_t k = static_cast<size_t>(i);
    glp_set_row_bnds(lp, i, in->row_type[k], in->row_lo[k], in->row_hi[k]);
    const int start = in->row_start[k], len = in->row_start[k + 1] - start;
    // glp_set_mat_row reads ind[1..len]: pass pointers one slot before the row's first entry.
    if (len > 0) glp_set_mat_row(lp, i, len, in->idx.data() + start - 1, in->val.data() + start - 1);
  }
  glp_iocp parm = in->parm;
  parm.cb_func = on_glpk_tree;
  parm.cb_info = out;
  out->ret = glp_intopt(lp, &parm);
  out->mip_status = glp_mip_status(lp);
  if (out->mip_status == GLP_OPT || out->mip_status == GLP_FEAS)
    for (int j = 1; j <= in->n; ++j) out->x[j - 1] = glp_mip_col_val(lp, j);
  glp_delete_prob(lp);
  glp_error_hook(nullptr, nullptr);
}

GlpkInput glpk_input(const Blp& blp, const AttemptOptions& o) {
  GlpkInput in;
  in.n = blp.num_vars();
  in.m = static_cast<int>(blp.rows.size());
  in.cost.assign(1, 0.0);
  in.cost.insert(in.cost.end(), blp.objective.begin(), blp.objective.end());
  in.row_type.assign(1, 0);
  in.row_lo.assign(1, 0.0);
  in.row_hi.assign(1, 0.0);
  in.row_start.assign(1, 0);
  in.idx.assign(1, 0);  // dummy slot so that the first row's "one before" pointer is valid
  in.val.assign(1, 0.0);
  for (const BlpRow& r : blp.rows) {
    const bool has_lo = r.lo > -kInfinity, has_hi = r.hi < kInfinity;
    int type = GLP_FR;
    if (has_lo && has_hi) type = r.lo == r.hi ? GLP_FX : GLP_DB;
    else if (has_lo) type = GLP_LO;
    else if (has_hi) type = GLP_UP;
    in.row_type.push_back(type);
    in.row_lo.push_back(has_lo ? r.lo : 0.0);
    in.row_hi.push_back(has_hi ? r.hi : 0.0);
    in.row_start.push_back(static_cast<int>(in.idx.size()));
    for (const auto& [j, a] : r.terms)
      if (a != 0) {  // GLPK rejects explicit zeros
        in.idx.push_back(j + 1);
        in.val.push_back(a);
      }
  }
  in.row_start.push_back(static_cast<int>(in.idx.size()));

  glp_init_iocp(&in.parm);
  in.parm.msg_lev = o.verbose ? GLP_MSG_ON : GLP_MSG_OFF;
  in.parm.presolve = GLP_ON;
  const double ms = std::max(o.time_limit_s, 0.001) * 1000.0;
  in.parm.tm_lim = ms >= static_cast<double>(INT_MAX) ? INT_MAX : static_cast<int>(ms);
  in.parm.mip_gap = std::max(o.rel_gap, 0.0);
  // Cheap cuts and the feasibility pump: set cover/implication rows are exactly what cover and
  // clique cuts target, and the pump finds an incumbent early when the time limit is short.
  in.parm.cov_cuts = GLP_ON;
  in.parm.clq_cuts = GLP_ON;
  in.parm.fp_heur = GLP_ON;
  return in;
}

const char* glpk_ret_name(int ret) {
  switch (ret) {
    case 0: return "ok";
    case GLP_EBOUND: return "invalid bounds";
    case GLP_EROOT: return "no optimal LP basis";
    case GLP_ENOPFS: return "no primal feasible solution";
    case GLP_ENODFS: return "no dual feasible solution";
    case GLP_EFAIL: return "solver failure";
    case GLP_EMIPGAP: return "relative gap reached";
    case GLP_ETMLIM: return "time limit";
    case GLP_ESTOP: return "stopped by callback";
    default: return "unknown return code";
  }
}

const char* glpk_status_name(int s) {
  switch (s) {
    case GLP_OPT: return "optimal";
    case GLP_FEAS: return "feasible";
    case GLP_NOFEAS: return "no feasible";
    case GLP_UNDEF: return "undefined";
    default: return "?";
  }
}

}  // namespace

Attempt solve_with_glpk(const Blp& blp, const AttemptOptions& options) {
  Attempt a;
  GlpkInput in = glpk_input(blp, options);
  std::vector<double> x(static_cast<size_t>(in.n), 0.0);
  GlpkOutput out;
  out.x = x.data();
  // msg_lev does not silence everything (the clique-cut builder prints regardless): switch
  // GLPK's terminal output off for the call, then restore whatever the host had.
  const int previous_term = glp_term_out(options.verbose ? GLP_ON : GLP_OFF);
  run_guarded(&in, &out);
  glp_term_out(previous_term);
  if (out.crashed) {
    a.error = "GLPK internal error (see its message on stderr)";
    return a;
  }
  a.detail = fmt::format("glp_intopt: {}, mip status {}", glpk_ret_name(out.ret),
                         glpk_status_name(out.mip_status));
  const bool has_x = out.mip_status == GLP_OPT || out.mip_status == GLP_FEAS;
  if (has_x) a.x = std::move(x);
  a.has_bound = out.has_bound != 0;
  a.bound = out.bound;
  switch (out.ret) {
    case 0:
    case GLP_EMIPGAP:
      if (has_x) {
        a.status = SolveStatus::kOptimal;
      } else if (out.mip_status == GLP_NOFEAS) {
        a.status = SolveStatus::kInfeasible;
      } else {
        a.error = a.detail;
      }
      break;
    case GLP_ENOPFS:  // presolver (or LP relaxation) proved infeasibility
      a.status = SolveStatus::kInfeasible;
      a.x.clear();
      break;
    case GLP_ETMLIM:
      a.stopped_by_limit = true;
      a.status = has_x ? SolveStatus::kFeasible : SolveStatus::kNoSolution;
      break;
    default:
      a.error = a.detail;
      a.x.clear();
  }
  return a;
}

}  // namespace korch::blp_internal
