// korch ops: the supported operators with their opset ranges (the README table is generated from
// this, so it cannot drift from the code). If and Loop are not registered operators: the frontend
// inlines or unrolls them (frontend/control_flow.h), and only under the condition printed.
#include <algorithm>

#include "commands.h"
#include "frontend/control_flow.h"
#include "ir/op_registry.h"

namespace korch::cli {

Command add_ops(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  app.add_flag("--markdown", *markdown, "Print a Markdown table");
  app.footer("Examples:\n  korch ops\n  korch ops --markdown > ops.md");
  return [markdown]() {
    struct Row {
      std::string op_type;
      std::string versions;  // default-domain opsets, or another domain's version
      std::string condition;
    };
    const bool md = *markdown;
    auto opsets = [md](int lo, int hi) { return md ? fmt::format("{}–{}", lo, hi) : fmt::format("opsets {}..{}", lo, hi); };
    auto domain_version = [md](const std::string& domain) { return md ? domain + " 1" : "version 1 of " + domain; };
    std::vector<Row> rows;
    for (const OpDef* d : OpRegistry::global().all())
      rows.push_back({d->op_type, d->domain.empty() ? opsets(std::max(d->min_opset, kMinOpset), d->max_opset)
                                                    : domain_version(d->domain), ""});
    for (const InlinedOp& c : inlined_control_flow_ops())
      rows.push_back({c.op_type, opsets(c.min_opset, c.max_opset), c.condition});
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.op_type < b.op_type; });
    if (*markdown) {
      fmt::print("| operator | opsets |\n|---|---|\n");
      for (const Row& r : rows)
        fmt::print("| {} | {}{} |\n", r.op_type, r.versions, r.condition.empty() ? "" : ", " + r.condition);
    } else {
      for (const Row& r : rows)
        fmt::print("{:<28} {}{}\n", r.op_type, r.versions, r.condition.empty() ? "" : "  (" + r.condition + ")");
      fmt::print("{} operators\n", rows.size());
    }
    return 0;
  };
}

}  // namespace korch::cli
