// The "cuda-emulator" device (cuda_device.h): a CUDA artifact's kernels on this CPU.
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "runtime/cpu/cpu_device_id.h"
#include "runtime/cpu/cpu_linear_step.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_emulator.h"
#include "runtime/cuda/cuda_kernel.h"
#include "support/error.h"
#include "support/file_io.h"

namespace korch::cuda {

namespace {

class EmulatedCudaModule : public runtime::KernelModule {
 public:
  explicit EmulatedCudaModule(std::shared_ptr<EmulatedModule> m) : m_(std::move(m)) {}
  std::string describe() const override { return m_->source_path() + " (compiled for the host emulator)"; }
  const EmulatedModule& module() const { return *m_; }

 private:
  std::shared_ptr<EmulatedModule> m_;
};

// One planned kernel on the emulator: its library call (oneDNN, as the CPU runs it), then its
// launches in order, or its reference op.
class EmulatedKernel : public runtime::DeviceKernel {
 public:
  EmulatedKernel(CudaKernelRecipe r, std::shared_ptr<runtime::KernelModule> module) : r_(std::move(r)) {
    if (!r_.reference_graph.empty()) reference_ = std::make_unique<runtime::ReferenceStep>(r_.reference_graph, r_);
    if (!r_.in_place.empty()) in_place_ = std::make_unique<runtime::InPlaceStep>(r_);
    if (r_.linear) linear_ = cpu::LinearStep::create(*r_.linear);
    if (!r_.launches.empty()) {
      auto* m = dynamic_cast<EmulatedCudaModule*>(module.get());
      if (!m) fail("a CUDA kernel's launches need the emulated kernel module, got {}", module ? module->describe() : "none");
      module_ = std::move(module);
      for (const CudaLaunch& l : r_.launches)
        if (!m->module().has(l.function)) fail_io("{} has no function {}", m->describe(), l.function);
    }
    args_.assign(r_.inputs.size() + r_.outputs.size(), nullptr);
    for (int64_t bytes : r_.scratch_bytes) {
      const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 256) + 255) / 256 * 256);
      void* p = std::aligned_alloc(256, size);  // cudaMalloc's alignment: float4 accesses rely on it
      if (!p) fail_io("out of memory: {} bytes of kernel scratch", size);
      scratch_.push_back(p);
      args_.push_back(p);
    }
  }
  ~EmulatedKernel() override {
    for (void* p : scratch_) std::free(p);
  }
  void run(const void* const* inputs, void* const* outputs) override {
    if (reference_) {
      reference_->run(inputs, outputs);
      return;
    }
    if (in_place_) {
      in_place_->run_on_host(inputs, outputs);
      return;
    }
    const size_t ni = r_.inputs.size(), no = r_.outputs.size();
    for (size_t i = 0; i < ni; ++i) args_[i] = const_cast<void*>(inputs[i]);
    for (size_t i = 0; i < no; ++i) args_[ni + i] = outputs[i];
    if (linear_) linear_->run(args_.data());
    if (module_) {
      const EmulatedModule& m = static_cast<EmulatedCudaModule*>(module_.get())->module();
      for (const CudaLaunch& l : r_.launches) m.launch(l, args_.data(), static_cast<int>(args_.size()));
    }
  }

 private:
  CudaKernelRecipe r_;
  std::shared_ptr<runtime::KernelModule> module_;
  std::unique_ptr<runtime::ReferenceStep> reference_;
  std::unique_ptr<runtime::InPlaceStep> in_place_;
  std::unique_ptr<cpu::LinearStep> linear_;
  std::vector<void*> scratch_, args_;
};

class EmulatorDevice : public runtime::Device {
 public:
  std::string name() const override { return "cuda-emulator"; }
  std::string id() const override { return "cuda-emulator:" + cpu_device_id(1); }
  bool host_memory() const override { return true; }
  void* alloc(int64_t bytes) override {
    const size_t size = static_cast<size_t>((std::max<int64_t>(bytes, 256) + 255) / 256 * 256);
    void* p = std::aligned_alloc(256, size);
    if (!p) fail_io("out of memory: {} bytes", size);
    return p;
  }
  void free(void* p) override { std::free(p); }
  void upload(void* dst, const void* src, int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void download(void* dst, const void* src, int64_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void synchronize() override {}
  bool uses_module(const nlohmann::json& recipe) const override { return CudaKernelRecipe::has_launches(recipe); }
  std::shared_ptr<runtime::KernelModule> load_module(const std::string& artifact_dir) override {
    const std::string path = (std::filesystem::path(artifact_dir) / "kernels" / "kernels.cu").string();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail_io("{} is missing: the artifact has no CUDA source to emulate", path);
    return std::make_shared<EmulatedCudaModule>(EmulatedModule::compile(read_file_bytes(path)));
  }
  std::unique_ptr<runtime::DeviceKernel> make_kernel(const nlohmann::json& recipe,
                                                     std::shared_ptr<runtime::KernelModule> module) override {
    return std::make_unique<EmulatedKernel>(CudaKernelRecipe::from_json(recipe), std::move(module));
  }
};

}  // namespace

std::shared_ptr<runtime::KernelModule> emulated_module(std::shared_ptr<EmulatedModule> m) {
  return std::make_shared<EmulatedCudaModule>(std::move(m));
}

std::unique_ptr<runtime::Device> make_emulator_device() { return std::make_unique<EmulatorDevice>(); }

}  // namespace korch::cuda
