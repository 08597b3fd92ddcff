// The artifact: a folder that runs a compiled model without the optimizer.
//
//   manifest.json     what made it: format/version, korch version, generator version, compiler
//                     command and version, creation time (UTC), device, model + caller extras
//   program.json      buffers (graph inputs, graph outputs, weights, arena intermediates: dtype,
//                     shape, offset), kernels in execution order (recipe + argument buffer ids +
//                     note), input/output names in order, arena bytes and the memory report
//   weights.bin       every constant a kernel reads as an argument (and constant graph outputs),
//                     each at a 64-byte-aligned offset; baked constants are inside the code
//   kernels/          the device's kernel module, written by its backend: for "cpu"
//                     kernels.cc + build.sh + libkernels.so (runtime/cpu/cpu_module.h), for
//                     "cuda" kernels.cu + kernels.ptx (CudaBackend::write_module, codegen/cuda/cuda_backend.h)
// manifest.json's "device" tag says which device runs it (runtime/device.h). The compile command
// also puts plan.json, primitives.txt and report.html (the plan for people, orchestrate/plan_report.h)
// here; nothing in runtime reads them.
// program.json's layout is documented in artifact.cc next to the code that writes it; the
// loader (executable.h) validates everything it reads and names the file on any error.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <functional>

#include "ir/graph.h"
#include "runtime/memory_plan.h"

namespace korch::runtime {

constexpr int kArtifactVersion = 1;
constexpr const char* kArtifactFormat = "korch-artifact";

// Whether `name` is one of the entries above (plan.json, primitives.txt and report.html included): what a
// compile writes into an artifact folder, so a folder holding anything else is not one.
bool is_artifact_entry(const std::string& name);

struct ArtifactKernel {
  nlohmann::json recipe;        // the device's recipe (device.h: carries inputs/outputs/scratch)
  std::vector<ValueId> args;    // recipe inputs then recipe outputs, as graph values
  std::string note;             // for people: what the kernel computes (op list, source nodes)
};

struct ArtifactContents {
  const Graph* graph = nullptr;
  std::string device = "cpu";           // manifest.json's "device": which device runs it
  std::vector<ArtifactKernel> kernels;  // execution order
  // Writes dir/kernels/ (the device's module) and returns manifest fields that describe it
  // (e.g. {"generator_version", "compiler"}). May be empty when no kernel has generated code.
  std::function<nlohmann::json(const std::string& dir)> write_module;
  nlohmann::json manifest_extra = nlohmann::json::object();  // merged into manifest.json last
  // > 1: the graph is the model at a micro-batch of k samples and a run is this many runs of it, one
  // per k samples of the inputs' leading dimension (pipeline/micro_batch.h); program.json's
  // "micro_batches".
  int64_t micro_batches = 1;
  // Runs with denormal floats flushed to zero (program.json's "denormals": "flush"; on the CPU the
  // FTZ and DAZ modes, runtime/cpu/cpu_device.h); else IEEE gradual underflow, as the reference.
  bool flush_denormals = false;
};

// Creates `dir`, writes every file listed above (the module through write_module).
// Before: kernels are in an order where every argument input is a graph input, a constant or an
// output of an earlier kernel; each args matches its recipe's types; every graph output is
// written by a kernel or is a graph input/constant (KORCH_CHECKed: Korch's own invariants).
// Throws korch::Error when a file cannot be written or the module cannot be built.
// Returns the memory report it wrote into program.json.
MemoryReport write_artifact(const std::string& dir, const ArtifactContents& c);

// Rewrites the manifest.json of the artifact in `dir` as `edit` changes it (what the compile learns
// after writing: the micro-batch trials' times, the whole-model check); the other files stay.
void update_manifest(const std::string& dir, const std::function<void(nlohmann::json& manifest)>& edit);

}  // namespace korch::runtime
