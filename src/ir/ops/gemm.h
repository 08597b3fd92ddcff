// The blocked GEMM kernel the linear family runs on (MatMul, Gemm, Conv, ConvTranspose).
//
// The GEMM is the interpreter's hot spot (convolutions are im2col + GEMM): a BLIS-style
// blocked kernel in plain C++. A is packed into MR-row panels, B into NR-column panels, and an
// MR x NR micro-kernel keeps its accumulators in a local array the compiler maps to vector
// registers. OpenMP parallelises over (batch, row block, column block) tiles. Floating-point
// types accumulate in their own type (fp32 in/out); integer types take a plain loop.
#pragma once

#include <cstdint>

namespace korch::linear_detail {

// C[b] (+)= A[b] * B[b] for b < batch; row-major with leading dimensions. Batch b's operands start
// at a_offsets[b] (or b * a_stride when a_offsets is null), likewise for B and C.
template <typename T>
struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;
  const T* A = nullptr;
  const T* B = nullptr;
  T* C = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // C += A*B instead of C = A*B
  bool serial = false;      // run on the calling thread (caller parallelises)
  int64_t batch = 1;
  const int64_t* a_offsets = nullptr;
  const int64_t* b_offsets = nullptr;
  int64_t a_stride = 0, b_stride = 0, c_stride = 0;
  int64_t a_off(int64_t b) const { return a_offsets ? a_offsets[b] : b * a_stride; }
  int64_t b_off(int64_t b) const { return b_offsets ? b_offsets[b] : b * b_stride; }
  int64_t c_off(int64_t b) const { return b * c_stride; }
};

// Runs the GEMM described by `g`. Instantiated (gemm.cc) for float, double and every integer type.
template <typename T>
void gemm(const GemmArgs<T>& g);

}  // namespace korch::linear_detail
