#include "support/file_io.h"

#include <fstream>
#include <iterator>

#include "support/error.h"

namespace korch {

std::string read_file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail_io("cannot open '{}'", path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_file_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
  f.close();
  if (!f) fail_io("cannot write {}", path);
}

}  // namespace korch
