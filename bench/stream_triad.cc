// Memory bandwidth now: a triad over three 32 MB arrays (96 MB, past this VM's 32 MB L3), on
// OMP_NUM_THREADS threads, GB/s (best of three passes after one). Used beside `korch bench` to ask
// whether this VM's slow state is a neighbour taking memory bandwidth (bench/results/omp_wait_policy.md).
//
//   g++ -O3 -march=native -fopenmp bench/stream_triad.cc -o /tmp/stream_triad
//   OMP_NUM_THREADS=2 /tmp/stream_triad
#include <omp.h>
#include <chrono>
#include <cstdio>
#include <vector>
int main() {
  const size_t n = 8 << 20;  // 32 MB per array
  std::vector<float> a(n, 1.f), b(n, 2.f), c(n, 0.f);
  double best = 1e9;
  for (int r = 0; r < 4; ++r) {
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i) c[i] = a[i] + 0.5f * b[i];
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0 && s < best) best = s;
  }
  std::printf("%.1f\n", 3.0 * n * 4 / best / 1e9);
}
