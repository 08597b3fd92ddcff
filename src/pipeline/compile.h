// The whole compiler, one function for every target: model graph -> artifact folder.
//
//   compile_model(model, dir, options):
//     1. lower_to_primitives      fission + never-losing rewrites (pipeline.h), channels-last
//                                 activations where the backend's convolutions prefer them
//     2. every primitive must have a kernel of its own on the target, or no plan exists
//     3. costs                    measured on the target's timing device (profile/measured_cost.h),
//                                 or the analytic roofline restricted to what the backend can emit
//     4. orchestrate              candidates under the backend's fusion rules -> BLP -> plan
//     5. emit                     each planned kernel (Backend::emit)
//     6. write the artifact       program + weights (runtime/artifact.h), the backend's kernel
//                                 module, plan.json + primitives.txt
//     7. verify                   when the costs were not measured (so no kernel of the plan has
//                                 passed the correctness gate yet): each kernel of the written
//                                 artifact runs on the backend's check device on reference values;
//                                 a kernel that fails is excluded, so is every candidate overlapping
//                                 it that fails the gate on its own, and the plan is solved again
//     8. close the loop           measured costs: run the plan in the model (profile/in_model.h),
//                                 its kernels' in-model times replace their isolated costs; while
//                                 some kernel departed by more than 10%, solve again (3-6, 8) until
//                                 the plan repeats (a few rounds at most, within a time budget);
//                                 then an earlier compile's best plan and the plan of the isolated
//                                 costs alone, when no round ran them, run too; keep the fastest
//                                 plan the loop ran; time it beside the unfused baseline
//                                 (alternating runs)
//     9. micro-batches            a model with a batch of N > 1 independent samples is compiled again
//                                 at batch k (steps 1-8); N / k runs of that plan are timed beside
//                                 the batch-N plan (alternating runs) and the faster is the artifact
//                                 (pipeline/micro_batch.h)
//    10. check (model_check)      the written artifact runs once on seeded random inputs against the
//                                 reference interpreter (pipeline/model_check.h); a miss fails the
//                                 compile, the artifact left for inspection
// `unfused` compiles the baseline instead: one kernel per primitive, no search; `korch bench` runs
// it next to the optimised plan so the orchestration's own gain is visible.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "ir/graph.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/orchestrate.h"
#include "orchestrate/plan_json.h"
#include "pipeline/model_check.h"
#include "profile/measured_cost.h"
#include "runtime/memory_plan.h"

namespace korch {

enum class CostSource { kMeasured, kAnalytic };

// The closed loop's machine-drift bound: a run whose kernels' median in-model time moved more than
// this from their stored in-model times is taken again, then not stored (close_the_loop).
constexpr double kMaxDrift = 0.08;
// Run-to-run noise of a whole plan's time (3%): a plan replaces another (a later closed-loop round,
// an earlier compile's plan, a micro-batched artifact) only when it ran in under this fraction of
// the other's time.
constexpr double kBeyondNoise = 0.97;
// The kept plan's kernel-by-kernel run and its runs beside the unfused plan agree within this, or
// the first is taken again (settle_in_model_run).
constexpr double kKeptAgreement = 0.10;
// A compile is warm when the database held in-model times for kernels making up at least this
// share of its first plan's predicted time (LoopReport::warm_share).
constexpr double kWarmShare = 0.9;

struct CompileOptions {
  std::string target = "cpu";       // the backend (codegen/backend.h)
  Backend* backend = nullptr;       // when set, used instead of make_backend(target) (not owned)
  int cpu_threads = 2;              // cpu: threads kernels run and are measured with
  OrchestrateOptions orchestrate;   // its candidate fusion rules are replaced by the backend's
  CostSource cost = CostSource::kMeasured;
  std::optional<DeviceSpec> spec;   // analytic costs: default the backend's analytic_spec()
  MeasuredCostOptions measured;     // measured costs
  bool unfused = false;
  // Activation layout: "auto" (channels-last where the backend prefers it), "nchw" (as the model
  // has it) or "channels-last" (rewrite/channels_last.h).
  std::string layout = "auto";
  // cpu: the artifact runs with denormal floats flushed to zero (x86 FTZ/DAZ; runtime/cpu/
  // cpu_device.h): what an operation on one costs on Intel cores (a microcode assist each) made
  // swin_t's masked-attention MatMuls 30x slower. A denormal's magnitude is under 1.2e-38, so
  // outputs stay within fp32's 1e-4 of the reference; false keeps IEEE gradual underflow.
  bool flush_denormals = true;
  bool verify = true;               // step 7
  bool close_loop = true;           // step 8 (false: isolated costs alone)
  int loop_rounds = 3;
  // The closed loop starts a third round (or later), or solves and runs the plan of the isolated
  // costs alone after its rounds, only within this many seconds (warm compiles under 30 s: issue 11).
  double loop_budget_s = 15;
  int loop_runs = 5;                // least timed runs of the model per round (at least 1 s of them)
  double loop_max_spread = 0.15;    // a run whose spread is wider is taken again once, then marked noisy
  double loop_max_drift = kMaxDrift;  // a run that drifts more (LoopReport::Round::drift) is taken again once,
                                      // then not stored (slower) or stored over the old times (faster)
  // Step 9: "auto" (measured costs on the CPU: micro-batches of 4 and 1 timed against the batch-N
  // plan, the fastest kept), "on" (micro-batches of 1 whenever the samples are independent; no
  // timing), a number k (micro-batches of k, no timing) or "off".
  std::string micro_batch = "auto";
  bool model_check = false;         // step 10
  std::string model_name;           // recorded in plan.json and the manifest
  std::function<void(const std::string&)> log;  // one line per phase; may be empty
};

struct VerifyReport {
  bool ran = false;
  std::string device;                 // the check device
  int64_t kernels = 0;                // kernels checked (last round)
  int64_t reference = 0;              // kernels that are the reference interpreter: not checked
  int rounds = 0;                     // plans written (1 = the first one passed)
  std::vector<std::string> failures;  // "kernel: what differs", every round
  int64_t gated = 0;                  // candidates overlapping a failure, checked on their own
  int64_t gate_failures = 0;          // of those, how many failed too
};

struct LoopReport {
  bool ran = false;
  int64_t loaded = 0;  // in-model costs found in the tuning database at the start
  int64_t left_slow = 0;  // found, but taken while the machine ran slow (profile/pace.h): taken again
  // The share of the first plan's predicted time in kernels the database held in-model times for
  // (also those left out for their pace): at least kWarmShare makes a warm compile, whose second
  // round too runs only within loop_budget_s.
  double warm_share = 0;
  struct Round {
    double predicted = 0, measured = 0;
    int departures = 0;
    double spread = 0;   // of the run's whole-run times, after its re-take if any
    bool noisy = false;  // spread above 15% even after the re-take
    // Median of the plan's kernels' in-model times against their stored in-model times (1: too
    // few were stored).
    double drift = 1;
    bool drifted = false;    // above 1 + loop_max_drift even after a re-take: nothing of it stored
    // Below 1 - loop_max_drift even after it, or above it at the machine's pace: its times
    // replaced the stored.
    bool refreshed = false;
    double pace = 0;    // the machine's while the run was taken (profile/pace.h; 0 unknown)
    bool slow = false;  // that pace was a slow phase: the plan was not solved again on its times
  };
  std::vector<Round> rounds;
  int kept = 0;                   // the round whose plan was kept (1-based)
  double kept_pace = 0;           // the machine's pace while its run was taken (profile/pace.h; 0 unknown)
  bool kept_at_pace = false;      // that run was slow: predicted from in-model times taken at the pace
  double to_whole_runs = 1;       // its whole runs' median over its kernels' medians, applied to their times
  bool earlier_plan = false;      // it is an earlier compile's plan, which ran faster again
  bool isolated_plan = false;     // it is the plan of the isolated costs alone, run after the rounds and faster
  double predicted = 0, measured = 0;
  double unfused_isolated = 0;
  // The unfused plan and the kept plan timed side by side (run_side_by_side, in every compile): the
  // gain printed and plan.json's unfused_s come from these two medians.
  double unfused_measured = 0, plan_beside_unfused = 0;
  bool unfused_noisy = false;  // either's spread was above loop_max_spread in those runs
  // The kept plan's kernel-by-kernel run departed from plan_beside_unfused by more than
  // kKeptAgreement and was taken again (the faster kept; first_measured: the first run's median);
  // agrees: the kept run is within kKeptAgreement of plan_beside_unfused.
  bool retaken = false, agrees = true;
  double first_measured = 0;
  // When a later round's plan ran fastest: its median and the first round's, timed side by side
  // (choose_kept_round in profile/in_model.h); empty otherwise.
  std::optional<std::pair<double, double>> candidate_beside_first;
  // The kept run's drift from the stored in-model times when slower beyond loop_max_drift (else 1):
  // the predicted latency is its kernel times over this (the quieter state the database describes).
  double kept_drift = 1;
  // Its kernel-by-kernel runs still slower than its runs beside the unfused plan (SettledRun::scale,
  // when that is the faster state): the predicted latency is its kernel times times this (else 1).
  double kept_scale = 1;
};

// The closed loop's rounds as JSON (manifest.json and `korch compile --json` alike); `runs`: runs
// of the plan per model run (a micro-batched artifact's manifest gives whole-run times).
nlohmann::json loop_rounds_json(const LoopReport& loop, double runs = 1);

struct MicroBatchReport {
  int64_t batches = 1;  // the model's batch N (the inputs' leading dimension); 1: not batched
  int64_t size = 1;     // the micro-batch k of the artifact, when chosen
  bool chosen = false;  // the artifact runs its batch-k plan N / k times
  struct Trial {
    int64_t size = 1;          // k
    double seconds = 0;        // its N / k runs, timed beside the best plan so far ("auto")
    double against = 0;        // that plan, in the same alternating runs
    int64_t against_size = 0;  // its k (0: the batch-N plan)
    bool noisy = false;        // spread above max_spread even when taken again
    bool kept = false;
  };
  std::vector<Trial> trials;        // micro-batch sizes compiled, in order
  double whole_s = 0, micro_s = 0;  // "auto": the batch-N plan and the chosen one, as timed (seconds)
  std::string why_not;              // not chosen: why
  // "auto": when the trials are an earlier compile's (MicroBatchMemory, pipeline/micro_batch.h), the
  // unix time they were recorded at; 0 when they were timed by this compile.
  int64_t recalled = 0;
  int64_t runs() const { return chosen ? batches / size : 1; }  // plan runs per model run
};
nlohmann::json micro_batch_json(const MicroBatchReport& m);
// Why none of m.trials was kept, trial by trial: slower, not beyond the noise (kBeyondNoise), or
// faster but in runs too noisy to trust. "" without trials.
std::string micro_batch_why_not(const MicroBatchReport& m);

struct CompileResult {
  Graph primitives;
  OrchestrateResult orchestration;
  std::vector<EmittedKernel> kernels;  // one per planned kernel, plan order
  MeasuredCostStats measured;          // when costs were measured
  std::string cost_model;              // provider name
  std::string target, module;          // the backend, and what its artifact module holds
  VerifyReport verify;
  LoopReport loop;
  runtime::MemoryReport memory;
  PlanMetadata meta;                   // timing per phase
  // Step 9. When chosen, everything above describes the batch-k plan (its graph, kernels and
  // per-run times are one micro-batch's); the manifest's plan_seconds and measured_seconds are
  // N / k times its own.
  MicroBatchReport micro;
  std::optional<ModelCheck> check;  // step 10, when asked
};

// The defaults the CLI and the Python API share. Measured costs need a device to time kernels on:
// the CPU always; a GPU for cuda (the CUDA runtime is not built yet), so cuda defaults to analytic.
CostSource default_cost_source(const std::string& target);
// Measured costs carry a few percent of noise (spread is recorded per kernel); proving a plan
// optimal to 0% over them buys nothing, and on some models (vit_b_16, convnext_tiny) CBC then runs
// to its time limit. The solver stops within 0.5% of its bound instead, unless asked otherwise.
constexpr double kMeasuredGap = 0.005;
inline double default_gap(CostSource cost) { return cost == CostSource::kMeasured ? kMeasuredGap : 0.0; }

// Throws korch::Error naming the node and op when a primitive has no kernel on the target,
// (kUnsupported) when the target cannot do what is asked here (measured costs without a GPU),
// and when the artifact cannot be written.
CompileResult compile_model(const Graph& model, const std::string& artifact_dir, const CompileOptions& options);

}  // namespace korch
