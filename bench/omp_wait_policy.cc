// libgomp's wait policy on this VM: 100 back-to-back parallel passes over 1.8 MB (the shape of a
// plan's small kernels, and of the pace probe), schedule(static) against schedule(dynamic), one
// sample every 0.2 s. Question it answers: do OpenMP workers that stop spinning between parallel
// regions cost Korch's fork/join-bound kernels time here? (bench/results/omp_wait_policy.md)
//
//   g++ -O3 -march=native -fopenmp bench/omp_wait_policy.cc -o /tmp/omp_wait_policy
//   OMP_NUM_THREADS=2 /tmp/omp_wait_policy 30                       # libgomp's defaults
//   OMP_NUM_THREADS=2 GOMP_SPINCOUNT=10000000 /tmp/omp_wait_policy 30
//   OMP_NUM_THREADS=2 OMP_WAIT_POLICY=active /tmp/omp_wait_policy 30
//   OMP_NUM_THREADS=2 /tmp/omp_wait_policy 30 0                     # no idle gap between samples
// bench/slow_phase_watch.sh runs it every few seconds, on two threads and on each core alone.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

std::vector<float> a(450000, 1.f), b(450000, 2.f);

template <bool Dynamic>
double passes_ms(int reps) {
  const auto t0 = std::chrono::steady_clock::now();
  const long n = static_cast<long>(a.size());
  for (int r = 0; r < reps; ++r) {
    if (Dynamic) {
#pragma omp parallel for schedule(dynamic, 8192)
      for (long i = 0; i < n; ++i) b[i] = a[i] * 1.0001f + b[i] * 0.5f;
    } else {
#pragma omp parallel for schedule(static)
      for (long i = 0; i < n; ++i) b[i] = a[i] * 1.0001f + b[i] * 0.5f;
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 30;
  const long gap_ms = argc > 2 ? std::atol(argv[2]) : 200;  // idle between samples
  passes_ms<false>(50);
  passes_ms<true>(50);
  std::vector<double> st, dy;
  for (int i = 0; i < samples; ++i) {
    st.push_back(passes_ms<false>(100));
    dy.push_back(passes_ms<true>(100));
    const timespec pause{gap_ms / 1000, (gap_ms % 1000) * 1000000};
    if (gap_ms > 0) nanosleep(&pause, nullptr);
  }
  std::printf("100 passes, ms: static median %.2f (min %.2f), dynamic median %.2f (min %.2f), %d samples\n",
              median(st), *std::min_element(st.begin(), st.end()), median(dy),
              *std::min_element(dy.begin(), dy.end()), samples);
}
