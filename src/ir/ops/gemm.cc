// The blocked GEMM kernel (see gemm.h).
#include "ir/ops/gemm.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

namespace korch::linear_detail {

namespace {

template <typename T> struct Tile;
template <> struct Tile<float> { static constexpr int MR = 8, NR = 32, KC = 256, MC = 128, NC = 512; };
template <> struct Tile<double> { static constexpr int MR = 8, NR = 16, KC = 256, MC = 96, NC = 256; };

// C[mr x nr] (+)= Ap (kc x MR, k-major) * Bp (kc x NR, k-major).
template <typename T, int MR, int NR>
inline void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, T* __restrict c, int64_t ldc,
                         int mr, int nr, bool overwrite) {
  T acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = T(0);
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; ++k) {
    const T* a = ap + k * MR;
    const T* b = bp + k * NR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T av = a[i];
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) acc[i][j] += av * b[j];
    }
  }
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      if (overwrite)
        for (int j = 0; j < NR; ++j) ci[j] = acc[i][j];
      else
        for (int j = 0; j < NR; ++j) ci[j] += acc[i][j];
    }
  } else {
    for (int i = 0; i < mr; ++i) {
      T* ci = c + i * ldc;
      if (overwrite)
        for (int j = 0; j < nr; ++j) ci[j] = acc[i][j];
      else
        for (int j = 0; j < nr; ++j) ci[j] += acc[i][j];
    }
  }
}

// Packs A[m x k] (row-major, lda) into ceil(m/MR) panels of k x MR, zero-padding rows.
template <typename T, int MR>
void pack_a(int64_t m, int64_t k, const T* a, int64_t lda, T* out) {
  for (int64_t i0 = 0; i0 < m; i0 += MR) {
    int64_t mr = std::min<int64_t>(MR, m - i0);
    for (int64_t p = 0; p < k; ++p) {
      T* o = out + p * MR;
      int64_t i = 0;
      for (; i < mr; ++i) o[i] = a[(i0 + i) * lda + p];
      for (; i < MR; ++i) o[i] = T(0);
    }
    out += k * MR;
  }
}

// Packs B[k x n] (row-major, ldb) into ceil(n/NR) panels of k x NR, zero-padding columns.
template <typename T, int NR>
void pack_b(int64_t k, int64_t n, const T* b, int64_t ldb, T* out) {
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    int64_t nr = std::min<int64_t>(NR, n - j0);
    if (nr == NR) {
      for (int64_t p = 0; p < k; ++p) std::memcpy(out + p * NR, b + p * ldb + j0, sizeof(T) * NR);
    } else {
      for (int64_t p = 0; p < k; ++p) {
        T* o = out + p * NR;
        int64_t j = 0;
        for (; j < nr; ++j) o[j] = b[p * ldb + j0 + j];
        for (; j < NR; ++j) o[j] = T(0);
      }
    }
    out += k * NR;
  }
}

template <typename T>
void gemm_float(const GemmArgs<T>& g) {
  using TL = Tile<T>;
  constexpr int MR = TL::MR, NR = TL::NR;
  const int64_t M = g.M, N = g.N, K = g.K;
  if (M <= 0 || N <= 0 || g.batch <= 0) return;
  if (K <= 0) {
    if (!g.accumulate)
      for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) g.C[g.c_off(b) + i * g.ldc + j] = T(0);
    return;
  }
  const int64_t mt = (M + TL::MC - 1) / TL::MC, nt = (N + TL::NC - 1) / TL::NC;
  const int64_t tasks = g.batch * mt * nt;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) *
                       static_cast<double>(g.batch);
#pragma omp parallel if (!g.serial && tasks > 1 && flops > 2e5)
  {
    std::vector<T> abuf(static_cast<size_t>(TL::MC) * TL::KC), bbuf(static_cast<size_t>(TL::NC) * TL::KC);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / (mt * nt), rem = t % (mt * nt);
      const int64_t i0 = (rem / nt) * TL::MC, j0 = (rem % nt) * TL::NC;
      const int64_t mc = std::min<int64_t>(TL::MC, M - i0), nc = std::min<int64_t>(TL::NC, N - j0);
      const T* A = g.A + g.a_off(b);
      const T* B = g.B + g.b_off(b);
      T* C = g.C + g.c_off(b);
      for (int64_t p0 = 0; p0 < K; p0 += TL::KC) {
        const int64_t kc = std::min<int64_t>(TL::KC, K - p0);
        pack_a<T, MR>(mc, kc, A + i0 * g.lda + p0, g.lda, abuf.data());
        pack_b<T, NR>(kc, nc, B + p0 * g.ldb + j0, g.ldb, bbuf.data());
        const bool overwrite = p0 == 0 && !g.accumulate;
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
          const T* bp = bbuf.data() + (jr / NR) * kc * NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
            micro_kernel<T, MR, NR>(kc, abuf.data() + (ir / MR) * kc * MR, bp, C + (i0 + ir) * g.ldc + j0 + jr, g.ldc,
                                    mr, nr, overwrite);
          }
        }
      }
    }
  }
}

template <typename T>
void gemm_plain(const GemmArgs<T>& g) {
  using Acc = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
#pragma omp parallel for if (!g.serial && g.batch * g.M * g.N * g.K > 100000)
  for (int64_t t = 0; t < g.batch * g.M; ++t) {
    const int64_t b = t / g.M, i = t % g.M;
    const T* A = g.A + g.a_off(b) + i * g.lda;
    const T* B = g.B + g.b_off(b);
    T* C = g.C + g.c_off(b) + i * g.ldc;
    for (int64_t j = 0; j < g.N; ++j) {
      // Unsigned wrap-around arithmetic: well defined, equals two's complement results.
      uint64_t s = g.accumulate ? static_cast<uint64_t>(static_cast<Acc>(C[j])) : 0;
      for (int64_t p = 0; p < g.K; ++p)
        s += static_cast<uint64_t>(static_cast<Acc>(A[p])) * static_cast<uint64_t>(static_cast<Acc>(B[p * g.ldb + j]));
      C[j] = static_cast<T>(s);
    }
  }
}

}  // namespace

template <typename T>
void gemm(const GemmArgs<T>& g) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    gemm_float<T>(g);
  else
    gemm_plain<T>(g);
}

template void gemm<float>(const GemmArgs<float>&);
template void gemm<double>(const GemmArgs<double>&);
template void gemm<int8_t>(const GemmArgs<int8_t>&);
template void gemm<int16_t>(const GemmArgs<int16_t>&);
template void gemm<int32_t>(const GemmArgs<int32_t>&);
template void gemm<int64_t>(const GemmArgs<int64_t>&);
template void gemm<uint8_t>(const GemmArgs<uint8_t>&);
template void gemm<uint16_t>(const GemmArgs<uint16_t>&);
template void gemm<uint32_t>(const GemmArgs<uint32_t>&);
template void gemm<uint64_t>(const GemmArgs<uint64_t>&);

}  // namespace korch::linear_detail
