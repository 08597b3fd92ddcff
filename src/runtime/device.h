// The run-time half of a backend: a Device allocates buffers, moves data, loads kernel modules,
// turns kernel recipes into runnable kernels and tells time. The artifact executor
// (executable.h) and the measuring driver (profile/measured_cost.h) see devices only through this
// interface; the compile-time half (what a target can fuse, how a candidate becomes code) is
// codegen/backend.h.
//
//   device      what it runs on                         made by
//   "cpu"       this CPU: generated C++ + oneDNN        runtime/cpu/cpu_device.h
//   "cuda"      an NVIDIA GPU (driver loaded at run     runtime/cuda/cuda_device.h
//               time; no GPU here: a clear error)
//   "cuda-emulator"  the generated CUDA source compiled runtime/cuda/cuda_device.h
//               for this CPU, threads as fibers (tests, machines without a GPU)
//
// Recipes are JSON (each device documents its own); every recipe carries "inputs" and "outputs"
// (lists of {dtype, shape}) and "scratch_bytes", which the executor validates generically
// (kernel_recipe.h). Argument convention shared by every device: a kernel receives its argument
// inputs, its outputs, then its scratch buffers, in that order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace korch::runtime {

// A loaded batch of compiled kernels (a shared library, an emulated module, a CUDA module).
class KernelModule {
 public:
  virtual ~KernelModule() = default;
  virtual std::string describe() const = 0;  // where it came from, for messages
  virtual bool rebuilt() const { return false; }  // loading had to rebuild it from its source
};

// Layout conversions a kernel makes on every run (a library call whose chosen layout differs from
// the tensors it is handed: the reorders the orchestrator does not see). Constant operands
// converted once are not counted.
struct ReorderStats {
  int64_t count = 0;
  int64_t bytes = 0;  // of the converted tensors (each counted once, in its plain layout)
};

class DeviceKernel {
 public:
  virtual ~DeviceKernel() = default;
  // inputs/outputs: device pointers, as many as the recipe's inputs/outputs. May return before the
  // device has finished (Device::synchronize waits).
  virtual void run(const void* const* inputs, void* const* outputs) = 0;
  // As the kernel stands now (after Device::specialize).
  virtual ReorderStats reorders_per_run() const { return {}; }
  // Whether its work can be recorded into a replayable sequence (Device::capture): false when it
  // needs the host between device work (a reference op on a device without host memory).
  virtual bool capturable() const { return true; }
  // Copies of constant inputs the kernel keeps (weights reordered once, on its first run, into a
  // library's layout): what it reads in their place, so what a cold measurement evicts with them
  // (Device::evict). Empty by default.
  virtual std::vector<std::pair<const void*, int64_t>> constant_copies() const { return {}; }
};

// A recorded sequence of device work (a CUDA graph), replayed as a whole.
class Replay {
 public:
  virtual ~Replay() = default;
  virtual void launch() = 0;  // may return before the work has finished (Device::synchronize)
};

// What a device may change in a loaded program before it runs (device-specific plan tweaks such as
// the CPU's layout handoff): the steps with their buffer ids and the buffer pointers.
struct ProgramView {
  struct Step {
    DeviceKernel* kernel = nullptr;
    std::vector<int> inputs, outputs;  // buffer ids
  };
  std::vector<Step> steps;
  std::vector<bool> is_arena;   // per buffer: an intermediate in the arena (others: inputs, outputs, weights)
  std::vector<void*>* ptrs = nullptr;  // per buffer; a device may point an arena buffer elsewhere
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda", "cuda-emulator"
  // What a measurement on this device is valid for (the device part of a tuning key).
  virtual std::string id() const = 0;
  // Device pointers are host pointers (no copies needed).
  virtual bool host_memory() const = 0;
  virtual void* alloc(int64_t bytes) = 0;  // aligned to at least 64 bytes; throws korch::Error
  virtual void free(void* p) = 0;
  virtual void upload(void* dst, const void* src, int64_t bytes) = 0;
  virtual void download(void* dst, const void* src, int64_t bytes) = 0;
  virtual void synchronize() = 0;
  // Seconds on a monotonic clock once everything issued so far has finished: the timer that
  // measurements use (a kernel's time is the difference of two readings around its runs). The
  // default is the host's steady clock after synchronize(); a GPU reads its own timeline (events).
  virtual double synchronized_seconds();

  // Whether the kernel of `recipe` runs code from the kernel module (else: a library call or a
  // reference op alone).
  virtual bool uses_module(const nlohmann::json& recipe) const = 0;
  // The kernel module of an artifact folder (its kernels/ files). Throws korch::Error naming the
  // file at fault.
  virtual std::shared_ptr<KernelModule> load_module(const std::string& artifact_dir) = 0;
  // A runnable kernel for `recipe` from `module` (which may be null for kernels without generated
  // code). Throws korch::Error when the recipe is malformed or names code the module lacks.
  virtual std::unique_ptr<DeviceKernel> make_kernel(const nlohmann::json& recipe,
                                                    std::shared_ptr<KernelModule> module) = 0;
  // Records the device work `issue` submits (it runs once, recording, not executing) into a
  // sequence replayed with the same buffers: the executor's whole kernel sequence becomes one
  // launch (CUDA graphs). Null when the device cannot record (the default) or recording failed;
  // *why then says why (may be null).
  virtual std::unique_ptr<Replay> capture(const std::function<void()>& issue, std::string* why) {
    (void)issue;
    if (why) *why = name() + " does not record kernel sequences";
    return nullptr;
  }
  // Evicts this device's caches (a GPU's L2) so that the next kernel reads its data cold; what a
  // measurement calls between repeats where the kernel meets cold data in the model. No-op where
  // the device has nothing to flush cheaply.
  virtual void flush_caches() {}
  // A kernel whose constant inputs (weights) add up to at least this many bytes is measured with
  // them cold: the measuring driver evicts them (evict below) before each timed call. In a model
  // a weight is read once per run, and the rest of the run's traffic pushes it out of the caches
  // before the next; measured alone and repeated, a kernel finds its weights where its last call
  // left them. 0: never (the default; a device whose flush_caches empties every cache needs none).
  virtual int64_t cold_constant_bytes() const { return 0; }
  // Makes the next read of [data, data + bytes) come from memory (on the CPU: every cache line
  // flushed). No-op by default.
  virtual void evict(const void* data, int64_t bytes) {
    (void)data;
    (void)bytes;
  }
  // Seconds one run of a fixed probe takes on this device now (the median of a few short sets):
  // work whose time moves with the machine's state, not with the kernels. A shared VM slows down
  // when its neighbours stream memory (this project's EPYC VM: 1.3-2.5x on memory-bound kernels
  // for seconds to many minutes, with no steal time and no other process to see); comparing the
  // probe with the best this device has shown tells a measurement taken then (profile/pace.h).
  // 0: the device has no probe (the default).
  virtual double pace_probe_seconds() const { return 0; }
  // Around each run of a program (Executable::run): a device may put the threads that run its
  // kernels in the program's floating-point mode, and put them back after (the CPU's flush of
  // denormal floats, DeviceOptions::flush_denormals). No-ops by default.
  virtual void begin_run() {}
  virtual void end_run() {}
  // begin_run() for a scope, end_run() however it ends (a run, or a kernel's timing:
  // profile/measured_cost.cc times kernels in the mode their artifact runs them in).
  class RunScope {
   public:
    explicit RunScope(Device& d) : d_(d) { d_.begin_run(); }
    ~RunScope() { d_.end_run(); }
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;

   private:
    Device& d_;
  };
  // Device-specific changes to a loaded program; returns how many it made (for reports).
  virtual int specialize(ProgramView& program) {
    (void)program;
    return 0;
  }
};

struct DeviceOptions {
  int cpu_threads = 0;    // "cpu": OpenMP threads for the kernels (0: leave OpenMP's setting)
  bool emulate = false;   // "cuda": run on the host emulator instead of a GPU
  // "cpu": each run with denormal floats flushed to zero (program.json's "denormals": "flush").
  bool flush_denormals = false;
};

// The device for an artifact's device tag ("cpu" | "cuda"). Throws korch::Error (kUnsupported)
// with one line naming what is missing (no GPU, no driver) when it cannot run here.
std::unique_ptr<Device> open_device(const std::string& tag, const DeviceOptions& options = {});

}  // namespace korch::runtime
