// Generated kernels compiled with the CPU backend's flags (cpu_compiler.h) against a GCC 12.2
// miscompile we hit: with -march=native on a Sapphire Rapids Xeon (even with -mno-avx512f, through
// its -mtune), the vectorised int64 min(i1, 4) below read wrong elements (Concat's clamped source
// index: out[.., 4] came out 0). The kernel is the one the loop emitter wrote for that Concat.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "codegen/cpu/cpu_compiler.h"
#include "codegen/cpu/cpu_loop_emitter.h"
#include "runtime/cpu/cpu_device_id.h"
#include "temp_dir.h"

namespace korch {
namespace {

TEST(ToolchainKernel, VectorisedInt64MinAndMax) {
  // The probe (cpu_compiler.cc) holds that kernel and the brace-initialised int64 vector.
  EXPECT_TRUE(cpu::miscompile_probe_passes(cpu::default_cpu_compiler()));
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

// Float math rounds each operation, as the reference interpreter does: no a * b + c contracted
// into an FMA (GCC does that by default under -march=native on an FMA CPU), whose one-ulp
// differences a quantizer downstream turns into flipped quanta. The loop's inputs are chosen so
// the fused and the separately rounded results differ.
TEST(ToolchainKernel, FloatMathIsNotContractedIntoFma) {
  testing::TempDir dir("korch-compile-fma");
  HostCompilerConfig config = cpu::default_cpu_compiler();
  config.cache_dir = dir.path().string();
  const std::string src =
      "extern \"C\" void mul_add(const float* a, const float* b, const float* c, float* y, int n) {\n"
      "  for (int i = 0; i < n; ++i) y[i] = a[i] * b[i] + c[i];\n}\n";
  auto libs = compile_libraries({src}, config);
  auto fn = reinterpret_cast<void (*)(const float*, const float*, const float*, float*, int)>(
      libs.at(0).library->symbol("mul_add"));
  ASSERT_TRUE(fn);
  const int n = 4096;
  std::vector<float> a(n), b(n), c(n), y(n);
  for (int i = 0; i < n; ++i) {
    a[i] = 1.0f + static_cast<float>(i) * 1e-4f;
    b[i] = 3.0f - static_cast<float>(i) * 3e-4f;
    c[i] = -a[i] * b[i];  // the product's rounding error is all that is left with an FMA
  }
  fn(a.data(), b.data(), c.data(), y.data(), n);
  int fused = 0;
  for (int i = 0; i < n; ++i) {
    volatile float p = a[i] * b[i];  // rounded to float, then added: the interpreter's way
    const float want = p + c[i];
    EXPECT_EQ(y[i], want) << i;
    fused += y[i] != want;
    if (fused > 3) break;
  }
}

// One of the prelude's float functions, applied to the inputs in a `#pragma omp simd` loop compiled
// with the kernels' flags (vectorised as in a kernel).
std::vector<float> run_prelude_function(const std::string& name, const std::string& dir_name,
                                        const std::vector<float>& x) {
  testing::TempDir dir(dir_name);
  HostCompilerConfig config = cpu::default_cpu_compiler();
  config.cache_dir = dir.path().string();
  const std::string src = cpu::cpu_prelude() +
                          "extern \"C\" void apply(const float* __restrict x, float* __restrict y, int64_t n) {\n"
                          "  #pragma omp simd\n"
                          "  for (int64_t i = 0; i < n; ++i) y[i] = " +
                          name + "(x[i]);\n}\n";
  auto libs = compile_libraries({src}, config);
  auto fn = reinterpret_cast<void (*)(const float*, float*, int64_t)>(libs.at(0).library->symbol("apply"));
  std::vector<float> y(x.size());
  if (fn) fn(x.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

// Every 997th float of [0, top] with both signs, then `edges`.
std::vector<float> every_997th_float(uint32_t top_bits, const std::vector<float>& edges) {
  std::vector<float> x;
  for (uint32_t b = 0; b <= top_bits; b += 997) {
    float v;
    std::memcpy(&v, &b, sizeof v);
    x.push_back(v);
    x.push_back(-v);
  }
  x.insert(x.end(), edges.begin(), edges.end());
  return x;
}

// y against `want` (in double) of each x: the worst relative error where the result is a normal
// float, the worst error in units of the least denormal where it is below that, how many results
// past FLT_MAX are not inf; a NaN input must give NaN.
struct FloatErrors {
  double worst = 0, worst_denormal = 0;
  int wrong_overflow = 0;
};
FloatErrors errors_against(const std::vector<float>& x, const std::vector<float>& y, double (*want_of)(double)) {
  FloatErrors e;
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE(std::isnan(y[i])) << y[i];
      continue;
    }
    const double want = want_of(static_cast<double>(x[i]));
    if (want > 0x1.fffffep127) {
      e.wrong_overflow += !std::isinf(y[i]);
      continue;
    }
    const double err = std::fabs(static_cast<double>(y[i]) - want);
    if (want >= 0x1p-126)
      e.worst = std::max(e.worst, err / want);
    else
      e.worst_denormal = std::max(e.worst_denormal, err / 0x1p-149);
  }
  return e;
}

// korch_exp_negabs (the prelude's exp(-|v|): Sigmoid's exp and a softmax's) against exp in double
// on every 997th float of [0, 104] with both signs: relative error under 5e-7 where the result is a
// normal float (3.9e-7 over every float there, measured), under 4 units of the least denormal
// below it (the scaled result rounds once: 3.9e-7 of 2^23 such units at 2^-126), NaN kept, +-inf
// and what lies past 104 giving 0.
TEST(ToolchainKernel, ThePreludesExpOfMinusAbsStaysWithinItsErrorBound) {
  const std::vector<float> x = every_997th_float(0x42d00000u, {INFINITY, -INFINITY, NAN, -NAN, 104.f, -104.5f, 1e30f});
  const std::vector<float> y = run_prelude_function("korch_exp_negabs", "korch-compile-exp", x);
  const FloatErrors e = errors_against(x, y, [](double v) { return std::exp(-std::fabs(v)); });
  EXPECT_LT(e.worst, 5e-7);
  EXPECT_LT(e.worst_denormal, 4.0);
  EXPECT_EQ(y[x.size() - 7], 0.f);  // exp(-inf)
}

// korch_exp (the prelude's exp for every other float exp) against exp in double on every 997th
// float of [-110, 110]: relative error under 5e-7 where the result is a normal float (3.91e-7 over
// every float there, measured), under 4 units of the least denormal below it, inf where exp passes
// FLT_MAX, NaN kept, exp(-inf) 0 and exp(inf) inf.
TEST(ToolchainKernel, ThePreludesExpStaysWithinItsErrorBound) {
  const std::vector<float> x = every_997th_float(
      0x42dc0000u, {88.72283f, 88.72284f, 89.f, 1e30f, -103.9f, -104.f, -1e30f, INFINITY, -INFINITY, NAN});
  const std::vector<float> y = run_prelude_function("korch_exp", "korch-compile-exp-any", x);
  const FloatErrors e = errors_against(x, y, [](double v) { return std::exp(v); });
  EXPECT_LT(e.worst, 5e-7);
  EXPECT_LT(e.worst_denormal, 4.0);
  EXPECT_EQ(e.wrong_overflow, 0);
  EXPECT_EQ(y[x.size() - 3], INFINITY);  // exp(inf)
  EXPECT_EQ(y[x.size() - 2], 0.f);       // exp(-inf)
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

// Generated kernels use AVX-512 only on a CPU that has it and only with flags under which the
// miscompiled patterns compute right; the probe can tell: with GCC 12.2 and AVX-512 on (without
// -fno-tree-slp-vectorize) it fails, as the miscompile did on a Sapphire Rapids Xeon and a Zen 4.
TEST(ToolchainKernel, GeneratedKernelsUseAvx512OnlyWhereTheProbePasses) {
  const std::vector<std::string> flags = cpu::default_cpu_compiler().flags;
  const bool no_avx512 = std::find(flags.begin(), flags.end(), "-mno-avx512f") != flags.end();
  EXPECT_NE(no_avx512, cpu::generated_kernels_use_avx512());
  if (!host_cpu_flags().count("avx512f")) {
    EXPECT_TRUE(no_avx512) << "a CPU without AVX-512";
    GTEST_SKIP() << "this CPU has no AVX-512: the probe is not run";
  }
  if (!std::getenv("KORCH_NO_AVX512")) {
    EXPECT_EQ(cpu::generated_kernels_use_avx512(),
              cpu::miscompile_probe_passes(cpu::cpu_compiler_with({"-march=native", "-mtune=generic", "-fno-tree-slp-vectorize"})));
  }
  if (host_compiler_version(cpu::default_cpu_compiler().cxx).find("12.2.0") == std::string::npos)
    GTEST_SKIP() << "not GCC 12.2: whether it miscompiles with AVX-512 is not known here";
  EXPECT_FALSE(cpu::miscompile_probe_passes(cpu::cpu_compiler_with({"-march=native", "-mtune=generic"})))
      << "GCC 12.2 compiled the probe right with AVX-512 and SLP vectorisation on";
}

}  // namespace
}  // namespace korch
