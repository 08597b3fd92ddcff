#include "codegen/cuda/cuda_compiler.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "codegen/kernel_signature.h"
#include "support/host_compiler.h"
#include "support/error.h"
#include "support/shared_library.h"

namespace korch::cuda {
namespace fs = std::filesystem;

namespace {

// The slice of the NVRTC C API we use (nvrtc.h is not needed: nvrtcProgram is an opaque pointer,
// nvrtcResult an int with NVRTC_SUCCESS = 0).
struct Nvrtc {
  bool ok = false;
  std::string why;  // when !ok
  int major = 0, minor = 0;
  int (*version)(int*, int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*create)(void**, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(void*, int, const char* const*) = nullptr;
  int (*ptx_size)(void*, size_t*) = nullptr;
  int (*ptx)(void*, char*) = nullptr;
  int (*log_size)(void*, size_t*) = nullptr;
  int (*log)(void*, char*) = nullptr;
  int (*destroy)(void**) = nullptr;
};

const Nvrtc& nvrtc() {
  static const Nvrtc n = [] {
    Nvrtc r;
    std::string errors;
    void* h = open_first_library("KORCH_NVRTC", {"libnvrtc.so.13", "libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13"},
                                 &errors);
    if (!h) {
      r.why = "NVRTC is not available (set KORCH_NVRTC to libnvrtc.so): " + errors;
      return r;
    }
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p && r.why.empty()) r.why = fmt::format("NVRTC has no {}", name);
      return p;
    };
    r.version = reinterpret_cast<int (*)(int*, int*)>(sym("nvrtcVersion"));
    r.error_string = reinterpret_cast<const char* (*)(int)>(sym("nvrtcGetErrorString"));
    r.create = reinterpret_cast<decltype(r.create)>(sym("nvrtcCreateProgram"));
    r.compile = reinterpret_cast<decltype(r.compile)>(sym("nvrtcCompileProgram"));
    r.ptx_size = reinterpret_cast<decltype(r.ptx_size)>(sym("nvrtcGetPTXSize"));
    r.ptx = reinterpret_cast<decltype(r.ptx)>(sym("nvrtcGetPTX"));
    r.log_size = reinterpret_cast<decltype(r.log_size)>(sym("nvrtcGetProgramLogSize"));
    r.log = reinterpret_cast<decltype(r.log)>(sym("nvrtcGetProgramLog"));
    r.destroy = reinterpret_cast<decltype(r.destroy)>(sym("nvrtcDestroyProgram"));
    if (!r.why.empty()) return r;
    if (r.version(&r.major, &r.minor) != 0) {
      r.why = "nvrtcVersion failed";
      return r;
    }
    r.ok = true;
    return r;
  }();
  return n;
}

std::string cache_dir_of(const NvrtcConfig& config) {
  if (!config.cache_dir.empty()) return config.cache_dir;
  return korch_cache_root() + "/cuda";
}

// temp file + rename: a killed run leaves no half file under the final name.
bool write_atomically(const std::string& path, const std::string& text, const std::string& tag) {
  const std::string tmp = path + tag;
  {
    std::ofstream f(tmp, std::ios::binary);
    f << text;
    if (!f) return false;
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  return !ec;
}

// Compiles one program; "" on success (ptx and its log filled), else the error text.
std::string compile_one(const Nvrtc& n, const std::string& source, const std::string& name,
                        const std::vector<std::string>& options, std::string* ptx, std::string* warnings) {
  void* prog = nullptr;
  if (int rc = n.create(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr); rc != 0)
    return fmt::format("nvrtcCreateProgram failed for {}: {}", name, n.error_string(rc));
  std::vector<const char*> opts;
  for (const std::string& o : options) opts.push_back(o.c_str());
  const int rc = n.compile(prog, static_cast<int>(opts.size()), opts.data());
  std::string error, log;
  if (size_t size = 0; n.log_size(prog, &size) == 0 && size > 1) {
    log.resize(size);
    n.log(prog, log.data());
    log.resize(size - 1);
  }
  if (rc != 0) {
    error = fmt::format("generated CUDA source {} does not compile (NVRTC {}.{}: {}):\n{}", name, n.major, n.minor,
                        n.error_string(rc), log.substr(0, 4000));
  } else {
    size_t size = 0;
    n.ptx_size(prog, &size);
    ptx->resize(size);
    n.ptx(prog, ptx->data());
    while (!ptx->empty() && ptx->back() == '\0') ptx->pop_back();
    *warnings = std::move(log);
  }
  n.destroy(&prog);
  return error;
}

}  // namespace

bool nvrtc_available(std::string* why) {
  const Nvrtc& n = nvrtc();
  if (!n.ok && why) *why = n.why;
  return n.ok;
}

std::string nvrtc_version() {
  const Nvrtc& n = nvrtc();
  return n.ok ? fmt::format("{}.{}", n.major, n.minor) : std::string();
}

std::vector<PtxModule> compile_to_ptx(const std::vector<std::string>& sources, const NvrtcConfig& config,
                                      const std::function<void(bool cached)>& on_unit) {
  const Nvrtc& n = nvrtc();
  if (!n.ok) throw Error(ErrorCode::kUnsupported, n.why);
  const std::string dir = cache_dir_of(config);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_io("cannot create the CUDA kernel cache folder {}: {}", dir, ec.message());
  // No fast math: IEEE division and square root (NVRTC's defaults), no -use_fast_math.
  std::vector<std::string> options{"--gpu-architecture=" + config.arch, "-std=c++17"};
  options.insert(options.end(), config.options.begin(), config.options.end());
  std::string key_prefix = fmt::format("nvrtc {}.{}", n.major, n.minor);
  for (const std::string& o : options) key_prefix += "|" + o;

  std::vector<PtxModule> out(sources.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string key = content_hash(key_prefix + "\n" + sources[i]);
    out[i].source_path = dir + "/" + key + ".cu";
    out[i].ptx_path = dir + "/" + key + ".ptx";
    std::ifstream f(out[i].ptx_path, std::ios::binary);
    if (f) {
      std::stringstream ss;
      ss << f.rdbuf();
      out[i].ptx = ss.str();
      out[i].cached = !out[i].ptx.empty();
    }
    if (!out[i].cached) todo.push_back(i);
    else if (on_unit) on_unit(true);
  }
  std::atomic<size_t> next{0};
  std::mutex mu;
  std::string first_error;
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < todo.size();) {
      PtxModule& m = out[todo[t]];
      const std::string tag = fmt::format(".tmp{}.{}", getpid(), todo[t]);
      std::string error;
      if (!write_atomically(m.source_path, sources[todo[t]], tag)) error = "cannot write " + m.source_path;
      if (error.empty()) error = compile_one(n, sources[todo[t]], m.source_path, options, &m.ptx, &m.log);
      if (error.empty() && !write_atomically(m.ptx_path, m.ptx, tag)) error = "cannot write " + m.ptx_path;
      std::lock_guard<std::mutex> lock(mu);
      if (!error.empty()) {
        if (first_error.empty()) first_error = error;
        continue;
      }
      if (on_unit) on_unit(false);
    }
  };
  std::vector<std::thread> threads;
  const int jobs = std::max(1, std::min<int>(config.jobs, static_cast<int>(todo.size())));
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  if (!first_error.empty()) throw Error(ErrorCode::kUnsupported, first_error);
  return out;
}

}  // namespace korch::cuda
