#include "support/shared_library.h"

#include <dlfcn.h>

#include "support/error.h"

namespace korch {

std::shared_ptr<SharedLibrary> SharedLibrary::open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_io("cannot load kernel library {}: {}", path, dlerror());
  auto lib = std::shared_ptr<SharedLibrary>(new SharedLibrary());
  lib->handle_ = h;
  lib->path_ = path;
  return lib;
}

SharedLibrary::~SharedLibrary() {
  if (handle_) dlclose(handle_);
}

void* SharedLibrary::symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

}  // namespace korch
