#include "codegen/cpu/cpu_compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "codegen/cpu/cpu_kernel.h"
#include "codegen/kernel_signature.h"
#include "support/error.h"
#include "support/process.h"
#include "support/strings.h"

namespace korch::cpu {
namespace fs = std::filesystem;

namespace {

const std::string& compiler_version(const std::string& cxx) {
  static std::mutex mu;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(mu);
  auto it = versions.find(cxx);
  if (it != versions.end()) return it->second;
  std::string out;
  if (run_shell(cxx + " --version", &out) != 0)
    fail_io("the C++ compiler '{}' does not run (install build-essential): {}", cxx, out);
  return versions[cxx] = out.substr(0, out.find('\n'));
}

std::string cache_dir_of(const CompilerConfig& config) {
  if (!config.cache_dir.empty()) return config.cache_dir;
  if (const char* d = std::getenv("KORCH_CACHE_DIR"); d && *d) return std::string(d) + "/kernels";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/korch/kernels";
}


}  // namespace

CompilerConfig default_cpu_compiler() {
  CompilerConfig c;
  if (const char* cxx = std::getenv("KORCH_CXX"); cxx && *cxx) c.cxx = cxx;
  c.flags = {"-std=c++17", "-O3", "-march=native", "-mno-avx512f", "-fopenmp", "-fno-math-errno",
             "-fno-trapping-math", "-fPIC", "-shared", "-w"};
  c.libs = {"-lmvec", "-lm"};
  return c;
}

std::shared_ptr<KernelLibrary> KernelLibrary::open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) fail_io("cannot load kernel library {}: {}", path, dlerror());
  auto lib = std::shared_ptr<KernelLibrary>(new KernelLibrary());
  lib->handle_ = h;
  lib->path_ = path;
  return lib;
}

KernelLibrary::~KernelLibrary() {
  if (handle_) dlclose(handle_);
}

void* KernelLibrary::symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

std::string compile_command(const CompilerConfig& config, const std::string& source,
                            const std::string& library) {
  std::string cmd = config.cxx;
  for (const auto& f : config.flags) cmd += " " + f;
  cmd += " " + shell_quote(source) + " -o " + shell_quote(library);
  for (const auto& l : config.libs) cmd += " " + l;
  return cmd;
}

std::vector<CompiledSource> compile_sources(const std::vector<std::string>& sources,
                                            const CompilerConfig& config,
                                            const std::function<void()>& on_compiled) {
  const std::string dir = cache_dir_of(config);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_io("cannot create the kernel cache folder {}: {}", dir, ec.message());
  std::string key_prefix = compiler_version(config.cxx) + "|" + std::to_string(kCpuGeneratorVersion);
  for (const auto& f : config.flags) key_prefix += "|" + f;
  for (const auto& l : config.libs) key_prefix += "|" + l;

  std::vector<CompiledSource> out(sources.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string key = content_hash(key_prefix + "\n" + sources[i]);
    out[i].source_path = dir + "/" + key + ".cc";
    out[i].library_path = dir + "/" + key + ".so";
    if (fs::exists(out[i].library_path)) out[i].cached = true;
    else todo.push_back(i);
  }

  std::atomic<size_t> next{0};
  std::mutex mu;
  std::string first_error;
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < todo.size();) {
      CompiledSource& cs = out[todo[t]];
      std::string tag = fmt::format(".tmp{}.{}", getpid(), todo[t]);
      std::string tmp_src = cs.source_path + tag + ".cc", tmp_lib = cs.library_path + tag;
      {
        std::ofstream f(tmp_src, std::ios::binary);
        f << sources[todo[t]];
        if (!f) {
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty()) first_error = "cannot write " + tmp_src;
          continue;
        }
      }
      fs::rename(tmp_src, cs.source_path, ec);
      std::string log;
      int rc = run_shell(compile_command(config, cs.source_path, tmp_lib), &log);
      if (rc != 0) {
        fs::remove(tmp_lib, ec);
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty())
          first_error = fmt::format("generated kernel source {} does not compile:\n{}", cs.source_path,
                                    log.substr(0, 4000));
        continue;
      }
      std::error_code rec;
      fs::rename(tmp_lib, cs.library_path, rec);  // atomic: a killed run leaves no partial .so
      if (on_compiled) {
        std::lock_guard<std::mutex> lock(mu);
        on_compiled();
      }
    }
  };
  std::vector<std::thread> threads;
  int jobs = std::max(1, std::min<int>(config.jobs, static_cast<int>(todo.size())));
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  if (!first_error.empty()) throw Error(ErrorCode::kUnsupported, first_error);
  for (auto& cs : out) cs.library = KernelLibrary::open(cs.library_path);
  return out;
}

}  // namespace korch::cpu
