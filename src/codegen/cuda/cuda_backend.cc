#include "codegen/cuda/cuda_backend.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "codegen/cuda/cuda_compiler.h"
#include "codegen/cuda/cuda_loop_emitter.h"
#include "codegen/kernel_parts.h"
#include "codegen/kernel_signature.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_emulator.h"
#include "runtime/cuda/cuda_kernel.h"
#include "runtime/cuda/cuda_library.h"
#include "support/code_writer.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/hash.h"

namespace korch::cuda {

namespace {

// Epilogues as on the CPU; the linear step keeps those cuBLASLt / cuDNN apply (plan_library_call:
// a scale, a bias, a residual, then ReLU or tanh-GELU) and generated code runs the rest after it.
FusionRules cuda_fusion_rules() {
  FusionRules r;
  r.name = "cuda: library epilogues (cuBLASLt, cuDNN)";
  r.linear_library = [](const nlohmann::json& desc) { return plan_library_call(desc).reason; };
  return r;
}

}  // namespace

CudaBackend::CudaBackend() : rules_(cuda_fusion_rules()) {}

CudaBackend::~CudaBackend() = default;

int CudaBackend::generator_version() const { return kCudaGeneratorVersion; }

runtime::Device* CudaBackend::timing_device() {
  if (!gpu_ && probe_gpu().available && timing_why_.empty()) {
    try {
      gpu_ = make_gpu_device();
    } catch (const Error& e) {
      timing_why_ = e.what();
    }
  }
  return gpu_.get();
}

std::string CudaBackend::timing_unavailable() const {
  const GpuInfo& gpu = probe_gpu();
  if (!gpu.available) return gpu.why;
  return timing_why_;
}

std::string CudaBackend::ptx_arch() const {
  const GpuInfo& gpu = probe_gpu();
  return gpu.available ? fmt::format("compute_{}{}", gpu.major, gpu.minor) : "compute_90";
}

EmittedKernel CudaBackend::emit(const Graph& g, const KernelCandidate& c, const std::string& variant) const {
  EmittedKernel k;
  CudaKernelRecipe recipe;
  KernelParts parts = start_emit(g, c, rules_, k, recipe);
  if (!k.reason.empty()) return k;
  if (!variant.empty() && !parts.loop) {
    k.reason = "schedule '" + variant + "' asked for a kernel with no generated code";
    return k;
  }
  if (recipe.linear) {  // what the GPU's libraries cannot run is not offered on the emulator either
    LibraryPlan plan = plan_library_call(*recipe.linear);
    if (!plan.ok()) {
      k.reason = "the CUDA backend has no library call for " + plan.reason;
      return k;
    }
  }
  if (parts.loop) {
    CudaSchedule schedule = default_cuda_schedule(*parts.loop);
    std::string symbol = "korch_k_" + k.hash;
    if (!variant.empty()) {
      const std::vector<CudaSchedule> space = cuda_schedule_space(*parts.loop);
      auto it = std::find_if(space.begin(), space.end(), [&](const CudaSchedule& s) { return s.describe() == variant; });
      if (it == space.end()) {
        std::vector<std::string> names;
        for (const CudaSchedule& s : space) names.push_back(s.describe());
        k.reason = fmt::format("schedule '{}' does not apply to this kernel (its schedules: {})", variant, fmt::join(names, "; "));
        return k;
      }
      // Variants of one signature share a translation unit while they are timed: distinct names.
      if (!(*it == schedule)) symbol += "_" + content_hash(variant).substr(0, 8);
      schedule = *it;
      k.variant = variant;
    }
    CodeWriter w;
    w.line("// " + std::to_string(c.nodes.size()) + " primitives; signature " + k.hash + "; schedule " + schedule.describe());
    CudaLoopEmit e = emit_cuda_loop_kernel(*parts.loop, symbol, parts.loop_input_slots, parts.loop_output_slots,
                                           parts.loop_first_scratch, schedule, w);
    if (!e.ok) {
      k.reason = e.reason;
      return k;
    }
    recipe.launches = std::move(e.launches);
    for (int64_t b : e.extra_scratch_bytes) recipe.scratch_bytes.push_back(b);
    k.source = w.take();
    k.entry = symbol;
  }
  const size_t slots = recipe.inputs.size() + recipe.outputs.size() + recipe.scratch_bytes.size();
  if (slots > static_cast<size_t>(kMaxKernelArgs)) {
    k.reason = fmt::format("{} argument buffers: a CUDA kernel here takes at most {}", slots, kMaxKernelArgs);
    k.source.clear();
    return k;
  }
  k.ok = true;
  k.recipe = recipe.to_json();
  return k;
}

std::vector<std::string> CudaBackend::schedule_variants(const Graph& g, const KernelCandidate& c) const {
  EmittedKernel k;
  CudaKernelRecipe recipe;
  KernelParts parts = start_emit(g, c, rules_, k, recipe);
  std::vector<std::string> out;
  if (!k.reason.empty() || !parts.loop) return out;
  const std::vector<CudaSchedule> space = cuda_schedule_space(*parts.loop);
  for (const CudaSchedule& s : space) out.push_back(s.describe());
  return out;
}

std::string CudaBackend::translation_unit(const std::vector<const EmittedKernel*>& kernels) const {
  std::string tu = cuda_prelude();
  std::set<std::string> seen;
  for (const EmittedKernel* k : kernels) {
    if (k->source.empty() || !seen.insert(k->entry).second) continue;
    tu += "\n" + k->source;
  }
  return tu;
}

std::vector<CompiledUnit> CudaBackend::compile(const std::vector<std::string>& units, runtime::Device& device,
                                               const std::function<void(bool cached)>& on_unit) {
  std::vector<CompiledUnit> out;
  if (device.name() == "cuda") {  // NVRTC to PTX (cached), loaded by the driver
    NvrtcConfig config;
    config.arch = ptx_arch();
    for (const PtxModule& m : compile_to_ptx(units, config, on_unit))
      out.push_back({m.source_path, m.cached, gpu_module(m.ptx, m.ptx_path)});
    return out;
  }
  if (device.name() != "cuda-emulator") fail_unsupported("the CUDA backend does not compile for {}", device.name());
  for (const auto& m : EmulatedModule::compile_all(units)) {
    out.push_back({m->source_path(), false, emulated_module(m)});
    if (on_unit) on_unit(false);
  }
  return out;
}

runtime::Device* CudaBackend::check_device() {
  if (!emulator_) emulator_ = make_emulator_device();
  return emulator_.get();
}

nlohmann::json CudaBackend::write_module(const std::string& dir, const std::vector<const EmittedKernel*>& kernels) {
  namespace fs = std::filesystem;
  const fs::path root = fs::path(dir) / "kernels";
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail_io("cannot create artifact folder {}: {}", root.string(), ec.message());
  for (const char* stale : {"kernels.cc", "build.sh", "libkernels.so"}) fs::remove(root / stale, ec);
  const std::string source = translation_unit(kernels);
  write_file_bytes((root / "kernels.cu").string(), source);
  NvrtcConfig config;
  config.arch = ptx_arch();
  std::vector<PtxModule> ptx = compile_to_ptx({source}, config);
  write_file_bytes((root / "kernels.ptx").string(), ptx[0].ptx);
  int functions = 0, launches = 0;
  for (const EmittedKernel* k : kernels) {
    functions += !k->source.empty();
    launches += static_cast<int>(CudaKernelRecipe::from_json(k->recipe).launches.size());
  }
  const std::string sm = "sm_" + config.arch.substr(config.arch.find('_') + 1);
  module_ = fmt::format("{} kernels with CUDA code ({} launches) in kernels/kernels.cu, PTX for {} by NVRTC {}{} "
                        "in kernels/kernels.ptx",
                        functions, launches, sm, nvrtc_version(), ptx[0].cached ? " (cached)" : "");
  nlohmann::json m;
  m["generator_version"] = kCudaGeneratorVersion;
  m["cuda"] = {{"arch", sm},
               {"ptx", "kernels/kernels.ptx"},
               {"source", "kernels/kernels.cu"},
               {"nvrtc", nvrtc_version()},
               {"note", "linear steps are library calls (cuBLASLt/cuDNN on the GPU, fp32 without TF32; oneDNN on the emulator)"}};
  return m;
}

}  // namespace korch::cuda
