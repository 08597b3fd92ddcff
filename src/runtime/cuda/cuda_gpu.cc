// The "cuda" device on a GPU (cuda_device.h): driver API through cuda_api.h, one context and one
// stream per process, generated kernels from PTX (cuModuleLoadDataEx), linear steps as library
// calls (cuda_library.h), reference ops through host copies, kernel sequences recorded as CUDA
// graphs (Device::capture).
#include "runtime/cuda/cuda_device.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_kernel.h"
#include "runtime/cuda/cuda_library.h"
#include "support/error.h"
#include "support/file_io.h"

#if KORCH_HAVE_CUDA_HEADERS

#include "runtime/cuda/cuda_api.h"

namespace korch::cuda {

namespace {

struct Context {
  CUcontext ctx = nullptr;
  CUstream stream = nullptr;
  int l2_bytes = 0;
  std::string id;
};

// The primary context of GPU 0, current on the calling thread, and the stream everything runs on.
Context& context() {
  static Context c = [] {
    Context c;
    const GpuInfo& gpu = probe_gpu();
    CUdevice dev = 0;
    KORCH_CU(cuDeviceGet, &dev, 0);
    KORCH_CU(cuDevicePrimaryCtxRetain, &c.ctx, dev);
    KORCH_CU(cuCtxSetCurrent, c.ctx);
    KORCH_CU(cuStreamCreate, &c.stream, CU_STREAM_NON_BLOCKING);
    KORCH_CU(cuDeviceGetAttribute, &c.l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev);
    int version = 0;
    KORCH_CU(cuDriverGetVersion, &version);
    c.id = fmt::format("cuda:{}:{}:driver{}", gpu.name, gpu.arch(), version);
    return c;
  }();
  KORCH_CU(cuCtxSetCurrent, c.ctx);  // each thread that uses the device
  return c;
}

CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

class GpuModule : public runtime::KernelModule {
 public:
  GpuModule(const std::string& ptx, std::string where) : where_(std::move(where)) {
    context();
    char log[8192] = {0};
    CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[] = {log, reinterpret_cast<void*>(sizeof log - 1)};
    CUresult rc = driver().cuModuleLoadDataEx(&m_, ptx.c_str(), 2, opts, vals);
    if (rc != CUDA_SUCCESS) {
      const char* name = nullptr;
      driver().cuGetErrorName(rc, &name);
      fail_io("{}: the driver does not load its PTX ({}): {}", where_, name ? name : "?", log);
    }
  }
  ~GpuModule() override {
    if (m_) driver().cuModuleUnload(m_);
  }
  std::string describe() const override { return where_ + " (PTX loaded by the driver)"; }
  CUfunction function(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = functions_.find(name);
    if (it != functions_.end()) return it->second;
    CUfunction f = nullptr;
    if (driver().cuModuleGetFunction(&f, m_, name.c_str()) != CUDA_SUCCESS || !f)
      fail_io("{} has no function {}", describe(), name);
    functions_[name] = f;
    return f;
  }

 private:
  CUmodule m_ = nullptr;
  std::string where_;
  mutable std::mutex mu_;
  mutable std::map<std::string, CUfunction> functions_;
};

// The generated functions' one parameter (cuda_launch.h): argument slots by value.
struct KorchArgs {
  void* p[kMaxKernelArgs];
};

class GpuKernel : public runtime::DeviceKernel {
 public:
  GpuKernel(CudaKernelRecipe r, std::shared_ptr<runtime::KernelModule> module) : r_(std::move(r)) {
    Context& c = context();
    stream_ = c.stream;
    if (!r_.reference_graph.empty()) {
      reference_ = std::make_unique<runtime::ReferenceStep>(r_.reference_graph, r_);
      for (const TensorType& t : r_.inputs) host_in_.emplace_back(t);
      for (const TensorType& t : r_.outputs) host_out_.emplace_back(t);
      for (Tensor& t : host_in_) host_in_ptrs_.push_back(t.raw());
      for (Tensor& t : host_out_) host_out_ptrs_.push_back(t.raw());
    }
    if (!r_.in_place.empty()) in_place_ = std::make_unique<runtime::InPlaceStep>(r_);
    if (r_.linear) {
      LibraryPlan plan = plan_library_call(*r_.linear);
      if (!plan.ok()) fail_unsupported("a linear step the GPU cannot run: {}", plan.reason);
      library_ = make_library_call(plan, stream_);
    }
    if (!r_.launches.empty()) {
      auto* m = dynamic_cast<GpuModule*>(module.get());
      if (!m) fail("a CUDA kernel's launches need the GPU kernel module, got {}", module ? module->describe() : "none");
      module_ = std::move(module);
      for (const CudaLaunch& l : r_.launches) {
        if (l.grid > 0x7fffffff) fail("launch of {} has {} blocks, over the GPU's 2^31-1", l.function, l.grid);
        functions_.push_back(m->function(l.function));
      }
    }
    for (int64_t bytes : r_.scratch_bytes) {
      CUdeviceptr p = 0;
      KORCH_CU(cuMemAlloc, &p, static_cast<size_t>(std::max<int64_t>(bytes, 256)));
      scratch_.push_back(p);
    }
  }
  ~GpuKernel() override {
    for (CUdeviceptr p : scratch_) driver().cuMemFree(p);
  }
  bool capturable() const override { return reference_ == nullptr; }
  void run(const void* const* inputs, void* const* outputs) override {
    const size_t ni = r_.inputs.size(), no = r_.outputs.size();
    if (reference_) {  // through the host: the interpreter reads and writes host memory
      for (size_t i = 0; i < ni; ++i)
        KORCH_CU(cuMemcpyDtoHAsync, host_in_[i].raw(), dptr(inputs[i]), host_in_[i].nbytes(), stream_);
      KORCH_CU(cuStreamSynchronize, stream_);
      reference_->run(host_in_ptrs_.data(), host_out_ptrs_.data());
      for (size_t o = 0; o < no; ++o)
        KORCH_CU(cuMemcpyHtoDAsync, dptr(outputs[o]), host_out_[o].raw(), host_out_[o].nbytes(), stream_);
      KORCH_CU(cuStreamSynchronize, stream_);  // host_out_ is reused by the next run
      return;
    }
    if (in_place_) {
      in_place_->run(inputs, outputs, [&](void* to, const void* from, int64_t n) {
        KORCH_CU(cuMemcpyDtoDAsync, dptr(to), dptr(from), static_cast<size_t>(n), stream_);
      });
      return;
    }
    KorchArgs args{};
    for (size_t i = 0; i < ni; ++i) args.p[i] = const_cast<void*>(inputs[i]);
    for (size_t o = 0; o < no; ++o) args.p[ni + o] = outputs[o];
    for (size_t s = 0; s < scratch_.size(); ++s) args.p[ni + no + s] = reinterpret_cast<void*>(scratch_[s]);
    if (library_) library_->run(args.p);
    void* params[] = {&args};
    for (size_t l = 0; l < functions_.size(); ++l) {
      const CudaLaunch& x = r_.launches[l];
      KORCH_CU(cuLaunchKernel, functions_[l], static_cast<unsigned>(x.grid), 1, 1, static_cast<unsigned>(x.block), 1, 1,
               0, stream_, params, nullptr);
    }
  }

 private:
  CudaKernelRecipe r_;
  CUstream stream_ = nullptr;
  std::shared_ptr<runtime::KernelModule> module_;
  std::vector<CUfunction> functions_;
  std::unique_ptr<runtime::ReferenceStep> reference_;
  std::unique_ptr<runtime::InPlaceStep> in_place_;
  std::vector<Tensor> host_in_, host_out_;  // the reference op's host copies
  std::vector<const void*> host_in_ptrs_;
  std::vector<void*> host_out_ptrs_;
  std::unique_ptr<LibraryCall> library_;
  std::vector<CUdeviceptr> scratch_;
};

class GraphReplay : public runtime::Replay {
 public:
  GraphReplay(CUgraph g, CUgraphExec e, CUstream s) : graph_(g), exec_(e), stream_(s) {}
  ~GraphReplay() override {
    driver().cuGraphExecDestroy(exec_);
    driver().cuGraphDestroy(graph_);
  }
  void launch() override { KORCH_CU(cuGraphLaunch, exec_, stream_); }

 private:
  CUgraph graph_;
  CUgraphExec exec_;
  CUstream stream_;
};

class GpuDevice : public runtime::Device {
 public:
  GpuDevice() : c_(context()) {}
  ~GpuDevice() override {
    if (flush_) driver().cuMemFree(flush_);
    if (base_) driver().cuEventDestroy(base_);
    if (now_) driver().cuEventDestroy(now_);
  }
  std::string name() const override { return "cuda"; }
  std::string id() const override { return c_.id; }
  bool host_memory() const override { return false; }
  void* alloc(int64_t bytes) override {
    CUdeviceptr p = 0;
    CUresult rc = driver().cuMemAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 256)));
    if (rc != CUDA_SUCCESS) fail_io("GPU out of memory: {} bytes (cuMemAlloc error {})", bytes, static_cast<int>(rc));
    return reinterpret_cast<void*>(p);
  }
  void free(void* p) override {
    if (p) driver().cuMemFree(dptr(p));
  }
  void upload(void* dst, const void* src, int64_t bytes) override {
    if (bytes > 0) KORCH_CU(cuMemcpyHtoDAsync, dptr(dst), src, static_cast<size_t>(bytes), c_.stream);
  }
  void download(void* dst, const void* src, int64_t bytes) override {
    if (bytes > 0) KORCH_CU(cuMemcpyDtoHAsync, dst, dptr(src), static_cast<size_t>(bytes), c_.stream);
  }
  void synchronize() override { KORCH_CU(cuStreamSynchronize, c_.stream); }
  bool uses_module(const nlohmann::json& recipe) const override { return CudaKernelRecipe::has_launches(recipe); }
  std::shared_ptr<runtime::KernelModule> load_module(const std::string& artifact_dir) override {
    const std::string path = (std::filesystem::path(artifact_dir) / "kernels" / "kernels.ptx").string();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail_io("{} is missing: the artifact has no PTX for the GPU", path);
    return std::make_shared<GpuModule>(read_file_bytes(path), path);
  }
  std::unique_ptr<runtime::DeviceKernel> make_kernel(const nlohmann::json& recipe,
                                                     std::shared_ptr<runtime::KernelModule> module) override {
    return std::make_unique<GpuKernel>(CudaKernelRecipe::from_json(recipe), std::move(module));
  }
  std::unique_ptr<runtime::Replay> capture(const std::function<void()>& issue, std::string* why) override {
    synchronize();
    CUgraph graph = nullptr;
    // Relaxed: libraries may call APIs that global mode forbids while a stream records.
    KORCH_CU(cuStreamBeginCapture, c_.stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    try {
      issue();
    } catch (const Error& e) {
      driver().cuStreamEndCapture(c_.stream, &graph);
      if (graph) driver().cuGraphDestroy(graph);
      if (why) *why = fmt::format("recording the kernels failed: {}", e.what());
      return nullptr;
    }
    CUresult rc = driver().cuStreamEndCapture(c_.stream, &graph);
    CUgraphExec exec = nullptr;
    if (rc == CUDA_SUCCESS) rc = driver().cuGraphInstantiate(&exec, graph, 0);
    if (rc != CUDA_SUCCESS) {
      if (graph) driver().cuGraphDestroy(graph);
      const char* name = nullptr;
      driver().cuGetErrorName(rc, &name);
      if (why) *why = fmt::format("the driver could not record the kernels as a CUDA graph ({})", name ? name : "?");
      return nullptr;
    }
    return std::make_unique<GraphReplay>(graph, exec, c_.stream);
  }
  // The GPU's own timeline: an event recorded after everything issued, its time since a base
  // event (the driver's resolution, about 0.5 us; no host scheduling between the two). The base
  // moves forward every second, so the float milliseconds keep their resolution.
  double synchronized_seconds() override {
    if (!base_) {
      KORCH_CU(cuEventCreate, &base_, CU_EVENT_DEFAULT);
      KORCH_CU(cuEventCreate, &now_, CU_EVENT_DEFAULT);
      KORCH_CU(cuEventRecord, base_, c_.stream);
      KORCH_CU(cuEventSynchronize, base_);
    }
    KORCH_CU(cuEventRecord, now_, c_.stream);
    KORCH_CU(cuEventSynchronize, now_);
    float ms = 0;
    KORCH_CU(cuEventElapsedTime, &ms, base_, now_);
    const double t = base_seconds_ + ms * 1e-3;
    if (ms > 1000) {
      std::swap(base_, now_);
      base_seconds_ = t;
    }
    return t;
  }
  // Writes a buffer twice the L2's size: whatever a kernel left in the L2 is evicted.
  void flush_caches() override {
    const size_t bytes = static_cast<size_t>(std::max(c_.l2_bytes, 1 << 20)) * 2;
    if (!flush_) KORCH_CU(cuMemAlloc, &flush_, bytes);
    KORCH_CU(cuMemsetD8Async, flush_, static_cast<unsigned char>(++flush_value_), bytes, c_.stream);
  }

 private:
  Context& c_;
  CUdeviceptr flush_ = 0;
  unsigned flush_value_ = 0;
  CUevent base_ = nullptr, now_ = nullptr;
  double base_seconds_ = 0;
};

}  // namespace

std::unique_ptr<runtime::Device> make_gpu_device() { return std::make_unique<GpuDevice>(); }

std::shared_ptr<runtime::KernelModule> gpu_module(const std::string& ptx, const std::string& where) {
  return std::make_shared<GpuModule>(ptx, where);
}

}  // namespace korch::cuda

#else  // no CUDA headers at build time

namespace korch::cuda {

std::unique_ptr<runtime::Device> make_gpu_device() {
  fail_unsupported("this korch was built without the CUDA toolkit's headers, so it has no CUDA runtime (rebuild "
                   "with /usr/local/cuda/include present, or run with --emulate)");
}

std::shared_ptr<runtime::KernelModule> gpu_module(const std::string&, const std::string&) {
  fail_unsupported("this korch was built without the CUDA toolkit's headers, so it has no CUDA runtime");
}

}  // namespace korch::cuda

#endif
