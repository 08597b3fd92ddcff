// Linear primitives (Conv, MatMul) on the CPU through oneDNN 2.6, with epilogues as post-ops.
// OWNER: linear helper. See its brief for the full contract.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace korch::cpu {

// Which part of a kernel runs as one oneDNN primitive.
struct LinearMatch {
  NodeId linear = -1;              // the Conv / MatMul node
  std::vector<NodeId> absorbed;    // kernel nodes executed inside the step (post-ops and the
                                   // Expand nodes that only feed a binary post-op)
  ValueId result = kNoValue;       // the value the step writes: the linear output or the last
                                   // absorbed node's output
  std::vector<ValueId> operands;   // values the step reads from outside the step, desc order
  // Serialisable description. Fields "operand_slots" (one per operand, -1) and "result_slot" (-1)
  // are filled in by the caller with args[] positions (cpu_kernel.h) before LinearStep::create.
  nlohmann::json desc;
};

struct LinearMatchResult {
  bool ok = false;
  LinearMatch match;
  std::string reason;  // when !ok: why this kernel's linear part cannot be emitted
};

// `nodes`: the kernel's nodes (ascending), exactly one linear primitive among them;
// `outputs`: the kernel's outputs. An absorbed node's output may be a kernel output only if it is
// `result`. Constant operands (weights) may be read from g at this point (e.g. to check shapes).
LinearMatchResult match_linear(const Graph& g, const std::vector<NodeId>& nodes,
                               const std::vector<ValueId>& outputs);

// The oneDNN primitive (created once; weights reordered on first run and kept, since weight
// arguments are constants whose pointer and contents never change).
class LinearStep {
 public:
  static std::unique_ptr<LinearStep> create(const nlohmann::json& desc);  // throws korch::Error
  virtual ~LinearStep() = default;
  virtual void run(void* const* args) = 0;
  // oneDNN's implementation name and the chosen layouts ("brg:avx512_core src 1x64x56x56
  // blocked 1:16 ..."), for logs, tests and the profiler's notes.
  virtual std::string implementation() const = 0;

  // Layout handoff (the runtime decides, runtime/executable.cc): when a step's result is read only
  // as the src of following steps whose primitives want the same layout, the producer writes it in
  // that layout and the consumers read it as is, skipping a reorder to plain and one back. On
  // mobilenet_v2 those reorders took more time than the convolutions (ONEDNN_VERBOSE).
  // Layouts are opaque keys ("" = plain row-major, no handoff possible).
  virtual std::string src_layout() const { return ""; }
  virtual std::string dst_layout() const { return ""; }
  virtual int64_t dst_layout_bytes() const { return 0; }  // buffer size of the result in dst_layout
  virtual int src_slot() const { return -1; }
  virtual int result_slot() const { return -1; }
  // Whether args[slot] is read as the src and nothing else (no bias, post-op or sum operand).
  virtual bool reads_only_as_src(int slot) const { (void)slot; return false; }
  // From now on args[src_slot()] holds the src in src_layout() / the result goes to
  // args[result_slot()] in dst_layout().
  virtual void set_src_in_layout(bool on) { (void)on; }
  // A residual read as a sum post-op: args[slot] read as that and nothing else; from now on it
  // holds the residual in dst_layout() (copied as is instead of reordered).
  virtual bool reads_only_as_sum(int slot) const { (void)slot; return false; }
  virtual void set_sum_in_layout(bool on) { (void)on; }
  virtual void set_dst_in_layout(bool on) { (void)on; }
};

}  // namespace korch::cpu
