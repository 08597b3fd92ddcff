// The compile flags shared by `korch compile`, `korch run --backend cpu` and `korch bench`, and
// the compile summary they print. The compiler itself is pipeline/compile.h.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <functional>
#include <string>

#include "pipeline/compile.h"

namespace korch::cli {

// Where the tuning database is unless --tuning-db says (for --help).
inline constexpr const char* kTuningDbDefault = "$KORCH_CACHE_DIR/tuning.db, else ~/.cache/korch/tuning.db";

struct OrchestrateFlags {
  int max_prims = 8, max_linear = 1, max_fanout = 4;
  bool no_recompute = false, verbose_solver = false, no_rewrite_choices = false;
  double time_limit = 20, gap = -1;  // gap -1: 0 for analytic costs, kMeasuredGap for measured
  int64_t state_limit = 200000;
  int64_t memory_budget = -1;  // --memory-budget; -1: none
  std::string solver = "auto", dump_blp;
  void add_to(CLI::App& app);
  OrchestrateOptions options() const;
};

struct CompileFlags {
  std::string target = "cpu";
  std::string cost;  // "" = measured where the target has a timing device, else analytic
  std::string tuning_db, spec_file;
  int threads = 2;
  bool no_prune = false, measure_device = false, no_verify = false, isolated_costs = false, redo = false;
  std::string layout = "auto";  // --layout
  std::string denormals = "flush";   // --denormals
  std::string micro_batch = "auto";  // --micro-batch
  double max_spread_pct = -1;   // --max-spread; < 0: the defaults
  std::string pace_wait = "60";  // --pace-wait: seconds measuring may wait for the machine's pace, or off
  OrchestrateFlags orchestrate;
  // with_orchestrate: also register the search flags (compile does; run and bench take defaults).
  void add_to(CLI::App& app, bool with_orchestrate = true);
  CompileOptions options(const std::string& model, const std::function<void(const std::string&)>& say) const;
};

// Compiles `g` into `dir` (pipeline/compile.h) and prints the summary unless quiet.
CompileResult compile_artifact(const std::string& model, const Graph& g, const std::string& dir,
                               const CompileOptions& options, bool quiet);
// The same summary as one JSON document (`--json`; README lists the keys).
nlohmann::json compile_summary_json(const std::string& model, const CompileResult& r, const std::string& dir,
                                    const CompileOptions& options);

}  // namespace korch::cli
