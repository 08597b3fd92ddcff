// Korch's two error channels.
//
// 1. User / environment errors (bad file, unsupported operator, wrong input shape, missing
//    dependency): thrown as korch::Error with a message a person can act on. Every stage entry
//    point documents that it may throw korch::Error; the CLI catches it at the top, prints one
//    line and exits non-zero. We use an exception rather than a Status return because the error
//    usually originates deep inside an operator's shape function, and the caller that knows the
//    node name and model path (the frontend) adds that context on the way out.
// 2. Broken invariants (a bug in Korch): KORCH_CHECK aborts with file:line. Never used for
//    anything the input can cause.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace korch {

enum class ErrorCode {
  kInvalid,      // the input (model, file, tensor) is malformed or inconsistent
  kUnsupported,  // valid input that Korch does not handle (op, dtype, attribute value)
  kIo,           // file system / environment
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorCode::kInvalid, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_unsupported(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorCode::kUnsupported, fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_io(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(ErrorCode::kIo, fmt::format(f, std::forward<Args>(args)...));
}

// Re-throws `e` with `prefix: ` prepended, keeping its code.
[[noreturn]] void rethrow_with_context(const Error& e, const std::string& prefix);

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace korch

// Invariant check (channel 2). Optional message arguments are fmt-style.
#define KORCH_CHECK(cond, ...)                                                        \
  do {                                                                                \
    if (!(cond)) ::korch::check_failed(__FILE__, __LINE__, #cond, ::fmt::format("" __VA_ARGS__)); \
  } while (0)
