// Linear steps on a GPU: a kernel's "linear" description (codegen/linear_match.h) as one vendor
// library call, cuBLASLt for MatMul/Einsum, cuDNN 9 for Conv/ConvTranspose.
//
// plan_library_call() is pure (no GPU, no library): it turns the description into the exact
// shapes, strides and flags the library is given, with the epilogue it applies (bias, residual,
// ReLU/GELU, a scale), or says why no call serves it. The CUDA
// backend refuses those kernels at emit time, so the emulator and the GPU run the same set.
// make_library_call() builds the call on the GPU (cuda_library_gpu.cc): libraries loaded at run
// time (dlopen: $KORCH_CUBLASLT / libcublasLt.so.13, $KORCH_CUDNN / libcudnn.so.9), so the
// binary starts without them; fp32 with TF32 off (cuBLASLt CUBLAS_COMPUTE_32F, cuDNN
// CUDNN_FMA_MATH), matching the PyTorch peers run with allow_tf32 = False.
// Algorithms are chosen by measurement on the first run, on the real operands: cuBLASLt's
// heuristic candidates timed with events, cuDNN's Find*Ex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace korch::cuda {

// Row-major C[b] = A[b] x B[b] as cuBLASLt (column-major) computes it: C^T = B^T A^T, so the
// library's first operand is B's memory and its second A's. Each matrix is given as the
// column-major rows/cols/ld the library reads, with its operation flag.
struct GemmPlan {
  struct Matrix {
    int64_t rows = 0, cols = 0, ld = 0;  // column-major layout of the memory
    bool transposed = false;             // the library applies op T to it
    int64_t batch_stride = 0;            // elements between batches (0: broadcast)
    int slot = -1;                       // args[] position
  };
  Matrix a, b, c;  // library operands: a = the row-major B operand (weights), b = A (src), c = dst
  int64_t m = 0, n = 0, k = 0;  // the row-major problem: [m,k] x [k,n]
  int64_t batch = 1;
};

// Conv as cuDNN's forward convolution; ConvTranspose as its backward-data convolution (the
// forward conv whose filter is ONNX's [C, M/G, k..] taking Y to X). At least 4-D (1-D convs get a
// unit height).
struct ConvPlan {
  bool transpose = false;
  std::vector<int> x, w, y;  // x = src dims, y = dst dims, w = filter (forward: [O, I/G, k..];
                             // transpose: [C_in, C_out/G, k..])
  std::vector<int> pads, strides, dilations;
  int groups = 1;
  int src_slot = -1, weights_slot = -1, dst_slot = -1;
};

// The part of a kernel's epilogue (post_ops, codegen/linear_match.h) the library applies as it
// writes the product: dst = act(alpha * product + residual + bias), cuBLASLt's epilogue with
// beta * C, cuDNN's fused convolution + bias + activation. Other post-ops are refused.
struct LibraryEpilogue {
  enum class Act { kNone, kRelu, kGeluTanh };  // GELU: cuBLASLt's is the tanh form, matmul only
  double alpha = 1;        // a scale of the product before anything is added (Mul/Div by a constant)
  bool bias = false;       // per output channel: the row-major result's last dim (gemm), dim 1 (conv)
  int bias_slot = -1;      // args[] positions (-1 until the description's slots are filled in)
  int64_t bias_length = 0;
  bool residual = false;   // a full-shape addend: cuBLASLt's C with beta 1, cuDNN's z with alpha2 1
  int residual_slot = -1;
  Act act = Act::kNone;
  bool empty() const { return alpha == 1 && !bias && !residual && act == Act::kNone; }
  std::string describe() const;  // "x0.125 + residual + bias, relu"; "" when empty
};

struct LibraryPlan {
  std::string reason;  // non-empty: no library call serves the description, and why
  std::optional<GemmPlan> gemm;
  std::optional<ConvPlan> conv;
  LibraryEpilogue epilogue;
  bool ok() const { return reason.empty(); }
};

// `desc` with or without its slots filled (unfilled slots stay -1). Never throws for a description
// it cannot serve; throws korch::Error for a malformed one.
LibraryPlan plan_library_call(const nlohmann::json& desc);

// A planned library call on the GPU. run() issues it on the device's stream; the first run
// measures the algorithms and keeps the fastest (not capturable before that run).
class LibraryCall {
 public:
  virtual ~LibraryCall() = default;
  virtual void run(void* const* args) = 0;
  virtual std::string describe() const = 0;  // library, algorithm, workspace
};

// stream: the device's CUstream. Throws korch::Error (kUnsupported) when the library is missing.
std::unique_ptr<LibraryCall> make_library_call(const LibraryPlan& plan, void* stream);

// One line per library: found (its version) or why not (for `korch devices`, gpu_check.sh).
std::vector<std::string> describe_gpu_libraries();

}  // namespace korch::cuda
