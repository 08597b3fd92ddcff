// A progress line for long loops (compiling and measuring thousands of kernels):
//
//   measure [#####...............] 123/4567 (2.7%) 45.2/s  ETA 1m38s  elapsed 3s  conv3x3
//
// On a terminal the line is redrawn in place (\r) at most every 100 ms. Otherwise (CI logs, a pipe)
// a full line is printed at most every 5 s, so a log gets a heartbeat without thousands of lines.
// finish() (or the destructor) prints the final line. KORCH_PROGRESS=0 disables all output.
// The rate is an exponential moving average over the last ~10 s, so the ETA follows the current
// speed rather than the average since the start; "ETA ?" until a rate is known.
// Items that needed no work (a compile unit found in the cache) are skip()ped: they count as done
// and show as "N cached", but the rate and the ETA are those of the items that did need work.
// tick(), skip() and set_note() may be called from several threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace korch {

// "3s", "1m38s", "2h05m" (rounded to whole seconds; negative counts as 0).
std::string format_duration(double seconds);

// One progress line without a trailing newline. total <= 0 means unknown: no bar, percent or ETA.
// rate: items per second, nullopt while unknown (also makes the ETA "?"). skipped: how many of
// `done` needed no work (shown as "N cached"; the ETA is (total - done) / rate either way).
std::string format_progress_line(const std::string& label, int64_t done, int64_t total,
                                 std::optional<double> rate, double elapsed_seconds,
                                 const std::string& note, int bar_width = 20, int64_t skipped = 0);

struct ProgressOptions {
  std::optional<bool> tty;              // unset: isatty(fileno(out))
  std::optional<bool> enabled;          // unset: false when KORCH_PROGRESS=0, else true
  std::function<double()> clock;        // seconds, monotonic; empty = steady_clock
  double tty_interval = 0.1;            // seconds between redraws on a terminal
  double log_interval = 5.0;            // seconds between lines otherwise
  double rate_time_constant = 10.0;     // seconds of history the rate average weighs most
};

class ProgressBar {
 public:
  ProgressBar(std::string label, int64_t total, std::FILE* out = stderr, ProgressOptions opt = {});
  ~ProgressBar();  // finish() unless already called
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  void tick(int64_t n = 1);
  // n items done without work: counted, shown as cached, never part of the rate.
  void skip(int64_t n = 1);
  void set_note(std::string note);
  // Prints the final line (with a newline); later ticks print nothing. Idempotent.
  void finish();

  int64_t done() const { return done_.load(std::memory_order_relaxed); }
  // The smoothed rate in items/s, nullopt until one has been measured.
  std::optional<double> rate() const;

 private:
  double now() const;
  void update_and_maybe_draw(bool final);  // caller holds mu_
  void draw(bool final);                   // caller holds mu_

  std::string label_;
  int64_t total_;
  std::FILE* out_;
  ProgressOptions opt_;
  bool enabled_ = true;
  bool tty_ = false;
  double start_ = 0;

  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> skipped_{0};
  std::atomic<double> next_check_{0};  // ticks before this time skip the lock

  mutable std::mutex mu_;  // guards everything below
  std::string note_;
  bool finished_ = false;
  double last_sample_time_ = 0;
  int64_t last_sample_worked_ = 0;  // done - skipped at the last rate sample
  std::optional<double> rate_;
  double last_draw_ = 0;
  size_t last_len_ = 0;
};

}  // namespace korch
