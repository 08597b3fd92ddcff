// korch inspect MODEL.onnx
#include <algorithm>

#include "commands.h"
#include "frontend/onnx_loader.h"
#include "ir/graph_stats.h"
#include "ir/text_format.h"
#include "support/strings.h"

namespace korch::cli {

void print_model_summary(const Graph& g, const std::string& path) {
  GraphStats s = graph_stats(g);
  fmt::print("model      {}\n", path);
  fmt::print("graph      {} (opset {})\n", g.name, g.opset);
  fmt::print("nodes      {}\n", g.nodes.size());
  fmt::print("parameters {} ({})\n", human_count(static_cast<double>(s.parameters)), human_bytes(s.parameter_bytes));
  size_t n_tensors = 0, n_const = 0;
  double tensor_bytes = 0;
  for (const Node& n : g.nodes)
    for (ValueId v : n.outputs)
      if (v != kNoValue) {
        ++n_tensors;
        tensor_bytes += static_cast<double>(g.type(v).numel()) * dtype_size(g.type(v).dtype);
      }
  for (const Value& v : g.values) n_const += v.is_constant();
  fmt::print("tensors    {} computed ({} in all), {} constants (--tensors lists them)\n", n_tensors,
             human_bytes(tensor_bytes), n_const);
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
  struct Opts { std::string model; LoadFlags load; bool all_tensors = false, ir = false; };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  o->load.add_to(app);
  app.add_flag("--tensors", o->all_tensors, "List every intermediate tensor too");
  app.add_flag("--ir", o->ir, "Print the graph after loading in the IR text form (large constants elided)");
  return [o]() {
    Graph g = load_model_arg(o->model, o->load.options());
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
