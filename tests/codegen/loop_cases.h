// The loop-kernel test table: every loop primitive alone (several attribute settings each) and
// the fused chains fission produces (softmax, layernorm, GELU, head reshapes, ...). The CPU
// tests and the CUDA tests run the same cases.
#pragma once

#include <vector>

#include "loop_test_util.h"

namespace korch::testing {

std::vector<LoopCase> op_cases();
std::vector<LoopCase> chain_cases();
// Softmax over the last axis as fission writes it (ReduceMax, Sub, Exp, ReduceSum, Div with Expands).
ValueId softmax(GraphBuilder& b, ValueId x, const Shape& s);
ValueId expand_to(GraphBuilder& b, ValueId v, const Shape& s);

}  // namespace korch::testing
