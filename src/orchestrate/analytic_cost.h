// The analytic cost provider: a roofline over each candidate kernel's bytes and FLOPs.
//
//   seconds = launch + max( bytes_moved / bandwidth ,  linear_flops / peak_linear
//                                                       + other_flops / peak_vector )
// where bytes_moved counts each distinct input value once (constants included: weights are read)
// and each written output once. A value that fits in the last-level cache (`cache_bytes`) moves
// at `cache_bandwidth` instead of `dram_bandwidth`: on a CPU a small intermediate written by one
// kernel is still in cache when the next reads it, so fusing it away saves less than DRAM traffic
// would suggest. FLOPs come from node_stats() (graph_stats.h) per primitive kind.
//
// Specs: cpu_spec() is this repository's reference CPU (numbers measured on the 2-core dev machine,
// see bench/results/device_specs.md); measure_cpu_spec() re-measures bandwidth on the machine at
// hand (about a second); h200_spec() is NVIDIA's published H200 SXM figures. Specs read and write
// as JSON so `korch compile --device-spec FILE` can use any other machine's numbers.
#pragma once

#include <string>

#include "orchestrate/kernel_cost.h"

namespace korch {

struct DeviceSpec {
  std::string name;
  double dram_bandwidth = 0;   // bytes/s
  double cache_bytes = 0;      // last-level cache; values at most this big move at cache speed
  double cache_bandwidth = 0;  // bytes/s
  double peak_linear = 0;      // FLOP/s reachable by a library GEMM/conv (fp32)
  double peak_vector = 0;      // FLOP/s for elementwise/reduce arithmetic (fp32)
  double launch_seconds = 0;   // fixed cost per kernel (dispatch, thread wake-up, launch)
  int threads = 1;             // CPU threads the numbers assume (1 for a GPU)
};

DeviceSpec cpu_spec();
DeviceSpec h200_spec();
// Measures DRAM and cache bandwidth (copy/triad over buffers far larger / smaller than the cache)
// with `threads` threads, and keeps cpu_spec()'s FLOP figures. Takes about a second.
DeviceSpec measure_cpu_spec(int threads);
// One measurement behind measure_cpu_spec(): the triad a[i] = b[i] + s*c[i] on `threads` threads,
// each over its own three float arrays totalling working_set_bytes / threads (repeated within a
// rep when small, so a rep lasts long enough to time); bytes/s of the fastest of `reps` timed reps
// after one warm-up, counting two reads and one write per element (as STREAM does). Tests call it
// with small sizes to stay fast.
double measure_triad_bandwidth(int threads, double working_set_bytes, int reps);

std::string device_spec_to_json(const DeviceSpec& s);
// Throws korch::Error (kInvalid) naming the field when a field is missing or not a positive number.
DeviceSpec device_spec_from_json(const std::string& text, const std::string& source_name);

// Bytes and FLOPs a candidate moves and computes, as the roofline sees them.
struct KernelWork {
  double bytes_dram = 0;     // bytes of values too big for the cache
  double bytes_cached = 0;   // bytes of values that fit
  double flops_linear = 0;
  double flops_vector = 0;
};
KernelWork kernel_work(const Graph& g, const KernelCandidate& c, const DeviceSpec& spec);

class AnalyticCost : public CostProvider {
 public:
  explicit AnalyticCost(DeviceSpec spec, FusionRules rules = {}) : spec_(std::move(spec)), rules_(std::move(rules)) {}
  std::string name() const override { return "analytic:" + spec_.name; }
  // Infinite (with the reason) when unfusable_reason(rules) objects; else the roofline above.
  KernelCost cost(const Graph& g, const KernelCandidate& c) override;
  const DeviceSpec& spec() const { return spec_; }

 private:
  DeviceSpec spec_;
  FusionRules rules_;
};

}  // namespace korch
