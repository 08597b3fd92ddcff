// The compiler as one straight function per stage group, readable top to bottom.
// Each stage writes its result under KORCH_DUMP when set.
#pragma once

#include "fission/fission.h"
#include "ir/graph.h"
#include "rewrite/channels_last.h"
#include "rewrite/rewrite.h"

namespace korch {

struct PrimitiveReport {
  FissionReport fission;
  SimplifyReport simplify;
  ChannelsLastReport channels_last;
};

// Operator graph (from the frontend) -> simplified primitive graph:
//   fission (every operator -> primitives)  ->  never-losing rewrites to a fixed point
//   [-> channels_last: convolutions and what lies between them on [N, spatial.., C] tensors, then
//    the rewrites again]
Graph lower_to_primitives(const Graph& g, PrimitiveReport* report = nullptr, bool channels_last = false);

}  // namespace korch
