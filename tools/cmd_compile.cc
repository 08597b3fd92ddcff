// korch compile MODEL.onnx --device cpu|cuda --cost analytic -o ARTIFACT_DIR
//
// Loads the model, lowers it to primitives, enumerates candidate kernels, costs them, solves for
// the cheapest plan and writes ARTIFACT_DIR/plan.json (see src/orchestrate/plan_json.h) plus the
// primitive graph in Korch's text form (primitives.txt). MODEL may be `builtin:NAME` for the
// embedded models (`korch demo` lists them).
#include <chrono>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "frontend/builtin_models.h"
#include "ir/text_format.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/plan_json.h"
#include "pipeline/pipeline.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/strings.h"

namespace korch::cli {

namespace {

DeviceSpec choose_spec(const std::string& device, const std::string& spec_file, bool measure) {
  if (!spec_file.empty()) return device_spec_from_json(read_file_bytes(spec_file), spec_file);
  if (device == "cpu") return measure ? measure_cpu_spec(2) : cpu_spec();
  // No GPU can be queried from here yet (the CUDA backend reads the device when it lands).
  return h200_spec();
}

}  // namespace

Command add_compile(CLI::App& app) {
  struct Opts {
    std::string model, out, device = "cpu", cost = "analytic", spec_file, solver = "auto", dump_blp;
    bool measure_device = false, no_recompute = false, quiet = false, verbose_solver = false;
    int max_prims = 8, max_linear = 1, max_fanout = 4;
    double time_limit = 30, gap = 0;
    int64_t state_limit = 200000;
    LoadFlags load;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  app.add_option("-o,--output", o->out, "Artifact directory (created; plan.json is written into it)")->required();
  app.add_option("--device", o->device, "Target device")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--cost", o->cost, "Cost source: analytic (a roofline over the device spec)")
      ->check(CLI::IsMember({"analytic", "measured"}));
  app.add_option("--device-spec", o->spec_file, "Device spec JSON for the analytic model (korch device-spec prints one)");
  app.add_flag("--measure-device", o->measure_device, "Measure this CPU's bandwidth for the analytic model (~1 s)");
  app.add_option("--max-kernel-size", o->max_prims, "Most primitives in one candidate kernel")->check(CLI::Range(1, 64));
  app.add_option("--max-linear", o->max_linear, "Most linear primitives in one candidate kernel")->check(CLI::Range(0, 8));
  app.add_option("--max-fanout", o->max_fanout, "Most consumers of one primitive inside one candidate kernel")
      ->check(CLI::Range(1, 64));
  app.add_flag("--no-recompute", o->no_recompute, "Disjoint kernels only (each primitive computed once)");
  app.add_option("--time-limit", o->time_limit, "Solver time limit in seconds (the best plan and its gap are kept)")
      ->check(CLI::PositiveNumber);
  app.add_option("--gap", o->gap, "Relative optimality gap at which the solver may stop (0 = proven optimal)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--solver", o->solver, "BLP solver")->check(CLI::IsMember({"auto", "cbc", "glpk"}));
  app.add_option("--state-limit", o->state_limit, "Most execution states for the no-recompute search (0 = skip)");
  app.add_option("--dump-blp", o->dump_blp, "Also write the binary linear program as solved (costs scaled so the dearest kernel is 1000) as LP text");
  app.add_flag("--verbose-solver", o->verbose_solver, "Show the solver's log");
  app.add_flag("-q,--quiet", o->quiet, "Print only the summary");
  o->load.add_to(app);
  return [o]() {
    using clock = std::chrono::steady_clock;
    const auto t_start = clock::now();
    auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    if (o->cost != "analytic")
      fail_unsupported("--cost {}: measured costs come with the CPU/CUDA backends; use --cost analytic", o->cost);
    PlanMetadata meta;
    meta.model = o->model;
    meta.device = o->device;
    auto t = clock::now();
    Graph g;
    if (o->model.rfind("builtin:", 0) == 0)
      g = load_onnx_bytes(builtin_model_bytes(o->model.substr(8)), o->model, o->load.options());
    else
      g = load_onnx(o->model, o->load.options());
    meta.timing["load"] = since(t);
    t = clock::now();
    Graph p = lower_to_primitives(g);
    meta.timing["lower"] = since(t);
    auto say = [o](const std::string& s) {
      if (!o->quiet) fmt::print("  {}\n", s);
      std::fflush(stdout);
    };
    say(fmt::format("{}: {} operators -> {} primitives ({:.2f} s load, {:.2f} s lower)", o->model, g.nodes.size(),
                    p.nodes.size(), meta.timing["load"], meta.timing["lower"]));

    DeviceSpec spec = choose_spec(o->device, o->spec_file, o->measure_device);
    AnalyticCost provider(spec);
    meta.cost_model = provider.name();
    meta.device_spec_json = device_spec_to_json(spec);

    OrchestrateOptions opt;
    opt.candidates.max_primitives = o->max_prims;
    opt.candidates.max_linear = o->max_linear;
    opt.candidates.max_fanout = o->max_fanout;
    opt.candidates.offer_minimal_outputs = !o->no_recompute;
    opt.allow_recompute = !o->no_recompute;
    opt.time_limit_s = o->time_limit;
    opt.rel_gap = o->gap;
    opt.dp_state_limit = o->state_limit;
    opt.solver = o->solver == "cbc" ? SolverChoice::kCbc : o->solver == "glpk" ? SolverChoice::kGlpk : SolverChoice::kAuto;
    opt.verbose = o->verbose_solver;
    opt.progress = say;
    opt.dump_blp_path = o->dump_blp;
    OrchestrateResult r = orchestrate(p, provider, opt);
    meta.timing["total"] = since(t_start);

    std::error_code ec;
    std::filesystem::create_directories(o->out, ec);
    if (ec) fail_io("cannot create artifact directory {}: {}", o->out, ec.message());
    {
      std::ofstream f(std::filesystem::path(o->out) / "plan.json");
      f << plan_to_json(p, r, opt, meta) << "\n";
      if (!f) fail_io("cannot write {}/plan.json", o->out);
      std::ofstream pf(std::filesystem::path(o->out) / "primitives.txt");
      pf << print_graph(p, PrintOptions{16});  // weights elided: the plan names values, not data
      if (!pf) fail_io("cannot write {}/primitives.txt", o->out);
    }
    const SolveResult& s = r.selection.solve;
    fmt::print("compiled {} for {} ({}): {} kernels for {} primitives\n", o->model, o->device, provider.name(),
               r.plan.kernels.size(), p.nodes.size());
    fmt::print("  states {}{}, candidates {} ({} cannot be emitted), variables {}, rows {}\n",
               r.selection.dp.states, r.selection.dp.completed ? "" : "+ (limit)", r.candidates.candidates.size(),
               r.infeasible, r.selection.variables, r.selection.rows);
    fmt::print("  plan {:.1f} us vs unfused {:.1f} us ({:.2f}x); no-recompute optimum {}\n",
               r.plan.total_seconds() * 1e6, r.unfused_seconds * 1e6,
               r.unfused_seconds / std::max(r.plan.total_seconds(), 1e-30),
               r.selection.dp.feasible ? fmt::format("{:.1f} us", r.selection.dp.cost * 1e6) : "not searched");
    fmt::print("  solver {} {} in {:.2f} s, gap {:.3g}%{}; total compile {:.2f} s\n", s.solver,
               solve_status_name(s.status), s.seconds, 100 * s.gap,
               r.selection.cycle_cuts ? fmt::format(", {} cycle cuts", r.selection.cycle_cuts) : "",
               meta.timing["total"]);
    fmt::print("  wrote {}/plan.json\n", o->out);
    return 0;
  };
}

}  // namespace korch::cli
