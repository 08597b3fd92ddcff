// korch ops: the supported operators with their opset ranges (the README table is generated from
// this, so it cannot drift from the code).
#include "commands.h"
#include "ir/op_registry.h"

namespace korch::cli {

Command add_ops(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  app.add_flag("--markdown", *markdown, "Print a Markdown table");
  return [markdown]() {
    auto ops = OpRegistry::global().all();
    if (*markdown) {
      fmt::print("| operator | opsets |\n|---|---|\n");
      for (const OpDef* d : ops)
        fmt::print("| {} | {}–{} |\n", d->op_type, std::max(d->min_opset, kMinOpset), d->max_opset);
    } else {
      for (const OpDef* d : ops) fmt::print("{:<28} opsets {}..{}\n", d->op_type, std::max(d->min_opset, kMinOpset), d->max_opset);
      fmt::print("{} operators\n", ops.size());
    }
    return 0;
  };
}

}  // namespace korch::cli
