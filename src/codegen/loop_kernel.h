// The target-independent description of a loop kernel (what the CPU and CUDA emitters share).
//
// A loop kernel computes a convex set of non-linear primitives (elementwise, broadcast, layout,
// reduce, windowed reduce) from argument buffers into output buffers. It is described as data:
// iteration spaces (loop nests), index maps (affine + div/mod index expressions from loop
// variables to operand elements), expression DAGs for the arithmetic, and reduction structure
// (which loops reduce, the combiner and its identity). Emitters (cpu/cpu_loop_emitter.h, later
// cuda/) are thin printers of this description.
// OWNER: loop-kernel helper. See its brief for the full contract.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

struct LoopKernel;  // defined by the implementation (may move into this header)

struct LoopKernelBuild {
  std::shared_ptr<LoopKernel> kernel;  // null when the set cannot be emitted
  std::string reason;                  // why not (names the node and op)
  std::vector<int64_t> scratch_bytes;  // temporaries the kernel needs (e.g. reduction results)
};

// Describes computing `outputs` from `inputs` with `nodes` (ascending ids, all of them non-linear
// primitives of g). `inputs` are the values read from outside the set that are passed as
// arguments, in argument order; baked constants (is_baked_constant) are read from g directly.
LoopKernelBuild build_loop_kernel(const Graph& g, const std::vector<NodeId>& nodes,
                                  const std::vector<ValueId>& inputs,
                                  const std::vector<ValueId>& outputs);

}  // namespace korch
