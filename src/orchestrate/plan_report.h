// report.html: the plan of plan.json for people, in one self-contained file (inline CSS, inline SVG,
// no script, no font, nothing fetched), built from the plan JSON alone (plan_json.h), so the report
// and plan.json cannot disagree. It shows
//   * the summary: predicted (and, after the closed loop, measured) end-to-end latency, the
//     solver's status, objective, bound, gap and time, and the rewrites offered ("none offered"
//     unless plan.json has a "rewrites" field);
//   * the plan beside two baselines priced on the same costs: one kernel per primitive
//     (cost.unfused_s) and greedy rule-based fusion (cost.greedy_s, greedy_fusion.h);
//   * the primitive graph drawn by Graphviz (`dot -Tsvg`): each kernel a cluster whose SVG group is
//     <g class="kernel" id="kernel-N" data-step="N">, each primitive a node inside the cluster of
//     every kernel that computes it (a recomputed one has class "node recomputed" and a dashed
//     border), edges along the values between primitives (across kernels from the last earlier
//     kernel that writes the value). Without `dot`, above `max_drawn_nodes` primitive instances or
//     past the timeout, the report says why there is no drawing and shows the rest;
//   * one table row per kernel: step, primitives, cost, in-model time when measured, share of the
//     total, what bounds it (the cost note), recomputed primitives marked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace korch {

struct ReportOptions {
  std::string dot = "dot";         // the Graphviz layout command
  int64_t max_drawn_nodes = 3000;  // primitive instances (recomputed ones count once per kernel)
  int dot_timeout_s = 20;
};

struct PlanDrawing {
  std::string svg;      // the <svg> element (no XML prolog, no comments); empty when not drawn
  std::string why_not;  // when svg is empty: why, in a sentence
  double seconds = 0;   // the layout's wall time
};

// The Graphviz input described above.
std::string plan_to_dot(const nlohmann::json& plan);

// Rewrites the opening tags of the groups dot made for kernels (id="kernel-N") to
// <g class="kernel" id="kernel-N" data-step="N"> and adds class "recomputed" to the groups of
// recomputed primitive nodes (ids listed in `recomputed_ids`, as plan_to_dot names them).
std::string mark_svg_groups(const std::string& svg, const std::vector<std::string>& recomputed_ids);

// Lays the plan out with `o.dot` (a subprocess, under a timeout).
PlanDrawing draw_plan(const nlohmann::json& plan, const ReportOptions& o = {});

std::string plan_report_html(const nlohmann::json& plan, const PlanDrawing& drawing);

// Creates nothing: writes dir/report.html (draws the plan first). Throws korch::Error (kIo) when
// the file cannot be written.
void write_plan_report(const std::string& dir, const nlohmann::json& plan, const ReportOptions& o = {});

}  // namespace korch
