#include "cpu_flags.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "pipeline/pipeline.h"
#include "support/error.h"

namespace korch::cli {

void OrchestrateFlags::add_to(CLI::App& app) {
  app.add_option("--max-kernel-size", max_prims, "Most primitives in one candidate kernel")->check(CLI::Range(1, 64));
  app.add_option("--max-linear", max_linear, "Most linear primitives in one candidate kernel")->check(CLI::Range(0, 8));
  app.add_option("--max-fanout", max_fanout, "Most consumers of one primitive inside one candidate kernel")
      ->check(CLI::Range(1, 64));
  app.add_flag("--no-recompute", no_recompute, "Disjoint kernels only (each primitive computed once)");
  app.add_option("--time-limit", time_limit, "Solver time limit in seconds (the best plan and its gap are kept)")
      ->check(CLI::PositiveNumber);
  app.add_option("--gap", gap,
                 "Relative optimality gap at which the solver may stop (0 = proven optimal; default 0 with "
                 "analytic costs, 0.005 with measured ones, which are noisier than that)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--solver", solver, "BLP solver")->check(CLI::IsMember({"auto", "cbc", "glpk"}));
  app.add_option("--state-limit", state_limit, "Most execution states for the no-recompute search (0 = skip)");
  app.add_option("--dump-blp", dump_blp,
                 "Also write the binary linear program as solved (costs scaled so the dearest kernel is 1000) as LP text");
  app.add_flag("--verbose-solver", verbose_solver, "Show the solver's log");
}

OrchestrateOptions OrchestrateFlags::options() const {
  OrchestrateOptions opt;
  opt.candidates.max_primitives = max_prims;
  opt.candidates.max_linear = max_linear;
  opt.candidates.max_fanout = max_fanout;
  opt.candidates.offer_minimal_outputs = !no_recompute;
  opt.allow_recompute = !no_recompute;
  opt.time_limit_s = time_limit;
  opt.rel_gap = std::max(gap, 0.0);
  opt.dp_state_limit = state_limit;
  opt.solver = solver == "cbc" ? SolverChoice::kCbc : solver == "glpk" ? SolverChoice::kGlpk : SolverChoice::kAuto;
  opt.verbose = verbose_solver;
  opt.dump_blp_path = dump_blp;
  return opt;
}

void CpuFlags::add_to(CLI::App& app, bool with_orchestrate) {
  app.add_option("--cost", cost,
                 "Cost source: measured (generate, check and time every candidate kernel on this machine; "
                 "results kept in the tuning database) or analytic (a roofline over the device spec)")
      ->check(CLI::IsMember({"analytic", "measured"}));
  app.add_option("--tuning-db", tuning_db, "Tuning database (default $KORCH_CACHE_DIR/tuning.db or ~/.cache/korch/tuning.db)");
  app.add_option("--threads", threads, "CPU threads for kernels and measurement")->check(CLI::Range(1, 256));
  app.add_flag("--no-prune", no_prune, "Measure every candidate (no analytic pre-pruning)");
  if (with_orchestrate) orchestrate.add_to(app);
}

CpuCompileOptions CpuFlags::options(const std::function<void(const std::string&)>& say) const {
  CpuCompileOptions o;
  o.orchestrate = orchestrate.options();
  o.orchestrate.progress = say;
  o.cost = cost == "analytic" ? CostSource::kAnalytic : CostSource::kMeasured;
  if (orchestrate.gap < 0) o.orchestrate.rel_gap = o.cost == CostSource::kMeasured ? kMeasuredGap : 0.0;
  o.measured.db_path = tuning_db;
  o.measured.threads = threads;
  o.measured.prune = !no_prune;
  o.measured.log = say;
  return o;
}

CpuCompileResult compile_cpu_artifact(const std::string& model, const Graph& g, const std::string& dir,
                                      const CpuCompileOptions& options, bool quiet) {
  using clock = std::chrono::steady_clock;
  auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  const auto t_start = clock::now();
  PlanMetadata meta;
  meta.model = model;
  meta.device = "cpu";
  auto t = clock::now();
  Graph p = lower_to_primitives(g);
  meta.timing["lower"] = since(t);
  if (!quiet)
    fmt::print("  {}: {} operators -> {} primitives ({:.2f} s)\n", model, g.nodes.size(), p.nodes.size(),
               meta.timing["lower"]);
  t = clock::now();
  CpuCompileResult r = compile_for_cpu(p, options);
  meta.timing["orchestrate"] = since(t);
  meta.cost_model = r.cost_model;
  meta.device_spec_json = options.cost == CostSource::kAnalytic ? device_spec_to_json(options.spec) : "";
  t = clock::now();
  runtime::MemoryReport mem = write_cpu_artifact(dir, p, r, options, meta);
  meta.timing["artifact"] = since(t);
  double total = since(t_start);
  if (quiet) return r;
  const OrchestrateResult& o = r.orchestration;
  const SolveResult& s = o.selection.solve;
  fmt::print("compiled {} for cpu ({}){}: {} kernels for {} primitives\n", model, r.cost_model,
             options.unfused ? ", unfused baseline" : "", o.plan.kernels.size(), p.nodes.size());
  fmt::print("  candidates {} ({} cannot be emitted or were skipped), variables {}, rows {}\n",
             o.candidates.candidates.size(), o.infeasible, o.selection.variables, o.selection.rows);
  if (options.cost == CostSource::kMeasured) {
    const MeasuredCostStats& m = r.measured;
    fmt::print("  tuning: {} distinct kernels, {} from the database, {} measured, {} failed the gate, {} unemittable, "
               "{} skipped by the lower bound\n",
               m.signatures, m.db_hits, m.measured, m.failed, m.unemittable, m.pruned);
    for (const std::string& f : m.failures) fmt::print("  gate failure: {}\n", f);
    for (size_t i = 0; i < m.pruned_examples.size() && i < 3; ++i) fmt::print("  e.g. {}\n", m.pruned_examples[i]);
  }
  fmt::print("  plan {:.1f} us vs unfused {:.1f} us ({:.2f}x, {} costs)\n", o.plan.total_seconds() * 1e6,
             o.unfused_seconds * 1e6, o.unfused_seconds / std::max(o.plan.total_seconds(), 1e-30),
             options.cost == CostSource::kMeasured ? "measured" : "analytic");
  fmt::print("  solver {} {} in {:.2f} s, gap {:.3g}%\n", s.solver, solve_status_name(s.status), s.seconds,
             100 * s.gap);
  fmt::print("  memory: intermediates {:.2f} MB (unfused plan {:.2f} MB), weights {:.2f} MB\n",
             mem.arena_bytes / 1e6, mem.unfused_arena_bytes / 1e6, mem.weights_bytes / 1e6);
  fmt::print("  compile {:.1f} s (orchestrate {:.1f} s, artifact {:.1f} s); wrote {}\n", total,
             meta.timing["orchestrate"], meta.timing["artifact"], dir);
  return r;
}

}  // namespace korch::cli
