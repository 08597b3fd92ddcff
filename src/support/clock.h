// Elapsed wall time for progress lines, budgets and the timings artifacts record: one monotonic
// clock and one helper for every stage (timing kernels is profile/measure.h's business).
#pragma once

#include <chrono>

namespace korch {

using Clock = std::chrono::steady_clock;

// Seconds on Clock since `t`.
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace korch
