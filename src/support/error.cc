#include "support/error.h"

namespace korch {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalid: return "invalid";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kIo: return "io";
  }
  return "?";
}

void rethrow_with_context(const Error& e, const std::string& prefix) {
  throw Error(e.code(), prefix + ": " + e.what());
}

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "korch: internal error at %s:%d: check failed: %s%s%s\n", file, line, cond,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace korch
