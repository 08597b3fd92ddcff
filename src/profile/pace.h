// The machine's pace: how fast the timing device runs a fixed probe now (Device::pace_probe_seconds)
// against the fastest probe the tuning database has recorded for it.
//
// Why: a shared VM changes speed with its neighbours. This project's 2-core EPYC VM runs
// memory-bound kernels 1.3-2.5x slower for seconds to many minutes at a time, with no steal time
// and no other process in /proc to show it (bench/results/cpu_latency_epyc_dec06_paired.md). A
// kernel timed then is stored and reused; if its neighbours in a plan were timed at the machine's
// pace, the solver compares numbers from two machines. So every measurement carries the pace it
// was taken at (TuningRecord::pace: 1 at the device's best, 1.6 in a slow phase), measuring waits
// a while for a slow machine to come back, and a record taken slow is measured again by a later
// compile that finds the machine at its pace (MeasuredCost::prepare).
//
// The probe costs ~4 ms on the CPU (100 parallel passes over 1.8 MB; past 50 ms, as when other
// processes hold the cores, the passes so far decide); settle() probes at most
// once per `interval_seconds` of measuring. A slow probe while other processes use the cores
// (ctest -j2, a build) is load, not the machine's pace: its pace is unknown (0), and it is not
// waited for (MeasuredCost warns about busy machines already).
#pragma once

#include <functional>
#include <string>

namespace korch {

namespace runtime {
class Device;
}
class TuningDb;

struct PaceOptions {
  // Off: no probe, every pace 0 (unknown), no wait: the library's default (the tests' compiles run
  // beside each other and would mark each other slow); `korch compile` turns it on (--pace-wait).
  bool enabled = false;
  double slow = 1.3;  // a pace above this is a slow machine (fast-phase probes: within 1.15)
  // In all, per MachinePace: how long measuring may wait for the pace (`korch compile`: 60 s).
  double max_wait_seconds = 0;
  double interval_seconds = 1;  // settle(): probes at most this often
  double retry_seconds = 2;     // while waiting: between probes
  double load_seconds = 5;      // how long a look at the other processes' load holds
  // Cores' worth of CPU time other processes use now (default: other_processes_cores, measure.h).
  std::function<double()> other_load;
};

class MachinePace {
 public:
  // `device_id` keys the best probe in `db` (the device part of the tuning keys).
  MachinePace(const runtime::Device& dev, TuningDb& db, std::string device_id, PaceOptions options = {},
              std::function<void(const std::string&)> say = {});

  // Probes now and returns the pace (this probe over the best recorded, which it may become);
  // 0 when disabled or the device has no probe.
  double probe();
  // probe(), but 0 (unknown) when it is slow and other processes on the cores explain it.
  double current();
  // The pace to record with a measurement about to be taken: the last one, taken again (current())
  // when `interval_seconds` have passed. While it is slow, waits for it (probing every
  // `retry_seconds`) as long as the wait budget lasts, and says so once per wait.
  // wait = false: no wait (the pace now, probed again after `interval_seconds`).
  double settle(bool wait = true);
  // settle() now, without its interval: the pace probed now, waited for while slow (within the
  // wait budget). `what` says what waits ("measuring", "the closed loop's run").
  double wait_for_pace(const std::string& what = "measuring");

  double last() const { return last_; }
  bool is_slow(double pace) const { return pace > options_.slow; }
  double waited_seconds() const { return waited_; }
  const PaceOptions& options() const { return options_; }

 private:
  const runtime::Device& dev_;
  TuningDb& db_;
  std::string device_id_;
  PaceOptions options_;
  std::function<void(const std::string&)> say_;
  double last_ = 0, last_probe_seconds_ = 0, last_at_ = -1e9, waited_ = 0;
  double load_at_ = -1e9;
  bool loaded_ = false;  // other processes used the cores at the last look
};

}  // namespace korch
