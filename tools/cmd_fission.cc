// korch fission MODEL.onnx -o PRIM.onnx: operator fission followed by the never-losing rewrites.
// Writes the primitive graph as a standard ONNX model (primitives are ONNX operators), so
// onnxruntime can run it, and prints the primitive counts by kind and the operators kept whole.
#include "commands.h"
#include "ir/graph_stats.h"
#include "pipeline/pipeline.h"
#include "support/strings.h"
#include "frontend/onnx_writer.h"
#include "ir/primitive.h"

namespace korch::cli {

Graph fission_with_report(const Graph& g, bool print) {
  PrimitiveReport rep;
  Graph p = lower_to_primitives(g, &rep);
  if (print) {
    fmt::print("fission    {} operators -> {} primitives; rewrites -> {} (", rep.fission.operators_in,
               rep.fission.primitives_out, rep.simplify.nodes_after);
    bool first = true;
    for (const auto& [kind, n] : primitive_counts(p)) {
      fmt::print("{}{} {}", first ? "" : ", ", n, kind);
      first = false;
    }
    fmt::print(")\n");
    GraphStats ps = graph_stats(p);
    fmt::print("           primitive graph: {} FLOPs, {} read, {} written (one kernel per primitive)\n",
               human_count(ps.flops), human_bytes(ps.bytes_read), human_bytes(ps.bytes_written));
    if (!rep.fission.kept_opaque.empty()) {
      fmt::print("           operators without a fission rule, kept whole:");
      for (const auto& [op, n] : rep.fission.kept_opaque) fmt::print(" {}x{}", n, op);
      fmt::print("\n");
    }
  }
  return p;
}

Command add_fission(CLI::App& app) {
  struct Opts { std::string model, out; LoadFlags load; };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file")->required();
  app.add_option("-o,--output", o->out, "Output .onnx file for the primitive graph")->required();
  o->load.add_to(app);
  return [o]() {
    Graph g = load_onnx(o->model, o->load.options());
    Graph p = fission_with_report(g, true);
    save_onnx(p, o->out);
    fmt::print("wrote {}\n", o->out);
    return 0;
  };
}

}  // namespace korch::cli
