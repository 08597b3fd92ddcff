// korch compile MODEL.onnx|builtin:NAME --device cpu|cuda [--cost measured|analytic] -o ARTIFACT_DIR
//
// Loads the model, lowers it to primitives, enumerates candidate kernels, costs them, solves for
// the cheapest plan and writes ARTIFACT_DIR. For the CPU the costs are measured by default
// (profile/measured_cost.h) and the folder is a runnable artifact (runtime/artifact.h: program,
// kernels, weights, manifest) plus plan.json and primitives.txt. For CUDA (no backend yet) only
// plan.json and primitives.txt, from the analytic model.
#include <chrono>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "cpu_flags.h"
#include "frontend/builtin_models.h"
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

Graph load_model_arg(const std::string& model, const LoadOptions& options) {
  if (model.rfind("builtin:", 0) == 0) return load_onnx_bytes(builtin_model_bytes(model.substr(8)), model, options);
  return load_onnx(model, options);
}

std::string model_file_for_peer(const std::string& model, const std::string& scratch_dir) {
  if (model.rfind("builtin:", 0) != 0) return model;
  std::filesystem::create_directories(scratch_dir);
  std::string path = (std::filesystem::path(scratch_dir) / (sanitize_name(model.substr(8)) + ".onnx")).string();
  std::ofstream f(path, std::ios::binary);
  std::string bytes = builtin_model_bytes(model.substr(8));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) fail_io("cannot write {}", path);
  return path;
}

Command add_compile(CLI::App& app) {
  struct Opts {
    std::string model, out, device = "cpu", spec_file;
    bool measure_device = false, quiet = false, unfused = false;
    CpuFlags cpu;
    LoadFlags load;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  app.add_option("-o,--output", o->out, "Artifact directory (created)")->required();
  app.add_option("--device", o->device, "Target device")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device-spec", o->spec_file, "Device spec JSON for the analytic model (korch device-spec prints one)");
  app.add_flag("--measure-device", o->measure_device, "Measure this CPU's bandwidth for the analytic model (~1 s)");
  app.add_flag("--unfused", o->unfused, "Compile the baseline instead: one kernel per primitive, no search");
  app.add_flag("-q,--quiet", o->quiet, "Print only the summary");
  o->cpu.add_to(app);
  o->load.add_to(app);
  return [o]() {
    using clock = std::chrono::steady_clock;
    const auto t_start = clock::now();
    auto since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
    auto say = [o](const std::string& s) {
      if (!o->quiet) fmt::print("  {}\n", s);
      std::fflush(stdout);
    };
    if (o->device == "cpu") {
      CpuCompileOptions copt = o->cpu.options(say);
      copt.spec = choose_spec(o->device, o->spec_file, o->measure_device);
      copt.unfused = o->unfused;
      Graph g = load_model_arg(o->model, o->load.options());
      compile_cpu_artifact(o->model, g, o->out, copt, false);
      return 0;
    }
    if (o->cpu.cost == "measured")
      fail_unsupported("--device cuda: measured costs come with the CUDA backend (next issue); use --cost analytic");
    PlanMetadata meta;
    meta.model = o->model;
    meta.device = o->device;
    auto t = clock::now();
    Graph g = load_model_arg(o->model, o->load.options());
    meta.timing["load"] = since(t);
    t = clock::now();
    Graph p = lower_to_primitives(g);
    meta.timing["lower"] = since(t);
    say(fmt::format("{}: {} operators -> {} primitives ({:.2f} s load, {:.2f} s lower)", o->model, g.nodes.size(),
                    p.nodes.size(), meta.timing["load"], meta.timing["lower"]));

    DeviceSpec spec = choose_spec(o->device, o->spec_file, o->measure_device);
    AnalyticCost provider(spec);
    meta.cost_model = provider.name();
    meta.device_spec_json = device_spec_to_json(spec);

    OrchestrateOptions opt = o->cpu.orchestrate.options();
    opt.progress = say;
    OrchestrateResult r = orchestrate(p, provider, opt);
    meta.timing["total"] = since(t_start);

    write_plan_files(o->out, p, r, opt, meta);
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
