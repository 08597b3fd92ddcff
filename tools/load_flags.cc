#include "commands.h"

#include <thread>

#include <fmt/format.h>

#include "ir/tensor_io.h"

namespace korch::cli {

namespace {
std::pair<std::string, std::string> split_assignment(const std::string& s, const char* flag, const char* example) {
  size_t eq = s.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size()) fail("{} expects {}, got '{}'", flag, example, s);
  return {s.substr(0, eq), s.substr(eq + 1)};
}
}  // namespace

void LoadFlags::add_to(CLI::App& app) {
  app.add_option("--shape", shapes,
                 "Fix an input shape, INPUT=1x3x224x224, or every dimension of one name, DIM=4 (repeatable; "
                 "dimensions written as a name or as -1 are dynamic)");
  app.add_option("--bind", binds, "Fix an input to the values in a .npy file: NAME=FILE.npy (repeatable)");
}

void warn_if_oversubscribed(int threads) {
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 0 && threads > static_cast<int>(cores))
    fmt::print(stderr, "korch: warning: --threads {} is more than this machine's {} cores; runs will be slower and "
               "timings will not mean much\n", threads, cores);
}

LoadOptions LoadFlags::options() const {
  LoadOptions lo;
  for (const std::string& s : shapes) {
    auto [name, text] = split_assignment(s, "--shape", "NAME=1x3x224x224");
    lo.input_shapes[name] = parse_shape_text(text);
  }
  for (const auto& [name, path] : bind_files()) lo.frozen_inputs[name] = load_npy(path);
  return lo;
}

std::map<std::string, std::string> LoadFlags::bind_files() const {
  std::map<std::string, std::string> files;
  for (const std::string& s : binds) {
    auto [name, path] = split_assignment(s, "--bind", "NAME=FILE.npy");
    files[name] = path;
  }
  return files;
}

}  // namespace korch::cli
