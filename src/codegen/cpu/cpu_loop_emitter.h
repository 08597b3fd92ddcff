// C++ for a LoopKernel (loop_kernel.h): one `extern "C" void symbol(void* const* args)` function.
// OWNER: loop-kernel helper.
#pragma once

#include <string>
#include <vector>

#include "codegen/loop_kernel.h"
#include "support/code_writer.h"

namespace korch::cpu {

// Text every translation unit starts with once: includes (<math.h>, <stdint.h>), the
// `omp declare simd` declarations of the libm functions used, small inline helpers.
std::string cpu_prelude();

// Writes the kernel function. input_slots[i] / output_slots[i]: index into `args` of the kernel's
// i-th input / output; scratch buffer k of the build is at args[first_scratch_slot + k].
void emit_cpu_loop_kernel(const LoopKernel& k, const std::string& symbol,
                          const std::vector<int>& input_slots, const std::vector<int>& output_slots,
                          int first_scratch_slot, CodeWriter& w);

}  // namespace korch::cpu
