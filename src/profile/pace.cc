#include "profile/pace.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "profile/measure.h"
#include "profile/tuning_db.h"
#include "runtime/device.h"

namespace korch {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

MachinePace::MachinePace(const runtime::Device& dev, TuningDb& db, std::string device_id, PaceOptions options,
                         std::function<void(const std::string&)> say)
    : dev_(dev), db_(db), device_id_(std::move(device_id)), options_(options), say_(std::move(say)) {}

double MachinePace::probe() {
  last_at_ = now_seconds();
  const double s = options_.enabled ? dev_.pace_probe_seconds() : 0;
  if (!(s > 0)) return last_ = 0;
  const double best = db_.best_pace(device_id_);
  if (!(best > 0) || s < best) db_.offer_pace(device_id_, s);
  last_probe_seconds_ = s;
  return last_ = best > 0 ? std::max(1.0, s / best) : 1.0;
}

double MachinePace::current() {
  if (!is_slow(probe())) return last_;
  // Other processes on the cores slow the probe too: that is load, not the machine's pace.
  const double t = now_seconds();
  if (t - load_at_ > options_.load_seconds) {
    loaded_ = (options_.other_load ? options_.other_load() : other_processes_cores()) > 0.5;
    load_at_ = now_seconds();
  }
  return loaded_ ? last_ = 0 : last_;
}

double MachinePace::settle(bool wait) {
  if (now_seconds() - last_at_ < options_.interval_seconds) return last_;
  if (!wait) return current();
  return wait_for_pace();
}

double MachinePace::wait_for_pace(const std::string& what) {
  if (!is_slow(current()) || waited_ >= options_.max_wait_seconds) return last_;
  const double start = now_seconds();
  if (say_)
    say_(
        fmt::format("the machine runs slower than its best (pace probe {:.1f} us, {:.2f}x its fastest; no other "
                    "process on the cores): waiting up to {:.0f} s for it before {} on",
                    last_probe_seconds_ * 1e6, last_, options_.max_wait_seconds - waited_, what));
  while (is_slow(last_) && waited_ + (now_seconds() - start) < options_.max_wait_seconds) {
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.retry_seconds));
    current();
  }
  const double waited = now_seconds() - start;
  waited_ += waited;
  if (say_)
    say_(is_slow(last_) ? fmt::format("still slow after {:.0f} s (pace {:.2f}x): measuring on; these records keep "
                                      "their pace and a later compile at the machine's pace measures them again",
                                      waited, last_)
                        : fmt::format("back to pace after {:.0f} s ({:.2f}x)", waited, last_));
  return last_;
}

}  // namespace korch
