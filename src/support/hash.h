// A stable content hash: names cached kernels, tuning records and compiled modules.
#pragma once

#include <cstddef>
#include <string>

namespace korch {

// 16 hex digits of a 64-bit FNV-1a hash of `text` (stable across runs and machines).
std::string content_hash(const std::string& text);
// 16 hex digits of a 64-bit checksum of `n` bytes: FNV-1a over 8-byte words (then the tail bytes),
// several GB/s, for files too big to hash byte by byte at every load (an artifact's weights).
std::string bytes_checksum(const void* data, size_t n);

}  // namespace korch
