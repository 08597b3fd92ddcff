// The one code writer every generated source goes through (CPU C++ now, CUDA next).
//
// It owns indentation and nothing else: emitters build text line by line, open and close blocks,
// and never count spaces themselves, so generated code is uniformly indented and diffable.
//   CodeWriter w;
//   w.open("for (int64_t i = 0; i < n; ++i)");   // "for (...) {" and indent
//   w.line("y[i] = x[i] + 1.0f;");
//   w.close();                                    // dedent and "}"
#pragma once

#include <string>
#include <string_view>

namespace korch {

class CodeWriter {
 public:
  // One line at the current indentation ("" writes an empty line).
  void line(std::string_view text);
  // "head {" then indents; close() dedents and writes "}" + tail (e.g. ";").
  void open(std::string_view head);
  void close(std::string_view tail = "");
  // Verbatim text (a prelude), each of its lines indented.
  void raw(std::string_view text);
  int depth() const { return depth_; }
  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  int depth_ = 0;
};

}  // namespace korch
