// libmvec's vector expf against the generated kernels' korch_exp (the prelude's general exp,
// src/codegen/cpu/cpu_loop_emitter.cc, generator 23; the copy below is that function as printed),
// one thread, on 460992 floats (swin_t's first attention softmax, [64, 3, 49, 49]) drawn from
// U(-10, 0) with a share of them set to -100 (a masked score minus its row's max), with the
// denormal flags off and then on (FTZ + DAZ, as an artifact runs). Prints the fastest of 50 passes.
// Question it answers: does an exp whose results underflow cost libmvec a scalar fallback
// (bench/results/exp_and_softmax.md, section 4)?
//
//   g++ -std=c++17 -O3 -march=native -mtune=generic -fno-tree-slp-vectorize -fopenmp -fno-math-errno \
//       -fno-trapping-math -ffp-contract=off bench/exp_underflow.cc -o /tmp/exp_underflow -lmvec -lm
//   /tmp/exp_underflow
#include <math.h>
#include <pmmintrin.h>
#include <stdint.h>
#include <xmmintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#pragma omp declare simd notinbranch
extern "C" float expf(float) noexcept;

namespace {

inline float korch_exp(float v) {
  const float x = v < -104.f ? -104.f : (v > 89.f ? 89.f : v);
  const float t = __builtin_fmaf(x, 1.44269504088896341f, 12582912.f);
  const float m = t - 12582912.f;
  const float s = __builtin_fmaf(m, -0.693147182464599609375f, x);
  float p = 0x1.0fa834p-7f;
  p = __builtin_fmaf(p, s, 0x1.573a54p-5f);
  p = __builtin_fmaf(p, s, 0x1.555a6ap-3f);
  p = __builtin_fmaf(p, s, 0x1.fffdc5p-2f);
  p = __builtin_fmaf(p, s, 0x1.fffff6p-1f);
  p = __builtin_fmaf(p, s, 1.f);
  const int32_t mi = (int32_t)(__builtin_bit_cast(uint32_t, t) - 0x4B400000u);
  const int32_t half = mi >> 1;
  const float lo = __builtin_bit_cast(float, (uint32_t)(half + 127) << 23);
  const float hi = __builtin_bit_cast(float, (uint32_t)(mi - half + 127) << 23);
  return p * lo * hi;
}

__attribute__((noinline)) void with_libmvec(const float* __restrict a, float* __restrict b, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) b[i] = expf(a[i]);
}

__attribute__((noinline)) void with_prelude(const float* __restrict a, float* __restrict b, int n) {
#pragma omp simd
  for (int i = 0; i < n; ++i) b[i] = korch_exp(a[i]);
}

double fastest_us(void (*k)(const float*, float*, int), const std::vector<float>& a, std::vector<float>& b) {
  double best = 1e9;
  for (int it = 0; it < 50; ++it) {
    const auto t = std::chrono::steady_clock::now();
    k(a.data(), b.data(), static_cast<int>(a.size()));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
  }
  return best * 1e6;
}

}  // namespace

int main() {
  const int n = 460992;
  std::vector<float> a(n), b(n);
  for (int ftz = 0; ftz < 2; ++ftz) {
    if (ftz) {
      _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
      _MM_SET_DENORMALS_ZERO_MODE(_MM_DENORMALS_ZERO_ON);
    }
    for (double masked : {0.0, 0.01, 0.12, 0.5}) {
      std::mt19937 r(0);
      std::uniform_real_distribution<float> u(-10, 0), c(0, 1);
      for (float& x : a) x = c(r) < masked ? -100.f : u(r);
      std::printf("ftz+daz %s, %4.0f%% at -100: libmvec expf %7.1f us, korch_exp %7.1f us\n", ftz ? "on " : "off",
                  masked * 100, fastest_us(with_libmvec, a, b), fastest_us(with_prelude, a, b));
    }
  }
}
