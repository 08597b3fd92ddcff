// Merging linear primitives that share their input (a rewrite that CAN lose; see rewrite.h).
//
// Q/K/V projections read the same activation with different constant weights:
//   q = MatMul(x, Wq[K,Nq]);  k = MatMul(x, Wk[K,Nk]);  v = MatMul(x, Wv[K,Nv])
// and can run as one wider MatMul whose result is split along the last axis:
//   y = MatMul(x, W[K, Nq+Nk+Nv]);  q, k, v = Split(y, axis=-1, [Nq, Nk, Nv])
// with W = Concat(Wq, Wk, Wv, axis=-1) computed once (a constant). One launch and one pass over x
// instead of three, but the Split is a copy of the outputs (unless a later stage fuses it away)
// and small/odd widths may pick a worse kernel: whether it pays is a measurement, so simplify()
// never applies it; the orchestrator gets each site as an alternative.
// Likewise for Convs over the same input with identical attributes (group 1) and constant weights
// of equal shape but for the output channels: one Conv with the weights concatenated along the
// output channels (dim 0; constant biases too, a missing bias counting as zeros), then a Split
// along axis 1.
//
// Conditions: the weights are constants (f32/f64 or any dtype equal across the site) with equal
// dims except the concatenated one (MatMul: rank >= 2, equal leading dims [..., K]); every node
// of a site has the same left operand/input value and default domain; at least two nodes.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

// One merge opportunity: the names of the nodes (all MatMul, or all Conv; in graph order).
struct MergeSite {
  std::vector<std::string> matmuls;
};

// Every maximal group of MatMuls (and, separately, of Convs) that can be merged, in graph order.
std::vector<MergeSite> find_matmul_merges(const Graph& g);

// Merges the site's nodes into one MatMul/Conv followed by a Split (the old nodes become dead and
// are removed). Graph output names are kept. Throws korch::Error when the site no longer matches.
void apply_matmul_merge(Graph& g, const MergeSite& site);

}  // namespace korch
