// The CUDA backend (codegen/backend.h): one candidate kernel -> CUDA C++ + a recipe to run it.
// Mirror of cpu/cpu_backend.h.
//
// A kernel is, as on every backend (codegen/kernel_parts.h), a reference op alone, a library
// call, or a loop kernel printed by cuda_loop_emitter.h (one or more launches; its default
// schedule unless emit() is asked for a variant: schedule_variants() names the others of
// cuda_schedule_space(), and measured costs time them on the GPU and keep the fastest). Argument slots follow runtime/device.h;
// a launch takes at most kMaxKernelArgs of them.
// Fusion rules: a linear primitive runs as one cuBLASLt/cuDNN call with the epilogue the library
// applies (runtime/cuda/cuda_library.h: scale, bias, residual, ReLU / tanh-GELU; a linear op or
// epilogue no call serves is refused at emit, on the emulator too); everything else fuses into
// loop kernels as on the CPU.
// Devices: with a GPU, kernels are timed on it (measured costs); without one there is no timing
// device and costs come from the analytic H200 model. The correctness gate runs every kernel on the
// host emulator (runtime/cuda/cuda_device.h), and with a GPU each timed kernel is also checked on
// the GPU by the measuring driver before its time is kept. An artifact holds kernels/kernels.cu
// and kernels/kernels.ptx (NVRTC, for the GPU's architecture when one is present, else sm_90:
// the H200).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.h"

namespace korch::cuda {

class CudaBackend : public Backend {
 public:
  CudaBackend();
  ~CudaBackend() override;
  std::string name() const override { return "cuda"; }
  int generator_version() const override;
  const FusionRules& fusion_rules() const override { return rules_; }
  DeviceSpec analytic_spec() const override { return h200_spec(); }
  EmittedKernel emit(const Graph& g, const KernelCandidate& c, const std::string& variant = "") const override;
  // cuda_schedule_space() of its loop kernel (the default first), as CudaSchedule::describe() names.
  std::vector<std::string> schedule_variants(const Graph& g, const KernelCandidate& c) const override;
  std::string translation_unit(const std::vector<const EmittedKernel*>& kernels) const override;
  std::vector<CompiledUnit> compile(const std::vector<std::string>& units, runtime::Device& device,
                                    const std::function<void(bool cached)>& on_unit = {}) override;
  runtime::Device* timing_device() override;
  std::string timing_unavailable() const override;
  runtime::Device* check_device() override;
  nlohmann::json write_module(const std::string& dir, const std::vector<const EmittedKernel*>& kernels) override;
  std::string describe_module() const override { return module_; }
  bool symmetric_conv_padding() const override { return true; }  // cuDNN's legacy convolution
  // The PTX target: "compute_<NN>" of the GPU present, else compute_90 (sm_90, the H200).
  std::string ptx_arch() const;

 private:
  FusionRules rules_;
  std::unique_ptr<runtime::Device> emulator_, gpu_;
  std::string timing_why_;  // the GPU is present but its device could not be opened
  std::string module_;
};

}  // namespace korch::cuda
