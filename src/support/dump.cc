#include "support/dump.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/error.h"

namespace korch {

std::string dump_dir() {
  const char* d = std::getenv("KORCH_DUMP");
  return d ? std::string(d) : std::string();
}

void dump_stage(const std::string& stage, const std::string& text) {
  static std::atomic<int> counter{0};
  std::string dir = dump_dir();
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail_io("KORCH_DUMP: cannot create '{}': {}", dir, ec.message());
  std::string path = fmt::format("{}/{:02}_{}.txt", dir, counter++, stage);
  std::ofstream f(path);
  f << text;
  if (!f) fail_io("KORCH_DUMP: cannot write '{}'", path);
}

}  // namespace korch
