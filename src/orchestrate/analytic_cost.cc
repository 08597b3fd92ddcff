#include "orchestrate/analytic_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "ir/graph_stats.h"
#include "ir/primitive.h"
#include "ir/tensor.h"
#include "support/error.h"

namespace korch {

// ---- specs -------------------------------------------------------------------------------------

DeviceSpec cpu_spec() {
  // The 2-core AMD EPYC (Zen 4) dev machine, 2 threads. The runs behind each number, and the
  // commands, are in bench/results/device_specs.md.
  DeviceSpec s;
  s.name = "cpu";
  // measure_cpu_spec(2): median of 14 runs of the triad over 96 MiB (3x the L3), 2 threads.
  s.dram_bandwidth = 47e9;
  // L2 is 1 MiB per core (lscpu: "L2 2 MiB (2 instances)"); L3 32 MiB shared. A value of at most
  // 1 MiB is still in the private L2s when the next kernel reads it, alongside that kernel's other
  // operands; bigger values spill to L3/DRAM, which this two-level model charges as DRAM.
  s.cache_bytes = 1024.0 * 1024.0;
  // measure_cpu_spec(2): median of the same 14 runs, triad over 512 KiB per thread (in L2).
  s.cache_bandwidth = 224e9;
  // oneDNN 2.6 sgemm 1024^3 on 2 threads: 214 GFLOP/s (shared/environment-notes.md, quiet
  // machine); model GEMMs are smaller and reach less, so ~70% of it.
  s.peak_linear = 150e9;
  // A fused elementwise loop (max, mul, add, exp, mul, add, div per element, in L1, AVX2,
  // -ffast-math) ran at 8.5-9.4 G primitive ops/s on 2 threads: about one op per lane every 4-5
  // cycles.
  s.peak_vector = 10e9;
  // An empty `#pragma omp parallel for` on 2 threads (libgomp): 3.5 us in the quietest batches,
  // 13 us median on the shared machine.
  s.launch_seconds = 3e-6;
  s.threads = 2;
  return s;
}

DeviceSpec h200_spec() {
  DeviceSpec s;
  s.name = "h200";
  // NVIDIA H200 SXM product page / datasheet: 141 GB HBM3e at 4.8 TB/s.
  s.dram_bandwidth = 4.8e12;
  // H200 has H100's 50 MB L2, split in two partitions (NVIDIA Hopper architecture whitepaper);
  // half of it is what a value can count on while the kernel's other operands share the cache.
  s.cache_bytes = 25e6;
  // Chips and Cheese ("Nvidia's H100: Funny L2, and Tons of Bandwidth", 2023) measured roughly
  // 5.5 TB/s of L2 bandwidth on the H100 PCIe (114 SMs, <= 1755 MHz); the SXM part has 132 SMs at
  // up to 1980 MHz, so ~1.3x that. An estimate (the 5.5 figure is recalled from that article, not
  // re-checked), not a measurement of ours: see bench/results/device_specs.md.
  s.cache_bandwidth = 7e12;
  // 67 TFLOPS fp32 (non-tensor-core, NVIDIA datasheet). We need 1e-4 accuracy, so no TF32: a
  // cuBLAS SGEMM reaches ~70% of the CUDA-core peak on large problems.
  s.peak_linear = 0.7 * 67e12;
  // 67 TFLOPS counts an FMA as 2: a quarter of it is one element op per lane every other clock,
  // for a mix of simple ops and SFU transcendentals (exp/rsqrt at 16 per SM per clock, 1/8 of the
  // lanes). Elementwise kernels on this GPU are memory-bound long before that matters.
  s.peak_vector = 0.25 * 67e12;
  // Back-to-back kernel launches on one stream: ~2-4 us each as commonly measured; not measured here.
  s.launch_seconds = 3e-6;
  s.threads = 1;
  return s;
}

// ---- measurement -------------------------------------------------------------------------------

namespace {

// A blocking barrier (not a spinning one: on a shared 2-core machine a spinning thread steals the
// core its partner needs to finish the rep).
class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int64_t generation = generation_;
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  const int count_;
  int arrived_ = 0;
  int64_t generation_ = 0;
};

}  // namespace

double measure_triad_bandwidth(int threads, double working_set_bytes, int reps) {
  if (threads < 1 || threads > 1024) fail("measure_triad_bandwidth: threads must be 1..1024, got {}", threads);
  if (!(working_set_bytes > 0)) fail("measure_triad_bandwidth: working set must be positive");
  if (reps < 1) fail("measure_triad_bandwidth: reps must be at least 1, got {}", reps);
  const size_t n = std::max<size_t>(
      1024, static_cast<size_t>(working_set_bytes / threads / (3 * sizeof(float))));
  const double pass_bytes = 3.0 * sizeof(float) * static_cast<double>(n);  // 2 reads + 1 write
  // Small (cache-resident) sets repeat the triad within a rep so that one rep moves ~32 MiB per
  // thread: long enough for the clock and the barriers to be noise.
  const int passes = static_cast<int>(std::max(1.0, std::ceil(32.0 * 1024 * 1024 / pass_bytes)));

  Barrier sync(threads);
  // Each worker stamps its own start and end: a coordinating thread's clock read can come late
  // when the cores are shared (it wakes after the workers have finished), timing an empty rep.
  using Clock = std::chrono::steady_clock;
  std::vector<Clock::time_point> start(static_cast<size_t>(threads) * reps), end(start.size());
  std::atomic<double> sink{0};
  auto worker = [&](int t) {
    // Each thread allocates and first-touches its own arrays (its own cache, its own pages).
    std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
    for (size_t i = 0; i < n; ++i) { a[i] = 0; b[i] = 1; c[i] = 2; }
    float* __restrict pa = a.get();
    const float* __restrict pb = b.get();
    const float* __restrict pc = c.get();
    for (int r = -1; r < reps; ++r) {  // rep -1 is the untimed warm-up
      sync.arrive_and_wait();
      const Clock::time_point t0 = Clock::now();
      for (int p = 0; p < passes; ++p) {
        const float s = 1.0f + 1e-3f * static_cast<float>(p);
        for (size_t i = 0; i < n; ++i) pa[i] = pb[i] + s * pc[i];
      }
      if (r >= 0) {
        start[static_cast<size_t>(r * threads + t)] = t0;
        end[static_cast<size_t>(r * threads + t)] = Clock::now();
      }
    }
    // Reading the result keeps the stores alive.
    double old = sink.load();
    while (!sink.compare_exchange_weak(old, old + pa[n / 2])) {}
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (std::thread& t : pool) t.join();
  KORCH_CHECK(std::isfinite(sink.load()), "triad produced a non-finite value");
  std::vector<double> seconds;
  for (int r = 0; r < reps; ++r) {
    const auto first = start.begin() + r * threads, last = end.begin() + r * threads;
    seconds.push_back(std::chrono::duration<double>(*std::max_element(last, last + threads) -
                                                    *std::min_element(first, first + threads))
                          .count());
  }
  // The fastest rep, as STREAM reports: on a shared machine the slower ones measure the neighbours.
  const double best = *std::min_element(seconds.begin(), seconds.end());
  return pass_bytes * passes * threads / std::max(best, 1e-9);
}

DeviceSpec measure_cpu_spec(int threads) {
  DeviceSpec s = cpu_spec();
  s.name = "cpu-measured";
  s.threads = threads;
  // 96 MiB >> the 32 MiB L3; half of cache_bytes per thread stays in that thread's L2.
  s.dram_bandwidth = measure_triad_bandwidth(threads, 96.0 * 1024 * 1024, 15);
  s.cache_bandwidth = measure_triad_bandwidth(threads, 0.5 * s.cache_bytes * threads, 15);
  return s;
}

// ---- JSON --------------------------------------------------------------------------------------

namespace {

using nlohmann::json;

struct NumberField {
  const char* name;
  double DeviceSpec::*member;
  bool zero_ok;  // launch_seconds may be 0 (a device modelled without a fixed cost)
};
constexpr NumberField kNumberFields[] = {
    {"dram_bandwidth", &DeviceSpec::dram_bandwidth, false},
    {"cache_bytes", &DeviceSpec::cache_bytes, false},
    {"cache_bandwidth", &DeviceSpec::cache_bandwidth, false},
    {"peak_linear", &DeviceSpec::peak_linear, false},
    {"peak_vector", &DeviceSpec::peak_vector, false},
    {"launch_seconds", &DeviceSpec::launch_seconds, true},
};

}  // namespace

std::string device_spec_to_json(const DeviceSpec& s) {
  json j;
  j["name"] = s.name;
  for (const NumberField& f : kNumberFields) j[f.name] = s.*(f.member);
  j["threads"] = s.threads;
  return j.dump(2) + "\n";
}

DeviceSpec device_spec_from_json(const std::string& text, const std::string& source_name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail("{}: not valid JSON: {}", source_name, e.what());
  }
  if (!j.is_object()) fail("{}: a device spec must be a JSON object", source_name);
  DeviceSpec s;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty())
    fail("{}: field \"name\" is missing or not a non-empty string", source_name);
  s.name = name->get<std::string>();
  for (const NumberField& f : kNumberFields) {
    const auto it = j.find(f.name);
    if (it == j.end()) fail("{}: field \"{}\" is missing", source_name, f.name);
    const double v = it->is_number() ? it->get<double>() : std::nan("");
    if (!std::isfinite(v) || v < 0 || (v == 0 && !f.zero_ok))
      fail("{}: field \"{}\" must be a {} number, got {}", source_name, f.name,
           f.zero_ok ? "non-negative" : "positive", it->dump());
    s.*(f.member) = v;
  }
  const auto threads = j.find("threads");
  if (threads == j.end()) fail("{}: field \"threads\" is missing", source_name);
  if (!threads->is_number_integer() || threads->get<int64_t>() < 1 || threads->get<int64_t>() > 4096)
    fail("{}: field \"threads\" must be an integer 1..4096, got {}", source_name, threads->dump());
  s.threads = static_cast<int>(threads->get<int64_t>());
  // A misspelt field would otherwise be ignored silently (and its default used).
  for (const auto& [key, value] : j.items()) {
    bool known = key == "name" || key == "threads";
    for (const NumberField& f : kNumberFields) known |= key == f.name;
    if (!known) fail("{}: unknown field \"{}\"", source_name, key);
  }
  return s;
}

// ---- the roofline ------------------------------------------------------------------------------

namespace {

double value_bytes(const Graph& g, ValueId v) {
  const TensorType& t = g.type(v);
  return static_cast<double>(shape_numel(t.shape)) * dtype_size(t.dtype);
}

std::string human(double x, const char* unit) {
  static const char* const kPrefix[] = {"", "k", "M", "G", "T", "P"};
  int p = 0;
  while (std::abs(x) >= 1000 && p < 5) { x /= 1000; ++p; }
  return p == 0 ? fmt::format("{:.0f} {}", x, unit) : fmt::format("{:.1f} {}{}", x, kPrefix[p], unit);
}

}  // namespace

KernelWork kernel_work(const Graph& g, const KernelCandidate& c, const DeviceSpec& spec) {
  KernelWork w;
  std::vector<bool> seen(g.values.size(), false);
  auto add = [&](ValueId v) {
    if (v == kNoValue || seen[static_cast<size_t>(v)]) return;
    seen[static_cast<size_t>(v)] = true;
    const double bytes = value_bytes(g, v);
    (bytes <= spec.cache_bytes ? w.bytes_cached : w.bytes_dram) += bytes;
  };
  for (ValueId v : c.inputs) add(v);
  for (ValueId v : c.outputs) add(v);
  // Only node_stats' FLOPs: its bytes are per node, and a fused kernel keeps interior values in
  // registers.
  for (NodeId id : c.nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    const double flops = node_stats(g, n).flops;
    (primitive_kind(g, n) == PrimitiveKind::kLinear ? w.flops_linear : w.flops_vector) += flops;
  }
  return w;
}

KernelCost AnalyticCost::cost(const Graph& g, const KernelCandidate& c) {
  if (written_in_place(g, c)) return in_place_cost();
  std::string why = unfusable_reason(g, c, rules_);
  if (!why.empty()) return KernelCost::infeasible(std::move(why));
  const KernelWork w = kernel_work(g, c, spec_);
  const double memory = w.bytes_dram / spec_.dram_bandwidth + w.bytes_cached / spec_.cache_bandwidth;
  const double compute = w.flops_linear / spec_.peak_linear + w.flops_vector / spec_.peak_vector;
  KernelCost k;
  k.seconds = spec_.launch_seconds + std::max(memory, compute);
  k.reason = memory >= compute ? "memory-bound " + human(w.bytes_dram + w.bytes_cached, "B")
                               : "compute-bound " + human(w.flops_linear + w.flops_vector, "FLOP");
  return k;
}

}  // namespace korch
