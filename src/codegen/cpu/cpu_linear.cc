// Placeholder until the linear helper's implementation lands (owner: linear helper).
#include "codegen/cpu/cpu_linear.h"

#include "support/error.h"

namespace korch::cpu {

LinearMatchResult match_linear(const Graph&, const std::vector<NodeId>&, const std::vector<ValueId>&) {
  return {false, {}, "linear kernels are not implemented yet"};
}

std::unique_ptr<LinearStep> LinearStep::create(const nlohmann::json&) {
  fail_unsupported("linear kernels are not implemented yet");
}

}  // namespace korch::cpu
