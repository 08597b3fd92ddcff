#include "support/host_compiler.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "support/error.h"
#include "support/hash.h"
#include "support/process.h"

namespace korch {
namespace fs = std::filesystem;

const std::string& host_compiler_version(const std::string& cxx) {
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

std::string korch_cache_root() {
  if (const char* d = std::getenv("KORCH_CACHE_DIR"); d && *d) return d;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/korch";
}

std::string host_compile_command(const HostCompilerConfig& config, const std::string& source,
                                 const std::string& library) {
  std::string cmd = config.cxx;
  for (const auto& f : config.flags) cmd += " " + f;
  cmd += " " + shell_quote(source) + " -o " + shell_quote(library);
  for (const auto& l : config.libs) cmd += " " + l;
  return cmd;
}

std::vector<CompiledLibrary> compile_libraries(const std::vector<std::string>& sources, const HostCompilerConfig& config,
                                               const std::function<void(bool cached)>& on_unit) {
  const std::string dir = config.cache_dir.empty() ? korch_cache_root() + "/" + config.cache_subdir : config.cache_dir;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail_io("cannot create the kernel cache folder {}: {}", dir, ec.message());
  std::string key_prefix = host_compiler_version(config.cxx) + "|" + config.key_extra;
  for (const auto& f : config.flags) key_prefix += "|" + f;
  for (const auto& l : config.libs) key_prefix += "|" + l;

  std::vector<CompiledLibrary> out(sources.size());
  std::vector<size_t> todo;
  for (size_t i = 0; i < sources.size(); ++i) {
    std::string key = content_hash(key_prefix + "\n" + sources[i]);
    out[i].source_path = dir + "/" + key + ".cc";
    out[i].library_path = dir + "/" + key + ".so";
    if (fs::exists(out[i].library_path)) {
      out[i].cached = true;
      // Its use, for the cache's least-recently-used trimming (cache_folder.h).
      const auto now = fs::file_time_type::clock::now();
      fs::last_write_time(out[i].library_path, now, ec);
      fs::last_write_time(out[i].source_path, now, ec);
      if (on_unit) on_unit(true);
    } else {
      todo.push_back(i);
    }
  }

  std::atomic<size_t> next{0};
  std::mutex mu;
  std::string first_error;
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < todo.size();) {
      CompiledLibrary& cs = out[todo[t]];
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
      std::error_code wec;
      fs::rename(tmp_src, cs.source_path, wec);
      std::string log;
      int rc = run_shell(host_compile_command(config, cs.source_path, tmp_lib), &log);
      if (rc != 0) {
        fs::remove(tmp_lib, wec);
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty())
          first_error = fmt::format("generated kernel source {} does not compile:\n{}", cs.source_path,
                                    log.substr(0, 4000));
        continue;
      }
      fs::rename(tmp_lib, cs.library_path, wec);  // atomic: a killed run leaves no partial .so
      if (on_unit) {
        std::lock_guard<std::mutex> lock(mu);
        on_unit(false);
      }
    }
  };
  std::vector<std::thread> threads;
  int jobs = std::max(1, std::min<int>(config.jobs, static_cast<int>(todo.size())));
  for (int j = 0; j < jobs; ++j) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  if (!first_error.empty()) throw Error(ErrorCode::kUnsupported, first_error);
  for (auto& cs : out) cs.library = SharedLibrary::open(cs.library_path);
  return out;
}

}  // namespace korch
