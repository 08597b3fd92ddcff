#include "codegen/cpu/cpu_compiler.h"

#include <cstdlib>
#include <string>

#include "codegen/cpu/cpu_loop_emitter.h"
#include "runtime/cpu/cpu_device_id.h"
#include "support/error.h"

namespace korch::cpu {

namespace {

const std::vector<std::string> kAvx2Flags = {"-march=native", "-mno-avx512f", "-mtune=generic"};
const std::vector<std::string> kAvx512Flags = {"-march=native", "-mtune=generic", "-fno-tree-slp-vectorize"};

// Code GCC 12.2 has compiled wrongly for AVX-512 (cpu_compiler.h); each function returns 1 when
// the library computes it right.
std::string miscompile_probe_source() {
  return cpu_prelude() + R"(
#include <vector>
__attribute__((noinline)) static std::vector<int64_t> korch_probe_pass(std::vector<int64_t> v) { return v; }
extern "C" int korch_probe_vector_init() {
  std::vector<int64_t> v = korch_probe_pass({1, 1, 0, 0});
  return v.size() == 4 && v[0] == 1 && v[1] == 1 && v[2] == 0 && v[3] == 0;
}
// The loop emitter's Concat of three 5-wide pieces along the innermost axis (clamped int64 indices).
extern "C" int korch_probe_int64_min_max() {
  float b0[60], b1[180];
  for (int i = 0; i < 60; ++i) b0[i] = 0.01f * (float)i - 0.3f;
  for (int64_t i0 = 0; i0 < 12; ++i0) {
    #pragma omp simd
    for (int64_t i1 = 0; i1 < 15; ++i1) {
      const int64_t x8 = korch_imax(0LL, (i1 + -10LL));
      const int64_t x12 = korch_imax(0LL, korch_imin(4LL, (i1 + -5LL)));
      const int64_t x14 = korch_imin(i1, 4LL);
      const float t2 = 2.0f * b0[(5LL * i0 + x8)];
      const float t6 = (i1 >= 5LL && i1 < 10LL) ? (float)(-b0[(5LL * i0 + x12)]) : t2;
      b1[(15LL * i0 + i1)] = (i1 >= 0LL && i1 < 5LL) ? b0[(5LL * i0 + x14)] : t6;
    }
  }
  for (int i0 = 0; i0 < 12; ++i0)
    for (int i1 = 0; i1 < 15; ++i1) {
      const float want = i1 < 5 ? b0[5 * i0 + i1] : i1 < 10 ? -b0[5 * i0 + i1 - 5] : 2.0f * b0[5 * i0 + i1 - 10];
      if (b1[15 * i0 + i1] != want) return 0;
    }
  return 1;
}
)";
}

}  // namespace

HostCompilerConfig cpu_compiler_with(const std::vector<std::string>& isa_flags) {
  HostCompilerConfig c;
  if (const char* cxx = std::getenv("KORCH_CXX"); cxx && *cxx) c.cxx = cxx;
  c.flags = {"-std=c++17", "-O3"};
  c.flags.insert(c.flags.end(), isa_flags.begin(), isa_flags.end());
  // -ffp-contract=off: each float operation rounds as the reference interpreter's does. GCC
  // otherwise fuses a * b + c into an FMA under -march=native, a one-ulp difference that a
  // quantizer downstream turns into a flipped quantum (dynamically quantized resnet18's artifact
  // drifted 8e-3 relative L2 from the interpreter and from onnxruntime so).
  for (const char* f : {"-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fPIC", "-shared", "-w"})
    c.flags.push_back(f);
  c.libs = {"-lmvec", "-lm"};
  c.cache_subdir = "kernels";
  // -march=native: a library is this CPU's (model and ISA), not only this source's and flags'.
  c.key_extra = std::to_string(kCpuGeneratorVersion) + "|" + cpu_device_id(1);
  return c;
}

bool miscompile_probe_passes(const HostCompilerConfig& config) {
  auto libs = compile_libraries({miscompile_probe_source()}, config);
  for (const char* name : {"korch_probe_vector_init", "korch_probe_int64_min_max"}) {
    auto fn = reinterpret_cast<int (*)()>(libs.at(0).library->symbol(name));
    KORCH_CHECK(fn, "the AVX-512 probe lacks {}", name);
    if (fn() != 1) return false;
  }
  return true;
}

bool generated_kernels_use_avx512() {
  static const bool on = [] {
    if (const char* off = std::getenv("KORCH_NO_AVX512"); off && *off && std::string(off) != "0") return false;
    if (!host_cpu_flags().count("avx512f")) return false;
    try {
      return miscompile_probe_passes(cpu_compiler_with(kAvx512Flags));
    } catch (const Error&) {
      return false;  // no compiler, or it refused: the AVX2 flags (whose failure is reported where kernels compile)
    }
  }();
  return on;
}

HostCompilerConfig default_cpu_compiler() { return cpu_compiler_with(generated_kernels_use_avx512() ? kAvx512Flags : kAvx2Flags); }

}  // namespace korch::cpu
