// Micro-batching: a batch of N independent samples run as N / k runs of the batch-k plan.
//
// At batch 16 a CNN's activations (77 MB for one of mobilenet_v2's expansions) stream from DRAM
// between every pair of kernels; at batch 1 the same layers' activations (4.8 MB at most) stay in
// the last-level cache and the weights are read from it N times. Measured on this 2-core EPYC
// (bench/results/micro_batch.md): mobilenet_v2 16 x 3.5 ms against 71 ms for the batch-16 plan.
// A micro-batch of k > 1 reads each weight once for k samples (mobilenet_v2's 14 MB of weights
// leave the cache when a neighbour on this VM claims it: 4 x batch 4 then ran 57-60 ms where
// 16 x batch 1 ran 56-91). Which is fastest depends on the model (resnet18's 3x3 convolutions
// reuse their weights across the batch and win at batch 16), so compile_model times the
// candidates and keeps the fastest (CompileOptions::micro_batch; compile.h).
//
// split_batch(model, k): the model at batch k, or why it cannot run that way. It applies when
// every graph input and output has the same leading dimension N > 1 and k divides N (k < N): the
// inputs get k there, shapes are inferred again, and a Reshape of a value leading with a multiple
// of N whose constant target starts with a multiple of N (a batch folded into a constant by the
// exporter, or heads folded into the batch: N*H, and back) gets k (k*H) there. The result must give
// every output [k, rest...], and it must compute the same function: the reference interpreter runs
// the model on seeded random inputs, and the batch-k graph on four of its micro-batches (the
// first, the last, two between); every output must agree within 1e-5 (relative L2), so an
// operator that mixes samples (a reduction over the batch, a batch-first/sequence-first transpose)
// is caught whatever form it takes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "pipeline/compile.h"

namespace korch {

struct BatchSplit {
  std::optional<Graph> micro;  // the model at batch k, when it splits
  int64_t batches = 1;         // N
  int64_t size = 1;            // k
  std::string why_not;         // when it does not (empty: it does)
};

// whole_outputs: the reference interpreter's outputs of the whole batch on random_inputs(model,
// seed), when the caller has them from an earlier call (filled in when empty).
BatchSplit split_batch(const Graph& model, int64_t k = 1, uint64_t seed = 0,
                       std::vector<Tensor>* whole_outputs = nullptr);

// The micro-batch sizes CompileOptions::micro_batch asks for, in the order they are tried:
// "auto" {4, 1}, "on" {1}, "off" {}, "K" {K}. Throws on anything else.
std::vector<int64_t> micro_batch_sizes(const std::string& mode);

// What an earlier compile's "auto" trials decided, kept in the tuning database: a warm compile of
// the same model (its graph text, weights elided, and the sizes tried) with the same options that
// shape its plans (`options`: a text the caller makes of them) on the same device (the timing
// device's id, threads included) and generator compiles only the plan they chose, where it
// would compile all three again and time them (a warm squeezenet1_0 compile at batch 16: 25.8 s
// with the trials, 8.8 s with the kept decision; bench/results/micro_batch.md), and a noisy trial
// of a later compile cannot undo a quiet earlier one
// (mobilenet_v2 at batch 16 lost its batch-4 plan that way: cpu_latency_batch16_epyc_dec07.md).
// Only a decision is kept: every trial timed, none noisy or the chosen micro-batches having won
// their own trial in quiet runs (a smaller size's noisy trial then leaves them standing), and not
// while the machine ran slow (a pace above PaceOptions::slow; unknown passes). redo (`--redo`) ignores it and times the
// trials again, replacing it. One record per model under (signature, device + "+micro-batch", generator); its note is
// the report as JSON (micro_batch_json), its seconds the chosen plan's time.
class MicroBatchMemory {
 public:
  MicroBatchMemory(const std::string& db_path, const std::string& device, int generator, const Graph& model,
                   const std::vector<int64_t>& sizes, const std::string& options, bool redo);
  // The report of the earlier compile's trials (MicroBatchReport::recalled set), when one decided.
  std::optional<MicroBatchReport> recall() const;
  // Keeps `m` when it decided (decided()) and `pace` (the slowest the compiles met) is not slow.
  // Returns why it was not kept ("" when it was).
  std::string remember(const MicroBatchReport& m, double pace) const;
  static bool decided(const MicroBatchReport& m);

 private:
  std::string db_path_, device_, signature_;
  int generator_;
  bool redo_;
};

// The options that shape a compile's plans (layout, denormals, the candidate limits, recompute, the
// memory budget, rewrite choices, the closed loop), as MicroBatchMemory's `options`: a decision
// reached under some options is not one for others.
std::string plan_options_text(const CompileOptions& o);

// compile_model's step 9, over its steps 1-8: compile(g, dir, k) compiles the batch-k graph into
// the artifact folder dir; write(r, dir) writes r (r.micro set) there again, as a micro-batched
// artifact. For each size (one that divides N and splits), the batch-k artifact is compiled beside
// `dir` and, when `timed`, run beside the best artifact so far (run_side_by_side, alternating
// runs; taken again once when either spread is above max_spread, and never chosen while it stays
// so): it replaces it when 3% faster (the noise two alternating medians keep here). Untimed, the first size that splits
// is the artifact. A size whose compile fails (korch::Error other than I/O) is skipped. `r` ends up describing the
// artifact in `dir`; every other folder is removed, also on an exception.
struct MicroBatchSteps {
  std::function<CompileResult(const Graph& g, const std::string& dir, int64_t k)> compile;
  std::function<void(CompileResult& r, const std::string& dir)> write;
};
// `memory` (timed only; may be null) remembers a decision reached here. `earlier` (may be null): a
// recall() that kept the whole batch, which is then the outcome (nothing compiled or timed).
void choose_micro_batches(const Graph& model, const std::string& dir, const std::vector<int64_t>& sizes, bool timed,
                          int cpu_threads, double max_spread, CompileResult& r, const MicroBatchSteps& steps,
                          const std::function<void(const std::string&)>& say, const MicroBatchMemory* memory = nullptr,
                          const MicroBatchReport* earlier = nullptr);

// Step 9 as an earlier compile decided (`earlier`: a recall() that chose micro-batches of k): the
// batch-k plan alone is compiled into `dir` and written as the micro-batched artifact, into `r`.
// False (and nothing in `dir` to rely on) when the model no longer splits at k or that compile fails
// (korch::Error other than I/O): the caller compiles as if nothing were recalled.
bool compile_earlier_micro_batches(const Graph& model, const std::string& dir, const MicroBatchReport& earlier,
                                   CompileResult& r, const MicroBatchSteps& steps,
                                   const std::function<void(const std::string&)>& say);

}  // namespace korch
