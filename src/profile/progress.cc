#include "profile/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace korch {

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_rate(double r) {
  if (r >= 100) return fmt::format("{:.0f}/s", r);
  if (r >= 1) return fmt::format("{:.1f}/s", r);
  return fmt::format("{:.2f}/s", r);
}

// Columns of the terminal behind `out`, 0 when unknown.
size_t terminal_columns(std::FILE* out) {
  winsize ws{};
  if (ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 0;
}

}  // namespace

std::string format_duration(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
}

std::string format_progress_line(const std::string& label, int64_t done, int64_t total,
                                 std::optional<double> rate, double elapsed_seconds,
                                 const std::string& note, int bar_width, int64_t skipped) {
  std::string line = label;
  if (total > 0) {
    const double frac = std::clamp(static_cast<double>(done) / static_cast<double>(total), 0.0, 1.0);
    const int filled = static_cast<int>(std::lround(frac * bar_width));
    line += fmt::format(" [{}{}] {}/{} ({:.1f}%)", std::string(filled, '#'),
                        std::string(bar_width - filled, '.'), done, total, frac * 100.0);
  } else {
    line += fmt::format(" {}", done);
  }
  if (skipped > 0) line += fmt::format(" {} cached", skipped);
  // fmt::format, not "literal" + std::string: GCC 12 warns falsely (-Wrestrict) on the latter.
  const bool known = rate.has_value();
  line += fmt::format(" {}", known ? format_rate(*rate) : std::string("?/s"));
  if (total > 0) {
    if (done >= total) {
      line += "  ETA 0s";
    } else if (known && *rate > 0) {
      line += fmt::format("  ETA {}", format_duration(static_cast<double>(total - done) / *rate));
    } else {
      line += "  ETA ?";
    }
  }
  line += fmt::format("  elapsed {}", format_duration(elapsed_seconds));
  if (!note.empty()) line += fmt::format("  {}", note);
  return line;
}

ProgressBar::ProgressBar(std::string label, int64_t total, std::FILE* out, ProgressOptions opt)
    : label_(std::move(label)), total_(total), out_(out), opt_(std::move(opt)) {
  if (opt_.enabled) {
    enabled_ = *opt_.enabled;
  } else {
    const char* env = std::getenv("KORCH_PROGRESS");
    enabled_ = !(env && std::strcmp(env, "0") == 0);
  }
  enabled_ = enabled_ && out_ != nullptr;
  tty_ = opt_.tty ? *opt_.tty : (out_ != nullptr && isatty(fileno(out_)) != 0);
  start_ = now();
  last_sample_time_ = start_;
  // A terminal shows the bar at the first tick; a log waits a full interval for its first line.
  last_draw_ = tty_ ? -std::numeric_limits<double>::infinity() : start_;
  next_check_.store(start_, std::memory_order_relaxed);
}

ProgressBar::~ProgressBar() { finish(); }

double ProgressBar::now() const { return opt_.clock ? opt_.clock() : steady_seconds(); }

std::optional<double> ProgressBar::rate() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rate_;
}

void ProgressBar::tick(int64_t n) {
  done_.fetch_add(n, std::memory_order_relaxed);
  if (!enabled_) return;
  const double t = now();
  if (t < next_check_.load(std::memory_order_relaxed)) return;
  // Another thread drawing right now covers this tick too.
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock() || finished_) return;
  next_check_.store(t + opt_.tty_interval, std::memory_order_relaxed);
  update_and_maybe_draw(false);
}

void ProgressBar::skip(int64_t n) {
  skipped_.fetch_add(n, std::memory_order_relaxed);
  tick(n);
}

void ProgressBar::set_note(std::string note) {
  std::lock_guard<std::mutex> lock(mu_);
  note_ = std::move(note);
}

void ProgressBar::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (enabled_) update_and_maybe_draw(true);
}

void ProgressBar::update_and_maybe_draw(bool final) {
  const double t = now();
  // A sample that sees a skip before its done_ (relaxed counters) would go backwards: hold it.
  const int64_t worked = std::max(last_sample_worked_, done_.load(std::memory_order_relaxed) -
                                                           skipped_.load(std::memory_order_relaxed));
  const double dt = t - last_sample_time_;
  const int64_t dn = worked - last_sample_worked_;
  // No rate before the first item: until then the time since the start is all we know.
  if (dt > 0 && (rate_ || dn > 0)) {
    const double inst = static_cast<double>(dn) / dt;
    const double alpha = 1.0 - std::exp(-dt / opt_.rate_time_constant);
    rate_ = rate_ ? alpha * inst + (1.0 - alpha) * *rate_ : inst;
    last_sample_time_ = t;
    last_sample_worked_ = worked;
  }
  const double interval = tty_ ? opt_.tty_interval : opt_.log_interval;
  if (final || t - last_draw_ >= interval) {
    last_draw_ = t;
    draw(final);
  }
}

void ProgressBar::draw(bool final) {
  std::string line = format_progress_line(label_, done_.load(std::memory_order_relaxed), total_, rate_,
                                          now() - start_, note_, 20, skipped_.load(std::memory_order_relaxed));
  if (tty_) {
    // A wrapped line would defeat \r; cut it to the terminal's width.
    const size_t cols = terminal_columns(out_);
    if (cols > 1 && line.size() > cols - 1) line.resize(cols - 1);
    const size_t len = line.size();
    if (len < last_len_) line += std::string(last_len_ - len, ' ');  // erase the longer old line
    last_len_ = len;
    std::fputs(("\r" + line + (final ? "\n" : "")).c_str(), out_);
  } else {
    std::fputs((line + "\n").c_str(), out_);
  }
  std::fflush(out_);
}

}  // namespace korch
