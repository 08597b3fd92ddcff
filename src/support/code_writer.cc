#include "support/code_writer.h"

#include "support/error.h"

namespace korch {

void CodeWriter::line(std::string_view text) {
  if (!text.empty()) out_.append(static_cast<size_t>(depth_) * 2, ' ').append(text);
  out_ += '\n';
}

void CodeWriter::open(std::string_view head) {
  std::string h(head);
  line(h.empty() ? "{" : h + " {");
  ++depth_;
}

void CodeWriter::close(std::string_view tail) {
  KORCH_CHECK(depth_ > 0, "CodeWriter::close without open");
  --depth_;
  line("}" + std::string(tail));
}

void CodeWriter::raw(std::string_view text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    line(text.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace korch
