// The channels-last layout pass: convolutions and the elementwise, reduction and concatenation
// work between them run on [N, spatial.., C] tensors, so a backend whose convolutions are fastest
// on channels-last memory (oneDNN's brgconv on AVX-512 reads and writes NHWC) needs no reorder
// around them; the layout changes that remain are explicit Transpose primitives, which the
// orchestrator fuses into kernels and prices like any other primitive.
//
// Before: a primitive graph (after simplify). After: the same function; every f32 Conv without a
// bias input of rank 3-5, and every int8 ConvInteger without a weight zero point, is a
// channels-last Conv / ConvInteger (attribute channels_last = 1, ir/ops/conv.cc)
// between two Transposes, and those Transposes have been moved past every node that can compute
// on channels-last operands, where they cancel (merge_transposes). Run simplify() afterwards.
//
// Worked example (shapes NCHW [1,8,4,4]; T_last = Transpose [0,2,3,1], T_first = [0,3,1,2]):
//     y = Conv(x, W); r = Relu(Add(y, Expand(b[1,8,1,1]))); z = Conv(r, W2)
// becomes
//     y' = Conv_cl(T_last(x), W)                      y' [1,4,4,8]
//     r' = Relu(Add(y', Expand(Reshape(b, [1,1,1,8]), [1,4,4,8])))
//     z  = T_first(Conv_cl(r', W2))
// with one Transpose at the graph input and one at the output instead of a reorder per conv.
//
// Nodes the Transposes move past (T_first is the channels-first Transpose of perm p):
//   elementwise   every non-scalar input is T_first(a), a constant (transposed, folded later),
//                 an Expand of such a constant or of a small value, or a value with one non-unit
//                 dim (reshaped): computed on the channels-last operands, then T_first
//   Reduce*       T_first(a) with constant axes A: Reduce(a, p[A]); keepdims: then T_first;
//                 keepdims = 0 only when the kept dims stay in order
//   Concat        every input T_first(a_i) or constant: Concat(a_i, axis p[axis]), then T_first
//   MaxPool, AveragePool   T_first(a), no Indices output: the channels-last pool of a (attribute
//                 channels_last = 1, ir/ops/pool.cc), then T_first
// Everything else (LpPool, Resize, Reshape of a spatial tensor, Slice, Pad) keeps its input
// Transpose: a layout conversion the orchestrator sees and costs.
//
// Why a pass and not a per-value choice in the BLP: the BLP picks kernels over one primitive graph;
// a layout per value multiplies every candidate by its operand layouts. Here the layout changes are
// primitives of the graph, so the plan already pays for each one that remains, and whether the
// pass runs at all is the backend's say (Backend::prefers_channels_last: on the CPU, whether oneDNN has a
// jit kernel for NHWC convolutions; measured faster than NCHW with reorders on AVX-512 and AVX2).
#pragma once

#include "ir/graph.h"

namespace korch {

struct ChannelsLastReport {
  int convolutions = 0;  // Convs made channels-last
  int moved = 0;         // nodes the channels-first Transposes were moved past
};

// Returns whether the graph changed. The graph is left with dead nodes; simplify() removes them.
bool to_channels_last(Graph& g, ChannelsLastReport* report = nullptr);

}  // namespace korch
