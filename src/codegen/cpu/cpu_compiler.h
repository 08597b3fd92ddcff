// How the CPU backend compiles its generated C++ (support/host_compiler.h does the work).
#pragma once

#include <string>
#include <vector>

#include "support/host_compiler.h"

namespace korch::cpu {

// Bumped whenever generated code changes what or how fast it computes: part of every tuning-database
// key and compiled-kernel cache key. (A change to a library step alone bumps its revision instead,
// cpu_backend.h: kCpuLinearStepRevision, kCpuRecurrentStepRevision.)
constexpr int kCpuGeneratorVersion = 23;

// g++ (or $KORCH_CXX) -std=c++17 -O3 <isa> -fopenmp -fno-math-errno -fno-trapping-math -ffp-contract=off -fPIC
// -shared, linked with -lmvec -lm, cached under kernels/: no -ffast-math anywhere: vector
// exp/tanh/erf come from glibc's libmvec through `omp declare simd` declarations in the prelude,
// reductions vectorise through `omp simd reduction`, and NaN/Inf keep IEEE semantics.
//
// <isa>: GCC 12.2 miscompiles with AVX-512 on: it built std::vector<int64_t>{1, 1, 0, 0} as
// {1, 1, 1, 1} (a vpbroadcastq of the first element, its SLP vectoriser's work; seen on a Sapphire
// Rapids Xeon and a Zen 4 EPYC, also with -mtune=generic), and tuning for an AVX-512 Intel core
// even without it made a vectorised int64 min(i, 4) read wrong elements
// (tests/codegen/toolchain_kernel_test.cc). So on a CPU with AVX-512 the generated kernels use
//     -march=native -mtune=generic -fno-tree-slp-vectorize
// only when a probe library of exactly those patterns, compiled with these flags, computes them
// right on this machine (once per process; the library is cached like the kernels); otherwise,
// and on CPUs without it, -march=native -mno-avx512f -mtune=generic. KORCH_NO_AVX512=1 forces the
// latter. Measured on a 2-core Zen 4 EPYC (bench/results/avx512_kernels.md): the generated kernels
// of efficientnet_b0 1.09-1.14x faster, segformer_b0's 1.04x.
HostCompilerConfig default_cpu_compiler();
bool generated_kernels_use_avx512();
// The configuration above with other instruction-set flags in place of <isa>.
HostCompilerConfig cpu_compiler_with(const std::vector<std::string>& isa_flags);
// Whether the probe's patterns compute right when compiled with `config`. Throws korch::Error
// when it does not compile.
bool miscompile_probe_passes(const HostCompilerConfig& config);

}  // namespace korch::cpu
