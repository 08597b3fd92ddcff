// The kernel module of a CPU artifact: kernels/kernels.cc (the translation unit: prelude + every
// kernel's function, each once), kernels/build.sh (the exact compile command, `sh build.sh`
// writes libkernels.so) and kernels/libkernels.so. Both halves of the format live here: writing
// (at compile time) and loading (at run time, rebuilding the library with build.sh when it is
// missing or does not load).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "runtime/device.h"
#include "support/host_compiler.h"

namespace korch::cpu {

class CpuModule : public runtime::KernelModule {
 public:
  explicit CpuModule(std::shared_ptr<SharedLibrary> lib, bool rebuilt = false) : lib_(std::move(lib)), rebuilt_(rebuilt) {}
  std::string describe() const override;
  const std::shared_ptr<SharedLibrary>& library() const { return lib_; }
  bool rebuilt() const override { return rebuilt_; }  // loading had to run kernels/build.sh

 private:
  std::shared_ptr<SharedLibrary> lib_;
  bool rebuilt_ = false;
};

// Writes dir/kernels/{kernels.cc, build.sh} and, when `source` defines any function
// (`has_functions`), compiles it (a cache hit runs no compiler) into dir/kernels/libkernels.so.
// Returns the manifest's "compiler" field: {command, version}. Throws korch::Error naming the file.
nlohmann::json write_cpu_module(const std::string& dir, const std::string& source, bool has_functions,
                                const HostCompilerConfig& config);

// The library of an artifact folder; rebuilt with kernels/build.sh when missing or unloadable.
std::shared_ptr<CpuModule> load_cpu_module(const std::string& dir);

}  // namespace korch::cpu
