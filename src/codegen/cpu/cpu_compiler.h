// Batch compilation of generated C++ with the system compiler, loaded with dlopen, cached on disk.
//
// One source = one translation unit holding many kernels (a compiler start costs ~150 ms; a
// kernel inside a batch ~5 ms). The cache key is a content hash of the source, the flags and the
// compiler's version string, so a changed generator or compiler never reuses a stale library.
// Cache folder: $KORCH_CACHE_DIR/kernels, else ~/.cache/korch/kernels. Writes are atomic (temp file
// + rename), so a killed compile leaves no half library behind.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace korch::cpu {

struct CompilerConfig {
  std::string cxx = "g++";
  // -O3 -march=native -mno-avx512f -fopenmp -fno-math-errno -fno-trapping-math -shared -fPIC:
  // no -ffast-math anywhere: vector exp/tanh/erf come from glibc's libmvec through `omp declare
  // simd` declarations in the prelude, reductions vectorise through `omp simd reduction`, and
  // NaN/Inf keep IEEE semantics. -mno-avx512f: AVX-512 down-clocks these cores.
  std::vector<std::string> flags;
  std::vector<std::string> libs;  // -lmvec -lm
  std::string cache_dir;          // "" = default
  int jobs = 2;                   // compilers run at once
};
CompilerConfig default_cpu_compiler();

// A dlopen'ed shared library; closed when the last reference goes.
class KernelLibrary {
 public:
  static std::shared_ptr<KernelLibrary> open(const std::string& path);  // throws korch::Error
  ~KernelLibrary();
  void* symbol(const std::string& name) const;  // nullptr when absent
  const std::string& path() const { return path_; }

 private:
  void* handle_ = nullptr;
  std::string path_;
};

struct CompiledSource {
  std::string source_path;  // the .cc in the cache (for error reports and the artifact)
  std::string library_path; // the .so in the cache
  bool cached = false;      // true when no compiler ran
  std::shared_ptr<KernelLibrary> library;
};

// Compiles each source into a shared library (cache hits skip the compiler), up to config.jobs at
// once, and loads them. Throws korch::Error naming the source path with the compiler's message.
// `on_compiled` (may be empty) is called once per source that needed the compiler, as each
// finishes, from the worker threads (serialised).
std::vector<CompiledSource> compile_sources(const std::vector<std::string>& sources,
                                            const CompilerConfig& config = default_cpu_compiler(),
                                            const std::function<void()>& on_compiled = {});

// The compile command for `source` -> `library` (for the artifact's build recipe).
std::string compile_command(const CompilerConfig& config, const std::string& source,
                            const std::string& library);

}  // namespace korch::cpu
