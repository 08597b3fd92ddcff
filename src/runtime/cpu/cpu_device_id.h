// The device part of a tuning key: which machine a measurement is valid for.
//
// cpu_device_id(threads) = "cpu:<model name>:<threads>t:<isa>", e.g.
//   "cpu:AMD EPYC 9654 96-Core Processor:16t:avx2+fma+avx512f"
// <isa> lists the instruction-set features that change generated code's speed: avx2, fma and
// avx512f (which the generated kernels use where the compiler can be trusted with it,
// codegen/cpu/cpu_compiler.h; oneDNN uses it anyway).
// "noavx2" when none is present. The result is stable across runs on the same machine and
// contains no '|' (the tuning key's separator).
//
// Also the other half of "which machine": the instruction-set extensions a kernel library was
// compiled for (-march=native on the compiling machine), which the loading CPU must have.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace korch {

std::string cpu_device_id(int threads);

// The same from the text of a /proc/cpuinfo (for tests and other machines' dumps).
std::string cpu_device_id_from_cpuinfo(const std::string& cpuinfo, int threads);

// The "flags" of a /proc/cpuinfo text; of this machine (empty when it cannot be read).
std::set<std::string> cpu_flags_from_cpuinfo(const std::string& cpuinfo);
std::set<std::string> host_cpu_flags();

// C++ source defining `extern "C" const char* korch_kernels_isa()`: the /proc/cpuinfo names of the
// x86 extensions the compiler enabled for the translation unit (from its predefined macros, e.g.
// __AVX2__ -> "avx2"), space-separated. Every generated CPU library carries it (cpu_prelude).
std::string isa_probe_source();
inline constexpr const char* kIsaProbeSymbol = "korch_kernels_isa";

// The features of `needed` (space-separated, as korch_kernels_isa returns) not in `have`.
std::vector<std::string> missing_cpu_features(const std::string& needed, const std::set<std::string>& have);

}  // namespace korch
