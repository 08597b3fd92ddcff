// Whole-file reads and writes shared by the loaders, writers and tools.
#pragma once

#include <string>

namespace korch {

// The file's bytes; throws korch::Error (kIo) "cannot open 'PATH'" when it cannot be opened.
std::string read_file_bytes(const std::string& path);
// Writes (truncates) the file; throws korch::Error (kIo) "cannot write PATH".
void write_file_bytes(const std::string& path, const std::string& bytes);

}  // namespace korch
