#include "runtime/cpu/cpu_lstm_batch1.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "support/error.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KORCH_BATCH1_LSTM 1
#endif

namespace korch::cpu {

namespace {

constexpr int64_t kUnits = 16;              // hidden units a block
constexpr int64_t kCols = 4 * kUnits;       // its columns: gates i, f, g, o (in that order) x 16 units
constexpr int kOnnxGate[4] = {0, 2, 3, 1};  // our gate q is ONNX's gate kOnnxGate[q] (i, o, f, c)

// Row `c` (a column of the blocked layout) of an ONNX [4H, K] weight: nullptr for a padding unit.
const float* onnx_row(const float* src, int64_t H, int64_t K, int64_t c) {
  const int64_t u = c / kCols * kUnits + c % kUnits;
  return u < H ? src + (kOnnxGate[c % kCols / kUnits] * H + u) * K : nullptr;
}

// W or R of one direction, blocked: [blocks][K][64].
void block_weights(const float* src, int64_t H, int64_t K, int64_t blocks, float* dst) {
  for (int64_t c = 0; c < blocks * kCols; ++c) {
    const float* row = onnx_row(src, H, K, c);
    for (int64_t k = 0; k < K; ++k) dst[(c / kCols * K + k) * kCols + c % kCols] = row ? row[k] : 0.f;
  }
}

#ifdef KORCH_BATCH1_LSTM

// e^x for x in [-87, 88] (clamped outside): x = n ln2 + r, |r| <= ln2 / 2, e^r by its Taylor
// polynomial of degree 6 (relative error under 2e-7), 2^n from the exponent bits.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.f)), _mm256_set1_ps(88.f));
  const __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 in two parts
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.f / 720);
  for (float c : {1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f}) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// tanh x = 1 - 2 / (e^2x + 1): saturates to +-1 without overflow; near 0 its absolute error is
// about one ulp of 1.
inline __m256 tanh8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.f), _mm256_add_ps(exp8(_mm256_add_ps(x, x)), one)));
}

// out[r][0..64) = bias + x[r] . Wb for R rows of x (I apart): Wb is one block [I][64]. R is a
// template argument so the accumulators stay in registers.
template <int R>
void project_rows(const float* x, int64_t I, const float* wb, const float* bias, float* const* out) {
  for (int64_t q = 0; q < kCols; q += 16) {
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_loadu_ps(bias + q), acc[r][1] = _mm256_loadu_ps(bias + q + 8);
    for (int64_t k = 0; k < I; ++k) {
      const __m256 w0 = _mm256_loadu_ps(wb + k * kCols + q), w1 = _mm256_loadu_ps(wb + k * kCols + q + 8);
      for (int r = 0; r < R; ++r) {
        const __m256 xr = _mm256_broadcast_ss(x + r * I + k);
        acc[r][0] = _mm256_fmadd_ps(xr, w0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(xr, w1, acc[r][1]);
      }
    }
    for (int r = 0; r < R; ++r) {
      _mm256_storeu_ps(out[r] + q, acc[r][0]);
      _mm256_storeu_ps(out[r] + q + 8, acc[r][1]);
    }
  }
}

// The same with AVX-512 where the CPU has it: all 64 columns at once (24 accumulators of the 32
// registers), about 1.3x the AVX2 kernel's rate on Zen 4 (the same FMA width, fewer loads).
template <int R>
__attribute__((target("avx512f,fma"))) void project_rows512(const float* x, int64_t I, const float* wb,
                                                            const float* bias, float* const* out) {
  __m512 acc[R][4];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_loadu_ps(bias + 16 * j);
  for (int64_t k = 0; k < I; ++k) {
    __m512 w[4];
    for (int j = 0; j < 4; ++j) w[j] = _mm512_loadu_ps(wb + k * kCols + 16 * j);
    for (int r = 0; r < R; ++r) {
      const __m512 xr = _mm512_set1_ps(x[r * I + k]);
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_fmadd_ps(xr, w[j], acc[r][j]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) _mm512_storeu_ps(out[r] + 16 * j, acc[r][j]);
}

std::atomic<bool> g_use_avx512{true};

bool avx512_here() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has && g_use_avx512.load(std::memory_order_relaxed);
}

// Rows 0..rows of X W + bias for block `wb`, six rows at a time (AVX2: 12 accumulators, 2 weights
// and a broadcast, 15 of the 16 registers); `wide`: the AVX-512 kernels (avx512_here(), decided
// once a run).
void project(bool wide, const float* x, int64_t rows, int64_t I, const float* wb, const float* bias,
             float* const* out) {
  using Rows = void (*)(const float*, int64_t, const float*, const float*, float* const*);
  static constexpr Rows kAvx2[6] = {project_rows<1>, project_rows<2>, project_rows<3>,
                                    project_rows<4>, project_rows<5>, project_rows<6>};
  static constexpr Rows kAvx512[6] = {project_rows512<1>, project_rows512<2>, project_rows512<3>,
                                      project_rows512<4>, project_rows512<5>, project_rows512<6>};
  for (int64_t t = 0; t < rows; t += 6) {
    const int64_t n = std::min<int64_t>(6, rows - t);
    (wide ? kAvx512 : kAvx2)[n - 1](x + t * I, I, wb, bias, out + t);
  }
}

// One step of one block: gates = xw + h_prev . Rb (K = H), then the cell and hidden state of the
// block's 16 units. pi/pf/po: its peepholes (nullptr: none).
void step_block(const float* xw, const float* h_prev, int64_t H, const float* rb, const float* pi, const float* pf,
                const float* po, float* c, float* h_next) {
  __m256 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = _mm256_loadu_ps(xw + 8 * j);
  for (int64_t k = 0; k < H; ++k) {
    const __m256 hk = _mm256_broadcast_ss(h_prev + k);
    const float* w = rb + k * kCols;
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_fmadd_ps(hk, _mm256_loadu_ps(w + 8 * j), acc[j]);
  }
  for (int m = 0; m < 2; ++m) {  // units 8m..8m+7 of the block
    const __m256 c_old = _mm256_loadu_ps(c + 8 * m);
    __m256 i = acc[m], f = acc[2 + m], g = acc[4 + m], o = acc[6 + m];
    if (pi) {
      i = _mm256_fmadd_ps(_mm256_loadu_ps(pi + 8 * m), c_old, i);
      f = _mm256_fmadd_ps(_mm256_loadu_ps(pf + 8 * m), c_old, f);
    }
    const __m256 c_new = _mm256_fmadd_ps(sigmoid8(f), c_old, _mm256_mul_ps(sigmoid8(i), tanh8(g)));
    if (po) o = _mm256_fmadd_ps(_mm256_loadu_ps(po + 8 * m), c_new, o);
    _mm256_storeu_ps(c + 8 * m, c_new);
    _mm256_storeu_ps(h_next + 8 * m, _mm256_mul_ps(sigmoid8(o), tanh8(c_new)));
  }
}

// step_block with AVX-512: one register a gate for the block's 16 units; exp as exp8.
__attribute__((target("avx512f,fma"))) inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.f)), _mm512_set1_ps(88.f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504f)), _MM_FROUND_TO_NEAREST_INT);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.f / 720);
  for (float c : {1.f / 120, 1.f / 24, 1.f / 6, 0.5f, 1.f, 1.f}) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

__attribute__((target("avx512f,fma"))) inline __m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

__attribute__((target("avx512f,fma"))) inline __m512 tanh16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.f), _mm512_add_ps(exp16(_mm512_add_ps(x, x)), one)));
}

__attribute__((target("avx512f,fma"))) void step_block512(const float* xw, const float* h_prev, int64_t H,
                                                          const float* rb, const float* pi, const float* pf,
                                                          const float* po, float* c, float* h_next) {
  __m512 acc[4];
  for (int j = 0; j < 4; ++j) acc[j] = _mm512_loadu_ps(xw + 16 * j);
  for (int64_t k = 0; k < H; ++k) {
    const __m512 hk = _mm512_set1_ps(h_prev[k]);
    const float* w = rb + k * kCols;
    for (int j = 0; j < 4; ++j) acc[j] = _mm512_fmadd_ps(hk, _mm512_loadu_ps(w + 16 * j), acc[j]);
  }
  const __m512 c_old = _mm512_loadu_ps(c);
  __m512 i = acc[0], f = acc[1], o = acc[3];
  if (pi) {
    i = _mm512_fmadd_ps(_mm512_loadu_ps(pi), c_old, i);
    f = _mm512_fmadd_ps(_mm512_loadu_ps(pf), c_old, f);
  }
  const __m512 c_new = _mm512_fmadd_ps(sigmoid16(f), c_old, _mm512_mul_ps(sigmoid16(i), tanh16(acc[2])));
  if (po) o = _mm512_fmadd_ps(_mm512_loadu_ps(po), c_new, o);
  _mm512_storeu_ps(c, c_new);
  _mm512_storeu_ps(h_next, _mm512_mul_ps(sigmoid16(o), tanh16(c_new)));
}

#endif  // KORCH_BATCH1_LSTM

}  // namespace

void batch1_lstm_allow_avx512(bool allow) {
#ifdef KORCH_BATCH1_LSTM
  g_use_avx512 = allow;
#else
  (void)allow;
#endif
}

bool batch1_lstm_available() {
#ifdef KORCH_BATCH1_LSTM
  return true;
#else
  return false;
#endif
}

Batch1Lstm::Batch1Lstm(int64_t T, int64_t I, int64_t H, int64_t D, bool reverse, bool peephole)
    : T_(T), I_(I), H_(H), D_(D), blocks_((H + kUnits - 1) / kUnits), reverse_(reverse), peephole_(peephole) {
  KORCH_CHECK(batch1_lstm_available(), "the batch-1 LSTM kernel is not in this build (no AVX2/FMA)");
  KORCH_CHECK(T >= 1 && I >= 1 && H >= 1 && (D == 1 || D == 2), "batch-1 LSTM T {} I {} H {} D {}", T, I, H, D);
  const int64_t cols = blocks_ * kCols, units = blocks_ * kUnits;
  w_.resize(static_cast<size_t>(D * cols * I));
  r_.resize(static_cast<size_t>(D * cols * H));
  bias_.resize(static_cast<size_t>(D * cols));
  if (peephole) peep_.resize(static_cast<size_t>(D * 3 * units));
  xw_.resize(static_cast<size_t>(D * T * cols));
  h_.resize(static_cast<size_t>(2 * D * units));
  c_.resize(static_cast<size_t>(D * units));
}

void Batch1Lstm::set_weights(const float* W, const float* R, const float* B, const float* P) {
  const int64_t cols = blocks_ * kCols, units = blocks_ * kUnits, GH = 4 * H_;
  std::fill(bias_.begin(), bias_.end(), 0.f);
  std::fill(peep_.begin(), peep_.end(), 0.f);
  for (int64_t d = 0; d < D_; ++d) {
    block_weights(W + d * GH * I_, H_, I_, blocks_, w_.data() + d * cols * I_);
    block_weights(R + d * GH * H_, H_, H_, blocks_, r_.data() + d * cols * H_);
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t b = c / kCols, q = (c % kCols) / kUnits, u = b * kUnits + c % kUnits;
      if (B && u < H_) {
        const int64_t row = kOnnxGate[q] * H_ + u;
        bias_[static_cast<size_t>(d * cols + c)] = B[d * 2 * GH + row] + B[d * 2 * GH + GH + row];
      }
    }
    if (peephole_ && P)  // ours: i, f, o; ONNX's: i, o, f
      for (int64_t u = 0; u < H_; ++u) {
        float* p = peep_.data() + d * 3 * units;
        p[u] = P[d * 3 * H_ + u];
        p[units + u] = P[d * 3 * H_ + 2 * H_ + u];
        p[2 * units + u] = P[d * 3 * H_ + H_ + u];
      }
  }
}

void Batch1Lstm::run(const float* x, const float* h0, const float* c0, float* y, float* yh, float* yc) {
#ifdef KORCH_BATCH1_LSTM
  const int64_t cols = blocks_ * kCols, units = blocks_ * kUnits, items = D_ * blocks_;
  std::fill(h_.begin(), h_.end(), 0.f);
  std::fill(c_.begin(), c_.end(), 0.f);
  for (int64_t d = 0; d < D_; ++d) {
    if (h0) std::memcpy(h_.data() + d * units, h0 + d * H_, static_cast<size_t>(H_) * sizeof(float));
    if (c0) std::memcpy(c_.data() + d * units, c0 + d * H_, static_cast<size_t>(H_) * sizeof(float));
  }
  const bool wide = avx512_here();
  const int threads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), items));
  // Each thread owns a contiguous range of (direction, block) items for the whole sequence: its
  // part of X W first, then its part of every step, with one barrier a step.
#pragma omp parallel num_threads(threads)
  {
    const int64_t P = omp_get_num_threads(), tid = omp_get_thread_num();
    const int64_t lo = items * tid / P, hi = items * (tid + 1) / P;
    std::vector<float*> rows(static_cast<size_t>(T_));
    for (int64_t it = lo; it < hi; ++it) {
      const int64_t d = it / blocks_, b = it % blocks_;
      for (int64_t t = 0; t < T_; ++t) rows[static_cast<size_t>(t)] = xw_.data() + (t * D_ + d) * cols + b * kCols;
      project(wide, x, T_, I_, w_.data() + (d * blocks_ + b) * I_ * kCols, bias_.data() + d * cols + b * kCols,
              rows.data());
    }
    for (int64_t s = 0; s < T_; ++s) {
      const float* h_prev = h_.data() + (s % 2) * D_ * units;
      float* h_next = h_.data() + ((s + 1) % 2) * D_ * units;
      for (int64_t it = lo; it < hi; ++it) {
        const int64_t d = it / blocks_, b = it % blocks_;
        const bool backwards = D_ == 2 ? d == 1 : reverse_;
        const int64_t t = backwards ? T_ - 1 - s : s;
        const float* pe = peephole_ ? peep_.data() + d * 3 * units + b * kUnits : nullptr;
        float* hb = h_next + d * units + b * kUnits;
        (wide ? step_block512 : step_block)(xw_.data() + (t * D_ + d) * cols + b * kCols, h_prev + d * units, H_,
                                            r_.data() + (d * blocks_ + b) * H_ * kCols, pe, pe ? pe + units : nullptr,
                                            pe ? pe + 2 * units : nullptr, c_.data() + d * units + b * kUnits, hb);
        if (y) {
          const int64_t n = std::min(kUnits, H_ - b * kUnits);
          std::memcpy(y + (t * D_ + d) * H_ + b * kUnits, hb, static_cast<size_t>(n) * sizeof(float));
        }
      }
#pragma omp barrier
    }
  }
  const float* h_last = h_.data() + (T_ % 2) * D_ * units;
  for (int64_t d = 0; d < D_; ++d) {
    if (yh) std::memcpy(yh + d * H_, h_last + d * units, static_cast<size_t>(H_) * sizeof(float));
    if (yc) std::memcpy(yc + d * H_, c_.data() + d * units, static_cast<size_t>(H_) * sizeof(float));
  }
#else
  fail("the batch-1 LSTM kernel is not in this build (no AVX2/FMA)");
#endif
}

}  // namespace korch::cpu
