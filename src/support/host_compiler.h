// Batch compilation of generated C++ into shared libraries with the system compiler, loaded with
// dlopen and cached on disk. Used by the CPU backend (its kernels), by the CUDA host emulator
// (generated CUDA compiled for the host) and by the runtime (a CPU artifact rebuilding its
// library).
//
// One source = one translation unit holding many kernels (a compiler start costs ~150 ms; a
// kernel inside a batch ~5 ms). The cache key is a content hash of the source, the flags, the
// compiler's version string and `key_extra` (the generator version), so a changed generator or
// compiler never reuses a stale library. Cache folder: `cache_dir`, else
// $KORCH_CACHE_DIR/<cache_subdir>, else ~/.cache/korch/<cache_subdir>. Writes are atomic (temp
// file + rename), so a killed compile leaves no half library behind.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "support/shared_library.h"

namespace korch {

struct HostCompilerConfig {
  std::string cxx = "g++";
  std::vector<std::string> flags;
  std::vector<std::string> libs;
  std::string cache_dir;                // "" = the default folder below korch_cache_root()
  std::string cache_subdir = "kernels";
  std::string key_extra;                // e.g. the generator version: part of the cache key
  int jobs = 2;                         // compilers run at once
};

// $KORCH_CACHE_DIR, else $HOME/.cache/korch (else /tmp/.cache/korch).
std::string korch_cache_root();

struct CompiledLibrary {
  std::string source_path;   // the source in the cache (for error reports and artifacts)
  std::string library_path;  // the .so in the cache
  bool cached = false;       // true when no compiler ran
  std::shared_ptr<SharedLibrary> library;
};

// Compiles each source into a shared library (cache hits skip the compiler), up to config.jobs at
// once, and loads them. Throws korch::Error (kUnsupported) naming the source path with the
// compiler's message. `on_unit` (may be empty) is called once per source: with cached = true for
// each cache hit, all before the compiler starts, then with false as each compile finishes (from
// the worker threads, serialised).
std::vector<CompiledLibrary> compile_libraries(const std::vector<std::string>& sources, const HostCompilerConfig& config,
                                               const std::function<void(bool cached)>& on_unit = {});

// The compile command for `source` -> `library` (for an artifact's build recipe).
std::string host_compile_command(const HostCompilerConfig& config, const std::string& source,
                                 const std::string& library);

// The first line of `cxx --version`; throws korch::Error (kIo) when the compiler does not run.
const std::string& host_compiler_version(const std::string& cxx);

}  // namespace korch
