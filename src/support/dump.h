// KORCH_DUMP=dir: every pipeline stage writes its result there in the IR text form, numbered in
// pipeline order (00_frontend.txt, 01_fission.txt, ...), so a bug report can show each step.
#pragma once

#include <string>

namespace korch {

// The dump folder from KORCH_DUMP, or "" when dumping is off.
std::string dump_dir();
// Writes `text` to <dump_dir>/<NN>_<stage>.txt when dumping is on; NN counts calls per process.
void dump_stage(const std::string& stage, const std::string& text);

}  // namespace korch
