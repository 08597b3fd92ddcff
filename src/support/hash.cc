#include "support/hash.h"

#include <fmt/format.h>

#include <cstdint>

namespace korch {

std::string content_hash(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace korch
