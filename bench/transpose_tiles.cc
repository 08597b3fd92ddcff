// Tile sizes for transposing copies in generated CPU loop kernels (loop::find_transpose_tile):
// the copies of segformer_b0's decode-head Concat read back channels-last, 3 slices of
// [256 channels, 16384 pixels] into [16384, 1024], as the generated kernel writes them, plain
// (one pixel row at a time) and in rows x cols tiles. Best of 15 repeats, 2 threads.
//
//   g++ -O3 -march=native -fopenmp bench/transpose_tiles.cc -o /tmp/transpose_tiles
//   OMP_NUM_THREADS=2 /tmp/transpose_tiles
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>

namespace {

constexpr int64_t kPixels = 16384, kChannels = 256, kOut = 1024;

void plain(const float* __restrict in, float* __restrict out) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < kPixels; ++i0) {
#pragma omp simd
    for (int64_t i1 = 0; i1 < kChannels; ++i1) out[kOut * i0 + i1] = in[i0 + kPixels * i1];
  }
}

template <int64_t Rows, int64_t Cols>
void tiled(const float* __restrict in, float* __restrict out) {
  constexpr int64_t col_blocks = kChannels / Cols;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < kPixels / Rows * col_blocks; ++p) {
    const int64_t i1b = p % col_blocks * Cols, i0b = p / col_blocks * Rows;
    for (int64_t i0 = i0b; i0 < i0b + Rows; ++i0) {
#pragma omp simd
      for (int64_t i1 = i1b; i1 < i1b + Cols; ++i1) out[kOut * i0 + i1] = in[i0 + kPixels * i1];
    }
  }
}

using Copy = void (*)(const float*, float*);

double best_ms(Copy f, const float* in, float* out) {
  double best = 1e30;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < 3; ++s) f(in + s * kChannels * kPixels, out + s * kChannels);
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return best;
}

}  // namespace

int main() {
  float* in = static_cast<float*>(aligned_alloc(64, 3 * kChannels * kPixels * sizeof(float)));
  float* out = static_cast<float*>(aligned_alloc(64, kPixels * kOut * sizeof(float)));
  for (int64_t i = 0; i < 3 * kChannels * kPixels; ++i) in[i] = static_cast<float>(i % 1000);
  for (int64_t i = 0; i < kPixels * kOut; ++i) out[i] = 0;
  struct Variant {
    const char* name;
    Copy f;
  } variants[] = {{"plain rows", plain},        {"16 x 8", tiled<16, 8>},   {"16 x 16", tiled<16, 16>},
                  {"32 x 16", tiled<32, 16>},   {"32 x 32", tiled<32, 32>}, {"64 x 8", tiled<64, 8>},
                  {"64 x 16", tiled<64, 16>},   {"64 x 64", tiled<64, 64>}, {"128 x 16", tiled<128, 16>}};
  printf("| tile (rows x cols) | ms |\n|---|---|\n");
  for (const Variant& v : variants) printf("| %s | %.2f |\n", v.name, best_ms(v.f, in, out));
  free(in);
  free(out);
  return 0;
}
