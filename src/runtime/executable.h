// A loaded artifact (artifact.h), ready to run on its device.
//
// load() reads manifest.json (its "device" tag picks the device, device.h) and program.json,
// puts weights.bin on the device (mapped read-only on host-memory devices, uploaded otherwise),
// loads the device's kernel module (a CPU artifact rebuilds kernels/libkernels.so with
// kernels/build.sh when it is missing or does not load) and makes one device kernel per planned
// kernel. run() feeds graph inputs (in place on host-memory devices), runs the kernels in order
// over one preallocated arena and returns fresh output tensors.
// CPU threads are the caller's unless LoadOptions::cpu_threads says otherwise: the kernels use
// OpenMP's current setting (cpu::set_cpu_threads, or omp_set_num_threads / OMP_NUM_THREADS).
// run() reuses one arena, so one Executable runs one call at a time.
#pragma once

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/tensor.h"
#include "runtime/device.h"
#include "runtime/memory_plan.h"

namespace korch::runtime {

struct LoadOptions {
  bool emulate = false;  // a CUDA artifact on the host emulator (runtime/cuda/cuda_device.h)
  int cpu_threads = 0;   // > 0: set the CPU kernels' OpenMP thread count
  // Opens the artifact's device instead of runtime::open_device (tests, embedding); may be empty.
  std::function<std::unique_ptr<Device>(const std::string& tag, const DeviceOptions&)> open_device;
};

class Executable {
 public:
  // Throws korch::Error naming the artifact file at fault (missing folder, not an artifact,
  // malformed program.json, short weights.bin, library that cannot be rebuilt or lacks a symbol),
  // or (kUnsupported) naming what this machine lacks for the artifact's device (a GPU, a driver).
  static std::unique_ptr<Executable> load(const std::string& dir, const LoadOptions& options = {});
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // `inputs` in input_names() order; throws korch::Error naming an input whose dtype or shape
  // differs from input_types(). Returns the outputs in output_names() order. A micro-batched
  // artifact (artifact.h) runs its kernels once per micro-batch of the inputs' leading dimension.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  const std::vector<std::string>& input_names() const { return input_names_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const std::vector<TensorType>& input_types() const { return input_types_; }
  const std::vector<TensorType>& output_types() const { return output_types_; }
  MemoryReport memory() const { return memory_; }
  size_t kernel_count() const { return steps_.size(); }
  int64_t micro_batches() const { return micro_batches_; }  // kernel sequences a run issues
  const Device& device() const { return *device_; }
  // Per-kernel time in the model, for each run since set_step_timing(true) (`korch bench
  // --per-kernel`, the closed loop of measured costs). One synchronised clock read between
  // consecutive kernels (about 20 ns on a CPU), so the steps of a run add up to the run: nothing
  // between kernels goes unaccounted. Off by default.
  struct StepTime {
    int step = 0;
    std::string note;
    std::vector<double> samples;  // seconds, one per run (per micro-batch when micro-batched)
    int64_t bytes = 0;  // the sizes of its input and output buffers: what it reads and writes at least
  };
  void set_step_timing(bool on);
  std::vector<StepTime> step_times() const;
  // What one of those clock reads costs on this executable's device, in seconds (the median of
  // a few hundred reads).
  double step_timer_seconds();
  // Device-specific changes made at load time (the CPU: values passed between linear steps in the
  // library's own layout, cpu_device.h; KORCH_NO_LAYOUT_HANDOFF=1 turns it off).
  int layout_handoffs() const { return specialized_; }
  // Layout conversions the kernels make on every run (after those handoffs): the reorders a
  // library call does around itself (device.h ReorderStats), summed over the program.
  ReorderStats reorders_per_run() const;
  const nlohmann::json& manifest() const { return manifest_; }
  bool rebuilt_library() const { return rebuilt_; }  // load() had to rebuild the kernel module
  // Device replay (device.h Device::capture): on a device without host memory whose kernels all
  // allow it, the first run issues the kernels one by one, the second records them once (a CUDA
  // graph) and every later run replays that record: one launch instead of one per kernel.
  // Step timing issues them one by one. KORCH_NO_DEVICE_REPLAY=1 turns replay off.
  bool replaying() const { return replay_ != nullptr; }
  std::string replay_status() const;  // for reports: replaying, or why not

 private:
  Executable() = default;
  static std::unique_ptr<Executable> load_checked(const std::string& dir, const LoadOptions& options);
  enum class Kind { kInput, kOutput, kWeight, kArena, kPiece };
  struct Buffer {
    Kind kind = Kind::kArena;
    std::string name;
    TensorType type;
    int64_t offset = 0;  // weight: in weights.bin; arena: in the arena; piece: in its holder
    int of = -1;         // piece only: the arena or output buffer holding it (memory_plan.h)
    int index = 0;       // input/output position
    int copy_from = -1;  // output only
  };
  struct Step {
    std::unique_ptr<DeviceKernel> kernel;
    std::vector<int> inputs, outputs;  // buffer ids
    std::vector<const void*> in_ptrs;
    std::vector<void*> out_ptrs;
    std::string note;
    std::vector<double> samples;  // step timing: seconds per run
  };
  void parse_program(const nlohmann::json& j, const std::string& path);
  // Maps weights.bin; it must hold exactly `bytes` bytes with this checksum (support/hash.h).
  void place_weights(const std::string& path, int64_t bytes, const std::string& checksum);
  void* device_buffer(int64_t bytes);
  void* piece_ptr(const Buffer& b) const;  // where a piece is now: its holder's pointer + offset
  void issue(Step& s);  // points the step at this run's buffers and runs its kernel
  // One micro-batch's pass (else the whole run): inputs and outputs at micro-batch m.
  void run_micro_batch(const std::vector<Tensor>& inputs, std::vector<Tensor>& outputs, int64_t m);

  // Declaration order is destruction order reversed: kernels go before the module, buffers and
  // the device they live on.
  std::unique_ptr<Device> device_;
  std::vector<void*> device_buffers_;   // arena, weights and staging on a device without host memory
  std::shared_ptr<KernelModule> module_;
  std::string dir_;
  nlohmann::json manifest_;
  std::vector<Buffer> buffers_;
  std::vector<int> input_buffers_, output_buffers_;
  std::vector<int> output_pieces_;  // pieces held by an output buffer: they move with it each run
  std::vector<std::string> input_names_, output_names_;
  std::vector<TensorType> input_types_, output_types_;
  std::vector<Step> steps_;
  MemoryReport memory_;
  int64_t arena_bytes_ = 0;
  int64_t micro_batches_ = 1;
  std::byte* arena_ = nullptr;
  const std::byte* weights_ = nullptr;  // mmap'ed weights.bin (host memory) or a device copy
  size_t weights_map_bytes_ = 0;        // > 0: weights_ is a mapping to unmap
  std::vector<void*> ptrs_;             // per buffer, rebuilt by each run
  std::vector<void*> staging_;          // per buffer: device copies of inputs/outputs (no host memory)
  bool rebuilt_ = false;
  bool step_timing_ = false;
  int specialized_ = 0;
  std::unique_ptr<Replay> replay_;  // before device_ in destruction (declared after it)
  std::string replay_why_;          // non-empty: no replay, and why
  int eager_runs_ = 0;
};

}  // namespace korch::runtime
