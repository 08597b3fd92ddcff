// Generated kernels compiled with the CPU backend's flags (cpu_compiler.h) against a GCC 12.2
// miscompile we hit: with -march=native on a Sapphire Rapids Xeon (even with -mno-avx512f, through
// its -mtune), the vectorised int64 min(i1, 4) below read wrong elements (Concat's clamped source
// index: out[.., 4] came out 0). The kernel is the one the loop emitter wrote for that Concat.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "codegen/cpu/cpu_compiler.h"
#include "codegen/cpu/cpu_loop_emitter.h"
#include "runtime/cpu/cpu_device_id.h"
#include "temp_dir.h"

namespace korch {
namespace {

TEST(ToolchainKernel, VectorisedInt64MinAndMax) {
  const std::string source = cpu::cpu_prelude() + R"(
extern "C" void concat3(void* const* args) {
  const float* __restrict b0 = (const float*)args[0];
  float* __restrict b1 = (float*)args[1];
  for (int64_t i0 = 0; i0 < 12; ++i0) {
    #pragma omp simd
    for (int64_t i1 = 0; i1 < 15; ++i1) {
      const int64_t x8 = korch_imax(0LL, (i1 + -10LL));
      const int64_t x12 = korch_imax(0LL, korch_imin(4LL, (i1 + -5LL)));
      const int64_t x14 = korch_imin(i1, 4LL);
      const float t2 = expf(b0[(5LL * i0 + x8)]);
      const float t6 = (i1 >= 5LL && i1 < 10LL) ? (float)(-b0[(5LL * i0 + x12)]) : t2;
      b1[(15LL * i0 + i1)] = (i1 >= 0LL && i1 < 5LL) ? b0[(5LL * i0 + x14)] : t6;
    }
  }
}
)";
  auto libs = compile_libraries({source}, cpu::default_cpu_compiler());
  auto fn = reinterpret_cast<void (*)(void* const*)>(libs[0].library->symbol("concat3"));
  ASSERT_NE(fn, nullptr);
  std::vector<float> x(60), y(180, -99.f);
  for (int i = 0; i < 60; ++i) x[static_cast<size_t>(i)] = 0.01f * static_cast<float>(i) - 0.3f;
  void* args[2] = {x.data(), y.data()};
  fn(args);
  for (int i0 = 0; i0 < 12; ++i0)
    for (int i1 = 0; i1 < 15; ++i1) {
      const float want = i1 < 5 ? x[static_cast<size_t>(5 * i0 + i1)]
                       : i1 < 10 ? -x[static_cast<size_t>(5 * i0 + i1 - 5)]
                                 : std::exp(x[static_cast<size_t>(5 * i0 + i1 - 10)]);
      EXPECT_NEAR(y[static_cast<size_t>(15 * i0 + i1)], want, 1e-5f) << "row " << i0 << " column " << i1;
    }
}

// A progress bar's rate is the compiler's only if cache hits are told apart (and told first).
TEST(ToolchainKernel, CacheHitsAreReportedFirstThenEachCompile) {
  testing::TempDir dir("korch-compile-units");
  HostCompilerConfig config = cpu::default_cpu_compiler();
  config.cache_dir = dir.path().string();
  const std::string a = "extern \"C\" int unit_a() { return 1; }\n";
  const std::string b = "extern \"C\" int unit_b() { return 2; }\n";
  std::vector<bool> first, second;
  compile_libraries({a}, config, [&](bool cached) { first.push_back(cached); });
  EXPECT_EQ(first, std::vector<bool>({false}));
  auto libs = compile_libraries({b, a}, config, [&](bool cached) { second.push_back(cached); });
  EXPECT_EQ(second, std::vector<bool>({true, false}));  // a's hit before b's compile
  EXPECT_FALSE(libs[0].cached);
  EXPECT_TRUE(libs[1].cached);
}

// Kernels are built -march=native: a cached library is this CPU's, so the CPU (model and ISA) is
// part of its key, and a cache folder shared with another machine does not hand its libraries here.
TEST(ToolchainKernel, TheCacheKeyNamesTheCpu) {
  testing::TempDir dir("korch-compile-cpu-key");
  HostCompilerConfig config = cpu::default_cpu_compiler();
  config.cache_dir = dir.path().string();
  EXPECT_NE(config.key_extra.find(cpu_device_id(1)), std::string::npos) << config.key_extra;
  const std::string a = "extern \"C\" int unit_a() { return 1; }\n";
  std::vector<bool> hits;
  compile_libraries({a}, config, [&](bool cached) { hits.push_back(cached); });
  config.key_extra += "|another cpu";
  compile_libraries({a}, config, [&](bool cached) { hits.push_back(cached); });
  EXPECT_EQ(hits, std::vector<bool>({false, false}));
}

}  // namespace
}  // namespace korch
