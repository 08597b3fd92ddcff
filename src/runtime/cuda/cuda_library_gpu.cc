// make_library_call(): cuBLASLt and cuDNN on the GPU (cuda_library.h). Loaded with dlopen at run
// time; signatures from the toolkit's headers (KORCH_HAVE_CUDA_HEADERS).
#include "runtime/cuda/cuda_library.h"

#include <fmt/format.h>

#include "support/error.h"

#if KORCH_HAVE_CUDA_HEADERS

#include <cublasLt.h>
#include <cudnn.h>
#include <dlfcn.h>

#include "runtime/cuda/cuda_api.h"
#include "support/shared_library.h"

// cuDNN 9 marks its legacy convolution API deprecated; it is the one with Find*Ex measurement.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace korch::cuda {

namespace {

#define KORCH_CUBLASLT_ENTRY_POINTS(X)                                                                  \
  X(cublasLtCreate) X(cublasLtGetVersion) X(cublasLtMatmulDescCreate) X(cublasLtMatmulDescDestroy)     \
  X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) X(cublasLtMatrixLayoutDestroy)       \
  X(cublasLtMatrixLayoutSetAttribute) X(cublasLtMatmulPreferenceCreate)                                \
  X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)                           \
  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

#define KORCH_CUDNN_ENTRY_POINTS(X)                                                                      \
  X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnSetStream)                            \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensorNdDescriptor) X(cudnnDestroyTensorDescriptor)           \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilterNdDescriptor) X(cudnnDestroyFilterDescriptor)           \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolutionNdDescriptor) X(cudnnSetConvolutionGroupCount) \
  X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)                                   \
  X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnFindConvolutionBackwardDataAlgorithmEx)              \
  X(cudnnConvolutionForward) X(cudnnConvolutionBackwardData) X(cudnnConvolutionBiasActivationForward)       \
  X(cudnnCreateActivationDescriptor) X(cudnnSetActivationDescriptor) X(cudnnDestroyActivationDescriptor)

#define KORCH_MEMBER(name) decltype(&::name) name = nullptr;
#define KORCH_RESOLVE(name)                                                   \
  name = reinterpret_cast<decltype(&::name)>(dlsym(h, KORCH_STR(name)));      \
  if (!name) { why = fmt::format("{} lacks {}", lib_name, KORCH_STR(name)); return; }

struct Cublaslt {
  KORCH_CUBLASLT_ENTRY_POINTS(KORCH_MEMBER)
  std::string why, lib_name = "cuBLASLt";
  cublasLtHandle_t handle = nullptr;
  Cublaslt() {
    void* h = open_first_library("KORCH_CUBLASLT", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}, &why, true);
    if (!h) return;
    KORCH_CUBLASLT_ENTRY_POINTS(KORCH_RESOLVE)
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) why = "cublasLtCreate failed (no GPU context?)";
  }
};

struct Cudnn {
  KORCH_CUDNN_ENTRY_POINTS(KORCH_MEMBER)
  std::string why, lib_name = "cuDNN";
  cudnnHandle_t handle = nullptr;
  Cudnn() {
    void* h = open_first_library("KORCH_CUDNN", {"libcudnn.so.9", "libcudnn.so"}, &why, true);
    if (!h) return;
    KORCH_CUDNN_ENTRY_POINTS(KORCH_RESOLVE)
    if (cudnnCreate(&handle) != CUDNN_STATUS_SUCCESS) why = "cudnnCreate failed (no GPU context?)";
  }
};

#undef KORCH_MEMBER
#undef KORCH_RESOLVE

// Loaded on first use, after the device made its context current (cuda_gpu.cc).
Cublaslt& cublaslt() {
  static Cublaslt lib;
  if (!lib.why.empty()) fail_unsupported("the CUDA runtime's MatMul needs cuBLASLt: {}", lib.why);
  return lib;
}
Cudnn& cudnn() {
  static Cudnn lib;
  if (!lib.why.empty()) fail_unsupported("the CUDA runtime's convolutions need cuDNN 9: {}", lib.why);
  return lib;
}

void blas_check(cublasStatus_t rc, const char* call) {
  if (rc != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt call failed: {} returned status {}", call, static_cast<int>(rc));
}
void dnn_check(cudnnStatus_t rc, const char* call) {
  if (rc != CUDNN_STATUS_SUCCESS) fail("cuDNN call failed: {} returned {}", call, cudnn().cudnnGetErrorString(rc));
}
#define KORCH_BLAS(fn, ...) blas_check(cublaslt().fn(__VA_ARGS__), #fn)
#define KORCH_DNN(fn, ...) dnn_check(cudnn().fn(__VA_ARGS__), #fn)

// Device memory owned by one call (workspaces).
struct DeviceBuffer {
  CUdeviceptr p = 0;
  size_t bytes = 0;
  void resize(size_t n) {
    if (n <= bytes) return;
    release();
    KORCH_CU(cuMemAlloc, &p, n);
    bytes = n;
  }
  void release() {
    if (p) driver().cuMemFree(p);
    p = 0;
    bytes = 0;
  }
  ~DeviceBuffer() { release(); }
  void* ptr() const { return reinterpret_cast<void*>(p); }
};

// Seconds `fn` takes on `stream`, by events around `reps` calls.
template <typename F>
double time_on_stream(CUstream stream, int reps, F fn) {
  CUevent a, b;
  KORCH_CU(cuEventCreate, &a, CU_EVENT_DEFAULT);
  KORCH_CU(cuEventCreate, &b, CU_EVENT_DEFAULT);
  KORCH_CU(cuEventRecord, a, stream);
  for (int i = 0; i < reps; ++i) fn();
  KORCH_CU(cuEventRecord, b, stream);
  KORCH_CU(cuEventSynchronize, b);
  float ms = 0;
  KORCH_CU(cuEventElapsedTime, &ms, a, b);
  driver().cuEventDestroy(a);
  driver().cuEventDestroy(b);
  return ms * 1e-3 / reps;
}

constexpr size_t kGemmWorkspace = 32u << 20;

// cuBLASLt's epilogue for a plan's: bias (a vector along the library's rows, i.e. the row-major
// result's columns, shared by every batch) and then ReLU or (tanh) GELU.
cublasLtEpilogue_t gemm_epilogue(const LibraryEpilogue& e) {
  using A = LibraryEpilogue::Act;
  if (e.act == A::kRelu) return e.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
  if (e.act == A::kGeluTanh) return e.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  return e.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

class GemmCall : public LibraryCall {
 public:
  GemmCall(const GemmPlan& g, const LibraryEpilogue& e, CUstream stream) : g_(g), e_(e), stream_(stream) {
    Cublaslt& lt = cublaslt();
    KORCH_BLAS(cublasLtMatmulDescCreate, &op_, CUBLAS_COMPUTE_32F, CUDA_R_32F);  // fp32, no TF32
    const cublasOperation_t ta = g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = g.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
    KORCH_BLAS(cublasLtMatmulDescSetAttribute, op_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    KORCH_BLAS(cublasLtMatmulDescSetAttribute, op_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    const cublasLtEpilogue_t epi = gemm_epilogue(e);
    KORCH_BLAS(cublasLtMatmulDescSetAttribute, op_, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    layout(g.a, &la_);
    layout(g.b, &lb_);
    layout(g.c, &lc_);
    KORCH_BLAS(cublasLtMatmulPreferenceCreate, &pref_);
    const uint64_t ws = kGemmWorkspace;
    KORCH_BLAS(cublasLtMatmulPreferenceSetAttribute, pref_, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    int returned = 0;
    KORCH_BLAS(cublasLtMatmulAlgoGetHeuristic, lt.handle, op_, la_, lb_, lc_, lc_, pref_, kCandidates, heur_, &returned);
    if (returned < 1) fail("cuBLASLt offers no algorithm for a {}x{}x{} fp32 matmul (batch {})", g.m, g.n, g.k, g.batch);
    candidates_ = returned;
    workspace_.resize(kGemmWorkspace);
  }
  ~GemmCall() override {
    Cublaslt& lt = cublaslt();
    lt.cublasLtMatmulPreferenceDestroy(pref_);
    lt.cublasLtMatrixLayoutDestroy(la_);
    lt.cublasLtMatrixLayoutDestroy(lb_);
    lt.cublasLtMatrixLayoutDestroy(lc_);
    lt.cublasLtMatmulDescDestroy(op_);
  }
  void run(void* const* args) override {
    const void* A = args[g_.a.slot];
    const void* B = args[g_.b.slot];
    void* C = args[g_.c.slot];
    if (e_.bias) {  // the pointer is an attribute of the operation, set before each call
      const void* bias = args[e_.bias_slot];
      KORCH_BLAS(cublasLtMatmulDescSetAttribute, op_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
    }
    residual_ = e_.residual ? args[e_.residual_slot] : nullptr;
    if (chosen_ < 0) {  // first run: time each heuristic candidate on these operands
      double best = 0;
      for (int i = 0; i < candidates_; ++i) {
        if (heur_[i].workspaceSize > kGemmWorkspace) continue;
        call(i, A, B, C);  // warm
        const double t = time_on_stream(stream_, 3, [&] { call(i, A, B, C); });
        if (chosen_ < 0 || t < best) {
          chosen_ = i;
          best = t;
        }
      }
      if (chosen_ < 0) fail("cuBLASLt: no algorithm fits the {} MB workspace", kGemmWorkspace >> 20);
    }
    call(chosen_, A, B, C);
  }
  std::string describe() const override {
    return fmt::format("cuBLASLt fp32 {}x{}x{} batch {}{}{}{}, {} of {} heuristic algorithms", g_.m, g_.n, g_.k, g_.batch,
                       g_.a.transposed ? " A^T" : "", g_.b.transposed ? " B^T" : "",
                       e_.empty() ? "" : ", epilogue " + e_.describe(), chosen_ < 0 ? 0 : chosen_ + 1, candidates_);
  }

 private:
  static constexpr int kCandidates = 8;
  void layout(const GemmPlan::Matrix& m, cublasLtMatrixLayout_t* l) {
    KORCH_BLAS(cublasLtMatrixLayoutCreate, l, CUDA_R_32F, static_cast<uint64_t>(m.rows), static_cast<uint64_t>(m.cols), m.ld);
    if (g_.batch > 1) {
      const int32_t count = static_cast<int32_t>(g_.batch);
      const int64_t stride = m.batch_stride;
      KORCH_BLAS(cublasLtMatrixLayoutSetAttribute, *l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      KORCH_BLAS(cublasLtMatrixLayoutSetAttribute, *l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    }
  }
  // D = epilogue(alpha * op(A) op(B) + beta * R): R is the residual (beta 1), else D itself (beta 0).
  void call(int i, const void* A, const void* B, void* C) {
    const float alpha = static_cast<float>(e_.alpha), beta = residual_ ? 1.f : 0.f;
    KORCH_BLAS(cublasLtMatmul, cublaslt().handle, op_, &alpha, A, la_, B, lb_, &beta, residual_ ? residual_ : C, lc_, C,
               lc_, &heur_[i].algo, workspace_.ptr(), heur_[i].workspaceSize, stream_);
  }
  GemmPlan g_;
  LibraryEpilogue e_;
  const void* residual_ = nullptr;
  CUstream stream_;
  cublasLtMatmulDesc_t op_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, lc_ = nullptr;
  cublasLtMatmulPreference_t pref_ = nullptr;
  cublasLtMatmulHeuristicResult_t heur_[kCandidates] = {};
  int candidates_ = 0, chosen_ = -1;
  DeviceBuffer workspace_;
};

constexpr size_t kFindWorkspace = 256u << 20;  // what cuDNN's Find may use while measuring

class ConvCall : public LibraryCall {
 public:
  ConvCall(const ConvPlan& c, const LibraryEpilogue& e, CUstream stream) : c_(c), e_(e), stream_(stream) {
    KORCH_DNN(cudnnCreateTensorDescriptor, &x_);
    KORCH_DNN(cudnnCreateTensorDescriptor, &y_);
    KORCH_DNN(cudnnCreateFilterDescriptor, &w_);
    KORCH_DNN(cudnnCreateConvolutionDescriptor, &conv_);
    tensor(x_, c.x);
    tensor(y_, c.y);
    KORCH_DNN(cudnnSetFilterNdDescriptor, w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(c.w.size()), c.w.data());
    KORCH_DNN(cudnnSetConvolutionNdDescriptor, conv_, static_cast<int>(c.pads.size()), c.pads.data(), c.strides.data(),
              c.dilations.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
    KORCH_DNN(cudnnSetConvolutionGroupCount, conv_, c.groups);
    KORCH_DNN(cudnnSetConvolutionMathType, conv_, CUDNN_FMA_MATH);  // fp32 without TF32
    if (fused()) {
      KORCH_DNN(cudnnCreateTensorDescriptor, &bias_);
      std::vector<int> per_channel(c.y.size(), 1);
      per_channel[1] = c.y[1];
      tensor(bias_, per_channel);
      KORCH_DNN(cudnnCreateActivationDescriptor, &act_);
      KORCH_DNN(cudnnSetActivationDescriptor, act_,
                e.act == LibraryEpilogue::Act::kRelu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
                CUDNN_NOT_PROPAGATE_NAN, 0.0);
      if (!e.bias) {  // the fused call always adds a bias: zeros
        zero_bias_.resize(static_cast<size_t>(c.y[1]) * sizeof(float));
        KORCH_CU(cuMemsetD8Async, zero_bias_.p, 0, zero_bias_.bytes, stream_);
      }
    }
  }
  ~ConvCall() override {
    Cudnn& d = cudnn();
    if (act_) d.cudnnDestroyActivationDescriptor(act_);
    if (bias_) d.cudnnDestroyTensorDescriptor(bias_);
    d.cudnnDestroyConvolutionDescriptor(conv_);
    d.cudnnDestroyFilterDescriptor(w_);
    d.cudnnDestroyTensorDescriptor(y_);
    d.cudnnDestroyTensorDescriptor(x_);
  }
  void run(void* const* args) override {
    Cudnn& d = cudnn();
    KORCH_DNN(cudnnSetStream, d.handle, reinterpret_cast<cudaStream_t>(stream_));
    const void* src = args[c_.src_slot];
    const void* w = args[c_.weights_slot];
    void* dst = args[c_.dst_slot];
    if (!chosen_) choose(src, w, dst, args);
    const float alpha = static_cast<float>(e_.alpha), beta = 0;
    if (fused())
      KORCH_DNN(cudnnConvolutionBiasActivationForward, d.handle, &alpha, x_, src, w_, w, conv_, fwd_algo_, workspace_.ptr(),
                workspace_.bytes, &residual_scale_, y_, residual(args, dst), bias_, bias(args), act_, y_, dst);
    else if (c_.transpose)
      KORCH_DNN(cudnnConvolutionBackwardData, d.handle, &alpha, w_, w, x_, src, conv_, bwd_algo_, workspace_.ptr(),
                workspace_.bytes, &beta, y_, dst);
    else
      KORCH_DNN(cudnnConvolutionForward, d.handle, &alpha, x_, src, w_, w, conv_, fwd_algo_, workspace_.ptr(),
                workspace_.bytes, &beta, y_, dst);
  }
  std::string describe() const override {
    return fmt::format("cuDNN {} algorithm {} ({}), workspace {} bytes{}",
                       c_.transpose ? "backward-data" : fused() ? "fused conv+bias+activation" : "forward",
                       c_.transpose ? static_cast<int>(bwd_algo_) : static_cast<int>(fwd_algo_),
                       chosen_ ? "FMA math, no TF32" : "not chosen yet", workspace_.bytes,
                       e_.empty() ? "" : ", epilogue " + e_.describe());
  }

 private:
  // cudnnConvolutionBiasActivationForward: y = act(alpha1 * conv(x) + alpha2 * z + bias); a
  // scale alone is the plain call's alpha.
  bool fused() const { return e_.bias || e_.residual || e_.act != LibraryEpilogue::Act::kNone; }
  const void* residual(void* const* args, void* dst) const { return e_.residual ? args[e_.residual_slot] : dst; }
  const void* bias(void* const* args) const { return e_.bias ? args[e_.bias_slot] : zero_bias_.ptr(); }
  void tensor(cudnnTensorDescriptor_t t, const std::vector<int>& dims) {
    std::vector<int> st(dims.size(), 1);
    for (size_t i = dims.size(); i-- > 1;) st[i - 1] = st[i] * dims[i];
    KORCH_DNN(cudnnSetTensorNdDescriptor, t, CUDNN_DATA_FLOAT, static_cast<int>(dims.size()), dims.data(), st.data());
  }
  // Find*Ex times every algorithm on these buffers (it writes dst); the fastest one that uses FMA
  // math (no TF32) is kept, with exactly the workspace it needs.
  template <typename Perf>
  const Perf& pick(const Perf* perf, int n) {
    const Perf* best = nullptr;
    for (int i = 0; i < n; ++i)
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {
        best = &perf[i];
        break;  // sorted by time
      }
    if (!best)
      fail("cuDNN measured no fp32 FMA-math algorithm for a {} convolution {} -> {}", c_.transpose ? "transposed" : "forward",
           fmt::join(c_.x, "x"), fmt::join(c_.y, "x"));
    return *best;
  }
  void choose(const void* src, const void* w, void* dst, void* const* args) {
    Cudnn& d = cudnn();
    DeviceBuffer scratch;
    scratch.resize(kFindWorkspace);
    int n = 0;
    size_t workspace = 0;
    if (c_.transpose) {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      KORCH_DNN(cudnnFindConvolutionBackwardDataAlgorithmEx, d.handle, w_, w, x_, src, conv_, y_, dst,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf, scratch.ptr(), scratch.bytes);
      const auto& p = pick(perf, n);
      bwd_algo_ = p.algo;
      workspace = p.memory;
    } else {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      KORCH_DNN(cudnnFindConvolutionForwardAlgorithmEx, d.handle, x_, src, w_, w, conv_, y_, dst,
                CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf, scratch.ptr(), scratch.bytes);
      if (fused()) {
        // Find timed the convolution alone; the fused call takes the fastest of those it accepts
        // (an identity activation only with IMPLICIT_PRECOMP_GEMM).
        const float alpha = static_cast<float>(e_.alpha);
        bool found = false;
        for (int i = 0; i < n && !found; ++i) {
          if (perf[i].status != CUDNN_STATUS_SUCCESS || perf[i].mathType != CUDNN_FMA_MATH) continue;
          found = d.cudnnConvolutionBiasActivationForward(d.handle, &alpha, x_, src, w_, w, conv_, perf[i].algo, scratch.ptr(),
                                                          perf[i].memory, &residual_scale_, y_, residual(args, dst), bias_,
                                                          bias(args), act_, y_, dst) == CUDNN_STATUS_SUCCESS;
          if (found) {
            fwd_algo_ = perf[i].algo;
            workspace = perf[i].memory;
          }
        }
        if (!found)
          fail("cuDNN's fused convolution ({}) accepts none of the fp32 FMA-math algorithms measured for {} -> {}",
               e_.describe(), fmt::join(c_.x, "x"), fmt::join(c_.y, "x"));
      } else {
        const auto& p = pick(perf, n);
        fwd_algo_ = p.algo;
        workspace = p.memory;
      }
    }
    scratch.release();
    if (workspace > 0) workspace_.resize(workspace);
    chosen_ = true;
  }
  ConvPlan c_;
  LibraryEpilogue e_;
  CUstream stream_;
  float residual_scale_ = e_.residual ? 1.f : 0.f;  // alpha2
  cudnnTensorDescriptor_t bias_ = nullptr;
  cudnnActivationDescriptor_t act_ = nullptr;
  DeviceBuffer zero_bias_;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  bool chosen_ = false;
  DeviceBuffer workspace_;
};

}  // namespace

std::unique_ptr<LibraryCall> make_library_call(const LibraryPlan& plan, void* stream) {
  if (!plan.ok()) fail_unsupported("no GPU library call: {}", plan.reason);
  if (plan.gemm) return std::make_unique<GemmCall>(*plan.gemm, plan.epilogue, static_cast<CUstream>(stream));
  return std::make_unique<ConvCall>(*plan.conv, plan.epilogue, static_cast<CUstream>(stream));
}

std::vector<std::string> describe_gpu_libraries() {
  auto line = [](auto version_line) -> std::string {
    try {
      return version_line();
    } catch (const Error& e) {
      return e.what();
    }
  };
  return {line([] { return fmt::format("cuBLASLt {}", cublaslt().cublasLtGetVersion()); }),
          line([] { return fmt::format("cuDNN {}", cudnn().cudnnGetVersion()); })};
}

}  // namespace korch::cuda

#else  // no CUDA headers at build time

namespace korch::cuda {

std::unique_ptr<LibraryCall> make_library_call(const LibraryPlan&, void*) {
  fail_unsupported("this korch was built without the CUDA toolkit's headers: it has no GPU library calls");
}

std::vector<std::string> describe_gpu_libraries() { return {"built without the CUDA toolkit's headers"}; }

}  // namespace korch::cuda

#endif
