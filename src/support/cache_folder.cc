#include "support/cache_folder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <tuple>

#include <fmt/format.h>

#include "support/error.h"

namespace korch {

namespace fs = std::filesystem;

namespace {

struct Known {
  const char* name;
  const char* what;
  bool rebuildable;
};
constexpr Known kEntries[] = {
    {"tuning.db", "measured kernel costs (the tuning database)", false},
    {"kernels", "compiled CPU kernel libraries", true},
    {"cuda", "NVRTC output for CUDA kernels", true},
    {"cuda_emu", "host builds of CUDA kernels (the emulator)", true},
};
constexpr const char* kDbFiles[] = {"tuning.db", "tuning.db-wal", "tuning.db-shm"};

bool in_flight(const fs::directory_entry& e) {
  if (e.path().filename().string().find(".tmp") == std::string::npos) return false;
  std::error_code ec;
  const auto age = fs::file_time_type::clock::now() - e.last_write_time(ec);
  return !ec && age < std::chrono::hours(1);
}

}  // namespace

std::vector<CacheEntry> cache_entries(const std::string& root) {
  std::vector<CacheEntry> out;
  for (const Known& k : kEntries) {
    CacheEntry e;
    e.name = k.name;
    e.what = k.what;
    e.rebuildable = k.rebuildable;
    e.path = (fs::path(root) / k.name).string();
    std::error_code ec;
    if (!k.rebuildable) {
      for (const char* f : kDbFiles) {
        const fs::path p = fs::path(root) / f;
        if (!fs::is_regular_file(p, ec)) continue;
        e.exists = true;
        ++e.files;
        e.bytes += static_cast<int64_t>(fs::file_size(p, ec));
      }
    } else if (fs::is_directory(e.path, ec)) {
      e.exists = true;
      for (const auto& f : fs::directory_iterator(e.path, ec)) {
        if (!f.is_regular_file(ec)) continue;
        ++e.files;
        e.bytes += static_cast<int64_t>(f.file_size(ec));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

int64_t cache_cap() {
  const char* v = std::getenv("KORCH_CACHE_MAX_SIZE");
  if (v == nullptr || *v == 0) return kDefaultCacheCap;
  if (std::string(v) == "none") return -1;
  return parse_size(v, "KORCH_CACHE_MAX_SIZE");
}

TrimResult trim_compiled(const std::string& root, int64_t max_bytes) {
  std::vector<std::tuple<fs::file_time_type, int64_t, fs::path>> files;
  TrimResult r;
  std::error_code ec;
  for (const Known& k : kEntries) {
    if (!k.rebuildable) continue;
    const fs::path dir = fs::path(root) / k.name;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& f : fs::directory_iterator(dir, ec)) {
      if (!f.is_regular_file(ec)) continue;
      const auto size = static_cast<int64_t>(f.file_size(ec));
      r.bytes_left += size;
      if (!in_flight(f)) files.emplace_back(f.last_write_time(ec), size, f.path());
    }
  }
  std::sort(files.begin(), files.end());  // least recently used first
  for (const auto& [when, size, path] : files) {
    if (r.bytes_left <= max_bytes) break;
    if (!fs::remove(path, ec) || ec) continue;
    ++r.files_removed;
    r.bytes_removed += size;
    r.bytes_left -= size;
  }
  return r;
}

int64_t remove_tuning_db(const std::string& root) {
  int64_t freed = 0;
  for (const char* f : kDbFiles) {
    const fs::path p = fs::path(root) / f;
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) continue;
    const auto size = static_cast<int64_t>(fs::file_size(p, ec));
    if (!fs::remove(p, ec)) fail_io("cannot delete {}: {}", p.string(), ec.message());
    freed += size;
  }
  return freed;
}

int64_t parse_size(const std::string& text, const std::string& what) {
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
  }
  std::string unit = text.substr(std::min(used, text.size()));
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();  // "GiB"
  double scale = 0;
  if (unit.empty()) scale = 1;
  else if (unit.size() == 1) {
    switch (unit[0]) {
      case 'k': case 'K': scale = 1024.0; break;
      case 'm': case 'M': scale = 1024.0 * 1024; break;
      case 'g': case 'G': scale = 1024.0 * 1024 * 1024; break;
      case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; break;
      default: break;
    }
  }
  if (!(v >= 0) || scale == 0 || !std::isfinite(v * scale))
    fail("{}: '{}' is not a size (examples: 1073741824, 500M, 2G)", what, text);
  return static_cast<int64_t>(std::llround(v * scale));
}

std::string format_size(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

}  // namespace korch
