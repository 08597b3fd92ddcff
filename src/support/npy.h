// NumPy .npy file I/O (format versions 1.0-3.0), little-endian, C order. Dtype-agnostic: the
// `descr` string ("<f4", "|b1", ...) is kept as is; ir/tensor_io.h maps it to a Tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace korch {

struct NpyArray {
  std::string descr;            // numpy dtype descr, e.g. "<f4"
  std::vector<int64_t> shape;
  std::vector<std::byte> data;  // C-order bytes
};

// Throws korch::Error (kIo for missing/unreadable files, kInvalid for malformed content), naming the path.
NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& a);

}  // namespace korch
