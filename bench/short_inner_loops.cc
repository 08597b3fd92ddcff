// Short innermost loops in generated CPU loop kernels (cpu_loop_emitter_stage.cc,
// kShortestSimdLoop): an image read channels-last, [N, 3, 224, 224] -> [N, 224, 224, 3], in the
// forms the generator prints. Before: the 3-channel innermost loop as a simd loop, inside the
// parallel loop over the pixels (N = 1) or over batch x pixels flattened (N = 16, a div and a mod
// per pixel). After: the channel loop unrolled; at N = 16 the batch is the parallel loop and the
// pixels the simd loop. Best of 41, 2 threads, three repeats; the generator's flags (an artifact's
// kernels/build.sh).
//
//   g++ -std=c++17 -O3 -march=native -mtune=generic -fno-tree-slp-vectorize -fopenmp -fno-math-errno \
//     -fno-trapping-math -ffp-contract=off bench/short_inner_loops.cc -o /tmp/short_inner_loops
//   OMP_NUM_THREADS=2 /tmp/short_inner_loops
//
// Intel Xeon VM (Sapphire Rapids flags, AVX-512), 2 cores, 2026-12-07:
//   N=1: simd inner 25.8, unrolled inner 8.1, simd outer 8.1 us
//   N=16: simd inner 891.6, unrolled inner 809.6, [N,HW,C] simd HW 347.7 us
//   (repeats: 25.9 / 8.7 / 8.5, 892.9 / 816.2 / 334.3; 27.0 / 8.7 / 8.7, 892.8 / 832.5 / 342.2)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
constexpr int64_t HW = 50176, C = 3;
// N = 1 as printed: loops [HW, C]
void a1(const float* __restrict b0, float* __restrict b1) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < HW; ++i0) {
#pragma omp simd
    for (int64_t i1 = 0; i1 < C; ++i1) b1[3LL * i0 + i1] = b0[i0 + HW * i1];
  }
}
void b1f(const float* __restrict b0, float* __restrict b1) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < HW; ++i0) {
#pragma GCC unroll 3
    for (int64_t i1 = 0; i1 < C; ++i1) b1[3LL * i0 + i1] = b0[i0 + HW * i1];
  }
}
void c1(const float* __restrict b0, float* __restrict b1) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i0 = 0; i0 < HW; ++i0) {
#pragma GCC unroll 3
    for (int64_t i1 = 0; i1 < C; ++i1) b1[3LL * i0 + i1] = b0[i0 + HW * i1];
  }
}
// N = 16 as printed: loops [N*HW, C], p unflattened
constexpr int64_t N = 16;
void a16(const float* __restrict b0, float* __restrict b1) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * HW; ++p) {
    const int64_t i1 = p % HW, i0 = p / HW;
#pragma omp simd
    for (int64_t i2 = 0; i2 < C; ++i2) b1[C * HW * i0 + C * i1 + i2] = b0[C * HW * i0 + i1 + HW * i2];
  }
}
void b16(const float* __restrict b0, float* __restrict b1) {
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < N * HW; ++p) {
    const int64_t i1 = p % HW, i0 = p / HW;
#pragma GCC unroll 3
    for (int64_t i2 = 0; i2 < C; ++i2) b1[C * HW * i0 + C * i1 + i2] = b0[C * HW * i0 + i1 + HW * i2];
  }
}
// loops [N, HW, C] unmerged: parallel over N, simd over HW
void c16(const float* __restrict b0, float* __restrict b1) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < N; ++i0) {
#pragma omp simd
    for (int64_t i1 = 0; i1 < HW; ++i1) {
#pragma GCC unroll 3
      for (int64_t i2 = 0; i2 < C; ++i2) b1[C * HW * i0 + C * i1 + i2] = b0[C * HW * i0 + i1 + HW * i2];
    }
  }
}
template <typename F>
double best(F f, const float* a, float* b) {
  double t = 1e9;
  for (int r = 0; r < 41; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    f(a, b);
    t = std::min(t, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return t * 1e6;
}
int main() {
  float* a = (float*)aligned_alloc(64, N * C * HW * 4);
  float* b = (float*)aligned_alloc(64, N * C * HW * 4);
  float* c = (float*)aligned_alloc(64, N * C * HW * 4);
  for (int64_t i = 0; i < N * C * HW; ++i) a[i] = (i % 1000) * 0.001f;
  for (int k = 0; k < 3; ++k) {
    printf("N=1: simd inner %.1f, unrolled inner %.1f, simd outer %.1f us\n", best(a1, a, b), best(b1f, a, c),
           best(c1, a, c));
    printf("N=16: simd inner %.1f, unrolled inner %.1f, [N,HW,C] simd HW %.1f us\n", best(a16, a, b), best(b16, a, c),
           best(c16, a, c));
  }
}
