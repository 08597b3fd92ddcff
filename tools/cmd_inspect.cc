// korch inspect MODEL.onnx [--tensors] [--ir | --json]
#include <algorithm>

#include "commands.h"
#include "frontend/onnx_loader.h"
#include "ir/graph_stats.h"
#include "ir/text_format.h"
#include "json_out.h"
#include "support/strings.h"

namespace korch::cli {

namespace {

// What the summary reports beyond graph_stats(): the tensors nodes compute and the constants.
struct TensorCounts {
  size_t computed = 0, constants = 0;
  double computed_bytes = 0;
};

TensorCounts count_tensors(const Graph& g) {
  TensorCounts c;
  for (const Node& n : g.nodes)
    for (ValueId v : n.outputs)
      if (v != kNoValue) {
        ++c.computed;
        c.computed_bytes += static_cast<double>(g.type(v).numel()) * dtype_size(g.type(v).dtype);
      }
  for (const Value& v : g.values) c.constants += v.is_constant();
  return c;
}

nlohmann::json values_json(const Graph& g, const std::vector<ValueId>& ids) {
  nlohmann::json a = nlohmann::json::array();
  for (ValueId v : ids) a.push_back(tensor_json(g.value(v).name, g.type(v)));
  return a;
}

// The facts of the text summary, fission's report and (with `tensors`) the computed tensors.
nlohmann::json model_summary_json(const Graph& g, const std::string& path, bool tensors) {
  const GraphStats s = graph_stats(g);
  const TensorCounts c = count_tensors(g);
  nlohmann::json j = {{"model", path},
                      {"graph", g.name},
                      {"opset", g.opset},
                      {"nodes", g.nodes.size()},
                      {"parameters", s.parameters},
                      {"parameter_bytes", static_cast<int64_t>(s.parameter_bytes)},
                      {"constants", c.constants},
                      {"computed_tensors", c.computed},
                      {"computed_tensor_bytes", static_cast<int64_t>(c.computed_bytes)},
                      {"flops", s.flops},
                      {"bytes_read", static_cast<int64_t>(s.bytes_read)},
                      {"bytes_written", static_cast<int64_t>(s.bytes_written)},
                      {"inputs", values_json(g, g.inputs)},
                      {"outputs", values_json(g, g.outputs)},
                      {"operators", s.op_histogram},
                      {"fission", nullptr},
                      {"fission_error", nullptr},
                      {"tensors", nullptr}};
  try {
    const FissionSummary f = summarize_fission(g);
    j["fission"] = {{"operators", f.report.fission.operators_in},
                    {"primitives", f.report.fission.primitives_out},
                    {"after_rewrites", f.report.simplify.nodes_after},
                    {"kinds", f.kinds},
                    {"flops", f.stats.flops},
                    {"bytes_read", static_cast<int64_t>(f.stats.bytes_read)},
                    {"bytes_written", static_cast<int64_t>(f.stats.bytes_written)},
                    {"alternatives", f.alternatives},
                    {"kept_whole", f.report.fission.kept_opaque}};
  } catch (const Error& e) {
    j["fission_error"] = e.what();
  }
  if (tensors) {
    j["tensors"] = nlohmann::json::array();
    for (const Node& n : g.nodes)
      for (ValueId v : n.outputs)
        if (v != kNoValue) {
          nlohmann::json t = tensor_json(g.value(v).name, g.type(v));
          t["op_type"] = n.op_type;
          j["tensors"].push_back(std::move(t));
        }
  }
  return j;
}

}  // namespace

void print_model_summary(const Graph& g, const std::string& path) {
  GraphStats s = graph_stats(g);
  fmt::print("model      {}\n", path);
  fmt::print("graph      {} (opset {})\n", g.name, g.opset);
  fmt::print("nodes      {}\n", g.nodes.size());
  fmt::print("parameters {} ({})\n", human_count(static_cast<double>(s.parameters)), human_bytes(s.parameter_bytes));
  const TensorCounts c = count_tensors(g);
  fmt::print("tensors    {} computed ({} in all), {} constants (--tensors lists them)\n", c.computed,
             human_bytes(c.computed_bytes), c.constants);
  fmt::print("FLOPs      {}\n", human_count(s.flops));
  fmt::print("bytes      {} read, {} written (per-operator, unfused)\n", human_bytes(s.bytes_read),
             human_bytes(s.bytes_written));
  fmt::print("inputs\n");
  for (ValueId v : g.inputs) fmt::print("  {:<30} {}\n", g.value(v).name, type_str(g.type(v)));
  fmt::print("outputs\n");
  for (ValueId v : g.outputs) fmt::print("  {:<30} {}\n", g.value(v).name, type_str(g.type(v)));
  std::vector<std::pair<int, std::string>> hist;
  for (const auto& [op, n] : s.op_histogram) hist.emplace_back(-n, op);
  std::sort(hist.begin(), hist.end());
  fmt::print("operators ({} kinds)\n", hist.size());
  for (const auto& [n, op] : hist) fmt::print("  {:<24} {}\n", op, -n);
}

Command add_inspect(CLI::App& app) {
  struct Opts { std::string model; LoadFlags load; bool all_tensors = false, ir = false, json = false; };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  o->load.add_to(app);
  app.add_flag("--tensors", o->all_tensors, "List every intermediate tensor too");
  auto* ir = app.add_flag("--ir", o->ir, "Print the graph after loading in the IR text form (large constants elided)");
  app.add_flag("--json", o->json, "Print the summary as one JSON document (README: korch --json)")->excludes(ir);
  app.footer(
      "Examples:\n"
      "  korch inspect model.onnx\n"
      "  korch inspect model.onnx --shape batch=1 --tensors     fix a dynamic dimension, list every tensor\n"
      "  korch inspect builtin:tiny_convnet --json");
  return [o]() {
    Graph g = load_model_arg(o->model, o->load.options());
    if (o->json) {
      print_json(model_summary_json(g, o->model, o->all_tensors));
      return 0;
    }
    if (o->ir) {
      PrintOptions po;
      po.max_constant_elements = 16;
      fmt::print("{}", print_graph(g, po));
      return 0;
    }
    print_model_summary(g, o->model);
    try {
      fission_with_report(g, true);
    } catch (const Error& e) {
      // The model itself loaded fine; report the fission problem without hiding the summary.
      fmt::print("fission    failed: {}\n", e.what());
    }
    if (o->all_tensors) {
      fmt::print("tensors\n");
      for (const Node& n : g.nodes)
        for (ValueId v : n.outputs)
          if (v != kNoValue) fmt::print("  {:<40} {:<24} {}\n", g.value(v).name, type_str(g.type(v)), n.op_type);
    }
    return 0;
  };
}

}  // namespace korch::cli
