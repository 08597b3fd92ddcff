#include "runtime/cpu/cpu_quant_lstm_step.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "ir/ops/quant_lstm.h"
#include "runtime/cpu/cpu_rnn_step.h"
#include "support/error.h"

#ifdef __AVX2__
#include <immintrin.h>
#endif

namespace korch::cpu {

namespace {

using nlohmann::json;

using namespace rnn_slots;
constexpr int64_t kBlock = 64;  // columns one pass sums (8 vectors of 8 int32)

// One direction's W or R for the products: (w[k, n] - zp) as int16, rows in pairs,
// [ceil(K / 2)][cols][2] with cols = 4H rounded up to kBlock (zeros pad an odd K and the columns).
// Exact: the products of two values within [-255, 255] and their pair sums fit int32.
struct PairedMatrix {
  std::vector<int16_t> w;
  int64_t K = 0, G = 0, cols = 0;
  int32_t zp = 0;
  std::vector<float> scale;  // a column's
};

template <typename Q>
void pair_rows(const Q* q, PairedMatrix& m) {
  m.w.assign(static_cast<size_t>((m.K + 1) / 2 * m.cols * 2), 0);
  for (int64_t k = 0; k < m.K; ++k) {
    int16_t* o = m.w.data() + (k / 2) * m.cols * 2 + k % 2;
    for (int64_t j = 0; j < m.G; ++j) o[2 * j] = static_cast<int16_t>(static_cast<int32_t>(q[k * m.G + j]) - m.zp);
  }
}

#ifdef __AVX2__
// sums[0..64) = sum_k (qa[k] - a_zp) * (w[k, j0 + j] - w.zp).
void block_sums(const int32_t* qa, int32_t a_zp, const PairedMatrix& m, int64_t j0, int32_t* sums) {
  __m256i acc[8];
  for (__m256i& v : acc) v = _mm256_setzero_si256();
  for (int64_t p = 0; p < (m.K + 1) / 2; ++p) {
    const int32_t a0 = qa[2 * p] - a_zp, a1 = 2 * p + 1 < m.K ? qa[2 * p + 1] - a_zp : 0;
    const __m256i ab = _mm256_set1_epi32(
        static_cast<int32_t>((static_cast<uint32_t>(a1) << 16) | (static_cast<uint32_t>(a0) & 0xffffu)));
    const int16_t* w = m.w.data() + (p * m.cols + j0) * 2;
    for (int g = 0; g < 8; ++g)
      acc[g] = _mm256_add_epi32(
          acc[g], _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16 * g)), ab));
  }
  for (int g = 0; g < 8; ++g) _mm256_storeu_si256(reinterpret_cast<__m256i*>(sums + 8 * g), acc[g]);
}
#endif

// sums[i * G + n] for rows i < M of qa (K apart): the exact integer products.
void products(const PairedMatrix& m, const int32_t* qa, int32_t a_zp, int64_t M, int32_t* sums) {
#ifdef __AVX2__
  const int64_t blocks = m.cols / kBlock;
#pragma omp parallel for collapse(2) if (!omp_in_parallel() && m.K * m.cols >= 262144)
  for (int64_t i = 0; i < M; ++i)
    for (int64_t b = 0; b < blocks; ++b) {
      int32_t block[kBlock];
      block_sums(qa + i * m.K, a_zp, m, b * kBlock, block);
      const int64_t n = std::min(kBlock, m.G - b * kBlock);
      std::copy_n(block, n, sums + i * m.G + b * kBlock);
    }
#else
  (void)m, (void)qa, (void)a_zp, (void)M, (void)sums;
#endif
}

class QuantLstmStep final : public LinearStep {
 public:
  explicit QuantLstmStep(const json& d);
  void run(void* const* args) override;
  // The widened W and R it reads in place of the int8 inputs (LinearStep::constant_copies).
  std::vector<std::pair<const void*, int64_t>> constant_copies() const override {
    std::vector<std::pair<const void*, int64_t>> copies;
    if (!ready_) return copies;
    for (const std::vector<PairedMatrix>* ms : {&w_, &r_})
      for (const PairedMatrix& m : *ms)
        if (!m.w.empty()) copies.emplace_back(m.w.data(), static_cast<int64_t>(m.w.size() * sizeof(int16_t)));
    return copies;
  }
  std::string implementation() const override {
    return fmt::format("korch DynamicQuantizeLSTM {}x{} ({} direction{}, int16 pair products)", I_, H_, D_,
                       D_ == 1 ? "" : "s");
  }

 private:
  void prepare(void* const* args);

  json desc_;
  int64_t S_, N_, I_, H_, D_;
  bool reverse_;
  std::vector<int> in_, out_;
  std::vector<PairedMatrix> w_, r_;  // per direction
  bool ready_ = false;
  rnn::Activation act_[3] = {{rnn::ActKind::kSigmoid}, {rnn::ActKind::kTanh}, {rnn::ActKind::kTanh}};
};

QuantLstmStep::QuantLstmStep(const json& d) : desc_(d) {
#ifndef __AVX2__
  fail_unsupported("DynamicQuantizeLSTM step: this build has no AVX2");
#endif
  RnnDesc r = read_rnn_desc(d, 12, "DynamicQuantizeLSTM step");
  S_ = r.seq, N_ = r.batch, I_ = r.input, H_ = r.hidden, D_ = r.directions, reverse_ = r.reverse;
  in_ = std::move(r.in);
  out_ = std::move(r.out);
  const int64_t G = 4 * H_;
  for (int64_t k = 0; k < D_; ++k)
    for (auto [list, K, key] :
         {std::tuple<std::vector<PairedMatrix>*, int64_t, const char*>{&w_, I_, "w"}, {&r_, H_, "r"}}) {
      PairedMatrix m;
      m.K = K, m.G = G, m.cols = (G + kBlock - 1) / kBlock * kBlock;
      m.zp = static_cast<int32_t>(d.at(std::string(key) + "_zero_points").at(static_cast<size_t>(k)).get<int64_t>());
      const auto& scales = d.at(std::string(key) + "_scales");
      if (static_cast<int64_t>(scales.size()) != D_ * G)
        fail("DynamicQuantizeLSTM step: {} {}_scales", scales.size(), key);
      for (int64_t c = 0; c < G; ++c) m.scale.push_back(scales.at(static_cast<size_t>(k * G + c)).get<float>());
      list->push_back(std::move(m));
    }
}

void QuantLstmStep::prepare(void* const* args) {
  for (auto [list, slot, key] :
       {std::tuple<std::vector<PairedMatrix>*, int, const char*>{&w_, in_[kW], "w"}, {&r_, in_[kR], "r"}})
    for (int64_t k = 0; k < D_; ++k) {
      PairedMatrix& m = (*list)[static_cast<size_t>(k)];
      const int64_t at = k * m.K * m.G;
      if (desc_.at(std::string(key) + "_signed").get<bool>())
        pair_rows(static_cast<const int8_t*>(args[slot]) + at, m);
      else
        pair_rows(static_cast<const uint8_t*>(args[slot]) + at, m);
    }
  ready_ = true;
}

void QuantLstmStep::run(void* const* args) {
  if (!ready_) prepare(args);  // W and R are constants: widened once
  auto in = [&](int k) { return in_[k] >= 0 ? static_cast<const float*>(args[in_[k]]) : nullptr; };
  auto out = [&](int k) { return out_[k] >= 0 ? static_cast<float*>(args[out_[k]]) : nullptr; };
  const int64_t state = D_ * N_ * H_;
  std::vector<float> h(static_cast<size_t>(state), 0.f), cell(static_cast<size_t>(state), 0.f);
  if (const float* h0 = in(kH0)) std::copy_n(h0, state, h.data());
  if (const float* c0 = in(kC0)) std::copy_n(c0, state, cell.data());
  const float *B = in(kB), *P = in(kP);
  float *Y = out(kY), *Yh = out(kYh), *Yc = out(kYc);
  auto direction = [&](int64_t d) {
    quant_lstm::Direction<float> dir;
    dir.S = S_, dir.N = N_, dir.I = I_, dir.H = H_, dir.d = d, dir.ND = D_;
    dir.reverse = reverse_ || d == 1;
    dir.x = in(kX);
    dir.b = B ? B + d * 8 * H_ : nullptr;
    dir.p = P ? P + d * 3 * H_ : nullptr;
    dir.w_scale = w_[static_cast<size_t>(d)].scale.data();
    dir.r_scale = r_[static_cast<size_t>(d)].scale.data();
    dir.act = act_;
    dir.h = h.data() + d * N_ * H_;
    dir.cell = cell.data() + d * N_ * H_;
    dir.y = Y;
    quant_lstm::run_direction<float>(
        dir, [&](bool recurrent, const int32_t* qa, int32_t a_zp, int64_t M, int32_t* sums) {
          products(recurrent ? r_[static_cast<size_t>(d)] : w_[static_cast<size_t>(d)], qa, a_zp, M, sums);
        });
  };
  for_each_direction(D_, direction);
  if (Yh) std::copy(h.begin(), h.end(), Yh);
  if (Yc) std::copy(cell.begin(), cell.end(), Yc);
}

}  // namespace

std::unique_ptr<LinearStep> create_quant_lstm_step(const nlohmann::json& desc) {
  return std::make_unique<QuantLstmStep>(desc);
}

}  // namespace korch::cpu
