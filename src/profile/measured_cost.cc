#include "profile/measured_cost.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "codegen/backend.h"
#include "codegen/kernel_signature.h"
#include "orchestrate/analytic_cost.h"
#include "profile/kernel_check.h"
#include "profile/progress.h"
#include "profile/tuning_db.h"
#include "support/error.h"

namespace korch {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// An optimistic roofline for step 4: no launch cost, every byte at 1.5x the cache bandwidth, twice
// the library GEMM peak and four times the vector figure. What it calls slower than the measured
// one-kernel-per-primitive cover is slower in fact.
DeviceSpec lower_bound_spec(DeviceSpec s) {
  s.name += "-lower-bound";
  s.cache_bandwidth *= 1.5;
  s.dram_bandwidth = s.cache_bandwidth;
  s.peak_linear *= 2;
  s.peak_vector *= 4;
  s.launch_seconds = 0;
  return s;
}

// The 1-minute load average (0 when unknown).
double machine_load() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return 0;
  double load = 0;
  if (std::fscanf(f, "%lf", &load) != 1) load = 0;
  std::fclose(f);
  return load;
}

KernelCost cost_of(const TuningRecord& r) {
  if (r.status == TuningStatus::kOk) return {r.seconds, fmt::format("measured {:.1f} us, spread {:.0f}%", r.seconds * 1e6, r.spread * 100)};
  if (r.status == TuningStatus::kFailed) return KernelCost::infeasible("failed the correctness gate: " + r.note);
  return KernelCost::infeasible(r.note);
}

}  // namespace

MeasureOptions MeasuredCostOptions::quick_measure_options() {
  MeasureOptions m;
  // Thousands of kernels per model: ~10 ms each (a 5 us kernel still gets hundreds of batched
  // samples), up to 0.3 s for the slowest (>= 3 reps).
  m.warmup_seconds = 0.002;
  m.min_reps = 5;
  m.min_seconds = 0.006;
  m.max_seconds = 0.3;
  return m;
}

MeasuredCost::MeasuredCost(Backend& backend, MeasuredCostOptions options)
    : backend_(backend), options_(std::move(options)) {
  runtime::Device* dev = backend_.timing_device();
  if (!dev)
    fail_unsupported("measured costs for {} need a device to time kernels on, and {} (use --cost analytic)",
                     backend_.name(), backend_.timing_unavailable());
  device_ = dev->id();
  db_ = TuningDb::open(options_.db_path.empty() ? TuningDb::default_path() : options_.db_path);
}

MeasuredCost::~MeasuredCost() = default;

std::string MeasuredCost::key_of(const std::string& hash) const {
  return make_tuning_key(hash, device_, backend_.generator_version());
}

void MeasuredCost::prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) {
  auto say = [&](const std::string& s) { if (options_.log) options_.log(s); };
  runtime::Device& dev = *backend_.timing_device();
  stats_ = {};
  stats_.candidates = static_cast<int64_t>(candidates.size());
  base_ = candidates.data();
  hash_of_.assign(candidates.size(), "");

  // 1-2. Signatures, then the database.
  auto t = Clock::now();
  std::map<std::string, int> first_of;  // hash -> representative candidate
  std::vector<std::string> keys;
  for (size_t i = 0; i < candidates.size(); ++i) {
    hash_of_[i] = content_hash(kernel_signature(g, candidates[i]));
    if (first_of.emplace(hash_of_[i], static_cast<int>(i)).second) keys.push_back(key_of(hash_of_[i]));
  }
  stats_.signatures = static_cast<int64_t>(first_of.size());
  std::map<std::string, TuningRecord> known = db_->get_many(keys);
  std::vector<std::string> todo;  // hashes to generate and measure, singletons first
  for (const auto& [hash, rep] : first_of) {
    auto it = known.find(key_of(hash));
    if (it != known.end() && it->second.status != TuningStatus::kInFlight && !options_.redo) {
      by_hash_[hash] = cost_of(it->second);
      ++stats_.db_hits;
    } else {
      todo.push_back(hash);
    }
  }
  std::stable_sort(todo.begin(), todo.end(), [&](const std::string& a, const std::string& b) {
    return candidates[static_cast<size_t>(first_of[a])].nodes.size() < candidates[static_cast<size_t>(first_of[b])].nodes.size();
  });
  stats_.seconds_signatures = since(t);
  say(fmt::format("measured costs: {} candidates, {} distinct kernels, {} in the tuning database ({}), {} to measure",
                  candidates.size(), first_of.size(), stats_.db_hits, db_->path(), todo.size()));
  if (todo.empty()) return;
  // A busy machine makes every parallel kernel wait for a descheduled thread (a scheduler tick,
  // milliseconds): such numbers are stored and reused, so say so.
  if (double load = machine_load(); load > std::thread::hardware_concurrency() - 0.5)
    say(fmt::format("warning: load average {:.1f} on {} cores: other processes compete for the CPU, so these "
                    "measurements will be slow and noisy (they are kept in the tuning database; delete it to redo them)",
                    load, std::thread::hardware_concurrency()));

  auto record = [&](const std::string& hash, TuningStatus status, double seconds, double spread, int reps,
                    const std::string& note) {
    TuningRecord r;
    r.key = key_of(hash);
    r.signature = hash;
    r.device = device_;
    r.generator = backend_.generator_version();
    r.status = status;
    r.seconds = seconds;
    r.spread = spread;
    r.reps = reps;
    r.note = note;
    r.created = static_cast<int64_t>(std::time(nullptr));
    db_->put(r);
    if (status != TuningStatus::kInFlight) by_hash_[hash] = cost_of(r);
  };

  // The reference run whose values every kernel is checked against (and fed with).
  std::vector<Tensor> values;
  bool have_reference = false;
  auto reference = [&] {
    if (have_reference) return;
    auto tr = Clock::now();
    values = reference_values(g, options_.seed);
    have_reference = true;
    stats_.seconds_reference += since(tr);
  };

  ProgressOptions bar_options;
  if (!options_.progress) bar_options.enabled = false;  // else KORCH_PROGRESS decides
  AnalyticCost lower_bound(lower_bound_spec(backend_.analytic_spec()), backend_.fusion_rules());
  std::map<NodeId, std::string> singleton_hash;
  for (size_t i = 0; i < candidates.size(); ++i)
    if (candidates[i].nodes.size() == 1 && !candidates[i].minimal_outputs)
      singleton_hash.emplace(candidates[i].nodes[0], hash_of_[i]);

  // Generates, compiles, checks and times `batch` (hashes).
  auto run_batch = [&](const std::vector<std::string>& batch, const std::string& what) {
    auto te = Clock::now();
    std::vector<std::unique_ptr<EmittedKernel>> emitted;
    std::vector<std::string> hashes;
    for (const std::string& h : batch) {
      auto k = std::make_unique<EmittedKernel>(backend_.emit(g, candidates[static_cast<size_t>(first_of[h])]));
      if (!k->ok) {
        ++stats_.unemittable;
        record(h, TuningStatus::kUnemittable, 0, 0, 0, k->reason);
        continue;
      }
      emitted.push_back(std::move(k));
      hashes.push_back(h);
    }
    stats_.seconds_emit += since(te);
    if (emitted.empty()) return;

    // Compile in units; a unit that fails is split so one bad kernel costs only itself.
    auto tc = Clock::now();
    std::vector<const EmittedKernel*> ks;
    int64_t with_source = 0;
    for (const auto& k : emitted) {
      ks.push_back(k.get());
      with_source += !k->source.empty();
    }
    const int64_t units = (with_source + options_.kernels_per_unit - 1) / options_.kernels_per_unit;
    say(fmt::format("{}: compiling {} kernels in {} translation units", what, emitted.size(), units));
    ProgressBar cbar(what + ": compiling", units, stderr, bar_options);
    CompiledKernels compiled = compile_kernels(backend_, dev, ks, options_.kernels_per_unit, [&](bool cached) { cached ? cbar.skip() : cbar.tick(); });
    cbar.finish();
    stats_.units_compiled += compiled.units_compiled;
    stats_.units_cached += compiled.units_cached;
    const std::vector<std::shared_ptr<runtime::KernelModule>>& module_of = compiled.module;
    const std::vector<std::string>& source_of = compiled.source_path;
    std::vector<bool> compile_failed(emitted.size(), false);
    for (size_t i = 0; i < emitted.size(); ++i) {
      if (compiled.error[i].empty()) continue;
      compile_failed[i] = true;
      ++stats_.failed;
      const std::string& msg = compiled.error[i];
      record(hashes[i], TuningStatus::kFailed, 0, 0, 0, msg.substr(0, 600));
      if (stats_.failures.size() < 8) stats_.failures.push_back(msg.substr(0, 300));
    }
    stats_.seconds_compile += since(tc);

    auto tm = Clock::now();
    reference();
    ProgressBar bar(what, static_cast<int64_t>(emitted.size()), stderr, bar_options);
    for (size_t i = 0; i < emitted.size(); ++i) {
      bar.tick();
      if (compile_failed[i]) continue;
      const EmittedKernel& k = *emitted[i];
      const std::string& h = hashes[i];
      // An in-flight record left by a process that died is in `known` (read once above).
      auto prev = known.find(key_of(h));
      int attempt = prev != known.end() && prev->second.status == TuningStatus::kInFlight ? prev->second.reps + 1 : 1;
      if (attempt > 2) {
        ++stats_.failed;
        record(h, TuningStatus::kFailed, 0, 0, 0, "crashed the profiling process twice (source " + source_of[i] + ")");
        continue;
      }
      record(h, TuningStatus::kInFlight, 0, 0, attempt, source_of[i]);
      std::string where = source_of[i].empty() ? "library step " + k.hash : source_of[i] + " (" + k.entry + ")";
      try {
        std::unique_ptr<runtime::DeviceKernel> kernel = dev.make_kernel(k.recipe, module_of[i]);
        KernelProbe probe(dev, *kernel, k, g, values);
        // A kernel that is the reference interpreter has nothing independent to be checked against.
        std::string bad;
        if (k.runs_reference()) ++stats_.unchecked_reference;
        else bad = probe.check(options_.tolerance);
        if (!bad.empty()) {
          ++stats_.failed;
          record(h, TuningStatus::kFailed, 0, 0, 0, where + ": " + bad);
          if (stats_.failures.size() < 8) stats_.failures.push_back(where + ": " + bad);
          continue;
        }
        MeasureOptions mo = options_.measure;
        if (!mo.clock) mo.clock = [&dev] { return dev.synchronized_seconds(); };
        if (!mo.before_sample) mo.before_sample = [&dev] { dev.flush_caches(); };  // no-op on the CPU
        Measurement m = measure([&] { probe.run(); }, mo);
        ++stats_.measured;
        // Still wider than max_spread after the re-takes: kept (the median of the quietest run),
        // but marked so, counted in the summary, and re-measured by --redo.
        if (m.noisy) ++stats_.noisy;
        record(h, TuningStatus::kOk, m.median, m.spread, m.reps,
               m.noisy ? fmt::format("{} (noisy: spread {:.0f}% after {} re-takes)", where, m.spread * 100, m.remeasures)
                       : where);
      } catch (const Error& e) {
        ++stats_.failed;
        record(h, TuningStatus::kFailed, 0, 0, 0, where + ": " + e.what());
        if (stats_.failures.size() < 8) stats_.failures.push_back(where + ": " + e.what());
      }
    }
    bar.finish();
    stats_.seconds_measure += since(tm);
  };

  std::vector<std::string> singles, rest;
  for (const std::string& h : todo)
    (candidates[static_cast<size_t>(first_of[h])].nodes.size() == 1 ? singles : rest).push_back(h);
  if (!singles.empty()) run_batch(singles, "profiling single-primitive kernels");

  // Step 4: prune by the optimistic bound against the measured one-kernel-per-primitive cover.
  if (options_.prune) {
    std::vector<std::string> keep;
    for (const std::string& h : rest) {
      const KernelCandidate& c = candidates[static_cast<size_t>(first_of[h])];
      double cover = 0;
      for (NodeId n : c.nodes) {
        auto sh = singleton_hash.find(n);
        auto sc = sh == singleton_hash.end() ? by_hash_.end() : by_hash_.find(sh->second);
        if (sc == by_hash_.end() || !sc->second.feasible()) { cover = -1; break; }
        cover += sc->second.seconds;
      }
      KernelCost lb = lower_bound.cost(g, c);
      if (cover > 0 && lb.feasible() && lb.seconds >= cover) {
        ++stats_.pruned;
        std::string why = fmt::format("skipped: its lower bound {:.1f} us is above its primitives run one by one ({:.1f} us measured)",
                                      lb.seconds * 1e6, cover * 1e6);
        by_hash_[h] = KernelCost::infeasible(why);
        if (stats_.pruned_examples.size() < 5) stats_.pruned_examples.push_back(fmt::format("{} primitives: {}", c.nodes.size(), why));
      } else {
        keep.push_back(h);
      }
    }
    rest.swap(keep);
    say(fmt::format("pre-pruning: {} kernels skipped (lower bound above their measured primitives), {} left",
                    stats_.pruned, rest.size()));
  }
  if (!rest.empty()) run_batch(rest, "profiling fused kernels");
  say(fmt::format("profiled: {} measured, {} failed the gate, {} unemittable, {} pruned; signatures {:.1f} s, "
                  "generate {:.1f} s, reference {:.1f} s, compile {:.1f} s ({} units, {} cached), measure {:.1f} s",
                  stats_.measured, stats_.failed, stats_.unemittable, stats_.pruned, stats_.seconds_signatures,
                  stats_.seconds_emit, stats_.seconds_reference, stats_.seconds_compile, stats_.units_compiled,
                  stats_.units_cached, stats_.seconds_measure));
}

KernelCost MeasuredCost::cost(const Graph& g, const KernelCandidate& c) {
  std::string hash;
  if (base_ && &c >= base_ && &c < base_ + hash_of_.size()) hash = hash_of_[static_cast<size_t>(&c - base_)];
  else hash = content_hash(kernel_signature(g, c));
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return KernelCost::infeasible("not measured (prepare() was not given this kernel)");
  return it->second;
}

}  // namespace korch
