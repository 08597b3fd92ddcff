// How the CPU backend compiles its generated C++ (support/host_compiler.h does the work).
#pragma once

#include "support/host_compiler.h"

namespace korch::cpu {

// Bumped whenever generated code or the linear step changes what or how fast it computes: part of
// every tuning-database key and compiled-kernel cache key.
constexpr int kCpuGeneratorVersion = 7;

// g++ (or $KORCH_CXX) -std=c++17 -O3 -march=native -mno-avx512f -mtune=generic -fopenmp
// -fno-math-errno -fno-trapping-math -fPIC -shared, linked with -lmvec -lm, cached under kernels/:
// no -ffast-math anywhere: vector exp/tanh/erf come from glibc's libmvec through `omp declare
// simd` declarations in the prelude, reductions vectorise through `omp simd reduction`, and
// NaN/Inf keep IEEE semantics. -mno-avx512f -mtune=generic: GCC 12.2 turns some int64 vector
// constants into broadcasts of their first element with AVX-512 on, or when tuning for an AVX-512
// Intel core (a vectorised min(i, 4) over int64 lanes read the wrong elements on a Sapphire
// Rapids Xeon; tests/codegen/toolchain_kernel_test.cc); generator version 3 has the flag.
HostCompilerConfig default_cpu_compiler();

}  // namespace korch::cpu
