// The generated CPU kernels' SiLU (x * Sigmoid(x)) in three forms, one thread, a loop over floats
// compiled with the flags of a generated kernel library (cpu_compiler.h):
//   gen18: e = exp(-|x|) with k + 32 converted to an integer and a NaN test;
//          s = x >= 0 ? 1 / (1 + e) : e * (1 / (1 + e))
//   gen19: k + 32 read from the bits of c / ln2 + 1.5 * 2^23 + 32 (no conversion; a NaN passes
//          the clamp and stays NaN); s = (x >= 0 ? 1 : e) / (1 + e)
//   gen20: exp(-|x|) from a = |x| with the negation folded into the constants, ln2 in one part,
//          a degree-5 polynomial in Horner form (14 vector operations for the exp, 18 before)
// Prints the median of 200 passes per form (three times), then the largest relative error of
// each against a float64 SiLU over [-87, 87] (where the result is a normal float).
// Question it answers: what each cheaper Sigmoid is worth per element
// (bench/results/silu_and_pools.md, bench/results/sigmoid_gen20.md).
//
//   g++ -std=c++17 -O3 -march=native -mtune=generic -fno-tree-slp-vectorize -fopenmp -fno-math-errno \
//       -fno-trapping-math -ffp-contract=off bench/silu_forms.cc -o /tmp/silu_forms
//   /tmp/silu_forms 200704       # floats per pass; also 1204224
//   /tmp/silu_forms sweep        # gen20's exp(-|x|) on every float in [0, 104] against float64
#include <math.h>
#include <stdint.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

namespace {

inline float exp_nonpos_18(float x) {
  const float c = x >= -104.f ? x : -104.f;
  const float k = (c * 1.44269504088896341f + 12582912.f) - 12582912.f;
  float r = __builtin_fmaf(k, -0.693145751953125f, c);
  r = __builtin_fmaf(k, -1.428606765330187045e-06f, r);
  float p = 1.3981999507e-3f;
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r * r, r) + 1.f;
  const float y =
      __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, p) + ((uint32_t)(int32_t)(k + 32.f) << 23)) * 0x1p-32f;
  return x == x ? y : x;
}

inline float exp_nonpos_19(float x) {
  const float c = x < -104.f ? -104.f : x;
  const float t = __builtin_fmaf(c, 1.44269504088896341f, 12582944.f);
  const float k = t - 12582944.f;
  float r = __builtin_fmaf(k, -0.693145751953125f, c);
  r = __builtin_fmaf(k, -1.428606765330187045e-06f, r);
  float p = 1.3981999507e-3f;
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  p = __builtin_fmaf(p, r * r, r) + 1.f;
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, p) + (__builtin_bit_cast(uint32_t, t) << 23)) *
         0x1p-32f;
}

inline float exp_negabs_20(float v) {
  const float a0 = fabsf(v);
  const float a = a0 > 104.f ? 104.f : a0;
  const float t = __builtin_fmaf(a, -1.44269504088896341f, 12582944.f);
  const float minus_m = t - 12582944.f;
  const float s = __builtin_fmaf(minus_m, 0.693147182464599609375f, a);
  float p = -0x1.0fa834p-7f;
  p = __builtin_fmaf(p, s, 0x1.573a54p-5f);
  p = __builtin_fmaf(p, s, -0x1.555a6ap-3f);
  p = __builtin_fmaf(p, s, 0x1.fffdc5p-2f);
  p = __builtin_fmaf(p, s, -0x1.fffff6p-1f);
  p = __builtin_fmaf(p, s, 1.f);
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, p) + (__builtin_bit_cast(uint32_t, t) << 23)) *
         0x1p-32f;
}

__attribute__((noinline)) void silu_18(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_nonpos_18(-fabsf(v));
    const float r = 1.f / (1.f + e);
    y[i] = v * (v >= 0.f ? r : e * r);
  }
}

__attribute__((noinline)) void silu_19(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_nonpos_19(-fabsf(v));
    y[i] = v * ((v >= 0.f ? 1.f : e) / (1.f + e));
  }
}

__attribute__((noinline)) void silu_20(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float e = exp_negabs_20(v);
    y[i] = v * ((v >= 0.f ? 1.f : e) / (1.f + e));
  }
}

__attribute__((noinline)) void copy(const float* __restrict x, float* __restrict y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
}

}  // namespace

// Every float x in [0, 104]: the largest relative error of exp_negabs_20(x) where exp(-x) is a
// normal float, and below that the largest error in units of the least denormal.
int sweep() {
  double worst = 0, worst_x = 0, worst_denormal = 0;
  for (uint32_t b = 0; b <= 0x42d00000u; ++b) {
    const float x = __builtin_bit_cast(float, b);
    const double want = exp(-static_cast<double>(x)), err = fabs(exp_negabs_20(x) - want);
    if (want >= 0x1p-126) {
      if (err / want > worst) worst = err / want, worst_x = x;
    } else {
      worst_denormal = std::max(worst_denormal, err / 0x1p-149);
    }
  }
  std::printf(
      "exp(-|x|), gen20, every float in [0, 104]: relative error %.3g (at x = %g) on normal results, "
      "%.3g units of the least denormal below\n",
      worst, worst_x, worst_denormal);
  return 0;
}

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "sweep") return sweep();
  const int64_t n = argc > 1 ? atoll(argv[1]) : 200704;
  std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n));
  std::mt19937 gen(1);
  std::normal_distribution<float> dist(0.f, 3.f);
  for (float& v : x) v = dist(gen);
  using Fn = void (*)(const float*, float*, int64_t);
  const Fn fns[] = {silu_18, silu_19, silu_20, copy};
  const char* names[] = {"gen18", "gen19", "gen20", "copy (memory floor)"};
  for (int pass = 0; pass < 3; ++pass) {
    for (int f = 0; f < 4; ++f) {
      std::vector<double> us;
      for (int it = 0; it < 200; ++it) {
        const auto t0 = std::chrono::steady_clock::now();
        fns[f](x.data(), y.data(), n);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
      std::nth_element(us.begin(), us.begin() + 100, us.end());
      std::printf("%s %.1f us  ", names[f], us[100]);
    }
    std::printf("\n");
  }
  double worst[3] = {0, 0, 0};
  for (float v = -87.f; v < 87.f; v += 0.00731f) {
    float out[3];
    silu_18(&v, &out[0], 1);
    silu_19(&v, &out[1], 1);
    silu_20(&v, &out[2], 1);
    const double ref = v / (1.0 + exp(-static_cast<double>(v)));
    for (int f = 0; f < 3; ++f) worst[f] = std::max(worst[f], fabs(out[f] - ref) / fabs(ref));
  }
  std::printf("largest relative error against float64: gen18 %.3g, gen19 %.3g, gen20 %.3g\n", worst[0], worst[1],
              worst[2]);
  return 0;
}
