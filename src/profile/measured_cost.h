// The measuring driver, one for every backend (codegen/backend.h): every candidate kernel is
// generated, compiled, checked against the reference interpreter and timed on the backend's
// timing device; results persist in the tuning database.
//
// prepare() does the work for the whole candidate list at once:
//   1. canonical signature per candidate (kernel_signature.h); identical kernels are handled once,
//      in this prepare() and across the earlier ones of this object (their costs stand: not looked
//      up or counted again);
//   2. tuning-database lookup by (signature and the step revision of a library kernel
//      (Backend::step_revision), device id, generator version): hits cost nothing;
//   3. the rest is generated (Backend::emit); what cannot be emitted costs infinity with the
//      generator's reason;
//   4. single-primitive kernels are measured first; a larger kernel whose analytic lower bound
//      (an optimistic roofline) already exceeds the measured cost of its primitives run one by one
//      is skipped (that cover computes everything the kernel does, so the kernel can never be in
//      an optimal plan) and reported;
//   5. the rest is compiled in batches (many kernels per translation unit, Backend::compile);
//   6. each kernel runs on the values of one reference-interpreter run of the whole graph on seeded
//      random inputs (kernel_check.h); outputs outside 1e-4 relative L2 of the reference mark it
//      failed (infinite cost, with its source path); the rest is timed (measure.h, with the
//      device's synchronising clock) and stored;
//   7. on a backend with schedule variants, kernels of at least schedule_min_seconds have every
//      schedule checked and timed (the default again beside them); the fastest is kept, with its
//      name, which the plan's emit then asks for (KernelCost::variant).
// Every record is committed as soon as it exists, so a killed compile loses at most the kernel in
// flight. A kernel that was in flight when a previous process died is retried once; if it is
// found in flight again (it crashes the process), it is recorded as failed.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "orchestrate/kernel_cost.h"
#include "profile/measure.h"
#include "profile/pace.h"

namespace korch {

class Backend;
class TuningDb;

// The fewest kernels (besides records taken again) a measuring pass waits for a slow machine's pace
// for: fewer are measured at once (MeasuredCost::prepare).
constexpr size_t kKernelsWorthAWait = 16;

struct MeasuredCostOptions {
  std::string db_path;          // "" = TuningDb::default_path()
  bool prune = true;            // step 4
  bool redo = false;            // measure again what the tuning database has (and replace it)
  int kernels_per_unit = 120;   // kernels per translation unit
  MeasureOptions measure = quick_measure_options();
  uint64_t seed = 1;            // random graph inputs for the reference run
  double tolerance = 1e-4;      // correctness gate, relative L2
  // Step 7: a backend with a schedule space (Backend::schedule_variants: the CUDA backend's loop
  // kernels) has every schedule of a kernel timed once the default's time is at least this, and
  // the fastest kept; shorter kernels are bound by their launch, where schedules hardly differ.
  bool tune_schedules = true;
  double schedule_min_seconds = 10e-6;
  bool progress = true;         // progress bars on stderr (KORCH_PROGRESS=0 also turns them off)
  // The machine's pace (profile/pace.h): every record carries it; measuring waits for a slow
  // machine within max_wait_seconds; records taken slow are measured again at the machine's pace.
  PaceOptions pace;
  // Per MeasuredCost (a compile), only as many of those as an estimated `retake_budget_seconds`
  // of measuring allows (retake_estimate_seconds each), the longest first and always one; later
  // compiles at the machine's pace take the rest. A warm compile stays seconds long (issue 11:
  // under 30 s) on a machine whose slow phases had most records taken slow (warm compiles
  // measured them all again: yolox_nano for 114 s; 64 of vit_b_16's longest took 27 s). Negative:
  // every one.
  double retake_budget_seconds = 5;
  std::function<void(const std::string&)> log;  // one line per phase; may be empty
  static MeasureOptions quick_measure_options();
};

// What measuring a kernel of `kernel_seconds` again is estimated to take (retake_budget_seconds).
double retake_estimate_seconds(double kernel_seconds);

struct MeasuredCostStats {
  int64_t candidates = 0, signatures = 0, db_hits = 0, unemittable = 0, pruned = 0, noisy = 0, failed = 0, measured = 0,
          units_compiled = 0, units_cached = 0,
          unchecked_reference = 0,                  // timed without the gate: they are the reference interpreter
      schedules_timed = 0, schedules_improved = 0,  // step 7: schedules timed; kernels a non-default won
      schedules_failed = 0,                         // schedules that failed the gate or did not compile (never chosen)
      schedule_crashes = 0,                         // records a process left while timing schedules (default kept)
      slow_pace = 0,     // stored now with a slow pace (above PaceOptions::slow; a tuned schedule: its slowest)
      retaken_slow = 0;  // records taken slow, measured again at the machine's pace
  double seconds_signatures = 0, seconds_emit = 0, seconds_reference = 0, seconds_compile = 0,
         seconds_measure = 0;
  std::vector<std::string> failures;         // "source path: what differs", first few
  std::vector<std::string> pruned_examples;  // first few
  // Adds `o` (another prepare's) to these: counts and seconds summed, the example lists joined.
  MeasuredCostStats& operator+=(const MeasuredCostStats& o);
};

class MeasuredCost : public CostProvider {
 public:
  // Throws korch::Error (kUnsupported) when the backend has no timing device here.
  MeasuredCost(Backend& backend, MeasuredCostOptions options = {});
  ~MeasuredCost() override;
  std::string name() const override { return "measured:" + device_; }
  void prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) override;
  KernelCost cost(const Graph& g, const KernelCandidate& c) override;
  // Over every prepare() so far (a compile with rewrite choices prepares once per variant graph).
  MeasuredCostStats stats() const {
    MeasuredCostStats all = earlier_;
    all += stats_;
    return all;
  }
  const std::string& device() const { return device_; }
  // The timing device's pace (the closed loop waits on it before its runs too).
  MachinePace& pace() { return *pace_; }
  // Whether c's constant inputs reach the timing device's cold_constant_bytes: it is measured with
  // them evicted before each call (KernelProbe::evict_constants), under a key of its own.
  bool measures_cold(const Graph& g, const KernelCandidate& c) const;

 private:
  // The tuning record's signature hash: the kernel's signature and its step's revision
  // (Backend::step_revision).
  std::string hash_of(const Graph& g, const KernelCandidate& c) const;
  // The tuning key of a hash prepare() saw: its kernel's Backend::measured_generator.
  int generator_of(const std::string& hash) const;
  std::string key_of(const std::string& hash) const;
  Backend& backend_;
  MeasuredCostOptions options_;
  std::string device_;
  std::unique_ptr<TuningDb> db_;
  std::unique_ptr<MachinePace> pace_;
  MeasuredCostStats stats_;    // this prepare()'s
  MeasuredCostStats earlier_;  // the earlier ones', summed
  std::map<std::string, KernelCost> by_hash_;
  double retake_spent_ = 0;  // estimated, by every prepare() (MeasuredCostOptions::retake_budget_seconds)
  // The last prepare()'s candidates and their signature hashes, so that cost() need not hash a
  // candidate again. It looks one up by address, and trusts the hash only for the same graph
  // object (GraphInstance) and a candidate that still holds the nodes and outputs it held.
  const KernelCandidate* base_ = nullptr;
  uint64_t graph_instance_ = 0;
  std::vector<KernelCandidate> prepared_;
  std::vector<std::string> hash_of_;
  int64_t cold_bytes_ = 0;                   // the timing device's cold_constant_bytes()
  std::map<std::string, int> generator_of_;  // hash -> the generator version its record is keyed by
};

}  // namespace korch
