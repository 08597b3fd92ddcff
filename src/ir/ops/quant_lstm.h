// DynamicQuantizeLSTM's arithmetic apart from its integer products, shared by the reference op
// (ir/ops/rnn_quant.cc) and the CPU backend's step for it (runtime/cpu/cpu_quant_lstm_step.h),
// which computes the products its own way: both run this one compiled function, so given the same
// exact integer sums they give the same bits (a last-bit difference before a step's dynamic
// quantization of Ht-1 can move a rounding and grow from there).
#pragma once

#include <cstdint>
#include <functional>

#include "ir/ops/rnn_internal.h"

namespace korch::quant_lstm {

// sums[m * 4H + n] = sum_k (qa[m * K + k] - a_zp) * (w[k, n] - w_zp) for m < M, exact: for the
// direction's W (recurrent = false, K = input size) or R (recurrent = true, K = hidden size).
using Products = std::function<void(bool recurrent, const int32_t* qa, int32_t a_zp, int64_t M, int32_t* sums)>;

// One direction d of ND. Pointers may be nullptr where the op's input or output is absent.
template <typename C>
struct Direction {
  int64_t S = 0, N = 0, I = 0, H = 0;  // steps, batch, input size, hidden size
  int64_t d = 0, ND = 1;
  bool reverse = false;
  const C* x = nullptr;                  // X [S, N, I]
  const C* b = nullptr;                  // this direction's B [8H]: Wb then Rb
  const C* p = nullptr;                  // this direction's P [3H]
  const C* w_scale = nullptr;            // [4H], a column's scale
  const C* r_scale = nullptr;            // [4H]
  const rnn::Activation* act = nullptr;  // f, g, h
  bool input_forget = false, has_clip = false;
  float clip = 0.f;
  C* h = nullptr;     // [N, H]: Ht-1 of the first step in, the last Ht out
  C* cell = nullptr;  // [N, H]: likewise C
  C* y = nullptr;     // Y [S, ND, N, H]: this direction's rows
};

// The direction's steps as onnxruntime computes them (rnn_quant.cc's header): X quantized whole,
// its projection for every step at once, then per step and batch row Ht-1 quantized, the
// recurrent projection, the biases, the LSTM cell.
template <typename C>
void run_direction(const Direction<C>& dir, const Products& products);

extern template void run_direction<float>(const Direction<float>&, const Products&);
extern template void run_direction<double>(const Direction<double>&, const Products&);

}  // namespace korch::quant_lstm
