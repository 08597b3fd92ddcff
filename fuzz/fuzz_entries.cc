#include "fuzz/fuzz_entries.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx_loader.h"
#include "ir/text_format.h"
#include "ir/graph.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace korch::fuzz {

namespace fs = std::filesystem;

void onnx_loader(const uint8_t* data, size_t size) {
  try {
    load_onnx_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.onnx");
  } catch (const Error&) {
  }
}

void ir_text(const uint8_t* data, size_t size) {
  try {
    Graph g = parse_graph(std::string(reinterpret_cast<const char*>(data), size));
    verify_graph(g);
  } catch (const Error&) {
  }
}

void artifact_loader(const uint8_t* data, size_t size) {
  // One scratch folder per process, rewritten for every input.
  static const fs::path dir = fs::temp_directory_path() / ("korch-fuzz-artifact-" + std::to_string(getpid()));
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  const size_t a = bytes.find('\0');
  const size_t b = a == std::string::npos ? std::string::npos : bytes.find('\0', a + 1);
  auto part = [&](size_t from, size_t to) {
    if (from == std::string::npos || from > bytes.size()) return std::string();
    return bytes.substr(from, to == std::string::npos ? std::string::npos : to - from);
  };
  std::ofstream(dir / "manifest.json", std::ios::binary) << part(0, a);
  std::ofstream(dir / "program.json", std::ios::binary) << part(a == std::string::npos ? a : a + 1, b);
  std::ofstream(dir / "weights.bin", std::ios::binary) << part(b == std::string::npos ? b : b + 1, std::string::npos);
  try {
    auto exe = runtime::Executable::load(dir.string());
    std::vector<Tensor> inputs;
    for (const TensorType& t : exe->input_types()) {
      if (t.byte_size() > (64 << 20)) return;  // a huge declared input is not a bug to find here
      inputs.emplace_back(t);
    }
    exe->run(inputs);
  } catch (const Error&) {
  }
}

}  // namespace korch::fuzz
