// A loaded artifact (artifact.h), ready to run.
//
// load() reads manifest.json and program.json, maps weights.bin read-only, opens
// kernels/libkernels.so (rebuilding it with kernels/build.sh when it is missing or does not load)
// and builds one cpu::CpuKernel per kernel. run() feeds graph inputs in place, runs the kernels in
// order over one preallocated arena and returns fresh output tensors.
// Threads are the caller's: the kernels use OpenMP's current setting (set_cpu_threads, or
// omp_set_num_threads / OMP_NUM_THREADS). run() reuses one arena, so one Executable runs one
// call at a time.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/tensor.h"
#include "runtime/memory_plan.h"

namespace korch::cpu {
class CpuKernel;
class KernelLibrary;
}  // namespace korch::cpu

namespace korch::runtime {

class Executable {
 public:
  // Throws korch::Error naming the artifact file at fault (missing folder, not an artifact,
  // malformed program.json, short weights.bin, library that cannot be rebuilt or lacks a symbol).
  static std::unique_ptr<Executable> load(const std::string& dir);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // `inputs` in input_names() order; throws korch::Error naming an input whose dtype or shape
  // differs from input_types(). Returns the outputs in output_names() order.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<TensorType>& input_types() const { return input_types_; }
  const std::vector<TensorType>& output_types() const { return output_types_; }
  MemoryReport memory() const { return memory_; }
  size_t kernel_count() const { return steps_.size(); }
  // Per-kernel wall time, summed over the runs since set_step_timing(true) (for `korch bench
  // --per-kernel`: which kernels the time goes to). Off by default: two clock reads per kernel.
  struct StepTime {
    int step = 0;
    std::string note;
    double seconds = 0;
  };
  void set_step_timing(bool on);
  // Values passed between linear steps in the library's own layout (no reorders); see
  // hand_off_layouts(). KORCH_NO_LAYOUT_HANDOFF=1 turns it off.
  int layout_handoffs() const { return handoffs_; }
  std::vector<StepTime> step_times() const;
  const nlohmann::json& manifest() const { return manifest_; }
  bool rebuilt_library() const { return rebuilt_; }  // load() had to run kernels/build.sh

 private:
  Executable() = default;
  enum class Kind { kInput, kOutput, kWeight, kArena };
  struct Buffer {
    Kind kind = Kind::kArena;
    std::string name;
    TensorType type;
    int64_t offset = 0;  // weight: in weights.bin; arena: in the arena
    int index = 0;       // input/output position
    int copy_from = -1;  // output only
  };
  struct Step {
    std::unique_ptr<cpu::CpuKernel> kernel;
    std::vector<int> inputs, outputs;  // buffer ids
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    std::string note;
    double seconds = 0;
  };
  void parse_program(const nlohmann::json& j, const std::string& path);
  void map_weights(const std::string& path, int64_t bytes);
  std::shared_ptr<cpu::KernelLibrary> open_library(const std::string& dir);

  std::string dir_;
  nlohmann::json manifest_;
  std::vector<Buffer> buffers_;
  std::vector<int> input_buffers_, output_buffers_;
  std::vector<std::string> input_names_, output_names_;
  std::vector<TensorType> input_types_, output_types_;
  std::vector<Step> steps_;
  MemoryReport memory_;
  int64_t arena_bytes_ = 0;
  std::byte* arena_ = nullptr;          // aligned_alloc'ed
  const std::byte* weights_ = nullptr;  // mmap'ed weights.bin
  size_t weights_map_bytes_ = 0;
  std::vector<void*> ptrs_;             // per buffer, rebuilt by each run
  bool rebuilt_ = false;
  bool step_timing_ = false;
  void hand_off_layouts();
  struct FreeDeleter { void operator()(void* p) const { std::free(p); } };
  std::vector<std::unique_ptr<void, FreeDeleter>> handoff_buffers_;
  int handoffs_ = 0;
};

// Sets the OpenMP thread count the kernels use (omp_set_num_threads), for callers that do not
// link OpenMP themselves. n >= 1.
void set_cpu_threads(int n);

}  // namespace korch::runtime
