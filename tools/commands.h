// The `korch` subcommands. Each add_* registers its options on the app and returns the callback
// to run when that subcommand is chosen.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "frontend/onnx_loader.h"
#include "ir/graph.h"
#include "ir/graph_stats.h"
#include "pipeline/pipeline.h"

namespace korch::cli {

using Command = std::function<int()>;

Command add_inspect(CLI::App& app);
Command add_run(CLI::App& app);
Command add_demo(CLI::App& app);
Command add_ops(CLI::App& app);
Command add_fold(CLI::App& app);
Command add_fission(CLI::App& app);
Command add_compile(CLI::App& app);
Command add_explain(CLI::App& app);
Command add_bench(CLI::App& app);
Command add_cache(CLI::App& app);
Command add_devices(CLI::App& app);
// What fission makes of a model: the primitive graph, the fission and rewrite counts, primitives
// by kind, the primitive graph's FLOPs and bytes, and the rewrite alternatives found (rule -> sites).
struct FissionSummary {
  Graph primitives;
  PrimitiveReport report;
  std::map<std::string, int> kinds, alternatives;
  GraphStats stats;
};
FissionSummary summarize_fission(const Graph& g);
// Runs fission; with `print`, reports primitive counts by kind and operators kept whole.
korch::Graph fission_with_report(const korch::Graph& g, bool print);

// The `inspect` report: graph, parameters, FLOPs, bytes, inputs/outputs, op histogram.
void print_model_summary(const korch::Graph& g, const std::string& path);

// The model-loading options shared by every command that reads an ONNX model:
//   --shape NAME=1x3x224x224   fix a symbolic input shape (or DIM=N: every dimension named DIM)
//   --bind NAME=FILE.npy       fix an input to known values (it becomes a constant and folds), for
//                              inputs that carry sizes (Resize scales, OneHot depth...)
struct LoadFlags {
  std::vector<std::string> shapes, binds;
  void add_to(CLI::App& app);
  korch::LoadOptions options() const;
  std::map<std::string, std::string> bind_files() const;  // --bind NAME=FILE.npy: NAME -> FILE
};

// One line on stderr when `threads` exceeds this machine's cores (oversubscribed threads wait on
// each other: runs slow down and timings stop meaning anything); nothing otherwise.
void warn_if_oversubscribed(int threads);

// `MODEL` arguments: a path, or builtin:NAME for the embedded models.
korch::Graph load_model_arg(const std::string& model, const korch::LoadOptions& options);
// The original ONNX bytes behind a MODEL argument (for onnxruntime), written to a file when the
// model is built in; returns a path onnxruntime can open.
std::string model_file_for_peer(const std::string& model, const std::string& scratch_dir);

}  // namespace korch::cli
