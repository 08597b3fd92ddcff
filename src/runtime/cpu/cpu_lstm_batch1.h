// Batch1Lstm: an ONNX LSTM on one sequence (batch 1), for the RNN step (cpu_rnn_step.cc).
//
// At batch 1 each time step is a GEMV over the recurrent weights R (4H x H), which do not fit in
// the core's L2 for the hidden sizes of real models (H = 512: 4 MB a direction), so a step's
// speed is the rate R streams from the last-level cache. oneDNN 2.6's RNN primitive reads it at
// about a third of that rate (ddddocr's bidirectional H = 512 LSTM: 2.2 ms for 20 steps alone,
// against 0.86 ms for the same 40 GEMVs streamed by an AVX-512 loop). So R (and W) are kept in a
// gate-interleaved block layout: block b holds hidden units 16b..16b+15 of all four gates (64
// columns, k-major), which makes one block a self-contained unit of work: its GEMV, the gate
// activations, and the cell and hidden state of its 16 units. The input projection X W for all
// steps is computed first, six steps at a time, by the thread that owns the block; then the steps
// run with the blocks of every direction shared among the threads and one barrier a step.
// AVX2 + FMA code, and AVX-512 for both loops where the CPU has it (chosen at run time): on Zen 4
// the ddddocr LSTM alone takes 1.4 ms with AVX-512, 1.8 ms with AVX2.
//
// ONNX semantics: gates i, o, f, c in W, R, B; default activations (sigmoid, tanh, tanh); optional
// peepholes P (i, o, f); no clip, no input_forget, full sequence lengths (the caller checks).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace korch::cpu {

// Whether this build has the kernel (AVX2 and FMA at compile time).
bool batch1_lstm_available();
// Whether the kernel may use AVX-512 where the CPU has it (default yes); tests turn it off to
// check the AVX2 path on such a CPU.
void batch1_lstm_allow_avx512(bool allow);

class Batch1Lstm {
 public:
  // T steps, input size I, hidden size H, D = 1 or 2 directions (D = 1 with `reverse` runs
  // backwards); `peephole`: P is given.
  Batch1Lstm(int64_t T, int64_t I, int64_t H, int64_t D, bool reverse, bool peephole);
  // The ONNX weights: W [D, 4H, I], R [D, 4H, H], B [D, 8H] (nullptr: zero), P [D, 3H].
  void set_weights(const float* W, const float* R, const float* B, const float* P);
  // x [T, I]; h0, c0 [D, H] (nullptr: zero); writes y [T, D, H], yh and yc [D, H] (each may be
  // nullptr). With batch 1, ONNX's layouts 0 and 1 are these same arrays.
  void run(const float* x, const float* h0, const float* c0, float* y, float* yh, float* yc);
  // Its blocked copies of W, R, the bias and the peepholes (LinearStep::constant_copies).
  std::vector<std::pair<const void*, int64_t>> constant_copies() const {
    std::vector<std::pair<const void*, int64_t>> copies;
    for (const std::vector<float>* v : {&w_, &r_, &bias_, &peep_})
      if (!v->empty()) copies.emplace_back(v->data(), static_cast<int64_t>(v->size() * sizeof(float)));
    return copies;
  }

 private:
  int64_t T_, I_, H_, D_, blocks_;
  bool reverse_, peephole_;
  // Per direction: W and R blocked ([blocks][I or H][64]), bias in the blocks' column order,
  // peepholes [3][blocks * 16] (i, f, o).
  std::vector<float> w_, r_, bias_, peep_;
  std::vector<float> xw_;     // [T][D][blocks * 64]: X W + bias
  std::vector<float> h_, c_;  // [2][D][blocks * 16] (h double-buffered), [D][blocks * 16]
};

}  // namespace korch::cpu
