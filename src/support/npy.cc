#include "support/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "support/error.h"
#include "support/file_io.h"

namespace korch {

namespace {

// Extracts the value text after 'key': in the header dict, up to the next top-level comma/brace.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail("{}: .npy header has no '{}'", path, key);
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) fail("{}: malformed .npy header", path);
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  size_t j = i;
  if (j < header.size() && header[j] == '(') {
    j = header.find(')', j);
    if (j == std::string::npos) fail("{}: malformed .npy header", path);
    return header.substr(i, j - i + 1);
  }
  while (j < header.size() && header[j] != ',' && header[j] != '}') ++j;
  return header.substr(i, j - i);
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  const std::string bytes = read_file_bytes(path);
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) fail("{}: not a .npy file", path);
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len = 0, pos = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
    pos = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail("{}: truncated .npy header", path);
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    pos = 12;
  } else {
    fail("{}: unsupported .npy version {}", path, major);
  }
  if (pos + header_len > bytes.size()) fail("{}: truncated .npy header", path);
  std::string header = bytes.substr(pos, header_len);
  pos += header_len;

  NpyArray a;
  std::string descr = dict_value(header, "descr", path);
  if (descr.size() < 2 || (descr.front() != '\'' && descr.front() != '"')) fail("{}: unsupported .npy descr {}", path, descr);
  a.descr = descr.substr(1, descr.size() - 2);
  std::string fortran = dict_value(header, "fortran_order", path);
  if (fortran.find("True") != std::string::npos) fail("{}: Fortran-order .npy arrays are not supported", path);
  std::string shape = dict_value(header, "shape", path);
  std::stringstream ss(shape.substr(1, shape.size() - 2));
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(' ');
    if (b == std::string::npos) continue;
    try {
      a.shape.push_back(std::stoll(item.substr(b)));
    } catch (const std::exception&) {
      fail("{}: malformed .npy shape {}", path, shape);
    }
  }
  int64_t itemsize = 0;
  try {
    itemsize = std::stoll(a.descr.substr(2));
  } catch (const std::exception&) {
    fail("{}: unsupported .npy dtype '{}'", path, a.descr);
  }
  int64_t numel = 1;
  for (int64_t d : a.shape) {
    if (d < 0) fail("{}: negative dimension in .npy shape", path);
    numel *= d;
  }
  size_t need = static_cast<size_t>(numel * itemsize);
  if (bytes.size() - pos < need)
    fail("{}: truncated .npy data ({} bytes, shape {} needs {})", path, bytes.size() - pos, shape, need);
  a.data.resize(need);
  std::memcpy(a.data.data(), bytes.data() + pos, need);
  return a;
}

void write_npy(const std::string& path, const NpyArray& a) {
  std::string shape = "(";
  for (size_t i = 0; i < a.shape.size(); ++i) shape += std::to_string(a.shape[i]) + ((a.shape.size() == 1) ? "," : (i + 1 < a.shape.size() ? ", " : ""));
  shape += ")";
  std::string header = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  header += std::string(pad, ' ') + "\n";
  std::ofstream f(path, std::ios::binary);
  if (!f) fail_io("cannot write '{}'", path);
  f.write("\x93NUMPY\x01\x00", 8);
  uint16_t hl = static_cast<uint16_t>(header.size());
  char hlb[2] = {static_cast<char>(hl & 0xff), static_cast<char>(hl >> 8)};
  f.write(hlb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(a.data.data()), static_cast<std::streamsize>(a.data.size()));
  if (!f) fail_io("error writing '{}'", path);
}

}  // namespace korch
