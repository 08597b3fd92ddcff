#include "profile/measure.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "support/clock.h"
#include "support/error.h"

namespace korch {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Ticks (USER_HZ) all CPUs spent busy, from /proc/stat's "cpu" line: user, nice, system, irq,
// softirq and steal (guest time is already inside user and nice).
std::optional<int64_t> busy_ticks() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  int64_t user, nice, system, idle, iowait, irq, softirq, steal = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) || cpu != "cpu") return std::nullopt;
  f >> steal;
  return user + nice + system + irq + softirq + steal;
}

// Ticks this process spent (utime, stime) and its reaped children (cutime, cstime).
std::optional<int64_t> own_ticks() {
  std::ifstream f("/proc/self/stat");
  std::string line;
  if (!std::getline(f, line)) return std::nullopt;
  const size_t paren = line.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(paren + 1));
  std::string field;
  int64_t sum = 0;
  for (int i = 3; i <= 17 && rest >> field; ++i)  // fields 14-17 (1-based, as proc(5) numbers them)
    if (i >= 14) sum += std::stoll(field);
  return sum;
}

// Quantile q of sorted `s` with linear interpolation between neighbours.
double quantile(const std::vector<double>& s, double q) {
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, s.size() - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - static_cast<double>(lo));
}

// One sampling run (step 2 + 3 of the header); *bound says which rule stopped it.
std::vector<double> sample_run(const std::function<void()>& fn, const MeasureOptions& opt,
                               const std::function<double()>& now, int64_t batch, const char** bound) {
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(opt.max_reps));
  const double start = now();
  while (true) {
    if (opt.before_sample) opt.before_sample();  // untimed: now() below waits for it to finish
    const double t0 = now();
    for (int64_t i = 0; i < batch; ++i) fn();
    const double t1 = now();
    samples.push_back((t1 - t0) / static_cast<double>(batch));
    const auto reps = static_cast<int64_t>(samples.size());
    const double elapsed = t1 - start;
    // The ordinary stop first, so a run that meets its minimums reports "min".
    *bound = "min";
    if (reps >= opt.min_reps && elapsed >= opt.min_seconds) break;
    *bound = "max_reps";
    if (reps >= opt.max_reps) break;
    *bound = "max_seconds";
    if (elapsed >= opt.max_seconds && reps >= 3) break;
  }
  return samples;
}

}  // namespace

Measurement summarize_samples(std::vector<double> samples) {
  KORCH_CHECK(!samples.empty(), "summarize_samples needs at least one sample");
  std::sort(samples.begin(), samples.end());
  Measurement m;
  m.median = quantile(samples, 0.5);
  m.min = samples.front();
  m.p10 = quantile(samples, 0.1);
  m.p90 = quantile(samples, 0.9);
  m.spread = m.median > 0 ? (m.p90 - m.p10) / m.median : 0.0;
  m.reps = static_cast<int64_t>(samples.size());
  return m;
}

MeasureOptions round_options(MeasureOptions o, int rounds) {
  if (rounds <= 1) return o;
  o.min_reps = std::max(3, (o.min_reps + rounds - 1) / rounds);
  o.max_reps = std::max(o.min_reps, o.max_reps / rounds);
  o.min_seconds /= rounds;
  o.max_seconds /= rounds;
  return o;
}

Measurement merge_rounds(const std::vector<Measurement>& rounds) {
  KORCH_CHECK(!rounds.empty(), "merge_rounds needs at least one round");
  if (rounds.size() == 1) return rounds.front();
  auto median_of = [&](double Measurement::*field) {
    std::vector<double> v;
    for (const Measurement& r : rounds) v.push_back(r.*field);
    std::sort(v.begin(), v.end());
    return quantile(v, 0.5);
  };
  Measurement m = rounds.front();
  m.median = median_of(&Measurement::median);
  m.p10 = median_of(&Measurement::p10);
  m.p90 = median_of(&Measurement::p90);
  m.spread = m.median > 0 ? (m.p90 - m.p10) / m.median : 0.0;
  m.reps = 0;
  m.remeasures = 0;
  int noisy = 0;
  for (const Measurement& r : rounds) {
    m.min = std::min(m.min, r.min);
    m.reps += r.reps;
    m.remeasures += r.remeasures;
    noisy += r.noisy;
  }
  m.noisy = 2 * noisy > static_cast<int>(rounds.size());
  return m;
}

double median_of_round_ratios(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || a.size() != b.size())
    fail("a paired comparison needs the same rounds of both systems ({} and {})", a.size(), b.size());
  std::vector<double> r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] / b[i];
  std::sort(r.begin(), r.end());
  return quantile(r, 0.5);
}

Measurement measure(const std::function<void()>& fn, const MeasureOptions& opt) {
  KORCH_CHECK(opt.min_reps >= 1 && opt.max_reps >= opt.min_reps && opt.max_reps >= 3,
              "bad MeasureOptions reps: min {} max {}", opt.min_reps, opt.max_reps);
  KORCH_CHECK(opt.max_remeasures >= 0, "bad MeasureOptions max_remeasures {}", opt.max_remeasures);
  const std::function<double()> now = opt.clock ? opt.clock : std::function<double()>(steady_seconds);

  // Warm-up, which also yields the call-time estimate that sizes the batches.
  int64_t warm_calls = 0;
  const double warm_start = now();
  double warm_elapsed = 0;
  do {
    fn();
    ++warm_calls;
    warm_elapsed = now() - warm_start;
  } while (warm_elapsed < opt.warmup_seconds);
  const double per_call = warm_elapsed / static_cast<double>(warm_calls);
  int64_t batch = 1;
  if (per_call < opt.min_sample_seconds && !opt.one_call_per_sample)
    batch = per_call > 0 ? static_cast<int64_t>(std::ceil(opt.min_sample_seconds / per_call))
                         : static_cast<int64_t>(1) << 16;  // clock did not move: a very fast call

  Measurement best;
  for (int run = 0; run <= opt.max_remeasures; ++run) {
    const char* bound = "min";
    Measurement m = summarize_samples(sample_run(fn, opt, now, batch, &bound));
    m.bound = bound;
    if (run == 0 || m.spread < best.spread) best = m;
    best.remeasures = run;
    if (m.spread <= opt.max_spread) break;
  }
  best.batch = batch;
  best.noisy = best.spread > opt.max_spread;
  return best;
}

double other_processes_cores(double window_seconds) {
  const long hz = sysconf(_SC_CLK_TCK);
  const auto busy0 = busy_ticks();
  const auto own0 = own_ticks();
  const auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(window_seconds));
  const auto busy1 = busy_ticks();
  const auto own1 = own_ticks();
  const double seconds = since(t0);
  if (hz <= 0 || !busy0 || !busy1 || !own0 || !own1) return -1;
  const int64_t others = (*busy1 - *busy0) - (*own1 - *own0);
  return std::max<int64_t>(others, 0) / (static_cast<double>(hz) * seconds);
}

}  // namespace korch
