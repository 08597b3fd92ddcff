// Shared by the rnn family (rnn.cc) and onnxruntime's DynamicQuantizeLSTM (rnn_quant.cc): cell
// kinds, the activation functions ONNX recurrent ops name, and one LSTM step.
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/ops/op_util.h"

namespace korch::rnn {

enum class CellKind { kRnn, kGru, kLstm };

struct CellInfo {
  const char* name;
  int gates;        // rows of W per direction, in units of hidden_size
  int acts;         // activation functions per direction
  int max_inputs;
  int max_outputs;
};

inline CellInfo cell_info(CellKind k) {
  switch (k) {
    case CellKind::kRnn: return {"RNN", 1, 1, 6, 2};
    case CellKind::kGru: return {"GRU", 3, 2, 6, 2};
    case CellKind::kLstm: return {"LSTM", 4, 3, 8, 3};
  }
  return {"?", 1, 1, 0, 0};
}

enum class ActKind { kRelu, kTanh, kSigmoid, kAffine, kLeakyRelu, kThresholdedRelu, kScaledTanh, kHardSigmoid, kElu,
                     kSoftsign, kSoftplus };

struct Activation {
  ActKind kind = ActKind::kTanh;
  float alpha = 0.f;
  float beta = 0.f;
};

struct ActSpec {
  const char* name;
  ActKind kind;
  bool uses_alpha;
  bool uses_beta;
  float default_alpha;
  float default_beta;
};

inline constexpr std::array<ActSpec, 11> kActSpecs{{
    {"relu", ActKind::kRelu, false, false, 0.f, 0.f},
    {"tanh", ActKind::kTanh, false, false, 0.f, 0.f},
    {"sigmoid", ActKind::kSigmoid, false, false, 0.f, 0.f},
    {"affine", ActKind::kAffine, true, true, 1.f, 0.f},
    {"leakyrelu", ActKind::kLeakyRelu, true, false, 0.01f, 0.f},
    {"thresholdedrelu", ActKind::kThresholdedRelu, true, false, 1.f, 0.f},
    {"scaledtanh", ActKind::kScaledTanh, true, true, 1.f, 1.f},
    {"hardsigmoid", ActKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", ActKind::kElu, true, false, 1.f, 0.f},
    {"softsign", ActKind::kSoftsign, false, false, 0.f, 0.f},
    {"softplus", ActKind::kSoftplus, false, false, 0.f, 0.f},
}};

template <typename C>
inline C activate(const Activation& a, C x) {
  const C alpha = static_cast<C>(a.alpha), beta = static_cast<C>(a.beta);
  switch (a.kind) {
    case ActKind::kRelu: return x > C(0) ? x : C(0);
    case ActKind::kTanh: return std::tanh(x);
    case ActKind::kSigmoid: return x >= C(0) ? C(1) / (C(1) + std::exp(-x)) : std::exp(x) / (C(1) + std::exp(x));
    case ActKind::kAffine: return alpha * x + beta;
    case ActKind::kLeakyRelu: return x >= C(0) ? x : alpha * x;
    case ActKind::kThresholdedRelu: return x > alpha ? x : C(0);
    case ActKind::kScaledTanh: return alpha * std::tanh(beta * x);
    case ActKind::kHardSigmoid: return std::min(C(1), std::max(C(0), alpha * x + beta));
    case ActKind::kElu: return x >= C(0) ? x : alpha * (std::exp(x) - C(1));
    case ActKind::kSoftsign: return x / (C(1) + std::fabs(x));
    case ActKind::kSoftplus: return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
  return x;
}

inline std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

inline std::vector<Activation> parse_activations(CellKind kind, const Attributes& attrs, int num_directions) {
  const CellInfo ci = cell_info(kind);
  std::vector<std::string> names;
  if (attrs.has("activations")) names = attrs.get_strings("activations");
  if (names.empty()) {
    switch (kind) {
      case CellKind::kRnn: names = {"Tanh"}; break;
      case CellKind::kGru: names = {"Sigmoid", "Tanh"}; break;
      case CellKind::kLstm: names = {"Sigmoid", "Tanh", "Tanh"}; break;
    }
  }
  const size_t per_dir = static_cast<size_t>(ci.acts);
  const size_t want = per_dir * static_cast<size_t>(num_directions);
  // The RNN schema's own default lists two functions even for one direction; the first is used.
  if (kind == CellKind::kRnn && num_directions == 1 && names.size() == 2) names.resize(1);
  if (names.size() != want && !(names.size() == per_dir && num_directions == 2)) {
    fail("activations has {} entries; expected {} ({} per direction)", names.size(), want, per_dir);
  }
  const std::vector<float> alphas = attrs.get_floats("activation_alpha");
  const std::vector<float> betas = attrs.get_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  for (const std::string& n : names) {
    const std::string ln = lower(n);
    const ActSpec* spec = nullptr;
    for (const ActSpec& s : kActSpecs)
      if (ln == s.name) spec = &s;
    if (!spec) fail_unsupported("activation function '{}' is not supported", n);
    Activation a;
    a.kind = spec->kind;
    a.alpha = spec->default_alpha;
    a.beta = spec->default_beta;
    if (spec->uses_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (spec->uses_beta && bi < betas.size()) a.beta = betas[bi++];
    out.push_back(a);
  }
  // One set given for a bidirectional node: both directions use it.
  if (out.size() == per_dir && num_directions == 2) {
    for (size_t i = 0; i < per_dir; ++i) out.push_back(out[i]);
  }
  return out;
}

// One LSTM step of one batch row: `pre` holds the 4H gate pre-activations (rows i, o, f, c: input
// and recurrent projections with their biases); P (or nullptr) the peepholes i, o, f; `cell` and `h`
// hold Ct-1 and Ht-1 and receive Ct and Ht.
template <typename C>
inline void lstm_step(const C* pre, const C* p, const Activation* act, bool input_forget, bool has_clip, float clip,
                      int64_t H, C* cell, C* h) {
  auto clipped = [&](C v) {
    return has_clip ? std::min(static_cast<C>(clip), std::max(static_cast<C>(-clip), v)) : v;
  };
  for (int64_t j = 0; j < H; ++j) {
    const C cprev = cell[j];
    C gi = pre[j], go = pre[H + j], gf = pre[2 * H + j];
    const C gc = pre[3 * H + j];
    if (p) {
      gi += p[j] * cprev;
      gf += p[2 * H + j] * cprev;
    }
    const C it = activate(act[0], clipped(gi));
    const C ft = input_forget ? C(1) - it : activate(act[0], clipped(gf));
    const C ct = activate(act[1], clipped(gc));
    const C cnew = ft * cprev + it * ct;
    if (p) go += p[H + j] * cnew;
    const C ot = activate(act[0], clipped(go));
    cell[j] = cnew;
    h[j] = ot * activate(act[2], cnew);
  }
}

}  // namespace korch::rnn
