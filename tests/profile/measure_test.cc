#include "profile/measure.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "support/error.h"

namespace korch {
namespace {

// A fake clock that only the measured function advances: each call "takes" duration(i) seconds.
struct FakeKernel {
  double t = 0;
  int64_t calls = 0;
  std::function<double(int64_t)> duration;
  MeasureOptions options(MeasureOptions o = {}) {
    o.clock = [this] { return t; };
    return o;
  }
  std::function<void()> fn() {
    return [this] { t += duration(calls++); };
  }
};

// Two systems in five rounds, the second always 10% slower than the first in the same state of the
// machine, which runs 2x slower in some rounds.
TEST(Measure, RoundRatiosPairTheRoundsOfTwoSystems) {
  EXPECT_DOUBLE_EQ(median_of_round_ratios({11, 22, 22, 22, 11}, {10, 20, 20, 20, 10}), 1.1);
  // The machine changed state within round 3, between the two systems' runs: one odd ratio, still 1.1,
  // where the median rounds (22 against 10) would say 2.2.
  EXPECT_DOUBLE_EQ(median_of_round_ratios({22, 22, 22, 11, 11}, {20, 20, 10, 10, 10}), 1.1);
  EXPECT_DOUBLE_EQ(median_of_round_ratios({3, 1, 2}, {1, 1, 1}), 2.0);  // odd count: the middle one
  EXPECT_THROW(median_of_round_ratios({1, 2}, {1}), Error);
  EXPECT_THROW(median_of_round_ratios({}, {}), Error);
}

// Kernels compared with each other are timed in alternating rounds: each round gets a share of
// the budget, and the rounds' medians make the measurement.
TEST(Measure, RoundsSplitTheBudgetAndTheirMediansMakeTheMeasurement) {
  MeasureOptions o;
  o.min_reps = 10;
  o.max_reps = 200;
  o.min_seconds = 0.05;
  o.max_seconds = 1.0;
  const MeasureOptions r = round_options(o, 3);
  EXPECT_EQ(r.min_reps, 4);
  EXPECT_EQ(r.max_reps, 66);
  EXPECT_DOUBLE_EQ(r.min_seconds, 0.05 / 3);
  EXPECT_DOUBLE_EQ(r.max_seconds, 1.0 / 3);
  EXPECT_DOUBLE_EQ(r.warmup_seconds, o.warmup_seconds);
  EXPECT_EQ(round_options(o, 1).min_reps, 10);
  o.min_reps = 1;
  EXPECT_EQ(round_options(o, 3).min_reps, 3);  // at least 3 samples a round

  auto round = [](double median, double p10, double p90, bool noisy) {
    Measurement m;
    m.median = median;
    m.min = p10 * 0.9;
    m.p10 = p10;
    m.p90 = p90;
    m.reps = 10;
    m.noisy = noisy;
    return m;
  };
  // The middle round's median, whichever round met a slow phase.
  const Measurement m = merge_rounds(
      {round(30e-6, 29e-6, 31e-6, false), round(45e-6, 40e-6, 60e-6, true), round(31e-6, 30e-6, 33e-6, false)});
  EXPECT_DOUBLE_EQ(m.median, 31e-6);
  EXPECT_DOUBLE_EQ(m.p10, 30e-6);
  EXPECT_DOUBLE_EQ(m.p90, 33e-6);
  EXPECT_DOUBLE_EQ(m.spread, 3e-6 / 31e-6);
  EXPECT_DOUBLE_EQ(m.min, 29e-6 * 0.9);
  EXPECT_EQ(m.reps, 30);
  EXPECT_FALSE(m.noisy);  // one round of three
  EXPECT_TRUE(merge_rounds({round(30e-6, 29e-6, 31e-6, true), round(45e-6, 40e-6, 60e-6, true),
                            round(31e-6, 30e-6, 33e-6, false)})
                  .noisy);
  EXPECT_DOUBLE_EQ(merge_rounds({round(30e-6, 29e-6, 31e-6, false)}).median, 30e-6);
}

TEST(Measure, SteadyKernel) {
  FakeKernel k;
  k.duration = [](int64_t) { return 1e-3; };
  const Measurement m = measure(k.fn(), k.options());
  EXPECT_NEAR(m.median, 1e-3, 1e-9);
  EXPECT_NEAR(m.min, 1e-3, 1e-9);
  EXPECT_LT(m.spread, 1e-6);
  EXPECT_EQ(m.batch, 1);
  EXPECT_EQ(m.remeasures, 0);
  EXPECT_FALSE(m.noisy);
  EXPECT_STREQ(m.bound, "min");
  // min_seconds 0.05 at 1 ms per call: ~50 samples, within [min_reps, max_reps].
  EXPECT_GE(m.reps, 49);
  EXPECT_LE(m.reps, 51);
}

TEST(Measure, SlowKernelGetsThreeReps) {
  FakeKernel k;
  k.duration = [](int64_t) { return 2.0; };  // slower than max_seconds
  const Measurement m = measure(k.fn(), k.options());
  EXPECT_EQ(m.reps, 3);
  EXPECT_STREQ(m.bound, "max_seconds");
  EXPECT_EQ(k.calls, 1 + 3);  // one warm-up call
  EXPECT_NEAR(m.median, 2.0, 1e-9);
}

TEST(Measure, MaxSecondsBoundsMediumKernels) {
  FakeKernel k;
  k.duration = [](int64_t) { return 0.3; };  // 10 reps would take 3 s
  const Measurement m = measure(k.fn(), k.options());
  EXPECT_EQ(m.reps, 4);  // the sample that crosses 1 s is the last
}

TEST(Measure, MaxRepsCaps) {
  FakeKernel k;
  k.duration = [](int64_t) { return 1e-4; };
  MeasureOptions o;
  o.min_seconds = 100;  // never reached
  o.max_reps = 30;
  const Measurement m = measure(k.fn(), k.options(o));
  EXPECT_EQ(m.reps, 30);
  EXPECT_STREQ(m.bound, "max_reps");
}

TEST(Measure, SubMicrosecondKernelsAreBatched) {
  FakeKernel k;
  k.duration = [](int64_t) { return 1e-7; };
  const Measurement m = measure(k.fn(), k.options());
  EXPECT_GE(m.batch, 200);  // >= 20 us per sample
  EXPECT_NEAR(m.median, 1e-7, 1e-12);
  EXPECT_GE(m.reps, 10);
}

// A measurement that makes each call's data cold (before_sample evicts it) times one call per
// sample: batched, the later calls would find the data the first brought in. Each sample here
// starts with one cold call of 5 us; warm calls take 0.1 us.
TEST(Measure, OneCallPerSampleWhenEachSampleStartsCold) {
  FakeKernel k;
  bool cold = true;
  k.duration = [&](int64_t) {
    const double d = cold ? 5e-6 : 1e-7;
    cold = false;
    return d;
  };
  MeasureOptions o = k.options();
  o.before_sample = [&] { cold = true; };
  o.warmup_seconds = 0;  // warm-up: one warm call, so the call looks short enough to batch
  cold = false;
  const Measurement batched = measure(k.fn(), o);
  EXPECT_GT(batched.batch, 1);
  EXPECT_LT(batched.median, 1e-6);  // the cold call hidden among warm ones
  o.one_call_per_sample = true;
  cold = false;
  const Measurement single = measure(k.fn(), o);
  EXPECT_EQ(single.batch, 1);
  EXPECT_NEAR(single.median, 5e-6, 1e-12);
}

TEST(Measure, NoisyStartIsRemeasured) {
  FakeKernel k;
  // The first 40 calls alternate 1 ms / 3 ms (a neighbour process), then it is quiet.
  k.duration = [](int64_t i) { return i < 40 && i % 2 ? 3e-3 : 1e-3; };
  const Measurement m = measure(k.fn(), k.options());
  EXPECT_TRUE(m.remeasured());
  EXPECT_GE(m.remeasures, 1);
  EXPECT_LE(m.remeasures, 2);
  EXPECT_FALSE(m.noisy);
  EXPECT_LE(m.spread, 0.15);
  EXPECT_NEAR(m.median, 1e-3, 1e-9);
}

TEST(Measure, AlwaysNoisyKeepsSmallestSpreadAndSaysSo) {
  FakeKernel k;
  k.duration = [](int64_t i) { return i % 3 == 0 ? 4e-3 : 1e-3; };
  const Measurement m = measure(k.fn(), k.options());
  EXPECT_EQ(m.remeasures, 2);
  EXPECT_TRUE(m.noisy);
  EXPECT_GT(m.spread, 0.15);
}

TEST(Measure, SummarizeQuantiles) {
  const Measurement m = summarize_samples({5, 1, 4, 2, 3, 6, 7, 8, 9, 10, 11});
  EXPECT_DOUBLE_EQ(m.median, 6);
  EXPECT_DOUBLE_EQ(m.min, 1);
  EXPECT_DOUBLE_EQ(m.p10, 2);
  EXPECT_DOUBLE_EQ(m.p90, 10);
  EXPECT_DOUBLE_EQ(m.spread, 8.0 / 6.0);
  EXPECT_EQ(m.reps, 11);
}

// Real clock: the numbers must be plausible on a loaded 2-core machine.
TEST(Measure, RealSleep) {
  int64_t calls = 0;
  MeasureOptions o;
  o.max_remeasures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const Measurement m = measure([&] {
    ++calls;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }, o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(m.median, 500e-6);
  EXPECT_LT(m.median, 20e-3);
  EXPECT_GE(m.reps, o.min_reps);
  EXPECT_LE(m.reps, o.max_reps);
  EXPECT_EQ(m.batch, 1);
  EXPECT_LT(wall, 2.5);
}

TEST(Measure, RealBusyLoopIsBatched) {
  volatile int sink = 0;
  const Measurement m = measure([&] {
    for (int i = 0; i < 20; ++i) sink = sink + i;
  });
  EXPECT_GT(m.batch, 1);
  EXPECT_GT(m.median, 0);
  EXPECT_LT(m.median, 5e-6);
  EXPECT_GE(m.reps, 10);
}

// Another process spinning on a core is seen (a busy machine's measurements are flagged by it);
// this process's own time is not counted as another's.
TEST(Measure, OtherProcessesCoresSeesASpinningChild) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    volatile uint64_t x = 0;
    for (;;) x = x + 1;  // until killed
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double busy = other_processes_cores(0.5);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_GT(busy, 0.3) << "a child spinning on one core";
  EXPECT_LT(busy, std::thread::hardware_concurrency() + 0.5);
}

}  // namespace
}  // namespace korch
