// Running a shell command and capturing what it prints (the kernel compiler, an artifact's
// build.sh, the onnxruntime peer of `korch bench`).
#pragma once

#include <string>

namespace korch {

// Runs `cmd` through /bin/sh with stderr joined to stdout; appends the output to *output and
// returns the exit status (128 when the command died of a signal). Throws korch::Error (kIo) when
// no shell can be started.
int run_shell(const std::string& cmd, std::string* output);

// `s` as one single-quoted shell word.
std::string shell_quote(const std::string& s);

}  // namespace korch
