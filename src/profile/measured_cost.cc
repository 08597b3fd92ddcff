#include "profile/measured_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <optional>
#include <set>
#include <thread>

#include "codegen/backend.h"
#include "codegen/kernel_signature.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/kernel_candidate.h"
#include "profile/kernel_check.h"
#include "profile/progress.h"
#include "profile/tuning_db.h"
#include "support/clock.h"
#include "support/error.h"

namespace korch {

namespace {

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

// What a record of a kernel measured with its weights cold (KernelProbe::evict_constants) says.
constexpr const char* kColdNote = ", its weights evicted before each call";

// Alternating rounds for the kernels of one linear primitive (check_and_time's groups).
constexpr int kGroupRounds = 3;

KernelCost cost_of(const TuningRecord& r) {
  if (r.status == TuningStatus::kOk) {
    const bool cold = r.note.find(kColdNote) != std::string::npos;
    // A record left in flight by schedule tuning holds the default's time.
    const bool tuned = !r.variant.empty() && r.variant != TuningRecord::kVariantInFlight;
    return {r.seconds,
            fmt::format("measured {:.1f} us, spread {:.0f}%{}{}", r.seconds * 1e6, r.spread * 100,
                        cold ? ", weights cold" : "", tuned ? ", schedule " + r.variant : ""),
            tuned ? r.variant : ""};
  }
  if (r.status == TuningStatus::kFailed) return KernelCost::infeasible("failed the correctness gate: " + r.note);
  return KernelCost::infeasible(r.note);
}

}  // namespace

double retake_estimate_seconds(double kernel_seconds) {
  // Generating, checking against the reference and timing a kernel (its schedules too, past 10 us)
  // took about 0.4 s for vit_b_16's 64 longest (1-5 ms) and tens of milliseconds for short ones.
  return 0.03 + 100 * kernel_seconds;
}

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
  cold_bytes_ = dev->cold_constant_bytes();
  db_ = TuningDb::open(options_.db_path.empty() ? TuningDb::default_path() : options_.db_path);
  pace_ = std::make_unique<MachinePace>(*dev, *db_, device_, options_.pace, options_.log);
}

MeasuredCost::~MeasuredCost() = default;

MeasuredCostStats& MeasuredCostStats::operator+=(const MeasuredCostStats& o) {
  for (auto [mine, theirs] : {std::pair{&candidates, o.candidates},
                              {&signatures, o.signatures},
                              {&db_hits, o.db_hits},
                              {&unemittable, o.unemittable},
                              {&pruned, o.pruned},
                              {&noisy, o.noisy},
                              {&failed, o.failed},
                              {&measured, o.measured},
                              {&units_compiled, o.units_compiled},
                              {&units_cached, o.units_cached},
                              {&unchecked_reference, o.unchecked_reference},
                              {&schedules_timed, o.schedules_timed},
                              {&schedules_improved, o.schedules_improved},
                              {&schedules_failed, o.schedules_failed},
                              {&schedule_crashes, o.schedule_crashes},
                              {&slow_pace, o.slow_pace},
                              {&retaken_slow, o.retaken_slow}})
    *mine += theirs;
  for (auto [mine, theirs] : {std::pair{&seconds_signatures, o.seconds_signatures}, {&seconds_emit, o.seconds_emit},
                              {&seconds_reference, o.seconds_reference}, {&seconds_compile, o.seconds_compile},
                              {&seconds_measure, o.seconds_measure}})
    *mine += theirs;
  for (const std::string& f : o.failures)
    if (failures.size() < 8) failures.push_back(f);
  for (const std::string& e : o.pruned_examples)
    if (pruned_examples.size() < 5) pruned_examples.push_back(e);
  return *this;
}

std::string MeasuredCost::hash_of(const Graph& g, const KernelCandidate& c) const {
  // A kernel measured with its weights cold (KernelProbe::evict_constants) has a key of its own:
  // its records from before were taken with them hot.
  return content_hash(kernel_cost_signature(g, c) + backend_.step_revision(g, c) +
                      (measures_cold(g, c) ? "\nconstants measured cold" : ""));
}

bool MeasuredCost::measures_cold(const Graph& g, const KernelCandidate& c) const {
  return cold_bytes_ > 0 && constant_input_bytes(g, kernel_arg_inputs(g, c)) >= cold_bytes_;
}

int MeasuredCost::generator_of(const std::string& hash) const {
  auto it = generator_of_.find(hash);
  return it == generator_of_.end() ? backend_.generator_version() : it->second;
}

std::string MeasuredCost::key_of(const std::string& hash) const {
  return make_tuning_key(hash, device_, generator_of(hash));
}

void MeasuredCost::prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) {
  auto say = [&](const std::string& s) { if (options_.log) options_.log(s); };
  runtime::Device& dev = *backend_.timing_device();
  earlier_ += stats_;
  stats_ = {};
  stats_.candidates = static_cast<int64_t>(candidates.size());
  base_ = candidates.data();
  graph_instance_ = g.instance.id();
  prepared_ = candidates;
  hash_of_.assign(candidates.size(), "");

  // 1-2. Signatures, then the database.
  auto t = Clock::now();
  std::map<std::string, int> first_of;  // hash -> representative candidate
  std::vector<std::string> keys;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (written_in_place(g, candidates[i])) continue;  // nothing to measure (cost())
    hash_of_[i] = hash_of(g, candidates[i]);
    if (by_hash_.count(hash_of_[i]) != 0) continue;  // an earlier prepare() of this compile has its cost
    if (first_of.emplace(hash_of_[i], static_cast<int>(i)).second) {
      generator_of_[hash_of_[i]] = backend_.measured_generator(g, candidates[i]);
      keys.push_back(key_of(hash_of_[i]));
    }
  }
  stats_.signatures = static_cast<int64_t>(first_of.size());
  std::map<std::string, TuningRecord> known = db_->get_many(keys);
  std::vector<std::string> todo;  // hashes to generate and measure, singletons first
  std::set<std::string> untuned;  // measured on the default schedule only
  std::vector<std::string> taken_slow;  // records measured while the machine ran slow
  std::set<std::string> retake;         // of those, measured again now (never pruned: they were kept once)
  std::set<std::string> slow_here;      // stored now with a slow pace (stats_.slow_pace counts them)
  // The pace of the record `hash` holds now: slow_here and stats_.slow_pace follow it.
  auto stored_at = [&](const std::string& hash, double pace) {
    const bool slow = pace_->is_slow(pace);
    if (slow == (slow_here.count(hash) > 0)) return;
    if (slow)
      slow_here.insert(hash);
    else
      slow_here.erase(hash);
    stats_.slow_pace += slow ? 1 : -1;
  };
  for (const auto& [hash, rep] : first_of) {
    auto it = known.find(key_of(hash));
    if (it != known.end() && it->second.status != TuningStatus::kInFlight && !options_.redo) {
      by_hash_[hash] = cost_of(it->second);
      ++stats_.db_hits;
      if (it->second.status == TuningStatus::kOk && it->second.variant.empty()) untuned.insert(hash);
      else if (it->second.variant == TuningRecord::kVariantInFlight) ++stats_.schedule_crashes;
      if (it->second.status == TuningStatus::kOk && pace_->is_slow(it->second.pace)) taken_slow.push_back(hash);
    } else {
      todo.push_back(hash);
    }
  }
  // Records taken on a slow machine are measured again when it runs at its pace now, so a plan
  // does not weigh kernels timed in two machine states against each other: the longest first
  // (they weigh most in a plan), within retake_budget_seconds per compile.
  const double budget = options_.retake_budget_seconds;
  if (!taken_slow.empty() && (budget < 0 || retake_spent_ < budget)) {
    const double now = pace_->current();
    if (now > 0 && !pace_->is_slow(now)) {
      std::stable_sort(taken_slow.begin(), taken_slow.end(), [&](const std::string& a, const std::string& b) {
        return by_hash_.at(a).seconds > by_hash_.at(b).seconds;
      });
      size_t n = 0;
      for (const std::string& h : taken_slow) {
        const double cost = retake_estimate_seconds(by_hash_.at(h).seconds);
        if (budget >= 0 && n > 0 && retake_spent_ + cost > budget) break;
        retake_spent_ += cost;
        ++n;
        by_hash_.erase(h);
        untuned.erase(h);
        todo.push_back(h);
        retake.insert(h);
      }
      stats_.db_hits -= static_cast<int64_t>(n);
      stats_.retaken_slow = static_cast<int64_t>(n);
      say(
          fmt::format("{} kernels were measured while the machine ran slow: {} measured again at its pace now "
                      "({:.2f}x){}",
                      taken_slow.size(), n == taken_slow.size() ? std::string("all") : fmt::format("the {} longest", n),
                      now, n == taken_slow.size() ? "" : "; later compiles at its pace take the rest"));
    }
  }
  // A slow machine is waited for (MachinePace::settle) only when enough is to be measured for the
  // wait to pay: not for records taken again because the machine ran at its pace a moment ago (a
  // warm vit_b_16 compile waited 45 s for it to come back, 49 s measuring 117 kernels), nor for a
  // handful of new kernels (a warm vit_b_16 compile whose closed loop chose another rewrite variant
  // waited its whole 60 s to measure 4, and took 78.5 s where issue 11 allows 30). Those are
  // measured now and keep the slow pace; a later compile at the machine's pace measures them again.
  const bool worth_a_wait = todo.size() >= retake.size() + kKernelsWorthAWait;
  std::stable_sort(todo.begin(), todo.end(), [&](const std::string& a, const std::string& b) {
    return candidates[static_cast<size_t>(first_of[a])].nodes.size() < candidates[static_cast<size_t>(first_of[b])].nodes.size();
  });
  stats_.seconds_signatures = since(t);
  say(fmt::format("measured costs: {} candidates, {} distinct kernels, {} in the tuning database ({}), {} to measure",
                  candidates.size(), first_of.size(), stats_.db_hits, db_->path(), todo.size()));
  // A busy machine makes every parallel kernel wait for a descheduled thread (a scheduler tick,
  // milliseconds): such numbers are stored and reused, so say so. Other processes' CPU time, not
  // the load average: that counted this compile's own compiler processes of a moment ago and
  // warned on every measuring pass of a cold compile on 2 cores. Its 0.2 s look is skipped for a
  // handful of kernels, which measure in about that time.
  if (todo.size() >= 16)
    if (const double others = other_processes_cores(); others > 0.5)
      say(
          fmt::format("warning: other processes are using {:.1f} of {} cores: these measurements will be slow and "
                      "noisy (they are kept in the tuning database; `--redo` measures again)",
                      others, std::thread::hardware_concurrency()));

  auto record = [&](const std::string& hash, TuningStatus status, double seconds, double spread, int reps,
                    const std::string& note, double pace = 0) {
    TuningRecord r;
    r.key = key_of(hash);
    r.signature = hash;
    r.device = device_;
    r.generator = generator_of(hash);
    r.status = status;
    r.seconds = seconds;
    r.spread = spread;
    r.reps = reps;
    r.note = note;
    r.created = static_cast<int64_t>(std::time(nullptr));
    r.pace = pace;
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

  // Compiles `ks`, then checks each against the reference and times it. before(i, source) runs
  // first for each compiled kernel (false: skip it); done(i, outcome) reports every kernel.
  struct Outcome {
    enum class Kind { kCompileFailed, kFailed, kMeasured } kind = Kind::kFailed;
    std::string where, message;  // where: its source and function (or library step)
    Measurement m;
    double pace = 0;  // the machine's when it was timed
  };
  // cold[i]: ks[i] is measured with its weights cold (measures_cold of its candidate). group[i] >= 0:
  // ks[i] runs the same linear primitive as the kernels beside it with the same group (adjacent): the
  // primitive alone and with its epilogues, or one kernel's schedules. Those are timed in
  // kGroupRounds alternating rounds (round_options, merge_rounds: profile/measure.h), so that their
  // differences come from one state of the machine.
  auto check_and_time = [&](const std::vector<const EmittedKernel*>& ks, const std::vector<bool>& cold,
                            const std::vector<int>& group, const std::string& what,
                            const std::function<bool(size_t, const std::string&)>& before,
                            const std::function<void(size_t, const Outcome&)>& done) {
    // Compile in units; a unit that fails is split so one bad kernel costs only itself.
    auto tc = Clock::now();
    int64_t with_source = 0;
    for (const EmittedKernel* k : ks) with_source += !k->source.empty();
    const int64_t units = (with_source + options_.kernels_per_unit - 1) / options_.kernels_per_unit;
    say(fmt::format("{}: compiling {} kernels in {} translation units", what, ks.size(), units));
    ProgressBar cbar(what + ": compiling", units, stderr, bar_options);
    CompiledKernels compiled = compile_kernels(backend_, dev, ks, options_.kernels_per_unit, [&](bool cached) { cached ? cbar.skip() : cbar.tick(); });
    cbar.finish();
    stats_.units_compiled += compiled.units_compiled;
    stats_.units_cached += compiled.units_cached;
    stats_.seconds_compile += since(tc);

    auto tm = Clock::now();
    reference();
    // Counted when done: a tick before the work made the first rate sample one item over a few
    // microseconds, which the moving average then carried ("534218/s" over 3 s).
    ProgressBar bar(what, static_cast<int64_t>(ks.size()), stderr, bar_options);
    auto finish = [&](size_t i, const Outcome& out) {
      done(i, out);
      bar.tick();
    };
    // A kernel checked against the reference and ready to be timed.
    struct Ready {
      size_t i = 0;
      Outcome out;
      std::unique_ptr<runtime::DeviceKernel> kernel;
      std::unique_ptr<KernelProbe> probe;
      std::vector<Measurement> rounds;
    };
    auto check = [&](size_t i, std::vector<Ready>& ready) {
      Outcome out;
      if (!compiled.error[i].empty()) {
        out.kind = Outcome::Kind::kCompileFailed;
        out.message = compiled.error[i];
        finish(i, out);
        return;
      }
      const EmittedKernel& k = *ks[i];
      const std::string& source = compiled.source_path[i];
      if (!before(i, source)) {
        bar.tick();
        return;
      }
      out.where = source.empty() ? "library step " + k.hash : source + " (" + k.entry + ")";
      try {
        Ready r;
        r.kernel = dev.make_kernel(k.recipe, compiled.module[i]);
        r.probe = std::make_unique<KernelProbe>(dev, *r.kernel, k, g, values, cold[i]);
        if (r.probe->cold_constants()) out.where += kColdNote;
        // A kernel that is the reference interpreter has nothing independent to be checked against.
        if (k.runs_reference())
          ++stats_.unchecked_reference;
        else
          out.message = r.probe->check(options_.tolerance);
        if (out.message.empty()) {
          r.i = i;
          r.out = std::move(out);
          ready.push_back(std::move(r));
          return;
        }
      } catch (const Error& e) {
        out.message = e.what();
      }
      finish(i, out);
    };
    for (size_t i = 0; i < ks.size();) {
      size_t end = i + 1;
      while (end < ks.size() && group[i] >= 0 && group[end] == group[i]) ++end;
      std::vector<Ready> ready;
      for (size_t j = i; j < end; ++j) check(j, ready);
      const int rounds = ready.size() > 1 ? kGroupRounds : 1;
      for (int round = 0; round < rounds; ++round)
        for (Ready& r : ready) {
          if (!r.out.message.empty()) continue;
          KernelProbe* probe = r.probe.get();
          MeasureOptions mo = round_options(options_.measure, rounds);
          if (!mo.clock) mo.clock = [&dev] { return dev.synchronized_seconds(); };
          if (!mo.before_sample)
            mo.before_sample = [&dev, probe] {
              dev.flush_caches();        // no-op on the CPU
              probe->evict_constants();  // weights past the CPU's L2: as cold as in the model
            };
          if (probe->cold_constants()) mo.one_call_per_sample = true;
          r.out.pace = std::max(r.out.pace, pace_->settle(worth_a_wait));
          try {
            // Timed in the floating-point mode the artifact runs in (denormals flushed, by
            // default): on Intel cores an operation on a denormal takes a ~100-cycle assist
            // (swin_t's masked attention MatMul, 30x), which a flushed run never pays. Checked
            // outside it, against the reference interpreter's IEEE arithmetic.
            const runtime::Device::RunScope mode(dev);
            r.rounds.push_back(measure([probe] { probe->run(); }, mo));
          } catch (const Error& e) {
            r.out.message = e.what();
          }
        }
      for (Ready& r : ready) {
        if (r.out.message.empty()) {
          r.out.m = merge_rounds(r.rounds);
          r.out.kind = Outcome::Kind::kMeasured;
        }
        finish(r.i, r.out);
      }
      i = end;
    }
    bar.finish();
    stats_.seconds_measure += since(tm);
  };
  auto note_failure = [&](const std::string& what) {
    if (stats_.failures.size() < 8) stats_.failures.push_back(what.substr(0, 300));
  };

  // The group of a kernel with a linear primitive (check_and_time): the signature of that primitive
  // alone, which every kernel running the same Conv or MatMul shares; "" for a loop kernel.
  auto linear_group = [&](const std::string& hash) -> std::string {
    const NodeId n = linear_node(g, candidates[static_cast<size_t>(first_of[hash])]);
    auto it = n < 0 ? singleton_hash.end() : singleton_hash.find(n);
    return it == singleton_hash.end() ? "" : it->second;
  };

  // Generates, compiles, checks and times `batch` (hashes), the kernels of one linear primitive
  // side by side.
  auto run_batch = [&](std::vector<std::string> batch, const std::string& what) {
    auto te = Clock::now();
    // A kernel left in flight by a process that died is timed alone: its group's kernels were all
    // in flight with it (check_and_time checks a group before timing it), and alone they are
    // charged only their own crashes.
    std::vector<std::string> group_key(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      auto prev = known.find(key_of(batch[i]));
      const bool crashed = prev != known.end() && prev->second.status == TuningStatus::kInFlight;
      group_key[i] = crashed ? "" : linear_group(batch[i]);
    }
    {
      std::vector<size_t> order(batch.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return group_key[a] < group_key[b]; });
      std::vector<std::string> b2, k2;
      for (size_t i : order) {
        b2.push_back(batch[i]);
        k2.push_back(group_key[i]);
      }
      batch.swap(b2);
      group_key.swap(k2);
    }
    std::map<std::string, int> group_id;
    std::vector<std::unique_ptr<EmittedKernel>> emitted;
    std::vector<std::string> hashes;
    std::vector<int> group;
    for (size_t b = 0; b < batch.size(); ++b) {
      const std::string& h = batch[b];
      auto k = std::make_unique<EmittedKernel>(backend_.emit(g, candidates[static_cast<size_t>(first_of[h])]));
      if (!k->ok) {
        ++stats_.unemittable;
        record(h, TuningStatus::kUnemittable, 0, 0, 0, k->reason);
        continue;
      }
      emitted.push_back(std::move(k));
      hashes.push_back(h);
      group.push_back(
          group_key[b].empty() ? -1 : group_id.emplace(group_key[b], static_cast<int>(group_id.size())).first->second);
    }
    stats_.seconds_emit += since(te);
    if (emitted.empty()) return;
    std::vector<const EmittedKernel*> ks;
    std::vector<bool> cold;
    for (size_t i = 0; i < emitted.size(); ++i) {
      ks.push_back(emitted[i].get());
      cold.push_back(measures_cold(g, candidates[static_cast<size_t>(first_of[hashes[i]])]));
    }
    check_and_time(
        ks, cold, group, what,
        [&](size_t i, const std::string& source) {
          const std::string& h = hashes[i];
          // An in-flight record left by a process that died is in `known` (read once above).
          auto prev = known.find(key_of(h));
          int attempt = prev != known.end() && prev->second.status == TuningStatus::kInFlight ? prev->second.reps + 1 : 1;
          if (attempt > 2) {
            ++stats_.failed;
            record(h, TuningStatus::kFailed, 0, 0, 0, "crashed the profiling process twice (source " + source + ")");
            return false;
          }
          record(h, TuningStatus::kInFlight, 0, 0, attempt, source);
          return true;
        },
        [&](size_t i, const Outcome& out) {
          const std::string& h = hashes[i];
          if (out.kind == Outcome::Kind::kCompileFailed) {
            ++stats_.failed;
            record(h, TuningStatus::kFailed, 0, 0, 0, out.message.substr(0, 600));
            note_failure(out.message);
          } else if (out.kind == Outcome::Kind::kFailed) {
            ++stats_.failed;
            record(h, TuningStatus::kFailed, 0, 0, 0, out.where + ": " + out.message);
            note_failure(out.where + ": " + out.message);
          } else {
            const Measurement& m = out.m;
            ++stats_.measured;
            // Still wider than max_spread after the re-takes: kept (the median of the quietest
            // run), but marked so, counted in the summary, and re-measured by --redo.
            if (m.noisy) ++stats_.noisy;
            stored_at(h, out.pace);
            record(h, TuningStatus::kOk, m.median, m.spread, m.reps,
                   m.noisy ? fmt::format("{} (noisy: spread {:.0f}% after {} re-takes)", out.where, m.spread * 100,
                                         m.remeasures)
                           : out.where,
                   out.pace);
            untuned.insert(h);
          }
        });
  };

  // Schedule tuning: every schedule of the kernels at least options_.schedule_min_seconds long
  // (the default among them, timed again beside the others), each checked before it is timed; the
  // fastest is kept with its name. While they run, the record says so (variant "in flight"): a
  // process that dies in a schedule leaves the default's time, which is not tuned again.
  auto tune_schedules = [&](const std::vector<std::string>& hashes) {
    auto te = Clock::now();
    struct Site {
      std::string hash;
      std::vector<std::string> names;
      TuningRecord before;
      std::vector<Measurement> times;  // per name; reps = 0 when it failed
      double pace = 0;                 // the machine's when the fastest was timed
    };
    std::vector<Site> sites;
    std::vector<std::unique_ptr<EmittedKernel>> emitted;
    std::vector<std::pair<size_t, size_t>> owner;  // emitted kernel -> (site, name)
    for (const std::string& h : hashes) {
      const KernelCandidate& c = candidates[static_cast<size_t>(first_of[h])];
      std::vector<std::string> names = backend_.schedule_variants(g, c);
      if (names.size() < 2) continue;
      std::optional<TuningRecord> r = db_->get(key_of(h));
      if (!r || r->status != TuningStatus::kOk) continue;
      Site site{h, names, *r, std::vector<Measurement>(names.size())};
      for (size_t v = 0; v < names.size(); ++v) {
        auto k = std::make_unique<EmittedKernel>(backend_.emit(g, c, names[v]));
        if (!k->ok) {
          note_failure(fmt::format("schedule '{}' of {}: {}", names[v], h, k->reason));
          continue;
        }
        owner.emplace_back(sites.size(), v);
        emitted.push_back(std::move(k));
      }
      sites.push_back(std::move(site));
    }
    stats_.seconds_emit += since(te);
    if (emitted.empty()) return;
    for (const Site& site : sites) {
      TuningRecord r = site.before;
      r.variant = TuningRecord::kVariantInFlight;
      db_->put(r);
    }
    std::vector<const EmittedKernel*> ks;
    std::vector<bool> cold;
    std::vector<int> group;  // a kernel's schedules side by side
    for (size_t i = 0; i < emitted.size(); ++i) {
      ks.push_back(emitted[i].get());
      cold.push_back(measures_cold(g, candidates[static_cast<size_t>(first_of[sites[owner[i].first].hash])]));
      group.push_back(static_cast<int>(owner[i].first));
    }
    check_and_time(
        ks, cold, group, fmt::format("timing the schedules of {} kernels", sites.size()),
        [](size_t, const std::string&) { return true; },
        [&](size_t i, const Outcome& out) {
          Site& site = sites[owner[i].first];
          const std::string& name = site.names[owner[i].second];
          if (out.kind == Outcome::Kind::kMeasured) {
            site.times[owner[i].second] = out.m;
            site.pace = std::max(site.pace, out.pace);
            ++stats_.schedules_timed;
            return;
          }
          // A schedule the default passed with is a generator bug: said, never chosen.
          ++stats_.schedules_failed;
          note_failure(fmt::format("schedule '{}' {}: {}", name, out.where, out.message));
        });
    for (const Site& site : sites) {
      size_t best = site.names.size();
      for (size_t v = 0; v < site.names.size(); ++v)
        if (site.times[v].reps > 0 && (best == site.names.size() || site.times[v].median < site.times[best].median)) best = v;
      TuningRecord r = site.before;
      if (best == site.names.size()) {  // none ran: keep the default's time, tuned (nothing to gain)
        r.variant = site.names.front();
      } else {
        const Measurement& m = site.times[best];
        const double dflt = site.times.front().reps > 0 ? site.times.front().median : site.before.seconds;
        r.variant = site.names[best];
        r.seconds = m.median;
        r.spread = m.spread;
        r.reps = m.reps;
        r.pace = site.pace;
        stored_at(site.hash, r.pace);  // the schedules' pace (their slowest), which the record now carries
        r.note = fmt::format("{} (fastest of {} schedules; the default {:.1f} us)", site.before.note, site.names.size(), dflt * 1e6);
        if (best != 0) ++stats_.schedules_improved;
      }
      r.created = static_cast<int64_t>(std::time(nullptr));
      db_->put(r);
      by_hash_[site.hash] = cost_of(r);
    }
  };

  // Steps 3-6 for what the database did not have: single primitives, pruning, fused kernels.
  auto measure_todo = [&] {
    std::vector<std::string> singles, rest;
    // A linear primitive alone is timed with the fused batch, beside its epilogue-fused kernels
    // (run_batch's groups): which of those wins is decided by their differences, so they come from
    // one state of the machine. (The pruning below then finds no single cost for such a primitive
    // and keeps every kernel with it, as it keeps any it cannot cover.)
    for (const std::string& h : todo) {
      const KernelCandidate& c = candidates[static_cast<size_t>(first_of[h])];
      (c.nodes.size() == 1 && c.linear == 0 ? singles : rest).push_back(h);
    }
    if (!singles.empty()) run_batch(singles, "profiling single-primitive kernels");

    // Step 4: prune by the optimistic bound against the measured one-kernel-per-primitive cover.
    if (options_.prune) {
      std::vector<std::string> keep;
      for (const std::string& h : rest) {
        if (retake.count(h)) {
          keep.push_back(h);
          continue;
        }
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
    say(fmt::format(
        "profiled: {} measured{}, {} failed the gate, {} unemittable, {} pruned; signatures {:.1f} s, "
        "generate {:.1f} s, reference {:.1f} s, compile {:.1f} s ({} units, {} cached), measure {:.1f} s{}",
        stats_.measured, stats_.slow_pace ? fmt::format(" ({} while the machine ran slow)", stats_.slow_pace) : "",
        stats_.failed, stats_.unemittable, stats_.pruned, stats_.seconds_signatures, stats_.seconds_emit,
        stats_.seconds_reference, stats_.seconds_compile, stats_.units_compiled, stats_.units_cached,
        stats_.seconds_measure,
        pace_->waited_seconds() > 0 ? fmt::format(", waited {:.0f} s for the machine's pace", pace_->waited_seconds())
                                    : ""));
  };

  if (!todo.empty()) measure_todo();
  if (options_.tune_schedules) {
    std::vector<std::string> tune;
    for (const std::string& h : untuned) {
      auto it = by_hash_.find(h);
      if (it != by_hash_.end() && it->second.feasible() && it->second.seconds >= options_.schedule_min_seconds) tune.push_back(h);
    }
    if (!tune.empty()) {
      tune_schedules(tune);
      if (stats_.schedules_timed > 0)
        say(fmt::format("schedules: {} timed for kernels of {:.0f} us or more, {} kernels faster than with their "
                        "default, {} schedules failed the gate",
                        stats_.schedules_timed, options_.schedule_min_seconds * 1e6, stats_.schedules_improved,
                        stats_.schedules_failed));
    }
  }
}

KernelCost MeasuredCost::cost(const Graph& g, const KernelCandidate& c) {
  if (written_in_place(g, c)) return in_place_cost();
  std::string hash;
  if (base_ && g.instance.id() == graph_instance_ && &c >= base_ && &c < base_ + hash_of_.size()) {
    const size_t i = static_cast<size_t>(&c - base_);
    if (c.nodes == prepared_[i].nodes && c.outputs == prepared_[i].outputs) hash = hash_of_[i];
  }
  if (hash.empty()) hash = hash_of(g, c);
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return KernelCost::infeasible("not measured (prepare() was not given this kernel)");
  return it->second;
}

}  // namespace korch
