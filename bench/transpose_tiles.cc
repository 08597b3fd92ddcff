// Tile sizes for transposing copies in generated CPU loop kernels (loop::find_transpose_tile):
// the copies of segformer_b0's decode-head Concat read back channels-last, 3 slices of
// [256 channels, 16384 pixels] into [16384, 1024], as the generated kernel writes them, plain
// (one pixel row at a time) and in rows x cols tiles. Best of 15 repeats, 2 threads.
// Then the order the 64 x 16 tiles are visited in, on segformer_b0's logits ([16384 pixels, 150
// classes] channels-last to NCHW) right after a parallel pass wrote the source, as in a model:
// column blocks first (a 64-class strip walked down all 16384 pixel rows before the next strip) against
// row blocks first (16 source rows read front to back before the next 16). Median of 41.
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

template <int64_t Rows, int64_t Cols, bool RowBlocksFirst = false>
void tiled(const float* __restrict in, float* __restrict out) {
  constexpr int64_t col_blocks = kChannels / Cols, row_blocks = kPixels / Rows;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < row_blocks * col_blocks; ++p) {
    const int64_t i1b = (RowBlocksFirst ? p / row_blocks : p % col_blocks) * Cols;
    const int64_t i0b = (RowBlocksFirst ? p % row_blocks : p / col_blocks) * Rows;
    for (int64_t i0 = i0b; i0 < i0b + Rows; ++i0) {
#pragma omp simd
      for (int64_t i1 = i1b; i1 < i1b + Cols; ++i1) out[kOut * i0 + i1] = in[i0 + kPixels * i1];
    }
  }
}

// Source [R rows][C], contiguous along C; out [C][R]. Tiles of 64 along C x 16 along R.
template <bool RowBlocksFirst>
void logits_to_nchw(const float* __restrict in, float* __restrict out, int64_t R, int64_t C) {
  const int64_t rb = (C + 63) / 64, cb = (R + 15) / 16;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < rb * cb; ++p) {
    const int64_t i0b = (RowBlocksFirst ? p % rb : p / cb) * 64, i1b = (RowBlocksFirst ? p / rb : p % cb) * 16;
    for (int64_t i0 = i0b; i0 < std::min(i0b + 64, C); ++i0) {
#pragma omp simd
      for (int64_t i1 = i1b; i1 < i1b + 16; ++i1) out[R * i0 + i1] = in[i0 + C * i1];
    }
  }
}

template <bool RowBlocksFirst>
double after_producer_ms(float* in, float* out, int64_t R, int64_t C) {
  double t[41];
  for (double& x : t) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < R * C; ++i) in[i] = in[i] * 0.5f + 1.0f;
    const auto t0 = std::chrono::steady_clock::now();
    logits_to_nchw<RowBlocksFirst>(in, out, R, C);
    x = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  std::sort(t, t + 41);
  return t[20];
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
                  {"64 x 16", tiled<64, 16>},   {"64 x 64", tiled<64, 64>}, {"128 x 16", tiled<128, 16>},
                  {"64 x 16, row blocks first", tiled<64, 16, true>}};
  printf("| tile (rows x cols) | ms |\n|---|---|\n");
  for (const Variant& v : variants) printf("| %s | %.2f |\n", v.name, best_ms(v.f, in, out));
  printf("\n| [16384, 150] after a producer, 64 x 16 tiles | ms |\n|---|---|\n");
  for (int r = 0; r < 2; ++r) {
    printf("| column blocks first | %.2f |\n", after_producer_ms<false>(in, out, 16384, 150));
    printf("| row blocks first | %.2f |\n", after_producer_ms<true>(in, out, 16384, 150));
  }
  free(in);
  free(out);
  return 0;
}
