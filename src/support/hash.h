// A stable content hash: names cached kernels, tuning records and compiled modules.
#pragma once

#include <string>

namespace korch {

// 16 hex digits of a 64-bit FNV-1a hash of `text` (stable across runs and machines).
std::string content_hash(const std::string& text);

}  // namespace korch
