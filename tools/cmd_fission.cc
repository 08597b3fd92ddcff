// korch fission MODEL.onnx -o PRIM.onnx: operator fission followed by the never-losing rewrites.
// Writes the primitive graph as a standard ONNX model (primitives are ONNX operators), so
// onnxruntime can run it, and prints the primitive counts by kind and the operators kept whole.
#include <algorithm>

#include "commands.h"
#include "ir/graph_stats.h"
#include "pipeline/pipeline.h"
#include "rewrite/alternatives.h"
#include "support/strings.h"
#include "frontend/onnx_writer.h"
#include "ir/primitive.h"

namespace korch::cli {

FissionSummary summarize_fission(const Graph& g) {
  FissionSummary s;
  s.primitives = lower_to_primitives(g, &s.report);
  s.kinds = primitive_counts(s.primitives);
  s.stats = graph_stats(s.primitives);
  for (const Alternative& a : find_alternatives(s.primitives)) s.alternatives[a.rule]++;
  return s;
}

Graph fission_with_report(const Graph& g, bool print) {
  if (!print) return lower_to_primitives(g);
  FissionSummary s = summarize_fission(g);
  const PrimitiveReport& rep = s.report;
  fmt::print("fission    {} operators -> {} primitives; rewrites -> {} (", rep.fission.operators_in,
             rep.fission.primitives_out, rep.simplify.nodes_after);
  bool first = true;
  for (const auto& [kind, n] : s.kinds) {
    fmt::print("{}{} {}", first ? "" : ", ", n, kind);
    first = false;
  }
  fmt::print(")\n");
  fmt::print("           primitive graph: {} FLOPs, {} read, {} written (one kernel per primitive)\n",
             human_count(s.stats.flops), human_bytes(s.stats.bytes_read), human_bytes(s.stats.bytes_written));
  if (!s.alternatives.empty()) {
    fmt::print("           rewrite alternatives for the orchestrator (not applied):");
    for (const auto& [rule, n] : s.alternatives) fmt::print(" {}x{}", n, rule);
    fmt::print("\n");
  }
  if (!rep.fission.kept_opaque.empty()) {
    fmt::print("           operators without a fission rule, kept whole:");
    for (const auto& [op, n] : rep.fission.kept_opaque) fmt::print(" {}x{}", n, op);
    fmt::print("\n");
  }
  return std::move(s.primitives);
}

Command add_fission(CLI::App& app) {
  struct Opts { std::string model, out; LoadFlags load; std::vector<std::string> apply; };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file, or builtin:NAME")->required();
  app.add_option("-o,--output", o->out, "Output .onnx file for the primitive graph")->required();
  o->load.add_to(app);
  app.add_option("--apply-alternative", o->apply,
                 "Apply every alternative of this rewrite rule (repeatable; 'all'), for experiments and tests; "
                 "the orchestrator normally chooses");
  app.footer(
      "Examples:\n"
      "  korch fission model.onnx -o model.prims.onnx           primitives as an ONNX graph (for Netron)\n"
      "  korch fission model.onnx -o rewritten.onnx --apply-alternative all");
  return [o]() {
    Graph g = load_model_arg(o->model, o->load.options());
    Graph p = fission_with_report(g, true);
    if (!o->apply.empty()) {
      // 'all' = every rule except scale_before_matmul, the inverse of scale_after_matmul (applying
      // both would undo each other). Each rule is applied at most as many times as it had sites when
      // its turn came: applying one site can expose another.
      std::vector<std::string> rules;
      for (const std::string& r : o->apply) {
        if (r != "all") { rules.push_back(r); continue; }
        for (const char* x : {"reduce_sum_as_matmul", "scale_after_matmul", "transpose_into_einsum",
                              "transpose_of_matmul", "merge_matmuls", "sparse_matmul_as_gathers", "matvec_as_reduce"})
          rules.push_back(x);
      }
      std::map<std::string, int> applied;
      for (const std::string& rule : rules) {
        auto sites = [&] {
          std::vector<Alternative> alts = find_alternatives(p), mine;
          for (Alternative& a : alts)
            if (a.rule == rule) mine.push_back(std::move(a));
          return mine;
        };
        size_t budget = sites().size();
        for (size_t k = 0; k < budget; ++k) {
          std::vector<Alternative> alts = sites();
          if (alts.empty()) break;
          alts.front().apply(p);
          applied[rule]++;
        }
      }
      verify_graph(p, true);
      fmt::print("applied   ");
      for (const auto& [rule, n] : applied) fmt::print(" {}x{}", n, rule);
      fmt::print(" ({} primitives)\n", p.nodes.size());
    }
    save_onnx(p, o->out);
    fmt::print("wrote {}\n", o->out);
    return 0;
  };
}

}  // namespace korch::cli
