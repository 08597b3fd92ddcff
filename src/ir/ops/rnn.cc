// The rnn family: LSTM, GRU, RNN (one layer each, ONNX opsets 7..22).
//
// Reference semantics, per direction and per batch element (batch elements are independent):
//   RNN : Ht = f(Xt*Wi^T + Ht-1*Ri^T + Wbi + Rbi)
//   GRU : zt = f(Xt*Wz^T + Ht-1*Rz^T + Wbz + Rbz), rt = f(... r ...)
//         ht = g(Xt*Wh^T + (rt (.) Ht-1)*Rh^T + Rbh + Wbh)          (linear_before_reset = 0)
//         ht = g(Xt*Wh^T + rt (.) (Ht-1*Rh^T + Rbh) + Wbh)          (linear_before_reset = 1)
//         Ht = (1 - zt) (.) ht + zt (.) Ht-1
//   LSTM: gates in W/R/B order i, o, f, c; peepholes P in order i, o, f
//         it = f(.. + Pi (.) Ct-1), ft = f(.. + Pf (.) Ct-1) (ft = 1 - it with input_forget),
//         ct = g(..), Ct = ft (.) Ct-1 + it (.) ct, ot = f(.. + Po (.) Ct), Ht = ot (.) h(Ct)
// `clip` bounds every gate pre-activation to [-clip, clip]. With sequence_lens, batch element b runs
// only steps 0..len[b]-1 (the reverse direction runs them backwards from len[b]-1); Y is zero past
// len[b], and Y_h / Y_c hold the state after the last step run (the initial state when len[b] == 0).
// Dot products accumulate in double; everything else is computed in float (f32/f16/bf16) or double.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "ir/ops/rnn_internal.h"

namespace korch {
namespace {

using namespace rnn;

// Everything an RNN node's attributes and input types determine; validated once, used by infer and eval.
struct RnnConfig {
  CellKind kind;
  int num_directions = 1;
  bool reverse_only = false;  // direction == "reverse"
  int64_t hidden = 0;
  int64_t seq = 0, batch = 0, input = 0;
  int layout = 0;
  bool has_clip = false;
  float clip = 0.f;
  bool input_forget = false;
  bool linear_before_reset = false;
  std::vector<Activation> acts;  // cell_info.acts per direction, forward direction first
};

// Validates attributes and input types; `types[i]` is nullptr for omitted inputs.
RnnConfig make_config(CellKind kind, const Node& node, int opset, const std::vector<const TensorType*>& types,
                      int num_outputs) {
  const CellInfo ci = cell_info(kind);
  const Attributes& attrs = node.attrs;
  RnnConfig c;
  c.kind = kind;
  const int n_in = static_cast<int>(types.size());
  if (n_in > ci.max_inputs) fail("{} takes at most {} inputs, got {}", ci.name, ci.max_inputs, n_in);
  if (num_outputs > ci.max_outputs) fail("{} has at most {} outputs, got {}", ci.name, ci.max_outputs, num_outputs);
  auto type_of = [&](int i) -> const TensorType* { return i < n_in ? types[static_cast<size_t>(i)] : nullptr; };
  const char* in_names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (int i = 0; i < 3; ++i)
    if (!type_of(i)) fail("input {} ({}) is required", i, in_names[i]);
  const TensorType& x = *type_of(0);
  const TensorType& w = *type_of(1);
  const TensorType& r = *type_of(2);
  ops::check_float_type(ci.name, x.dtype);

  const std::string dir = attrs.get_string("direction", "forward");
  if (dir == "forward") {
    c.num_directions = 1;
  } else if (dir == "reverse") {
    c.num_directions = 1;
    c.reverse_only = true;
  } else if (dir == "bidirectional") {
    c.num_directions = 2;
  } else {
    fail("direction must be forward, reverse or bidirectional, got '{}'", dir);
  }
  if (opset >= 14) {
    const int64_t layout = attrs.get_int("layout", 0);
    if (layout != 0 && layout != 1) fail("layout must be 0 or 1, got {}", layout);
    c.layout = static_cast<int>(layout);
  }
  if (attrs.has("clip")) {
    c.has_clip = true;
    c.clip = attrs.get_float("clip", 0.f);
    if (!(c.clip > 0.f)) fail("clip must be positive, got {}", c.clip);
  }
  if (kind == CellKind::kLstm) {
    const int64_t v = attrs.get_int("input_forget", 0);
    if (v != 0 && v != 1) fail("input_forget must be 0 or 1, got {}", v);
    c.input_forget = v == 1;
  }
  if (kind == CellKind::kGru) {
    const int64_t v = attrs.get_int("linear_before_reset", 0);
    if (v != 0 && v != 1) fail("linear_before_reset must be 0 or 1, got {}", v);
    c.linear_before_reset = v == 1;
  }

  if (x.rank() != 3) fail("X must have rank 3, got {}", type_str(x));
  if (w.rank() != 3) fail("W must have rank 3, got {}", type_str(w));
  if (r.rank() != 3) fail("R must have rank 3, got {}", type_str(r));
  c.seq = x.shape[c.layout == 0 ? 0 : 1];
  c.batch = x.shape[c.layout == 0 ? 1 : 0];
  c.input = x.shape[2];
  c.hidden = r.shape[2];
  if (attrs.has("hidden_size")) {
    const int64_t hs = attrs.get_int("hidden_size");
    if (hs <= 0) fail("hidden_size must be positive, got {}", hs);
    if (hs != c.hidden) fail("hidden_size is {} but R has shape {}", hs, shape_str(r.shape));
  }
  const int64_t nd = c.num_directions, gh = ci.gates * c.hidden, H = c.hidden;
  auto expect = [&](const TensorType& t, const char* what, const Shape& s) {
    if (t.dtype != x.dtype) fail("{} has element type {} but X has {}", what, dtype_name(t.dtype), dtype_name(x.dtype));
    if (t.shape != s) fail("{} must have shape {}, got {}", what, shape_str(s), shape_str(t.shape));
  };
  expect(w, "W", {nd, gh, c.input});
  expect(r, "R", {nd, gh, H});
  if (const TensorType* b = type_of(3)) expect(*b, "B", {nd, 2 * gh});
  if (const TensorType* sl = type_of(4)) {
    if (sl->dtype != DType::kInt32 && sl->dtype != DType::kInt64)
      fail("sequence_lens must be int32, got {}", dtype_name(sl->dtype));
    if (sl->shape != Shape{c.batch}) fail("sequence_lens must have shape {}, got {}", shape_str({c.batch}), shape_str(sl->shape));
  }
  const Shape state = c.layout == 0 ? Shape{nd, c.batch, H} : Shape{c.batch, nd, H};
  if (const TensorType* h0 = type_of(5)) expect(*h0, "initial_h", state);
  if (const TensorType* c0 = type_of(6)) expect(*c0, "initial_c", state);
  if (const TensorType* p = type_of(7)) expect(*p, "P", {nd, 3 * H});
  c.acts = parse_activations(kind, attrs, c.num_directions);
  return c;
}

std::vector<TensorType> output_types(const RnnConfig& c, DType dt, int num_outputs) {
  const int64_t nd = c.num_directions;
  const Shape y = c.layout == 0 ? Shape{c.seq, nd, c.batch, c.hidden} : Shape{c.batch, c.seq, nd, c.hidden};
  const Shape state = c.layout == 0 ? Shape{nd, c.batch, c.hidden} : Shape{c.batch, nd, c.hidden};
  std::vector<TensorType> out;
  for (int i = 0; i < num_outputs; ++i) out.push_back({dt, i == 0 ? y : state});
  return out;
}

// Reads sequence_lens (or seq for every batch element) and checks the range.
std::vector<int64_t> sequence_lengths(const RnnConfig& c, const Tensor* t) {
  std::vector<int64_t> lens(static_cast<size_t>(c.batch), c.seq);
  if (!t) return lens;
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t v = t->get_as_int(b);
    if (v < 0 || v > c.seq) fail("sequence_lens[{}] = {} is outside [0, {}]", b, v, c.seq);
    lens[static_cast<size_t>(b)] = v;
  }
  return lens;
}

template <typename C, typename T>
std::vector<C> load(const Tensor* t, size_t n) {
  std::vector<C> v(n, C(0));
  if (!t) return v;
  const T* p = t->data<T>();
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) v[i] = static_cast<C>(p[i]);
    else v[i] = static_cast<C>(static_cast<float>(p[i]));
  }
  return v;
}

template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) return static_cast<T>(v);
  else return T(static_cast<float>(v));
}

// acc[g] = bias[g] + sum_k a[k] * M[g, k] for g < rows (M row-major [rows, k_dim]); double accumulation.
template <typename C>
inline void matvec(const C* M, const C* a, int64_t rows, int64_t k_dim, const C* bias, C* acc) {
  for (int64_t g = 0; g < rows; ++g) {
    const C* m = M + g * k_dim;
    double s = 0.0;
    for (int64_t k = 0; k < k_dim; ++k) s += static_cast<double>(a[k]) * static_cast<double>(m[k]);
    acc[g] = static_cast<C>(s) + (bias ? bias[g] : C(0));
  }
}

template <typename T>
std::vector<Tensor> run_rnn(const RnnConfig& c, const OpEvalContext& ctx) {
  using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const CellInfo ci = cell_info(c.kind);
  const int64_t S = c.seq, N = c.batch, I = c.input, H = c.hidden, ND = c.num_directions;
  const int64_t G = ci.gates, GH = G * H;
  auto opt = [&](int i) -> const Tensor* { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  const std::vector<C> X = load<C, T>(opt(0), static_cast<size_t>(S * N * I));
  const std::vector<C> W = load<C, T>(opt(1), static_cast<size_t>(ND * GH * I));
  const std::vector<C> R = load<C, T>(opt(2), static_cast<size_t>(ND * GH * H));
  const std::vector<C> B = load<C, T>(opt(3), static_cast<size_t>(ND * 2 * GH));
  const std::vector<C> H0 = load<C, T>(opt(5), static_cast<size_t>(ND * N * H));
  const std::vector<C> C0 = load<C, T>(c.kind == CellKind::kLstm ? opt(6) : nullptr, static_cast<size_t>(ND * N * H));
  const std::vector<C> P = load<C, T>(c.kind == CellKind::kLstm ? opt(7) : nullptr, static_cast<size_t>(ND * 3 * H));
  const std::vector<int64_t> lens = sequence_lengths(c, opt(4));
  const bool has_b = opt(3) != nullptr, has_p = c.kind == CellKind::kLstm && opt(7) != nullptr;

  const int n_out = ctx.num_outputs();
  std::vector<Tensor> outs;
  for (int i = 0; i < n_out; ++i) outs.emplace_back(ctx.output_type(i));
  const bool want_y = n_out > 0 && ctx.node.outputs[0] != kNoValue;
  T* y = want_y ? outs[0].data<T>() : nullptr;
  T* yh = n_out > 1 && ctx.node.outputs[1] != kNoValue ? outs[1].data<T>() : nullptr;
  T* yc = n_out > 2 && ctx.node.outputs[2] != kNoValue ? outs[2].data<T>() : nullptr;
  // Element offsets (layout-aware) of X[t, b, :], Y[t, d, b, :] and state[d, b, :].
  auto x_off = [&](int64_t t, int64_t b) { return c.layout == 0 ? (t * N + b) * I : (b * S + t) * I; };
  auto y_off = [&](int64_t t, int64_t d, int64_t b) {
    return c.layout == 0 ? ((t * ND + d) * N + b) * H : ((b * S + t) * ND + d) * H;
  };
  auto s_off = [&](int64_t d, int64_t b) { return c.layout == 0 ? (d * N + b) * H : (b * ND + d) * H; };
  // Initial states arrive in the node's layout; H0/C0 are indexed with s_off as well.

  const int64_t work = ND * N;
#pragma omp parallel for if (work > 1 && S * GH * (I + H) > 32768)
  for (int64_t job = 0; job < work; ++job) {
    const int64_t d = job / N, b = job % N;
    const bool reverse = c.reverse_only || d == 1;
    const C* w = W.data() + d * GH * I;
    const C* r = R.data() + d * GH * H;
    const C* wb = has_b ? B.data() + d * 2 * GH : nullptr;
    const C* rb = has_b ? wb + GH : nullptr;
    const C* p = has_p ? P.data() + d * 3 * H : nullptr;
    const Activation* act = c.acts.data() + d * ci.acts;
    std::vector<C> h(H0.begin() + s_off(d, b), H0.begin() + s_off(d, b) + H);
    std::vector<C> cell(C0.begin() + s_off(d, b), C0.begin() + s_off(d, b) + H);
    std::vector<C> xg(static_cast<size_t>(GH)), hg(static_cast<size_t>(GH)), tmp(static_cast<size_t>(H));
    auto clip = [&](C v) {
      return c.has_clip ? std::min(static_cast<C>(c.clip), std::max(static_cast<C>(-c.clip), v)) : v;
    };
    const int64_t len = lens[static_cast<size_t>(b)];
    for (int64_t s = 0; s < len; ++s) {
      const int64_t t = reverse ? len - 1 - s : s;
      matvec(w, X.data() + x_off(t, b), GH, I, wb, xg.data());
      switch (c.kind) {
        case CellKind::kRnn: {
          matvec(r, h.data(), GH, H, rb, hg.data());
          for (int64_t j = 0; j < H; ++j) h[j] = activate(act[0], clip(xg[j] + hg[j]));
          break;
        }
        case CellKind::kGru: {
          // Rows: z [0, H), r [H, 2H), h [2H, 3H).
          matvec(r, h.data(), 2 * H, H, rb, hg.data());
          std::vector<C>& zr = hg;  // z and r gate activations, in place
          for (int64_t j = 0; j < 2 * H; ++j) zr[j] = activate(act[0], clip(xg[j] + hg[j]));
          const C* rh_w = r + 2 * H * H;
          const C* rh_b = rb ? rb + 2 * H : nullptr;
          if (c.linear_before_reset) {
            matvec(rh_w, h.data(), H, H, rh_b, tmp.data());
            for (int64_t j = 0; j < H; ++j) tmp[j] = activate(act[1], clip(xg[2 * H + j] + zr[H + j] * tmp[j]));
          } else {
            std::vector<C>& rhp = cell;  // scratch (GRU has no cell state): rt (.) Ht-1
            for (int64_t j = 0; j < H; ++j) rhp[j] = zr[H + j] * h[j];
            matvec(rh_w, rhp.data(), H, H, rh_b, tmp.data());
            for (int64_t j = 0; j < H; ++j) tmp[j] = activate(act[1], clip(xg[2 * H + j] + tmp[j]));
          }
          for (int64_t j = 0; j < H; ++j) h[j] = (C(1) - zr[j]) * tmp[j] + zr[j] * h[j];
          break;
        }
        case CellKind::kLstm: {
          // Rows: i [0, H), o [H, 2H), f [2H, 3H), c [3H, 4H); P: i, o, f.
          matvec(r, h.data(), GH, H, rb, hg.data());
          for (int64_t j = 0; j < GH; ++j) hg[j] = xg[j] + hg[j];
          lstm_step(hg.data(), p, act, c.input_forget, c.has_clip, c.clip, H, cell.data(), h.data());
          break;
        }
      }
      if (y) {
        T* yp = y + y_off(t, d, b);
        for (int64_t j = 0; j < H; ++j) yp[j] = store<T>(h[j]);
      }
    }
    if (yh) {
      T* o = yh + s_off(d, b);
      for (int64_t j = 0; j < H; ++j) o[j] = store<T>(h[j]);
    }
    if (yc) {
      T* o = yc + s_off(d, b);
      for (int64_t j = 0; j < H; ++j) o[j] = store<T>(cell[j]);
    }
  }
  return outs;
}

void register_cell(OpRegistry& reg, CellKind kind) {
  OpDef def;
  def.op_type = cell_info(kind).name;
  def.infer = [kind](const OpInferContext& ctx) {
    RnnConfig c = make_config(kind, ctx.node, ctx.opset, ctx.input_types, ctx.num_outputs());
    if (const Tensor* sl = ctx.constant(4)) sequence_lengths(c, sl);
    return output_types(c, ctx.input(0).dtype, ctx.num_outputs());
  };
  def.eval = [kind](const OpEvalContext& ctx) {
    std::vector<TensorType> storage;
    RnnConfig c = make_config(kind, ctx.node, ctx.opset, input_types_of(ctx.inputs, storage), ctx.num_outputs());
    return dispatch_dtype<float, double, Float16, BFloat16>(ctx.input(0).dtype(), cell_info(kind).name,
                                                           [&](auto tag) { return run_rnn<decltype(tag)>(c, ctx); });
  };
  reg.add(std::move(def));
}

}  // namespace

void register_rnn_ops(OpRegistry& r) {
  register_cell(r, CellKind::kRnn);
  register_cell(r, CellKind::kGru);
  register_cell(r, CellKind::kLstm);
}

}  // namespace korch
