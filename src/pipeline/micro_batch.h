// Micro-batching: a batch of N independent samples run as N runs of the batch-1 plan.
//
// At batch 16 a CNN's activations (77 MB for one of mobilenet_v2's expansions) stream from DRAM
// between every pair of kernels; at batch 1 the same layers' activations (4.8 MB at most) stay in
// the last-level cache and the weights are read from it N times. Measured on this 2-core EPYC
// (bench/results/micro_batch.md): mobilenet_v2 16 x 3.5 ms against 71 ms for the batch-16 plan.
// Which is faster depends on the model (resnet18's 3x3 convolutions reuse their weights across
// the batch and win at batch 16), so compile_model times both and keeps the faster
// (CompileOptions::micro_batch; compile.h).
//
// split_batch(model): the model at batch 1, or why it cannot run that way. It applies when every
// graph input and output has the same leading dimension N > 1: the inputs get 1 there, shapes are
// inferred again, and a Reshape whose constant target shape starts with N (a batch folded into a
// constant by the exporter) gets 1 there too. The result must give every output [1, rest...], and
// it must compute the same function: the reference interpreter runs the model on seeded random
// inputs, and the batch-1 graph on four of its samples (the first, the last, two between); every
// output must agree within 1e-5 (relative L2), so an operator that mixes samples (a reduction over
// the batch, a batch-first/sequence-first transpose) is caught whatever form it takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "ir/graph.h"

namespace korch {

struct BatchSplit {
  std::optional<Graph> one;  // the model at batch 1, when it splits
  int64_t batches = 1;       // N
  std::string why_not;       // when it does not (empty: it does)
};

BatchSplit split_batch(const Graph& model, uint64_t seed = 0);

}  // namespace korch
