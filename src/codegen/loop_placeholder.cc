// Placeholder until the loop-kernel implementation lands (deleted by that merge).
#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/loop_kernel.h"

namespace korch {
struct LoopKernel {};
LoopKernelBuild build_loop_kernel(const Graph&, const std::vector<NodeId>&, const std::vector<ValueId>&,
                                  const std::vector<ValueId>&) {
  return {nullptr, "loop kernels are not implemented yet", {}};
}
namespace cpu {
std::string cpu_prelude() { return "#include <math.h>\n"; }
void emit_cpu_loop_kernel(const LoopKernel&, const std::string&, const std::vector<int>&, const std::vector<int>&,
                          int, CodeWriter&) {}
}  // namespace cpu
}  // namespace korch
