#include "rewrite/rewrite.h"

#include <cstdlib>
#include <set>

#include "support/strings.h"

namespace korch {

const std::vector<RewritePass>& simplification_passes() {
  static const std::vector<RewritePass> passes = {
      {"normalize_reshapes", normalize_reshapes},
      {"remove_noop_layout", remove_noop_layout},
      {"merge_transposes", merge_transposes},
      {"merge_reshapes", merge_reshapes},
      {"merge_view_chains", merge_view_chains},
      {"slice_of_concat", slice_of_concat},
      {"regroup_sliced_concat", regroup_sliced_concat},
      {"hoist_elementwise_over_concat", hoist_elementwise_over_concat},
      {"slice_elementwise_of_concat", slice_elementwise_of_concat},
      {"remove_identities", remove_identities},
      {"remove_neutral_elements", remove_neutral_elements},
      {"remove_double_negation", remove_double_negation},
      {"fold_constants", fold_constants},
      {"eliminate_common_subexpressions", eliminate_common_subexpressions},
      {"fold_scale_into_linear", fold_scale_into_linear},
      {"fold_linear_into_linear", fold_linear_into_linear},
      {"sink_broadcasts", sink_broadcasts},
      {"conv_over_upsampled_concat", conv_over_upsampled_concat},
  };
  return passes;
}

namespace {
// Experiment hook for before/after measurements: KORCH_SKIP_REWRITES=pass,pass leaves those
// simplification passes out (names as in simplification_passes()).
const std::set<std::string>& skipped_passes() {
  static const std::set<std::string> skipped = [] {
    std::set<std::string> s;
    if (const char* e = std::getenv("KORCH_SKIP_REWRITES"))
      for (const std::string& name : split(e, ',')) s.insert(name);
    return s;
  }();
  return skipped;
}
}  // namespace

void simplify(Graph& g, const SimplifyOptions& options, SimplifyReport* report) {
  SimplifyReport rep;
  rep.nodes_before = static_cast<int>(g.nodes.size());
  for (rep.iterations = 0; rep.iterations < options.max_iterations;) {
    ++rep.iterations;
    bool changed = false;
    for (const RewritePass& p : simplification_passes()) {
      if (skipped_passes().count(p.name) != 0 || !p.run(g)) continue;
      changed = true;
      rep.changed_by[p.name]++;
      g.remove_dead_code();
      if (options.verify) {
        try {
          verify_graph(g, true);
        } catch (const Error& e) {
          rethrow_with_context(e, "rewrite pass " + p.name);
        }
      }
      if (options.after_pass) options.after_pass(p.name, g);
    }
    if (!changed) {
      rep.fixed_point = true;
      break;
    }
  }
  g.remove_dead_code();
  rep.nodes_after = static_cast<int>(g.nodes.size());
  if (report) *report = rep;
}

}  // namespace korch
