#include "orchestrate/plan_json.h"

#include <cmath>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "ir/primitive.h"
#include "ir/text_format.h"
#include "orchestrate/plan_report.h"
#include "support/error.h"

namespace korch {

nlohmann::json plan_json(const Graph& g, const OrchestrateResult& r, const OrchestrateOptions& options,
                         const PlanMetadata& meta) {
  using nlohmann::json;
  json j;
  j["format"] = "korch-plan";
  j["version"] = 1;
  j["model"] = meta.model;
  j["device"] = meta.device;
  j["cost_model"] = meta.cost_model;
  if (!meta.layout.empty()) j["layout"] = meta.layout;
  j["device_spec"] = meta.device_spec_json.empty() ? json() : json::parse(meta.device_spec_json);
  j["options"] = {{"max_primitives", options.candidates.max_primitives},
                  {"max_linear", options.candidates.max_linear},
                  {"max_fanout", options.candidates.max_fanout},
                  {"minimal_output_sets", options.candidates.offer_minimal_outputs},
                  {"allow_recompute", options.allow_recompute},
                  {"time_limit_s", options.time_limit_s},
                  {"rel_gap", options.rel_gap},
                  {"state_limit", options.dp_state_limit}};
  j["graph"] = {{"primitives", g.nodes.size()}, {"kinds", primitive_counts(g)}};
  json examples = json::array();
  for (const RejectedCandidate& e : r.candidates.rejected_examples) {
    json names = json::array();
    for (NodeId id : e.nodes) names.push_back(g.nodes[static_cast<size_t>(id)].name);
    examples.push_back({{"primitives", names}, {"reason", e.reason}});
  }
  j["candidates"] = {{"count", r.candidates.candidates.size()},
                     {"connected_sets", r.candidates.connected_sets},
                     {"scalar_primitives", r.candidates.scalar_primitives},
                     {"scalar_groups", r.candidates.scalar_groups},
                     {"row_groups", r.candidates.row_groups},
                     {"infeasible", r.infeasible},
                     {"rejected", r.candidates.rejected},
                     {"infeasible_reasons", r.infeasible_reasons},
                     {"rejected_examples", examples}};
  const DpResult& dp = r.selection.dp;
  j["states"] = {{"completed", dp.completed}, {"count", dp.states},
                 {"no_recompute_cost_s", dp.feasible ? json(dp.cost) : json()}, {"seconds", dp.seconds}};
  const SolveResult& s = r.selection.solve;
  j["solver"] = {{"source", r.selection.source}, {"warm_start", r.selection.warm_start}, {"name", s.solver}, {"status", solve_status_name(s.status)},
                 {"objective_s", r.selection.objective}, {"bound_s", s.bound}, {"gap", s.gap},
                 {"seconds", s.seconds}, {"cycle_cuts", r.selection.cycle_cuts}, {"dominated", r.selection.dominated},
                 {"regions", r.selection.regions},
                 {"variables", r.selection.variables}, {"rows", r.selection.rows}, {"log", s.log}};
  j["cost"] = {{"plan_s", r.plan.total_seconds()}, {"unfused_s", r.unfused_seconds}};
  for (const auto& [k, v] : meta.cost_extra) j["cost"][k] = v;
  const GreedyFusion& gf = r.greedy;
  j["cost"]["greedy_s"] = gf.ok ? json(gf.seconds) : json();
  j["greedy"] = {{"groups", gf.groups.size()}, {"kernels", gf.kernels.size()}, {"split_groups", gf.split_groups},
                 {"why", gf.why}};
  // The rewrite sites the program chose among (rewrite_choice.h), and what each chosen one saved.
  const RewriteReport& rw = r.rewrites;
  json chosen = json::array();
  for (size_t i = 0; i < rw.chosen.size(); ++i) {
    const RewriteReport::Site& site = rw.offered.at(static_cast<size_t>(rw.chosen[i]));
    const double saved = i < rw.saved.size() ? rw.saved[i] : std::nan("");
    chosen.push_back({{"name", site.nodes.empty() ? std::string() : site.nodes.front()},
                      {"rule", site.rule},
                      {"description", site.description},
                      {"nodes", site.nodes},
                      {"saved_s", std::isfinite(saved) ? json(saved) : json()}});
  }
  j["rewrites"] = {{"offered", rw.offered.size()},      {"chosen", chosen},
                   {"variant_graphs", rw.variant_graphs}, {"every_combination", rw.exhaustive},
                   {"candidates", rw.candidates},        {"skipped", rw.skipped},
                   {"program", {{"objective_s", rw.objective}, {"status", solve_status_name(rw.status)},
                                {"gap", rw.gap}, {"seconds", rw.solve_seconds}, {"regions", rw.regions}}}};
  json timing = meta.timing;
  timing["enumerate"] = r.enumerate_s;
  timing["cost"] = r.cost_s;
  timing["select"] = r.select_s;
  j["timing"] = timing;

  std::vector<int> times_computed(g.nodes.size(), 0);
  for (const PlannedKernel& k : r.plan.kernels)
    for (NodeId id : k.nodes) ++times_computed[static_cast<size_t>(id)];
  json kernels = json::array();
  for (size_t step = 0; step < r.plan.kernels.size(); ++step) {
    const PlannedKernel& k = r.plan.kernels[step];
    json prims = json::array(), recomputed = json::array(), ins = json::array(), outs = json::array();
    for (NodeId id : k.nodes) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      json reads = json::array(), writes = json::array();
      for (ValueId v : n.inputs)
        if (v != kNoValue && !g.value(v).is_constant()) reads.push_back(g.value(v).name);
      for (ValueId v : n.outputs)
        if (v != kNoValue) writes.push_back(g.value(v).name);
      prims.push_back({{"name", n.name}, {"op_type", n.op_type},
                       {"kind", primitive_kind_name(primitive_kind(g, n))}, {"reads", reads}, {"writes", writes}});
      if (times_computed[static_cast<size_t>(id)] > 1) recomputed.push_back(n.name);
    }
    for (ValueId v : k.inputs) ins.push_back(g.value(v).name);
    for (ValueId v : k.outputs) outs.push_back(g.value(v).name);
    kernels.push_back({{"step", step}, {"primitives", prims}, {"inputs", ins}, {"outputs", outs},
                       {"cost_s", k.seconds}, {"note", k.cost_note}, {"recomputed", recomputed}});
    if (meta.kernel_extra.size() == r.plan.kernels.size())
      for (const auto& [key, v] : meta.kernel_extra[step]) kernels.back()[key] = v;
  }
  j["kernels"] = kernels;
  json tensors = json::array();
  for (const PlannedTensor& t : r.plan.tensors)
    tensors.push_back({{"name", g.value(t.value).name}, {"bytes", t.bytes}, {"producer", t.producer},
                       {"last_use", t.last_use}});
  j["tensors"] = tensors;
  return j;
}

std::string plan_to_json(const Graph& g, const OrchestrateResult& r, const OrchestrateOptions& options,
                         const PlanMetadata& meta) {
  return plan_json(g, r, options, meta).dump(1);
}

void write_plan_files(const std::string& dir, const Graph& g, const OrchestrateResult& r,
                      const OrchestrateOptions& options, const PlanMetadata& meta) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_io("cannot create artifact directory {}: {}", dir, ec.message());
  const nlohmann::json plan = plan_json(g, r, options, meta);
  std::ofstream f(fs::path(dir) / "plan.json");
  f << plan.dump(1) << "\n";
  if (!f) fail_io("cannot write {}/plan.json", dir);
  std::ofstream pf(fs::path(dir) / "primitives.txt");
  pf << print_graph(g, PrintOptions{16});
  if (!pf) fail_io("cannot write {}/primitives.txt", dir);
  write_plan_report(dir, plan, meta.report);
}

}  // namespace korch
