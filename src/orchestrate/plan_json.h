// plan.json: the orchestrator's decision and everything needed to explain it.
//
// Written by `korch compile`, read by `korch explain` and (with issue 5) the runtime. Costs are in
// seconds; names are the graph's value and node names. Layout (version 1):
//   { "format": "korch-plan", "version": 1, "model", "device", "cost_model", "layout" ("nchw" or
//     "channels-last": the activations the convolutions read, rewrite/channels_last.h), "device_spec",
//     "options": {...}, "graph": {"primitives", "kinds": {kind: count}},
//     "candidates": {"count", "connected_sets", "scalar_primitives", "scalar_groups", "row_groups" (kernel_candidate.h),
//                    "infeasible", "rejected": {reason: n},
//                    "infeasible_reasons": {reason: n}, "rejected_examples": [...]},
//     "states": {"completed", "count", "no_recompute_cost_s", "seconds"},
//     "solver": {"source", "name", "status", "objective_s", "bound_s", "gap", "seconds",
//                "cycle_cuts", "dominated", "regions", "variables", "rows", "log"},
//     "cost": {"plan_s", "unfused_s", "greedy_s" (null when the greedy baseline could not be
//              priced), + PlanMetadata::cost_extra}, "timing": {phase: seconds},
//     "greedy": {"groups", "kernels", "split_groups", "why"}   (greedy_fusion.h),
//     "kernels": [{"step", "primitives": [{"name", "op_type", "kind", "reads" (non-constant input
//                  values), "writes"}], "inputs", "outputs", "cost_s", "note", "recomputed",
//                  + PlanMetadata::kernel_extra (after the closed loop: "in_model_s", "isolated_s")}],
//     "tensors": [{"name", "bytes", "producer", "last_use"}],
//     "rewrites": {"offered", "chosen": [{"name" (its first node), "rule", "description", "nodes",
//                  "saved_s" (the best plan without it is this much slower; null: not computed)}],
//                  "variant_graphs", "every_combination", "candidates", "skipped",
//                  "program": {"objective_s", "status", "gap", "seconds", "regions"}: the solve over
//                  every variant; "solver" above is the plan's own on the chosen graph} (rewrite_choice.h) }
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "orchestrate/orchestrate.h"
#include "orchestrate/plan_report.h"

namespace korch {

struct PlanMetadata {
  std::string model, device, cost_model, device_spec_json;
  std::string layout;  // activation layout of the primitive graph: "nchw" | "channels-last" ("" = not recorded)
  std::map<std::string, double> timing;  // phase -> seconds (load, lower, ... total)
  std::map<std::string, double> cost_extra;  // more "cost" fields (measured end to end, ...)
  // More fields per kernel, by step (used only when there is one map per kernel of the plan).
  std::vector<std::map<std::string, double>> kernel_extra;
  ReportOptions report;  // how report.html draws the graph (plan_report.h)
};

nlohmann::json plan_json(const Graph& g, const OrchestrateResult& r, const OrchestrateOptions& options,
                         const PlanMetadata& meta);
std::string plan_to_json(const Graph& g, const OrchestrateResult& r, const OrchestrateOptions& options,
                         const PlanMetadata& meta);

// Creates `dir` and writes dir/plan.json, dir/primitives.txt (the primitive graph in the IR text
// form, weights elided: the plan names values, not data) and dir/report.html (plan_report.h). Throws korch::Error (kIo) naming the file.
void write_plan_files(const std::string& dir, const Graph& g, const OrchestrateResult& r,
                      const OrchestrateOptions& options, const PlanMetadata& meta);

}  // namespace korch
