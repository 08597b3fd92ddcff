// oneDNN 2.6 MatMul with and without a fused bias + GELU (erf) epilogue: the MLP first layers of
// convnext_tiny (stages 1-4) and swin_t, batch 1. Weights packed (format any), activations
// row-major, both N(0, 1) (weights x 0.5: outputs spread about +-10, where gelu_erf's exp(-x^2)
// underflows to denormals). Median of 60 runs after 10; two passes with IEEE denormals (as korch
// measures a kernel alone), two with FTZ+DAZ in every thread (as a CPU artifact runs); 2 threads.
// Question it answers: what the gelu_erf post-op adds to the MatMul, against the separate bias and
// GELU loop kernels korch's plans for convnext_tiny and swin_t run (bench/results/onednn_matmul_gelu.md).
//
//   g++ -O3 -march=native -fopenmp -std=c++17 bench/onednn_matmul_gelu.cc -ldnnl -o /tmp/matmul_gelu
//   OMP_NUM_THREADS=2 /tmp/matmul_gelu
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include <pmmintrin.h>
#include <xmmintrin.h>

namespace {

using namespace dnnl;
using tag = memory::format_tag;

struct Shape {
  const char* name;
  int m, k, n;
};

template <typename F>
double median_us(F&& f) {
  std::vector<double> times;
  for (int i = 0; i < 70; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    if (i >= 10)
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

struct Mm {
  matmul prim;
  memory a, w, bias, c;
};

Mm make(engine& eng, const Shape& s, bool fused) {
  const auto f32 = memory::data_type::f32;
  const memory::desc a({s.m, s.k}, f32, tag::ab), w({s.k, s.n}, f32, tag::any), c({s.m, s.n}, f32, tag::ab);
  const memory::desc b({1, s.n}, f32, tag::ab);
  primitive_attr attr;
  if (fused) {
    post_ops po;
    po.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0.f, 0.f);
    attr.set_post_ops(po);
  }
  auto d = fused ? matmul::desc(a, w, b, c) : matmul::desc(a, w, c);
  matmul::primitive_desc pd(d, attr, eng);
  Mm m{matmul(pd), memory(pd.src_desc(), eng), memory(pd.weights_desc(), eng), memory(b, eng),
       memory(pd.dst_desc(), eng)};
  std::mt19937 rng(0);
  std::normal_distribution<float> nd(0.f, 1.f);
  float* ap = static_cast<float*>(m.a.get_data_handle());
  for (int i = 0; i < s.m * s.k; ++i) ap[i] = nd(rng);
  float* wp = static_cast<float*>(m.w.get_data_handle());
  for (size_t i = 0; i < pd.weights_desc().get_size() / 4; ++i) wp[i] = nd(rng) * 0.5f;
  float* bp = static_cast<float*>(m.bias.get_data_handle());
  std::fill(bp, bp + s.n, 0.1f);
  std::printf("  %s: %s\n", fused ? "fused" : "plain", pd.impl_info_str());
  return m;
}

}  // namespace

int main() {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  const Shape shapes[] = {{"convnext stage 1: 3136x96 x 96x384", 3136, 96, 384},
                          {"convnext stage 2: 784x192 x 192x768", 784, 192, 768},
                          {"convnext stage 3: 196x384 x 384x1536", 196, 384, 1536},
                          {"convnext stage 4: 49x768 x 768x3072", 49, 768, 3072},
                          {"swin stage 1: 3136x96 x 96x384", 3136, 96, 384},
                          {"swin stage 3: 196x384 x 384x1536", 196, 384, 1536}};
  for (const Shape& s : shapes) {
    std::printf("%s\n", s.name);
    Mm plain = make(eng, s, false), fused = make(eng, s, true);
    auto run_plain = [&] {
      plain.prim.execute(st, {{DNNL_ARG_SRC, plain.a}, {DNNL_ARG_WEIGHTS, plain.w}, {DNNL_ARG_DST, plain.c}});
      st.wait();
    };
    auto run_fused = [&] {
      fused.prim.execute(st, {{DNNL_ARG_SRC, fused.a}, {DNNL_ARG_WEIGHTS, fused.w}, {DNNL_ARG_BIAS, fused.bias},
                              {DNNL_ARG_DST, fused.c}});
      st.wait();
    };
    for (int pass = 0; pass < 4; ++pass) {
      const bool ftz = pass >= 2;
      // Every thread of the team oneDNN runs on, the calling one among them.
#pragma omp parallel
      {
        _MM_SET_FLUSH_ZERO_MODE(ftz ? _MM_FLUSH_ZERO_ON : _MM_FLUSH_ZERO_OFF);
        _MM_SET_DENORMALS_ZERO_MODE(ftz ? _MM_DENORMALS_ZERO_ON : _MM_DENORMALS_ZERO_OFF);
      }
      std::printf("  %s", ftz ? "FTZ+DAZ: " : "IEEE:    ");
      const double p = median_us(run_plain), f = median_us(run_fused);
      std::printf("  matmul %.1f us, with bias + gelu_erf fused %.1f us (+%.1f)\n", p, f, f - p);
    }
  }
}
