// korch demo: the README's main job on the embedded default models. Writes each built-in model to
// an .onnx file, loads it back through the frontend, prints what Korch knows about it (including
// its primitive graph after fission and rewrites), runs it in the reference interpreter on seeded
// inputs and prints the outputs.
// Later stages extend this command (optimize, run the artifact, bench) under the same name.
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "support/strings.h"

namespace korch::cli {

namespace fs = std::filesystem;

Command add_demo(CLI::App& app) {
  struct Opts { std::string model = "all", out = "build/demo"; };
  auto o = std::make_shared<Opts>();
  app.add_option("--model", o->model, "Built-in model: tiny_convnet, tiny_transformer or all");
  app.add_option("--out", o->out, "Folder for the generated .onnx files");
  app.footer("Examples:\n  korch demo\n  korch demo --model tiny_transformer --out /tmp/demo");
  return [o]() {
    std::vector<std::string> names = o->model == "all" ? builtin_model_names() : std::vector<std::string>{o->model};
    std::error_code ec;
    fs::create_directories(o->out, ec);
    if (ec) fail_io("cannot create '{}': {}", o->out, ec.message());
    for (const std::string& name : names) {
      std::string bytes = builtin_model_bytes(name);
      fs::path path = fs::path(o->out) / (name + ".onnx");
      std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
      fmt::print("=== {} ===\n", name);
      Graph g = load_onnx(path.string());
      print_model_summary(g, path.string());
      fission_with_report(g, true);
      std::vector<Tensor> inputs = random_inputs(g, 0);
      auto t0 = std::chrono::steady_clock::now();
      std::vector<Tensor> outs = interpret(g, inputs);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      fmt::print("reference run (seed 0): {:.2f} ms\n", ms);
      for (size_t i = 0; i < outs.size(); ++i) {
        std::vector<float> v = outs[i].to_float_vector();
        double sum = 0, sq = 0;
        for (float x : v) { sum += x; sq += static_cast<double>(x) * x; }
        fmt::print("  {:<16} {:<18} sum {:+.6f}  l2 {:.6f}  first [", g.value(g.outputs[i]).name, type_str(outs[i].type()),
                   sum, std::sqrt(sq));
        for (size_t k = 0; k < std::min<size_t>(4, v.size()); ++k) fmt::print("{}{:+.5f}", k ? ", " : "", v[k]);
        fmt::print("]\n");
      }
      fmt::print("\n");
    }
    return 0;
  };
}

}  // namespace korch::cli
