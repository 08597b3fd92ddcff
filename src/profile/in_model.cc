#include "profile/in_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <random>

#include "ir/random.h"
#include "orchestrate/kernel_candidate.h"
#include "profile/measure.h"
#include "profile/tuning_db.h"
#include "support/clock.h"
#include "support/error.h"
#include "support/hash.h"

namespace korch {

namespace {

std::vector<Tensor> bench_inputs(const runtime::Executable& exe) {
  std::mt19937_64 rng(0);  // the inputs korch bench uses
  std::vector<Tensor> inputs;
  for (const TensorType& t : exe.input_types()) inputs.push_back(random_tensor(t, rng));
  return inputs;
}

// a within tolerance of b, or within 10 us (a tiny plan's runs jitter by more than 10%).
bool within(double a, double b, double tolerance) { return std::abs(a - b) <= std::max(tolerance * b, 10e-6); }

}  // namespace

SideBySide run_side_by_side(const std::string& dir_a, const std::string& dir_b, int cpu_threads, int rounds,
                            double seconds) {
  runtime::LoadOptions lo;
  lo.cpu_threads = cpu_threads;
  std::unique_ptr<runtime::Executable> exe[2] = {runtime::Executable::load(dir_a, lo),
                                                 runtime::Executable::load(dir_b, lo)};
  const std::vector<Tensor> inputs = bench_inputs(*exe[0]);
  KORCH_CHECK(exe[1]->input_types() == exe[0]->input_types(), "{} and {} take different inputs", dir_a, dir_b);
  double per_run = 0;  // both, one run each, after the first (eager) run
  for (auto& e : exe) {
    e->run(inputs);
    const auto t0 = Clock::now();
    e->run(inputs);
    per_run += since(t0);
  }
  rounds = std::max(rounds, 1);
  const int runs = std::clamp(static_cast<int>(seconds / rounds / std::max(per_run, 1e-9)), 2, 200);
  std::vector<double> times[2];
  for (int round = 0; round < rounds; ++round)
    for (int k = 0; k < 2; ++k)
      for (int i = 0; i < runs; ++i) {
        const auto t0 = Clock::now();
        exe[k]->run(inputs);
        times[k].push_back(since(t0));
      }
  const Measurement a = summarize_samples(times[0]), b = summarize_samples(times[1]);
  return {a.median, b.median, a.spread, b.spread, runs * rounds};
}

RunDrift run_drift(const std::vector<std::pair<double, double>>& pairs, size_t kernels) {
  if (pairs.size() < 8 || 2 * pairs.size() < kernels) return {};
  std::vector<double> ratios;
  double measured = 0, stored = 0;
  for (const auto& [m, s] : pairs) {
    ratios.push_back(m / s);
    measured += m;
    stored += s;
  }
  std::nth_element(ratios.begin(), ratios.begin() + static_cast<std::ptrdiff_t>(ratios.size() / 2), ratios.end());
  return {ratios[ratios.size() / 2], measured / stored};
}

SettledRun settle_in_model_run(InModelRun first, double beside_seconds, double tolerance,
                               const std::function<InModelRun()>& retake) {
  SettledRun s;
  s.first = first.end_to_end;
  s.run = std::move(first);
  if (within(s.run.end_to_end, beside_seconds, tolerance)) return s;
  s.retaken = true;
  InModelRun again = retake();
  s.retake = again.end_to_end;
  s.retake_noisy = again.noisy;
  s.retake_spread = again.spread;
  const bool slower_machine = again.slow && !s.run.slow && s.run.pace > 0;  // the first at a known pace
  s.retake_slow = slower_machine;
  const bool quieter = s.run.noisy && !again.noisy && !slower_machine;
  // Both noisy: the faster (a mobilenet_v3_small compile kept a noisy 1321 us over a noisy retake of
  // 974 us, beside whole runs of 1151 us).
  const bool faster = again.end_to_end < s.run.end_to_end && (!again.noisy || s.run.noisy);
  if (quieter || faster) {
    s.run = std::move(again);
    s.kept_retake = true;
  }
  s.agrees = within(s.run.end_to_end, beside_seconds, tolerance);
  if (!s.agrees && beside_seconds > 0 && beside_seconds < s.run.end_to_end) s.scale = beside_seconds / s.run.end_to_end;
  return s;
}

std::string SettledRun::kept_because() const {
  if (kept_retake) return retake < first ? "the second run kept (the faster)" : "the second run kept (the quieter)";
  if (retake >= first) return "the first run kept (the faster)";
  if (retake_slow) return "the first run kept (the second, though faster, ran in a slow phase of the machine)";
  return fmt::format("the first run kept (the second, though faster, stayed noisy: spread {:.0f}%)",
                     100 * retake_spread);
}

KeptRound choose_kept_round(const std::vector<double>& end_to_end, double margin,
                            const std::function<SideBySide(size_t candidate)>& beside_first) {
  KeptRound k;
  for (size_t i = 1; i < end_to_end.size(); ++i)
    if (end_to_end[i] < margin * end_to_end[k.candidate]) k.candidate = i;
  if (k.candidate == 0) return k;
  k.timed_beside = true;
  k.beside = beside_first(k.candidate);
  if (k.beside.a < margin * k.beside.b) k.round = k.candidate;
  return k;
}

InModelRun run_in_model(const std::string& artifact_dir, int min_runs, int cpu_threads, double max_spread,
                        int max_retakes) {
  runtime::LoadOptions lo;
  lo.cpu_threads = cpu_threads;
  auto exe = runtime::Executable::load(artifact_dir, lo);
  const std::vector<Tensor> inputs = bench_inputs(*exe);
  const auto w0 = Clock::now();
  int warm = 0;
  do {
    exe->run(inputs);
    ++warm;
  } while (warm < 3 || since(w0) < 0.05);
  const double per_run = since(w0) / warm;
  const int runs = std::clamp(static_cast<int>(1.0 / std::max(per_run, 1e-9)), std::max(min_runs, 1), 500);
  // The per-kernel clock reads add (kernels + 1) reads to a run. Where that is under 0.1% of the
  // run (yolov4: 375 reads of ~20 ns in 300 ms), the whole runs are timed with them on, and the
  // same runs give both numbers; otherwise whole runs first, without them, then as many with.
  const double timer = exe->step_timer_seconds();
  const bool shared = static_cast<double>(exe->kernel_count() + 1) * timer < 1e-3 * per_run;
  auto take = [&] {
    InModelRun r;
    r.timer_seconds = timer;
    r.shared_runs = shared;
    std::vector<double> whole;
    if (shared) exe->set_step_timing(true);
    for (int i = 0; i < runs; ++i) {
      const auto t0 = Clock::now();
      exe->run(inputs);
      whole.push_back(since(t0));
    }
    if (!shared) {
      exe->set_step_timing(true);
      for (int i = 0; i < runs; ++i) exe->run(inputs);
    }
    for (const auto& s : exe->step_times()) r.step_seconds.push_back(summarize_samples(s.samples).median);
    exe->set_step_timing(false);
    const Measurement m = summarize_samples(whole);
    r.end_to_end = m.median;
    r.spread = m.spread;
    return r;
  };
  // As isolated measurements (profile/measure.h): a wide spread is taken again, the quietest
  // kept, and one still wide after the re-takes is marked noisy for the caller to report. Whole
  // runs are not batched, so a run of microseconds shows some microseconds of jitter on a quiet
  // machine (tiny_convnet: 27 us, p10-p90 5-9 us); under 10 us of p10-p90 is not noise.
  const auto wide = [&](const InModelRun& r) { return r.spread > max_spread && r.spread * r.end_to_end > 10e-6; };
  InModelRun best = take();
  for (int retake = 1; wide(best) && retake <= max_retakes; ++retake) {
    InModelRun again = take();
    if (again.spread < best.spread) best = std::move(again);
    best.retakes = retake;
  }
  best.noisy = wide(best);
  return best;
}

InModelCosts::InModelCosts(CostProvider& inner, const std::string& db_path, std::string device, int generator,
                           std::string model_key, bool redo)
    : inner_(inner), device_(std::move(device) + "+in-model"), generator_(generator), model_key_(std::move(model_key)),
      redo_(redo) {
  db_ = TuningDb::open(db_path.empty() ? TuningDb::default_path() : db_path);
}

InModelCosts::~InModelCosts() = default;

std::string InModelCosts::instance(const Graph& g, const KernelCandidate& c) const {
  return content_hash(fmt::format("{}|names|{}{}", model_key_, candidate_names(g, c),
                                  step_revision_ ? step_revision_(g, c) : std::string()));
}

void InModelCosts::prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) {
  inner_.prepare(g, candidates);
  if (redo_) return;
  std::vector<std::string> keys;
  std::map<std::string, std::string> instance_of_key;
  for (const KernelCandidate& c : candidates) {
    const std::string inst = instance(g, c);
    const std::string key = make_tuning_key(inst, device_, generator_);
    if (instance_of_key.emplace(key, inst).second) keys.push_back(key);
  }
  std::map<std::string, TuningRecord> found = db_->get_many(keys);
  bool any_slow = false;
  for (const auto& [key, r] : found) any_slow |= r.status == TuningStatus::kOk && pace_ && pace_->is_slow(r.pace);
  // Taken on a slow machine, while it runs at its pace now: left for the closed loop to take again.
  const bool leave_slow = any_slow && [&] {
    const double now = pace_->current();
    return now > 0 && !pace_->is_slow(now);
  }();
  for (const auto& [key, r] : found) {
    if (r.status != TuningStatus::kOk) continue;
    if (leave_slow && pace_->is_slow(r.pace)) {
      if (left_out_.insert(instance_of_key.at(key)).second) ++left_slow_;
      continue;
    }
    if (by_instance_.emplace(instance_of_key.at(key), r.seconds).second) {
      pace_of_[instance_of_key.at(key)] = r.pace;
      ++loaded_;
    }
  }
  for (const KernelCandidate& c : candidates) note_ratio(g, c);
}

CostClass InModelCosts::cost_class(const Graph& g, const KernelCandidate& c) const {
  if (cold_ && cold_(g, c)) return CostClass::kColdConstants;
  return c.linear > 0 ? CostClass::kLinear : CostClass::kLoop;
}

namespace {

// The name of c's linear primitive ("" when it has none).
std::string linear_name(const Graph& g, const KernelCandidate& c) {
  const NodeId n = linear_node(g, c);
  return n < 0 ? "" : g.nodes[static_cast<size_t>(n)].name;
}

}  // namespace

void InModelCosts::note_ratio(const Graph& g, const KernelCandidate& c) {
  auto it = by_instance_.find(instance(g, c));
  if (it == by_instance_.end()) return;
  const KernelCost alone = inner_.cost(g, c);
  if (!alone.feasible() || alone.seconds <= 0) return;
  const auto cls = static_cast<size_t>(cost_class(g, c));
  ratio_[cls][it->first] = it->second / alone.seconds;
  scale_[cls] = 0;  // recomputed on next use
  if (const std::string linear = linear_name(g, c); !linear.empty())
    linear_ratio_[cls][linear] = it->second / alone.seconds;
}

double InModelCosts::scale(CostClass cls) const {
  double& cached = scale_[static_cast<size_t>(cls)];
  if (cached > 0) return cached;
  const auto& m = ratio_[static_cast<size_t>(cls)];
  if (m.empty()) return cached = 1.0;
  std::vector<double> r;
  for (const auto& [k, v] : m) r.push_back(v);
  std::nth_element(r.begin(), r.begin() + static_cast<std::ptrdiff_t>(r.size() / 2), r.end());
  return cached = r[r.size() / 2];
}

KernelCost InModelCosts::cost(const Graph& g, const KernelCandidate& c) {
  KernelCost k = inner_.cost(g, c);
  if (!k.feasible()) return k;
  auto it = by_instance_.find(instance(g, c));
  if (it == by_instance_.end()) {
    const auto cls = static_cast<size_t>(cost_class(g, c));
    if (const std::string linear = linear_name(g, c); !linear.empty()) {
      const auto own = linear_ratio_[cls].find(linear);
      if (own != linear_ratio_[cls].end())
        return {k.seconds * own->second,
                fmt::format("{} x{:.2f} (in-model ratio of the kernel that ran its {})", k.reason, own->second, linear),
                k.variant};
    }
    const double f = scale(static_cast<CostClass>(cls));
    if (f == 1.0) return k;
    return {k.seconds * f, fmt::format("{} x{:.2f} (in-model scale of its class)", k.reason, f), k.variant};
  }
  return {it->second, fmt::format("in-model {:.1f} us (alone {:.1f} us)", it->second * 1e6, k.seconds * 1e6), k.variant};
}

std::string InModelCosts::whole_signature(const std::string& what) const { return content_hash(model_key_ + "|" + what); }

std::optional<TuningRecord> InModelCosts::whole(const std::string& what) const {
  if (redo_) return std::nullopt;
  auto r = db_->get(make_tuning_key(whole_signature(what), device_, generator_));
  if (!r || r->status != TuningStatus::kOk) return std::nullopt;
  return r;
}

void InModelCosts::put(const std::string& signature, double seconds, const std::string& note) {
  TuningRecord r;
  r.signature = signature;
  r.key = make_tuning_key(signature, device_, generator_);
  r.device = device_;
  r.generator = generator_;
  r.status = TuningStatus::kOk;
  r.seconds = seconds;
  r.reps = 1;
  r.note = note;
  r.created = static_cast<int64_t>(std::time(nullptr));
  r.pace = run_pace_;
  db_->put(r);
}

void InModelCosts::record_whole(const std::string& what, double seconds, const std::string& note) {
  put(whole_signature(what), seconds, note.empty() ? "whole " + what + " plan in the model" : note);
}

bool InModelCosts::record(const Graph& g, const KernelCandidate& c, double seconds, const std::string& note) {
  const std::string inst = instance(g, c);
  if (pace_ && pace_->is_slow(run_pace_) && at_pace(inst)) return false;
  by_instance_[inst] = seconds;
  pace_of_[inst] = run_pace_;
  note_ratio(g, c);
  put(inst, seconds, note);
  return true;
}

std::optional<double> InModelCosts::at_pace(const Graph& g, const KernelCandidate& c) const {
  return at_pace(instance(g, c));
}

std::optional<double> InModelCosts::at_pace(const std::string& inst) const {
  const auto t = by_instance_.find(inst);
  const auto p = pace_of_.find(inst);
  if (!pace_ || t == by_instance_.end() || p == pace_of_.end() || !(p->second > 0) || pace_->is_slow(p->second))
    return std::nullopt;
  return t->second;
}

}  // namespace korch
