// Whole-file reads shared by the loaders and tools.
#pragma once

#include <string>

namespace korch {

// The file's bytes; throws korch::Error (kIo) "cannot open 'PATH'" when it cannot be opened.
std::string read_file_bytes(const std::string& path);

}  // namespace korch
