// Every input the fuzz targets (fuzz/, scripts/fuzz.sh) ever crashed on, replayed through the
// same entry points in the normal build: each must now end in a korch::Error or be accepted.
// The folders hold one file per finding (tests/fuzz/regressions/<target>/).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/fuzz_entries.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

void replay(const std::string& target, void (*entry)(const uint8_t*, size_t)) {
  const fs::path dir = fs::path(KORCH_FUZZ_REGRESSIONS) / target;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().filename() == ".keep") continue;
    std::ifstream f(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string bytes = ss.str();
    SCOPED_TRACE(e.path().string());
    entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  std::printf("%s: %d regression inputs replayed\n", target.c_str(), n);
}

TEST(FuzzRegressions, OnnxLoader) { replay("onnx_loader", fuzz::onnx_loader); }
TEST(FuzzRegressions, IrText) { replay("ir_text", fuzz::ir_text); }
TEST(FuzzRegressions, ArtifactLoader) { replay("artifact_loader", fuzz::artifact_loader); }

}  // namespace
}  // namespace korch
