#include "json_out.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>

namespace korch::cli {

nlohmann::json tensor_json(const std::string& name, const TensorType& type) {
  return {{"name", name}, {"dtype", std::string(dtype_name(type.dtype))}, {"shape", type.shape}};
}

void print_json(const nlohmann::json& j) {
  // Names from a model need not be UTF-8: such bytes print as U+FFFD rather than failing.
  const std::string text = j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

StdoutToStderr::StdoutToStderr() {
  std::cout.flush();
  std::fflush(stdout);
  saved_ = dup(STDOUT_FILENO);
  if (saved_ >= 0) dup2(STDERR_FILENO, STDOUT_FILENO);
}

StdoutToStderr::~StdoutToStderr() {
  std::cout.flush();
  std::fflush(stdout);
  if (saved_ < 0) return;
  dup2(saved_, STDOUT_FILENO);
  close(saved_);
}

}  // namespace korch::cli
