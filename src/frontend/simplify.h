// Graph simplification after folding: Identity and inference-mode Dropout are bypassed, then
// dead code (nodes and constants that reach no output) is removed.
// Before: typed, topologically ordered graph. After: same function, no Identity/Dropout except
// where one connects a graph input or constant straight to a graph output (kept so the output keeps
// its name), verify_graph() holds.
#pragma once

#include "ir/graph.h"

namespace korch {

void simplify_graph(Graph& g);

}  // namespace korch
