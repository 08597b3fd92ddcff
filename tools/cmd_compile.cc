// korch compile MODEL.onnx|builtin:NAME --device cpu|cuda [--cost measured|analytic] -o ARTIFACT_DIR
//
// Loads the model and hands it to the compiler (pipeline/compile.h: lower to primitives,
// enumerate candidate kernels, cost them, solve for the cheapest plan, emit and verify its
// kernels, write ARTIFACT_DIR), then prints the summary. For the CPU the costs are measured by
// default (profile/measured_cost.h); for CUDA without a GPU they come from the analytic H200
// model, and the plan's kernels are checked on the host emulator. Either way the folder is a
// runnable artifact (runtime/artifact.h) plus plan.json, primitives.txt and report.html.
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "compile_flags.h"
#include "frontend/builtin_models.h"
#include "json_out.h"
#include "runtime/artifact.h"
#include "support/error.h"
#include "support/strings.h"

namespace korch::cli {

namespace fs = std::filesystem;

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
    std::string model, out;
    bool quiet = false, unfused = false, force = false, json = false, check = false;
    CompileFlags flags;
    LoadFlags load;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  app.add_option("-o,--output", o->out, "Artifact directory (created)")->required();
  app.add_option("--device", o->flags.target, "Target device")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--unfused", o->unfused, "Compile the baseline instead: one kernel per primitive, no search");
  app.add_flag("-q,--quiet", o->quiet, "Print only the summary");
  app.add_flag("--json", o->json, "Print the summary as one JSON document instead, and no progress (README: korch --json)");
  app.add_flag("--force", o->force, "Write into a non-empty folder that is not a Korch artifact");
  app.add_flag("--check", o->check,
               "Also run the written artifact once on seeded random inputs and fail unless every output is within 1e-4 "
               "(relative L2) of the reference interpreter, or no farther from a float64 run than it (an error that "
               "compounds across kernels passes each kernel's own check)");
  o->flags.add_to(app);
  o->load.add_to(app);
  app.footer(
      "Examples:\n"
      "  korch compile model.onnx -o model.korch                  measured costs on this CPU (kept in the tuning db)\n"
      "  korch compile model.onnx -o out --shape batch=1 --threads 4\n"
      "  korch compile model.onnx -o out --cost analytic          no measuring: the roofline model (seconds)\n"
      "  korch compile model.onnx -o out --device cuda            a CUDA artifact (analytic costs without a GPU)\n"
      "  korch compile model.onnx -o out --check                  and run it once against the reference interpreter\n"
      "Then: korch explain model.korch, korch bench --artifact model.korch, or open model.korch/report.html.");
  return [o]() {
    const bool quiet = o->quiet || o->json;
    auto say = [quiet](const std::string& s) {
      if (!quiet) fmt::print("  {}\n", s);
      std::fflush(stdout);
    };
    // An artifact folder (or what an interrupted compile left of one) is rewritten in place; a
    // folder with anything else in it is not ours to fill (a typo of -o could name a source tree).
    if (fs::is_directory(o->out) && !o->force) {
      for (const auto& e : fs::directory_iterator(o->out))
        if (!runtime::is_artifact_entry(e.path().filename().string()))
          fail("-o {}: the folder holds {}, so it is not a Korch artifact; give an empty or new folder, or --force",
               o->out, e.path().filename().string());
    }
    warn_if_oversubscribed(o->flags.threads);
    CompileOptions copt = o->flags.options(o->model, say);
    if (quiet) copt.measured.progress = false;  // -q, --json: no progress bars either
    copt.unfused = o->unfused;
    copt.model_check = o->check;
    Graph g = load_model_arg(o->model, o->load.options());
    if (!o->json) {
      compile_artifact(o->model, g, o->out, copt, false);
      return 0;
    }
    nlohmann::json summary;
    {
      StdoutToStderr guard;  // a solver's log (--verbose-solver) must not land in the document
      CompileResult r = compile_artifact(o->model, g, o->out, copt, true);
      summary = compile_summary_json(o->model, r, o->out, copt);
    }
    print_json(summary);
    return 0;
  };
}

}  // namespace korch::cli
