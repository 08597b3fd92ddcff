#include "support/strings.h"

#include <fmt/format.h>

#include <ctime>
#include <sstream>

namespace korch {

std::string sanitize_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
    if (!ok) c = '_';
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

static std::string scaled(double v, const char* const* units, int n, double base) {
  int u = 0;
  while (v >= base && u + 1 < n) { v /= base; ++u; }
  return fmt::format("{:.3g} {}", v, units[u]);
}

std::string human_bytes(double bytes) {
  static const char* const units[] = {"B", "KB", "MB", "GB", "TB"};
  return scaled(bytes, units, 5, 1000.0);
}

std::string human_count(double n) {
  static const char* const units[] = {"", "K", "M", "G", "T"};
  return scaled(n, units, 5, 1000.0);
}

std::string utc_minute(int64_t unix_time) {
  const std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", &tm);
  return buf;
}

}  // namespace korch
