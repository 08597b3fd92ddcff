// The artifact: a folder that runs a compiled model without the optimizer.
//
//   manifest.json     what made it: format/version, korch version, generator version, compiler
//                     command and version, creation time (UTC), device, model + caller extras
//   program.json      buffers (graph inputs, graph outputs, weights, arena intermediates: dtype,
//                     shape, offset), kernels in execution order (recipe + argument buffer ids +
//                     note), input/output names in order, arena bytes and the memory report
//   weights.bin       every constant a kernel reads as an argument (and constant graph outputs),
//                     each at a 64-byte-aligned offset; baked constants are inside the code
//   kernels/kernels.cc  the translation unit: prelude + every kernel's function, each once
//   kernels/build.sh    the exact compile command (`sh build.sh [OUT]`, OUT = libkernels.so)
//   kernels/libkernels.so
// The compile command also puts plan.json and primitives.txt here; nothing in runtime reads them.
// program.json's layout is documented in artifact.cc next to the code that writes it; the
// loader (executable.h) validates everything it reads and names the file on any error.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "codegen/cpu/cpu_kernel.h"
#include "runtime/memory_plan.h"
#include "ir/graph.h"

namespace korch::runtime {

constexpr int kArtifactVersion = 1;
constexpr const char* kArtifactFormat = "korch-artifact";

struct ArtifactKernel {
  cpu::CpuKernelRecipe recipe;
  std::vector<ValueId> args;    // recipe inputs then recipe outputs, as graph values
  std::string function_source;  // the C++ of recipe.symbol ("" when the kernel has no loop function)
  std::string note;             // for people: what the kernel computes (op list, source nodes)
};

struct ArtifactContents {
  const Graph* graph = nullptr;
  std::vector<ArtifactKernel> kernels;  // execution order
  std::string prelude;                  // includes and helpers shared by every function
  nlohmann::json manifest_extra = nlohmann::json::object();  // merged into manifest.json last
};

// Creates `dir` (and kernels/), writes every file listed above and compiles kernels.cc through
// cpu::compile_sources (a cache hit runs no compiler), copying the library in.
// Before: kernels are in an order where every argument input is a graph input, a constant or an
// output of an earlier kernel; each args matches its recipe's types; every graph output is
// written by a kernel or is a graph input/constant (KORCH_CHECKed: Korch's own invariants).
// Throws korch::Error when a file cannot be written or the sources do not compile.
// Returns the memory report it wrote into program.json.
MemoryReport write_artifact(const std::string& dir, const ArtifactContents& c);

}  // namespace korch::runtime
