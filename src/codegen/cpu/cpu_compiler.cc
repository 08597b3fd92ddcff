#include "codegen/cpu/cpu_compiler.h"

#include <cstdlib>
#include <string>

#include "runtime/cpu/cpu_device_id.h"

namespace korch::cpu {

HostCompilerConfig default_cpu_compiler() {
  HostCompilerConfig c;
  if (const char* cxx = std::getenv("KORCH_CXX"); cxx && *cxx) c.cxx = cxx;
  c.flags = {"-std=c++17", "-O3", "-march=native", "-mno-avx512f", "-mtune=generic", "-fopenmp",
             "-fno-math-errno", "-fno-trapping-math", "-fPIC", "-shared", "-w"};
  c.libs = {"-lmvec", "-lm"};
  c.cache_subdir = "kernels";
  // -march=native: a library is this CPU's (model and ISA), not only this source's and flags'.
  c.key_extra = std::to_string(kCpuGeneratorVersion) + "|" + cpu_device_id(1);
  return c;
}

}  // namespace korch::cpu
