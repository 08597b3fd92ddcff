// A dlopen'ed shared library (generated kernels compiled for the host); closed when the last
// reference goes.
#pragma once

#include <memory>
#include <string>

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

}  // namespace korch
