// korch run MODEL.onnx --backend reference|cpu (--inputs DIR | --random-inputs SEED) --outputs DIR
// korch run MODEL.onnx --backend reference --f64 ...   (the interpreter in float64, ir/precision.h)
// korch run --artifact DIR [--emulate] (--inputs DIR | --random-inputs SEED) --outputs DIR [--threads N]
//
// File contract (how held-back models are checked; keep exact): each model input is read from
// DIR/<name>.npy and each output written to OUT/<name>.npy, <name> being the ONNX tensor name with
// every character outside [A-Za-z0-9_.-] replaced by '_'. --random-inputs SEED makes seeded inputs
// (the same tensors for a model and its artifact) and writes them to the outputs folder too.
// --artifact runs a compiled artifact (src/runtime/executable.h) without the optimizer, on the
// device its manifest names; --emulate runs a CUDA artifact on the host emulator instead of a GPU.
// --f64 reads the inputs in the model's types (float32 inputs are then widened exactly) and writes
// the outputs the model declares float32 as float64 .npy files, unrounded: the oracle that
// scripts/compare_with_ort.py measures float32 runs against.
#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <random>

#include "commands.h"
#include "compile_flags.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/precision.h"
#include "ir/random.h"
#include "ir/tensor_io.h"
#include "json_out.h"
#include "pipeline/model_check.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/executable.h"
#include "support/strings.h"

namespace korch::cli {

namespace fs = std::filesystem;

namespace {

// The inputs named `names` with types `types`: from DIR/<name>.npy, or seeded random tensors
// (drawn in order from one generator, as random_inputs() does for a graph) written to `out_dir`.
// `files` gets the path of each one, read or written.
std::vector<Tensor> read_inputs(const std::vector<std::string>& names, const std::vector<TensorType>& types,
                                const std::string& in_dir, int64_t seed, const std::string& out_dir,
                                std::vector<std::string>& files) {
  std::vector<Tensor> inputs;
  std::mt19937_64 rng(static_cast<uint64_t>(seed));
  for (size_t i = 0; i < names.size(); ++i) {
    std::string file = sanitize_name(names[i]) + ".npy";
    if (!in_dir.empty()) {
      fs::path p = fs::path(in_dir) / file;
      if (!fs::exists(p)) fail_io("input '{}': expected file '{}' not found", names[i], p.string());
      Tensor t = load_npy(p.string());
      if (t.dtype() != types[i].dtype || t.shape() != types[i].shape)
        fail("input '{}': '{}' holds {} but the model expects {}", names[i], p.string(), type_str(t.type()),
             type_str(types[i]));
      inputs.push_back(std::move(t));
      files.push_back(p.string());
    } else {
      inputs.push_back(random_tensor(types[i], rng));
      files.push_back((fs::path(out_dir) / file).string());
      save_npy(files.back(), inputs.back());
    }
  }
  return inputs;
}

// Writes OUT/<name>.npy for each output (a line each unless quiet); returns the paths.
std::vector<std::string> write_outputs(const std::vector<std::string>& names, const std::vector<Tensor>& outs,
                                       const std::string& dir, bool quiet) {
  std::vector<std::string> files;
  for (size_t i = 0; i < outs.size(); ++i) {
    files.push_back((fs::path(dir) / (sanitize_name(names[i]) + ".npy")).string());
    save_npy(files.back(), outs[i]);
    if (!quiet) fmt::print("{:<30} {:<24} -> {}\n", names[i], type_str(outs[i].type()), files.back());
  }
  return files;
}

// [{"name", "dtype", "shape", "file"}] for `run --json`.
nlohmann::json files_json(const std::vector<std::string>& names, const std::vector<Tensor>& tensors,
                          const std::vector<std::string>& files) {
  nlohmann::json a = nlohmann::json::array();
  for (size_t i = 0; i < tensors.size(); ++i) {
    nlohmann::json t = tensor_json(names[i], tensors[i].type());
    t["file"] = files[i];
    a.push_back(std::move(t));
  }
  return a;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Command add_run(CLI::App& app) {
  struct Opts {
    std::string model, backend = "reference", inputs, outputs, artifact;
    LoadFlags load;
    int64_t seed = -1;
    int threads = 2;
    std::string save_artifact;
    bool check = false, emulate = false, json = false, f64 = false;
    CompileFlags cpu;
  };
  auto o = std::make_shared<Opts>();
  auto* model_opt = app.add_option("model", o->model, "ONNX model file");
  auto* backend_opt = app.add_option("--backend", o->backend, "Execution backend for a model (reference, cpu)")
                          ->check(CLI::IsMember({"reference", "cpu"}));
  auto* artifact_opt = app.add_option("--artifact", o->artifact, "Run a compiled artifact folder instead of a model");
  app.add_flag("--emulate", o->emulate,
               "--artifact of a CUDA artifact: run it on the CPU's CUDA emulator (correctness only; linear steps on "
               "oneDNN)")
      ->needs(artifact_opt);
  artifact_opt->excludes(model_opt);
  artifact_opt->excludes(backend_opt);
  auto* in_opt = app.add_option("--inputs", o->inputs, "Folder with one <input name>.npy per model input");
  auto* rnd_opt = app.add_option("--random-inputs", o->seed, "Generate seeded random inputs instead (written to --outputs)")
                      ->type_name("SEED")
                      ->default_str("");
  in_opt->excludes(rnd_opt);
  app.add_option("--outputs", o->outputs, "Folder to write <output name>.npy files to")->required();
  auto* threads_opt = app.add_option("--threads", o->threads, "CPU threads for the cpu backend / artifact")
                          ->check(CLI::Range(1, 1024));
  app.add_option("--save-artifact", o->save_artifact, "--backend cpu: keep the compiled artifact in this folder");
  app.add_flag("--check", o->check,
               "--backend cpu: also run the reference interpreter and fail unless every output is within 1e-4 "
               "(relative L2)");
  app.add_flag("--f64", o->f64,
               "--backend reference: run the interpreter in float64 (every float32 value, constant and Cast target "
               "widened; ops with no float64 version stay float32 and are listed); outputs the model declares "
               "float32 are written as float64 .npy, not rounded to float32")
      ->excludes(artifact_opt);
  app.add_option("--cost", o->cpu.cost, "--backend cpu: measured or analytic kernel costs")
      ->check(CLI::IsMember({"analytic", "measured"}))
      ->default_str("measured");
  app.add_option("--tuning-db", o->cpu.tuning_db, "--backend cpu: tuning database path")->default_str(kTuningDbDefault);
  app.add_flag("--json", o->json,
               "Print what ran as one JSON document (files, shapes, time; --backend cpu: the compile summary too) "
               "instead of lines (README: korch --json)");
  o->load.add_to(app);
  app.footer(
      "Examples:\n"
      "  korch run model.onnx --random-inputs 0 --outputs out/           the reference interpreter, seeded inputs\n"
      "  korch run model.onnx --backend cpu --inputs in/ --outputs out/ --check   compiled, checked against it\n"
      "  korch run --artifact model.korch --inputs in/ --outputs out/    an artifact made by korch compile\n"
      "Inputs are read from DIR/<name>.npy and outputs written to OUT/<name>.npy.");
  return [o, threads_opt]() {
    if (o->model.empty() && o->artifact.empty()) fail("give a MODEL.onnx or --artifact DIR");
    if (o->inputs.empty() && o->seed < 0) fail("give --inputs DIR or --random-inputs SEED");
    if (o->f64 && o->backend != "reference") fail("--f64 runs the reference interpreter: use it with --backend reference");
    // The reference interpreter keeps OpenMP's default unless --threads is given.
    bool cpu = !o->artifact.empty() || o->backend == "cpu";
    const bool threads_set = cpu || threads_opt->count() > 0;
    if (threads_set) {
      warn_if_oversubscribed(o->threads);
      cpu::set_cpu_threads(o->threads);
    }
    const bool quiet = o->json;
    // --json: the facts, filled in as the run goes; every key is there (null where it does not apply).
    nlohmann::json j = {{"backend", o->artifact.empty() ? o->backend : "artifact"},
                        {"device", "cpu"},
                        {"model", o->model.empty() ? nlohmann::json() : nlohmann::json(o->model)},
                        {"artifact", o->artifact.empty() ? nlohmann::json() : nlohmann::json(o->artifact)},
                        {"threads", threads_set ? nlohmann::json(o->threads) : nlohmann::json()},
                        {"kernels", nullptr},
                        {"primitives", nullptr},
                        {"nodes", nullptr},
                        {"wall_s", nullptr},
                        {"rebuilt_library", nullptr},
                        {"inputs", nullptr},
                        {"outputs", nullptr},
                        {"compile", nullptr},
                        {"check", nullptr}};
    std::optional<StdoutToStderr> guard;  // --json: nothing but the document on stdout
    if (o->json) guard.emplace();
    auto finish = [&]() {
      if (!o->json) return 0;
      guard.reset();
      print_json(j);
      return 0;
    };
    std::vector<std::string> input_files;

    if (!o->artifact.empty()) {
      runtime::LoadOptions lo;
      lo.emulate = o->emulate;
      auto exe = runtime::Executable::load(o->artifact, lo);
      std::error_code ec;
      fs::create_directories(o->outputs, ec);
      if (ec) fail_io("cannot create output folder '{}': {}", o->outputs, ec.message());
      std::vector<Tensor> inputs =
          read_inputs(exe->input_names(), exe->input_types(), o->inputs, o->seed, o->outputs, input_files);
      auto t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> outs = exe->run(inputs);
      double ms = ms_since(t0);
      std::vector<std::string> files = write_outputs(exe->output_names(), outs, o->outputs, quiet);
      const std::string device = exe->device().name();
      j.update({{"device", device},
                {"kernels", exe->kernel_count()},
                {"wall_s", ms / 1e3},
                {"rebuilt_library", exe->rebuilt_library()},
                {"inputs", files_json(exe->input_names(), inputs, input_files)},
                {"outputs", files_json(exe->output_names(), outs, files)}});
      if (quiet) return finish();
      const std::string where = device == "cpu" ? fmt::format("on {} threads", o->threads) : "on " + device;
      fmt::print("ran {} kernels of artifact {} {} in {:.2f} ms{}{}\n", exe->kernel_count(), o->artifact, where, ms,
                 exe->rebuilt_library() ? " (rebuilt its kernel library first)" : "",
                 device == "cuda-emulator" ? " (CUDA emulation on the CPU: checks correctness; the time "
                                             "says nothing about a GPU)"
                                           : "");
      return 0;
    }

    Graph g = load_model_arg(o->model, o->load.options());
    std::error_code ec;
    fs::create_directories(o->outputs, ec);
    if (ec) fail_io("cannot create output folder '{}': {}", o->outputs, ec.message());
    std::vector<std::string> names;
    std::vector<TensorType> types;
    for (ValueId v : g.inputs) {
      names.push_back(g.value(v).name);
      types.push_back(g.type(v));
    }
    std::vector<Tensor> inputs = read_inputs(names, types, o->inputs, o->seed, o->outputs, input_files);
    j["inputs"] = files_json(names, inputs, input_files);
    std::vector<std::string> out_names;
    for (ValueId v : g.outputs) out_names.push_back(g.value(v).name);
    if (o->backend == "cpu") {
      // Compile into an artifact (kept with --save-artifact), then run it like `--artifact` would.
      o->cpu.threads = o->threads;
      o->cpu.target = "cpu";
      fs::path dir = o->save_artifact.empty() ? fs::temp_directory_path() / fmt::format("korch-run-{}", getpid())
                                              : fs::path(o->save_artifact);
      auto say = [quiet](const std::string& s) {
        if (quiet) return;
        fmt::print("  {}\n", s);
        std::fflush(stdout);
      };
      CompileOptions copt = o->cpu.options(o->model, say);
      if (quiet) copt.measured.progress = false;
      CompileResult compiled = compile_artifact(o->model, g, dir.string(), copt, quiet);
      if (quiet) {
        j["compile"] = compile_summary_json(o->model, compiled, dir.string(), copt);
        if (o->save_artifact.empty()) j["compile"]["artifact_dir"] = nullptr;  // a temporary folder, removed below
      }
      auto exe = runtime::Executable::load(dir.string());
      exe->run(inputs);  // warm-up: first-run weight reorders and page faults are not the model's time
      auto t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> outs = exe->run(inputs);
      double ms = ms_since(t0);
      std::vector<std::string> files = write_outputs(out_names, outs, o->outputs, quiet);
      j.update({{"kernels", exe->kernel_count()},
                {"primitives", exe->manifest().value("primitives", 0)},
                {"wall_s", ms / 1e3},
                {"outputs", files_json(out_names, outs, files)}});
      if (!quiet)
        fmt::print("ran {} kernels ({} primitives) with the cpu backend in {:.2f} ms\n", exe->kernel_count(),
                   exe->manifest().value("primitives", 0), ms);
      if (o->save_artifact.empty()) fs::remove_all(dir, ec);
      if (o->check) {
        const ModelCheck c = check_model_outputs(g, inputs, outs);  // pipeline/model_check.h: the rule
        if (!c.passed) fail("{}", c.failure());
        nlohmann::json errors = nlohmann::json::object();
        for (const ModelCheck::Output& out : c.outputs) errors[out.name] = out.error;
        j["check"] = model_check_json(c);
        j["check"]["rel_l2_error"] = errors;
        if (!quiet)
          fmt::print("matches the reference interpreter: worst relative L2 error {:.2e} (reference {:.1f} ms){}\n",
                     c.worst, c.reference_seconds * 1e3, c.notes());
      }
      return finish();
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> kept;
    std::vector<Tensor> outs = o->f64 ? interpret_f64(g, inputs, &kept) : interpret(g, inputs);
    double ms = ms_since(t0);
    std::vector<std::string> files = write_outputs(out_names, outs, o->outputs, quiet);
    j.update({{"nodes", g.nodes.size()}, {"wall_s", ms / 1e3}, {"outputs", files_json(out_names, outs, files)},
              {"f64", o->f64}, {"kept_in_f32", kept}});
    if (!quiet) {
      fmt::print("ran {} nodes with the {} backend{} in {:.1f} ms\n", g.nodes.size(), o->backend,
                 o->f64 ? " in float64" : "", ms);
      if (!kept.empty())
        fmt::print("kept in float32 (no float64 version of the op): {} node(s): {}\n", kept.size(), fmt::join(kept, ", "));
    }
    return finish();
  };
}

}  // namespace korch::cli
