// korch: the command line. Errors from any stage arrive as korch::Error and are printed as one
// line with a non-zero exit code; internal invariant failures abort with file:line.
#include <cstdio>

#include "commands.h"
#include "support/error.h"

int main(int argc, char** argv) {
  CLI::App app{"Korch: optimal kernel orchestration for tensor programs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "korch 0.1.0");
  std::vector<std::pair<CLI::App*, korch::cli::Command>> commands;
  auto add = [&](const char* name, const char* help, auto adder) {
    CLI::App* sub = app.add_subcommand(name, help);
    commands.emplace_back(sub, adder(*sub));
  };
  add("inspect", "Print what Korch knows about a model: ops, tensors, parameters, FLOPs, bytes", korch::cli::add_inspect);
  add("demo", "The main job on the built-in models: load, inspect, run", korch::cli::add_demo);
  add("fission", "Split operators into primitives and write the primitive graph as ONNX", korch::cli::add_fission);
  add("compile", "Choose the cheapest kernels for a model and write the plan (plan.json) to an artifact directory",
      korch::cli::add_compile);
  add("explain", "Print an artifact's plan for a person: kernels, costs, why", korch::cli::add_explain);
  add("bench", "Time an artifact (or compile MODEL first) next to onnxruntime, OpenVINO and the unfused plan", korch::cli::add_bench);
  add("fold", "Write the model after the frontend (folded, simplified, static shapes) as ONNX", korch::cli::add_fold);
  add("ops", "List the supported ONNX operators and their opset ranges", korch::cli::add_ops);
  add("run", "Run a model on inputs from .npy files (or seeded random inputs)", korch::cli::add_run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, cmd] : commands)
      if (sub->parsed()) return cmd();
  } catch (const korch::Error& e) {
    std::fprintf(stderr, "korch: error: %s\n", e.what());
    return e.code() == korch::ErrorCode::kUnsupported ? 3 : 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "korch: error: out of memory\n");
    return 2;
  }
  return 1;
}
