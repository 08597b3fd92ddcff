// How the CPU backend compiles its generated C++ (support/host_compiler.h does the work).
#pragma once

#include "support/host_compiler.h"

namespace korch::cpu {

// Bumped whenever generated code or the linear step changes what or how fast it computes: part of
// every tuning-database key and compiled-kernel cache key.
constexpr int kCpuGeneratorVersion = 2;

// g++ (or $KORCH_CXX) -std=c++17 -O3 -march=native -mno-avx512f -fopenmp -fno-math-errno
// -fno-trapping-math -fPIC -shared, linked with -lmvec -lm, cached under kernels/:
// no -ffast-math anywhere: vector exp/tanh/erf come from glibc's libmvec through `omp declare
// simd` declarations in the prelude, reductions vectorise through `omp simd reduction`, and
// NaN/Inf keep IEEE semantics. -mno-avx512f: GCC 12.2 miscompiles some AVX-512 code on these
// machines (tests/support/toolchain_test.cc) and AVX-512 down-clocks these cores.
HostCompilerConfig default_cpu_compiler();

}  // namespace korch::cpu
