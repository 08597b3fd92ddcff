#include "commands.h"
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
  app.add_option("--shape", shapes, "Fix an input shape: NAME=1x3x224x224 (repeatable)");
  app.add_option("--bind", binds, "Fix an input to the values in a .npy file: NAME=FILE.npy (repeatable)");
}

LoadOptions LoadFlags::options() const {
  LoadOptions lo;
  for (const std::string& s : shapes) {
    auto [name, text] = split_assignment(s, "--shape", "NAME=1x3x224x224");
    lo.input_shapes[name] = parse_shape_text(text);
  }
  for (const std::string& s : binds) {
    auto [name, path] = split_assignment(s, "--bind", "NAME=FILE.npy");
    lo.frozen_inputs[name] = load_npy(path);
  }
  return lo;
}

}  // namespace korch::cli
