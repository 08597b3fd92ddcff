// korch run MODEL.onnx --backend reference (--inputs DIR | --random-inputs SEED) --outputs DIR
//
// File contract (how held-back models are checked; keep exact): each model input is read from
// DIR/<name>.npy and each output written to OUT/<name>.npy, <name> being the ONNX tensor name with
// every character outside [A-Za-z0-9_.-] replaced by '_'. --random-inputs SEED makes seeded inputs
// and writes them to the outputs folder too.
#include <chrono>
#include <filesystem>
#include <random>

#include "commands.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_io.h"
#include "support/strings.h"

namespace korch::cli {

namespace fs = std::filesystem;

Command add_run(CLI::App& app) {
  struct Opts {
    std::string model, backend = "reference", inputs, outputs;
    LoadFlags load;
    int64_t seed = -1;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file")->required();
  app.add_option("--backend", o->backend, "Execution backend (reference)")
      ->check(CLI::IsMember({"reference"}));
  auto* in_opt = app.add_option("--inputs", o->inputs, "Folder with one <input name>.npy per model input");
  auto* rnd_opt = app.add_option("--random-inputs", o->seed, "Generate seeded random inputs instead (written to --outputs)");
  in_opt->excludes(rnd_opt);
  app.add_option("--outputs", o->outputs, "Folder to write <output name>.npy files to")->required();
  o->load.add_to(app);
  return [o]() {
    if (o->inputs.empty() && o->seed < 0) fail("give --inputs DIR or --random-inputs SEED");
    Graph g = load_onnx(o->model, o->load.options());
    std::error_code ec;
    fs::create_directories(o->outputs, ec);
    if (ec) fail_io("cannot create output folder '{}': {}", o->outputs, ec.message());

    std::vector<Tensor> inputs;
    std::vector<Tensor> generated;
    if (o->inputs.empty()) generated = random_inputs(g, static_cast<uint64_t>(o->seed));
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const Value& v = g.value(g.inputs[i]);
      std::string file = sanitize_name(v.name) + ".npy";
      if (!o->inputs.empty()) {
        fs::path p = fs::path(o->inputs) / file;
        if (!fs::exists(p)) fail_io("input '{}': expected file '{}' not found", v.name, p.string());
        Tensor t = load_npy(p.string());
        if (t.dtype() != v.type.dtype || t.shape() != v.type.shape)
          fail("input '{}': '{}' holds {} but the model expects {}", v.name, p.string(), type_str(t.type()),
               type_str(v.type));
        inputs.push_back(std::move(t));
      } else {
        inputs.push_back(generated[i]);
        save_npy((fs::path(o->outputs) / file).string(), inputs.back());
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> outs = interpret(g, inputs);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < outs.size(); ++i) {
      const Value& v = g.value(g.outputs[i]);
      fs::path p = fs::path(o->outputs) / (sanitize_name(v.name) + ".npy");
      save_npy(p.string(), outs[i]);
      fmt::print("{:<30} {:<24} -> {}\n", v.name, type_str(outs[i].type()), p.string());
    }
    fmt::print("ran {} nodes with the {} backend in {:.1f} ms\n", g.nodes.size(), o->backend, ms);
    return 0;
  };
}

}  // namespace korch::cli
