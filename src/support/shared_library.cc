#include "support/shared_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <cstdlib>

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

void* open_first_library(const char* env, const std::vector<std::string>& candidates, std::string* errors,
                         bool global) {
  std::vector<std::string> tried;
  if (const char* e = std::getenv(env); e && *e) tried.push_back(e);
  tried.insert(tried.end(), candidates.begin(), candidates.end());
  errors->clear();
  for (const std::string& path : tried) {
    if (void* h = dlopen(path.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL))) return h;
    const char* e = dlerror();
    *errors += fmt::format("{}{}: {}", errors->empty() ? "" : "; ", path, e ? e : "not found");
  }
  return nullptr;
}

void* SharedLibrary::symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

}  // namespace korch
