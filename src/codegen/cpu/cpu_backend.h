// The CPU backend (codegen/backend.h): one candidate kernel -> generated C++ + a recipe to run it.
//
// A kernel with a linear primitive becomes a oneDNN step (codegen/linear_match.h: the linear op
// and the epilogue it absorbs as post-ops) followed, when primitives remain, by a loop function
// over the step's result; a kernel without one is a loop function (loop_kernel.h,
// cpu_loop_emitter.h). Argument slots follow runtime/cpu/cpu_kernel.h: argument inputs, outputs,
// then scratch (the linear result when it is not a kernel output comes first, then the loop
// kernel's temporaries). Opaque primitives and operators kept whole run in the reference
// interpreter (their recipe carries the one-node graph).
// Fusion rules: oneDNN's: a linear primitive with an elementwise/broadcast epilogue downstream
// of it, plus operands computed from constants alone (a bias Expand read by a binary post-op).
// Kernels run and are timed on this CPU (runtime/cpu/cpu_device.h) with `threads` threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "codegen/backend.h"
#include "codegen/cpu/cpu_compiler.h"

namespace korch::cpu {

class CpuDevice;

// Revisions of the runtime steps that run library kernels (Backend::step_revision): the oneDNN
// linear step (runtime/cpu/cpu_linear_step.h: convolutions, matrix products, their post-ops) and
// the recurrent steps (LSTM, GRU, RNN, DynamicQuantizeLSTM). Bump one when its step's code changes
// what or how fast it computes: the kernels it runs are measured again, the generated ones keep
// their records. 0 adds nothing to the key (the records stored before revisions existed).
constexpr int kCpuLinearStepRevision = 0;
constexpr int kCpuRecurrentStepRevision = 0;

class CpuBackend : public Backend {
 public:
  // flush_denormals: the timing device measures with denormal floats flushed (CpuDevice), as the
  // artifacts run by default.
  explicit CpuBackend(int threads = 2, bool flush_denormals = true);
  ~CpuBackend() override;
  std::string name() const override { return "cpu"; }
  int generator_version() const override { return kCpuGeneratorVersion; }
  std::string step_revision(const Graph& g, const KernelCandidate& c) const override;
  // 0 for a oneDNN call alone (kCpuLinearStepRevision keys its code).
  int measured_generator(const Graph& g, const KernelCandidate& c) const override;
  const FusionRules& fusion_rules() const override { return rules_; }
  DeviceSpec analytic_spec() const override;
  // variant: "direct" (the default) or "winograd" (oneDNN's Winograd convolution: see
  // schedule_variants).
  EmittedKernel emit(const Graph& g, const KernelCandidate& c, const std::string& variant = "") const override;
  // {"direct", "winograd"} for a kernel whose convolution oneDNN can run with Winograd (3x3,
  // stride 1, one group, its channels and post-ops), else none: the profiler times both.
  std::vector<std::string> schedule_variants(const Graph& g, const KernelCandidate& c) const override;
  std::string translation_unit(const std::vector<const EmittedKernel*>& kernels) const override;
  std::vector<CompiledUnit> compile(const std::vector<std::string>& units, runtime::Device& device,
                                    const std::function<void(bool cached)>& on_unit = {}) override;
  runtime::Device* timing_device() override;
  runtime::Device* check_device() override { return timing_device(); }
  nlohmann::json write_module(const std::string& dir, const std::vector<const EmittedKernel*>& kernels) override;
  // oneDNN runs convolutions on NHWC memory with a jit kernel (runtime/cpu/cpu_linear_step.h).
  bool prefers_channels_last() const override;

 private:
  int threads_;
  bool flush_denormals_;
  FusionRules rules_;
  std::unique_ptr<CpuDevice> device_;  // made on first use (sets OpenMP's thread count)
};

}  // namespace korch::cpu
