// A dlopen'ed shared library (generated kernels compiled for the host); closed when the last
// reference goes.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace korch {

class SharedLibrary {
 public:
  static std::shared_ptr<SharedLibrary> open(const std::string& path);  // throws korch::Error (kIo)
  ~SharedLibrary();
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  void* symbol(const std::string& name) const;  // nullptr when absent
  const std::string& path() const { return path_; }

 private:
  SharedLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
};

// A vendor library loaded for the rest of the process (NVRTC, cuBLASLt, cuDNN): $env when it is
// set, then each of `candidates`, the first that dlopen loads. Null when none does; *errors then
// lists each one tried with dlopen's reason. `global`: RTLD_GLOBAL (its symbols visible to the
// libraries it loads itself), else RTLD_LOCAL.
void* open_first_library(const char* env, const std::vector<std::string>& candidates, std::string* errors,
                         bool global = false);

}  // namespace korch
