// Timing one callable: warm-up, repeated timed samples, robust statistics, a noise check.
//
// measure(fn, opt):
//   1. warm-up: calls fn at least once and for at least warmup_seconds (caches, page faults, lazy
//      binding, CPU frequency ramp); the warm-up also estimates the time of one call;
//   2. samples: a sample times `batch` back-to-back calls and records the time per call. batch is 1
//      unless one call is shorter than min_sample_seconds (~20 us), where the clock's resolution
//      and overhead would dominate; then batch = ceil(min_sample_seconds / call time);
//   3. stops when (reps >= min_reps and elapsed >= min_seconds), or reps == max_reps, or
//      (elapsed >= max_seconds and reps >= 3): a kernel slower than max_seconds still gets 3 reps;
//   4. noise check: when spread = (p90 - p10) / median > max_spread, samples again (up to
//      max_remeasures times) and keeps the run with the smallest spread.
// After it returns, fn has been called (warm-up + batch * reps per run) times.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace korch {

struct MeasureOptions {
  double warmup_seconds = 0.01;
  int min_reps = 10;
  int max_reps = 200;
  double min_seconds = 0.05;
  double max_seconds = 1.0;
  double max_spread = 0.15;
  int max_remeasures = 2;
  double min_sample_seconds = 20e-6;
  // Seconds on a monotonic clock; empty = std::chrono::steady_clock. Tests inject a fake clock.
  std::function<double()> clock;
  // Called before each timed sample, outside the timing (the clock read that starts the sample
  // comes after it): the measuring driver flushes the device's caches here (a GPU's L2), so each
  // sample starts cold. May be empty.
  std::function<void()> before_sample;
  // Every sample one call (no batching of short calls): what a before_sample that makes the call's
  // data cold needs, since a batch's later calls would find it where the first left it.
  bool one_call_per_sample = false;
};

struct Measurement {
  double median = 0;  // seconds per call; the number to use
  double min = 0;
  double p10 = 0;
  double p90 = 0;
  double spread = 0;   // (p90 - p10) / median
  int64_t reps = 0;    // timed samples in the kept run
  int64_t batch = 1;   // calls per sample
  int remeasures = 0;  // extra runs the noise check made (0 = the first run was quiet enough)
  bool remeasured() const { return remeasures > 0; }
  bool noisy = false;  // spread still above max_spread after all remeasures
  // What ended the kept run: "min" (min_reps and min_seconds reached), "max_reps" or
  // "max_seconds" (a slow kernel: fewer reps than min_reps). For the tuning record's note.
  const char* bound = "min";
};

Measurement measure(const std::function<void()>& fn, const MeasureOptions& opt = {});

// Statistics of per-call times (any order; not empty). Linear-interpolated quantiles.
Measurement summarize_samples(std::vector<double> samples);

// Kernels compared with each other (one linear primitive alone and with its epilogues) are timed
// in alternating rounds, so that their differences come from one state of the machine: timed one
// after the other they met this VM's phases seconds apart (mobilenet_v2's 1x1 Conv+bias+Clip
// measured 13% over the same Conv alone, against 3% in the model and in alternating runs).
// round_options: one round's share of `o` (its time and samples split `rounds` ways, at least 3
// samples; the warm-up kept, as the other kernels' rounds cool the caches between).
MeasureOptions round_options(MeasureOptions o, int rounds);
// One kernel's measurement from its rounds (not empty): the median of their medians (each round met
// the machine as its neighbours' did), p10 and p90 the medians of theirs, the smallest min, samples
// and re-takes summed, noisy when more than half the rounds were.
Measurement merge_rounds(const std::vector<Measurement>& rounds);

// Paired comparison of two systems timed in the same alternating rounds: the median over rounds of
// a[r] / b[r] (each the median of its system's runs in round r; the mean of the middle two for an
// even count). A machine that changes speed between rounds (this VM's slow phases: 1.3-2.5x on
// memory-bound work for seconds at a time) moves both of a round's medians alike, so the ratio
// stays put where the ratio of the overall medians follows whichever system drew more slow
// rounds. Throws korch::Error unless both have the same, non-zero number of rounds.
double median_of_round_ratios(const std::vector<double>& a, const std::vector<double>& b);

// Cores' worth of CPU time that other processes (and the hypervisor's steal) took over the next
// `window_seconds`, from /proc/stat less this process's own time (/proc/self/stat: its OpenMP
// threads may still spin after a parallel region, and children it reaped count as its own);
// negative when /proc cannot tell. Sleeps for the window. Unlike the load average, it does not
// count the compiler processes and kernel runs of this very compile a moment ago.
double other_processes_cores(double window_seconds = 0.2);

}  // namespace korch
