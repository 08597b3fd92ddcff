// The measured CPU cost provider: every candidate kernel is generated, compiled, checked against
// the reference interpreter and timed on this machine; results persist in the tuning database.
//
// prepare() does the work for the whole candidate list at once:
//   1. canonical signature per candidate (kernel_signature.h); identical kernels are handled once;
//   2. tuning-database lookup by (signature, device, generator version): hits cost nothing;
//   3. the rest is generated (emit_cpu_kernel); what cannot be emitted costs infinity with the
//      generator's reason;
//   4. single-primitive kernels are measured first; a larger kernel whose analytic lower bound
//      (an optimistic roofline) already exceeds the measured cost of its primitives run one by one
//      is skipped (that cover computes everything the kernel does, so the kernel can never be in
//      an optimal plan) and reported;
//   5. the rest is compiled in batches (many kernels per translation unit, cpu_compiler.h);
//   6. each kernel runs on the values of one reference-interpreter run of the whole graph on seeded
//      random inputs (its inputs are the reference's values, so no per-kernel interpreter run and
//      no implausible inputs); outputs outside 1e-4 relative L2 of the reference mark it failed
//      (infinite cost, with its source path); the rest is timed (measure.h) and stored.
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

namespace korch {

class TuningDb;

struct MeasuredCostOptions {
  std::string db_path;          // "" = TuningDb::default_path()
  int threads = 2;              // OpenMP threads kernels run with (part of the device id)
  bool prune = true;            // step 4
  int kernels_per_unit = 120;   // kernels per translation unit
  MeasureOptions measure = quick_measure_options();
  uint64_t seed = 1;            // random graph inputs for the reference run
  double tolerance = 1e-4;      // correctness gate, relative L2
  bool progress = true;         // progress bars on stderr (KORCH_PROGRESS=0 also turns them off)
  std::function<void(const std::string&)> log;  // one line per phase; may be empty
  static MeasureOptions quick_measure_options();
};

struct MeasuredCostStats {
  int64_t candidates = 0, signatures = 0, db_hits = 0, unemittable = 0, pruned = 0,
          failed = 0, measured = 0, units_compiled = 0, units_cached = 0;
  double seconds_signatures = 0, seconds_emit = 0, seconds_reference = 0, seconds_compile = 0,
         seconds_measure = 0;
  std::vector<std::string> failures;         // "source path: what differs", first few
  std::vector<std::string> pruned_examples;  // first few
};

class MeasuredCpuCost : public CostProvider {
 public:
  explicit MeasuredCpuCost(MeasuredCostOptions options = {});
  ~MeasuredCpuCost() override;
  std::string name() const override { return "measured:" + device_; }
  void prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) override;
  KernelCost cost(const Graph& g, const KernelCandidate& c) override;
  const MeasuredCostStats& stats() const { return stats_; }
  const std::string& device() const { return device_; }

 private:
  std::string key_of(const std::string& hash) const;
  MeasuredCostOptions options_;
  std::string device_;
  std::unique_ptr<TuningDb> db_;
  MeasuredCostStats stats_;
  std::map<std::string, KernelCost> by_hash_;
  const KernelCandidate* base_ = nullptr;  // the list prepare() saw, to map cost() calls back
  std::vector<std::string> hash_of_;
};

}  // namespace korch
