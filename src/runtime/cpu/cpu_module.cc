#include "runtime/cpu/cpu_module.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/cpu/cpu_device_id.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/process.h"

namespace korch::cpu {

namespace fs = std::filesystem;

namespace {


// First line of `cxx --version`; "unknown" when it does not run (a cache hit needs no compiler).
std::string compiler_version_line(const std::string& cxx) {
  FILE* p = popen((cxx + " --version 2>/dev/null").c_str(), "r");
  if (!p) return "unknown";
  char buf[512] = {0};
  std::string line = fgets(buf, sizeof buf, p) ? std::string(buf) : "";
  int status = pclose(p);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return status == 0 && !line.empty() ? line : "unknown";
}

std::string build_script(const HostCompilerConfig& config) {
  std::string cxx = config.cxx.substr(0, config.cxx.find(' '));
  return "#!/bin/sh\n"
         "# Rebuilds libkernels.so from kernels.cc; korch runs it when the library is missing or does\n"
         "# not load. `sh build.sh` writes libkernels.so here (through a temporary, then a rename).\n"
         "set -e\n"
         "case \"$0\" in */*) cd \"${0%/*}\" ;; esac\n"
         "command -v " + cxx + " >/dev/null 2>&1 || { echo \"the C++ compiler '" + cxx +
         "' is not installed (install build-essential, or set KORCH_CXX when compiling)\" >&2; exit 127; }\n" +
         host_compile_command(config, "kernels.cc", "libkernels.so.tmp") + "\n" +
         "mv -f libkernels.so.tmp libkernels.so\n";
}

// "" when this CPU has every extension `lib` was compiled for (or it does not say: an artifact
// older than the check); else what it lacks.
std::string missing_isa(const SharedLibrary& lib) {
  auto* isa = reinterpret_cast<const char* (*)()>(lib.symbol(kIsaProbeSymbol));
  if (!isa) return "";
  const std::set<std::string> have = host_cpu_flags();
  if (have.empty()) return "";  // no /proc/cpuinfo: nothing to check against
  std::vector<std::string> missing = missing_cpu_features(isa(), have);
  return missing.empty() ? "" : fmt::format("{}", fmt::join(missing, " "));
}

}  // namespace

std::string CpuModule::describe() const { return lib_ ? lib_->path() : "no kernel library"; }

nlohmann::json write_cpu_module(const std::string& dir, const std::string& source, bool has_functions,
                                const HostCompilerConfig& config) {
  const fs::path root = fs::path(dir) / "kernels";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail_io("cannot create artifact folder {}: {}", root.string(), ec.message());
  write_file_bytes((root / "kernels.cc").string(), source);
  write_file_bytes((root / "build.sh").string(), build_script(config));
  fs::permissions(root / "build.sh", fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);
  if (has_functions) {
    std::vector<CompiledLibrary> compiled = compile_libraries({source}, config);
    fs::path lib = root / "libkernels.so", tmp = root / "libkernels.so.tmp";
    fs::copy_file(compiled[0].library_path, tmp, fs::copy_options::overwrite_existing, ec);
    if (!ec) fs::rename(tmp, lib, ec);
    if (ec) fail_io("cannot copy {} to {}: {}", compiled[0].library_path, lib.string(), ec.message());
  } else {
    fs::remove(root / "libkernels.so", ec);  // nothing to load: no stale library either
  }
  return {{"command", host_compile_command(config, "kernels.cc", "libkernels.so")},
          {"version", compiler_version_line(config.cxx)}};
}

std::shared_ptr<CpuModule> load_cpu_module(const std::string& dir) {
  const fs::path lib = fs::path(dir) / "kernels" / "libkernels.so";
  const fs::path script = fs::path(dir) / "kernels" / "build.sh";
  std::string why = "missing";
  std::error_code ec;
  if (fs::exists(lib, ec)) {
    try {
      auto l = SharedLibrary::open(lib.string());
      // A library built on another machine (-march=native there) may use extensions this CPU
      // lacks: it is rebuilt for this one before any kernel runs.
      const std::string missing = missing_isa(*l);
      if (missing.empty()) return std::make_shared<CpuModule>(std::move(l));
      why = "built for a CPU with " + missing + ", which this CPU lacks";
    } catch (const Error& e) {
      why = std::string("unloadable (") + e.what() + ")";
    }
  }
  if (!fs::exists(script, ec))
    fail_io("{} is {} and {}, which would rebuild it, is missing too", lib.string(), why, script.string());
  std::string log;
  if (run_shell("/bin/sh " + shell_quote(script.string()), &log) != 0)
    fail_io("{} is {}; rebuilding it with {} failed: {}", lib.string(), why, script.string(), log.substr(0, 2000));
  auto rebuilt = SharedLibrary::open(lib.string());
  if (const std::string missing = missing_isa(*rebuilt); !missing.empty())
    fail_unsupported("{} is {}; rebuilt with {}, it still needs {}, which this CPU lacks (the compile command in "
                     "that script asks for them)",
                     lib.string(), why, script.string(), missing);
  return std::make_shared<CpuModule>(std::move(rebuilt), true);
}

}  // namespace korch::cpu
