#include "support/hash.h"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>

namespace korch {

std::string content_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

std::string bytes_checksum(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h ^= w;
    h *= 1099511628211ull;
    h ^= h >> 29;
  }
  for (; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace korch
