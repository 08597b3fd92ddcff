// The canonical signature of a kernel: what it computes, independent of value and node names.
//
// Two candidates with the same signature run the same generated code at the same speed, so the
// signature keys the compiled-kernel cache and (in its canonical order, kernel_cost_signature) the
// tuning database, and repeated blocks of a model (or of different models) are generated, compiled
// and measured once.
// Constants come in two kinds (one rule for every backend, is_baked_constant):
//   * baked: scalars and integer tensors up to 4096 elements (Gather indices, Pad amounts) are
//     part of the generated code; their values are part of the signature;
//   * passed: every other constant (weights, biases; int8/uint8 tensors, which are quantized
//     weights) is a kernel argument like any input; only its type is part of the signature.
// Example: Conv(x, W1) -> Add(., Expand(b1)) -> Relu and the same with W2, b2 have one signature.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "orchestrate/kernel_candidate.h"
#include "support/hash.h"

namespace korch {

constexpr int64_t kMaxBakedIntegerConstant = 4096;

bool is_baked_constant(const Graph& g, ValueId v);

// The kernel's argument inputs: c.inputs without the baked constants, in c.inputs order.
std::vector<ValueId> kernel_arg_inputs(const Graph& g, const KernelCandidate& c);

// Canonical text: argument inputs by position and type, baked constants by value, every node's
// op type, attributes, operands (argument #k, baked constant, or output #o of local node #j) and
// output types, then the outputs in c.outputs order.
std::string kernel_signature(const Graph& g, const KernelCandidate& c);

// kernel_signature() of c with its nodes in a canonical order: among the nodes whose producers
// inside the kernel come earlier, the one whose op type, attributes, operands and output types
// read first (ties: c's order). The inputs follow in order of first use, the outputs in order of
// their producers. The same primitives written in another order (a rewritten graph sorted again:
// orchestrate/rewrite_choice.cc) get the same cost signature, though not the same
// kernel_signature(), whose generated code takes its arguments in another order but runs at the
// same speed. A kernel with one order only (a chain) keeps its kernel_signature(). Keys the
// measured costs (profile/measured_cost.h).
std::string kernel_cost_signature(const Graph& g, const KernelCandidate& c);

// The subgraph of one kernel as a stand-alone graph: argument inputs become graph inputs (in
// kernel_arg_inputs order), baked constants stay constants, outputs in c.outputs order. What the
// correctness gate runs in the reference interpreter.
Graph kernel_subgraph(const Graph& g, const KernelCandidate& c);

}  // namespace korch
