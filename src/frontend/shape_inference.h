// Static shape/dtype inference fused with constant folding.
//
// Before: nodes topologically ordered; graph inputs and constants have types; node output types
//         are unknown (kUndefined).
// After:  every node output has a type; every node whose inputs are all constants (and whose op is
//         deterministic) has been evaluated with the reference interpreter and replaced by its
//         constant outputs. Folding is what resolves shape arithmetic (Shape -> Gather -> Concat ->
//         Reshape) so later ops see their shape inputs as constants.
// Errors name `model_path` and the node.
#pragma once

#include <string>

#include "ir/graph.h"

namespace korch {

// Outputs bigger than this many elements are not folded (only typed), to bound memory.
constexpr int64_t kMaxFoldElements = int64_t{1} << 26;
// An Expand/Tile of constants is folded only while its result stays this small (or no bigger than
// its inputs); beyond it the node stays, as fission's own builder does.
constexpr int64_t kMaxGrowingFoldElements = 4096;

void infer_shapes_and_fold(Graph& g, const std::string& model_path);

}  // namespace korch
