// The CPU device (runtime/device.h): host memory, kernels from a CPU module (cpu_module.h) with
// their recipes (cpu_kernel.h), OpenMP threads, and the layout handoff between oneDNN steps.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace korch::cpu {

// The L2 cache of the first CPU in bytes (sysfs cpu0 cache index2, else sysconf), 1 MiB when
// neither tells. Read once.
int64_t cpu_l2_bytes();

class CpuDevice : public runtime::Device {
 public:
  // threads > 0 sets OpenMP's thread count for the kernels (omp_set_num_threads); 0 leaves it.
  // flush_denormals: every run sets the x86 flush-to-zero and denormals-are-zero modes (MXCSR FTZ
  // and DAZ) in the OpenMP threads and the calling thread, and restores each thread's own after.
  // Why: on Intel cores an operation on a denormal float takes a microcode assist of ~100 cycles;
  // swin_t's masked attention (e^-100 probabilities) ran its MatMuls 30x slower than on normal data.
  // No-op off x86.
  explicit CpuDevice(int threads = 0, bool flush_denormals = false);
  ~CpuDevice() override;
  std::string name() const override { return "cpu"; }
  std::string id() const override;  // cpu_device_id(threads), cpu_device_id.h
  bool host_memory() const override { return true; }
  void* alloc(int64_t bytes) override;
  void free(void* p) override;
  void upload(void* dst, const void* src, int64_t bytes) override;
  void download(void* dst, const void* src, int64_t bytes) override;
  void synchronize() override {}
  bool uses_module(const nlohmann::json& recipe) const override;  // a loop function ("symbol")
  std::shared_ptr<runtime::KernelModule> load_module(const std::string& artifact_dir) override;
  std::unique_ptr<runtime::DeviceKernel> make_kernel(const nlohmann::json& recipe,
                                                     std::shared_ptr<runtime::KernelModule> module) override;
  // Layout handoff (cpu_linear_step.h): an arena value written by a kernel that is only a linear
  // step and read only as the src (or sum operand) of kernels that are only linear steps wanting
  // the same layout stays in that layout, in a buffer of its own (a blocked layout pads channels,
  // so it may not fit the arena slot planned for the plain tensor). KORCH_NO_LAYOUT_HANDOFF=1
  // turns it off.
  int specialize(runtime::ProgramView& program) override;
  void begin_run() override;
  void end_run() override;
  // The median of 100 parallel passes c = a + b over 3 x 151296 floats (1.8 MB) on the kernels'
  // threads, fork/join included, each after one thread touched the arrays: ~12 us on the 2-core
  // EPYC VM at its pace, ~20 us in its slow phases (about 4 ms in all).
  double pace_probe_seconds() const override;
  // The L2 cache of one core (cpu_l2_bytes): a weight that big cannot stay in the core's own cache
  // from one run of a model to the next. On the EPYC VM mobilenet_v2's classifier (5.1 MB) took
  // 31.6 us measured alone and repeated, 240-280 us in the model.
  int64_t cold_constant_bytes() const override { return cpu_l2_bytes(); }
  void evict(const void* data, int64_t bytes) override;  // clflush of every line (x86), then a fence
  int threads() const { return threads_; }

 private:
  int threads_ = 0;
  bool flush_denormals_ = false;
  std::vector<unsigned> saved_csr_;  // per OpenMP thread number: its MXCSR before the run
  std::vector<void*> owned_;  // handoff buffers
};

// The CPU's pace probe (CpuDevice::pace_probe_seconds): the median time of up to 100 parallel
// passes over 1.8 MB after 10 to warm up; once `budget_seconds` have passed, the passes timed so far
// decide (at least 11). `passes`, when given, gets how many were timed.
double cpu_pace_probe(double budget_seconds, int* passes = nullptr);

// Sets the OpenMP thread count the CPU kernels use (omp_set_num_threads), for callers that do not
// link OpenMP themselves. n >= 1.
void set_cpu_threads(int n);
// The thread count the CPU kernels use now (omp_get_max_threads).
int cpu_threads();

}  // namespace korch::cpu
