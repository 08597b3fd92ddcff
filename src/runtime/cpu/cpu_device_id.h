// The device part of a tuning key: which machine a measurement is valid for.
//
// cpu_device_id(threads) = "cpu:<model name>:<threads>t:<isa>", e.g.
//   "cpu:AMD EPYC 9654 96-Core Processor:16t:avx2+fma+avx512f-disabled"
// <isa> lists the instruction-set features that change generated code's speed: avx2, fma, and
// avx512f, which the generated kernels are compiled without (-mno-avx512f), hence "-disabled".
// "noavx2" when none is present. The result is stable across runs on the same machine and
// contains no '|' (the tuning key's separator).
#pragma once

#include <string>

namespace korch {

std::string cpu_device_id(int threads);

// The same from the text of a /proc/cpuinfo (for tests and other machines' dumps).
std::string cpu_device_id_from_cpuinfo(const std::string& cpuinfo, int threads);

}  // namespace korch
