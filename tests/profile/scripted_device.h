// A CPU device whose pace probe returns scripted times, for tests of the machine's pace
// (profile/pace.h) and of what depends on it.
#pragma once

#include <deque>
#include <vector>

#include "runtime/cpu/cpu_device.h"

namespace korch::testing {

// Probes return `us` microseconds in turn (the last one again when they run out).
class ScriptedDevice : public cpu::CpuDevice {
 public:
  explicit ScriptedDevice(std::vector<double> us) : left_(us.begin(), us.end()) {}
  double pace_probe_seconds() const override {
    ++probes;
    const double s = left_.front() * 1e-6;
    if (left_.size() > 1) left_.pop_front();
    return s;
  }
  mutable int probes = 0;

 private:
  mutable std::deque<double> left_;
};

}  // namespace korch::testing
