// DynamicQuantizeLSTM (domain com.microsoft, version 1): the LSTM that onnxruntime's
// quantize_dynamic writes for every ONNX LSTM. Inputs: X, W, R, B, sequence_lens, initial_h,
// initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point; attributes and outputs as LSTM's
// (layout 0 only). W is [num_directions, input_size, 4*hidden_size] and R [num_directions,
// hidden_size, 4*hidden_size], int8 or uint8, columns in gate order i, o, f, c (LSTM's W and R
// transposed); scales and zero points are per direction ([num_directions]) or per column
// ([num_directions, 4*hidden_size], one zero point value per direction).
//
// Semantics, as onnxruntime's CPU kernel computes them (the only definition the op has): per
// direction, the input projection quantizes all of X (in the direction's order) to uint8 with one
// dynamic scale and zero point, and each step quantizes each batch row's Ht-1 the same way, where
//   scale = (max(x, 0) - min(x, 0)) / 255 (1 when both are 0),
//   zp = round_half_even(clamp(-min / scale, 0, 255)),  q = clamp(round_half_even(x / scale) + zp)
// (DynamicQuantizeLinear's rule). A projection is the exact integer sum of (qa - zp_a) * (qw - zp_w),
// times the float product scale_a * scale_w[column]; gate pre-activations are
// (input projection + recurrent projection) + (Wb + Rb), then LSTM's step (rnn_internal.h).
// onnxruntime quantizes Ht-1 in groups of ceil(batch / threads) rows when the batch is over 4 rows or
// 2+ rows with hidden_size <= 256, else the whole batch at once: its result depends on its thread
// count. Korch takes one row at a time (the two agree for batch 1 and whenever onnxruntime has a
// thread per row), so a sequence's result does not depend on its neighbours' hidden states.
// Limits: sequence_lens must be absent or every entry the full sequence length (shorter sequences
// change which rows onnxruntime quantizes together).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ir/ops/quant_lstm.h"
#include "ir/ops/rnn_internal.h"

namespace korch {
namespace {

using namespace rnn;

constexpr const char* kOp = "DynamicQuantizeLSTM";

struct QuantLstmConfig {
  int num_directions = 1;
  bool reverse_only = false;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  bool has_clip = false;
  float clip = 0.f;
  bool input_forget = false;
  bool per_column_w = false, per_column_r = false;
  std::vector<Activation> acts;
};

QuantLstmConfig make_config(const Node& node, const std::vector<const TensorType*>& types, int num_outputs) {
  const Attributes& attrs = node.attrs;
  QuantLstmConfig c;
  const int n_in = static_cast<int>(types.size());
  if (n_in > 12) fail("{} takes at most 12 inputs, got {}", kOp, n_in);
  if (num_outputs > 3) fail("{} has at most 3 outputs, got {}", kOp, num_outputs);
  auto type_of = [&](int i) -> const TensorType* { return i < n_in ? types[static_cast<size_t>(i)] : nullptr; };
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P",
                         "W_scale", "W_zero_point", "R_scale", "R_zero_point"};
  for (int i : {0, 1, 2, 8, 9, 10, 11})
    if (!type_of(i)) fail("input {} ({}) is required", i, names[i]);
  const TensorType& x = *type_of(0);
  ops::check_float_type(kOp, x.dtype);
  if (x.dtype != DType::kFloat32 && x.dtype != DType::kFloat64)
    fail_unsupported("{}: X must be float32, got {}", kOp, dtype_name(x.dtype));
  const std::string dir = attrs.get_string("direction", "forward");
  if (dir == "reverse") c.reverse_only = true;
  else if (dir == "bidirectional") c.num_directions = 2;
  else if (dir != "forward") fail("direction must be forward, reverse or bidirectional, got '{}'", dir);
  if (attrs.get_int("layout", 0) != 0) fail_unsupported("{}: layout 1 is not supported", kOp);
  if (attrs.has("clip")) {
    c.has_clip = true;
    c.clip = attrs.get_float("clip", 0.f);
    if (!(c.clip > 0.f)) fail("clip must be positive, got {}", c.clip);
  }
  const int64_t forget = attrs.get_int("input_forget", 0);
  if (forget != 0 && forget != 1) fail("input_forget must be 0 or 1, got {}", forget);
  c.input_forget = forget == 1;

  const TensorType& w = *type_of(1);
  const TensorType& r = *type_of(2);
  if (x.rank() != 3) fail("X must have rank 3, got {}", type_str(x));
  if (r.rank() != 3) fail("R must have rank 3, got {}", type_str(r));
  c.seq = x.shape[0];
  c.batch = x.shape[1];
  c.input = x.shape[2];
  c.hidden = r.shape[1];
  if (attrs.has("hidden_size") && attrs.get_int("hidden_size") != c.hidden)
    fail("hidden_size is {} but R has shape {}", attrs.get_int("hidden_size"), shape_str(r.shape));
  const int64_t nd = c.num_directions, G = 4 * c.hidden, H = c.hidden;
  auto expect_int8 = [&](const TensorType& t, const char* what, const Shape& s) {
    if (t.dtype != DType::kInt8 && t.dtype != DType::kUInt8)
      fail("{} must be int8 or uint8, got {}", what, dtype_name(t.dtype));
    if (t.shape != s) fail("{} must have shape {}, got {}", what, shape_str(s), shape_str(t.shape));
  };
  expect_int8(w, "W", {nd, c.input, G});
  expect_int8(r, "R", {nd, H, G});
  auto expect_float = [&](const TensorType& t, const char* what, const Shape& s) {
    if (t.dtype != x.dtype) fail("{} has element type {} but X has {}", what, dtype_name(t.dtype), dtype_name(x.dtype));
    if (t.shape != s) fail("{} must have shape {}, got {}", what, shape_str(s), shape_str(t.shape));
  };
  if (const TensorType* b = type_of(3)) expect_float(*b, "B", {nd, 2 * G});
  if (const TensorType* sl = type_of(4)) {
    if (sl->dtype != DType::kInt32) fail("sequence_lens must be int32, got {}", dtype_name(sl->dtype));
    if (sl->shape != Shape{c.batch}) fail("sequence_lens must have shape {}, got {}", shape_str({c.batch}), shape_str(sl->shape));
  }
  if (const TensorType* h0 = type_of(5)) expect_float(*h0, "initial_h", {nd, c.batch, H});
  if (const TensorType* c0 = type_of(6)) expect_float(*c0, "initial_c", {nd, c.batch, H});
  if (const TensorType* p = type_of(7)) expect_float(*p, "P", {nd, 3 * H});
  // Scales and zero points: [nd] (per direction) or [nd, 4H] (per column), alike for each matrix.
  auto quant_params = [&](int scale_i, int zp_i, const TensorType& m, const char* what) {
    const TensorType& s = *type_of(scale_i);
    const TensorType& z = *type_of(zp_i);
    if (s.dtype != x.dtype) fail("{} has element type {} but X has {}", names[scale_i], dtype_name(s.dtype), dtype_name(x.dtype));
    if (z.dtype != m.dtype) fail("{} has element type {} but {} has {}", names[zp_i], dtype_name(z.dtype), what, dtype_name(m.dtype));
    const bool per_column = s.rank() == 2;
    const Shape want = per_column ? Shape{nd, G} : Shape{nd};
    if (s.shape != want) fail("{} must have shape {} or {}, got {}", names[scale_i], shape_str({nd}), shape_str({nd, G}), shape_str(s.shape));
    if (z.shape != s.shape) fail("{} must have the shape of {}, {}, got {}", names[zp_i], names[scale_i], shape_str(s.shape), shape_str(z.shape));
    return per_column;
  };
  c.per_column_w = quant_params(8, 9, w, "W");
  c.per_column_r = quant_params(10, 11, r, "R");
  c.acts = parse_activations(CellKind::kLstm, attrs, c.num_directions);
  return c;
}

// Dynamic uint8 quantization parameters of `n` values (DynamicQuantizeLinear's rule; scale 1 when
// every value is 0).
template <typename C>
void dynamic_params(const C* x, int64_t n, C& scale, int32_t& zp) {
  C lo = C(0), hi = C(0);
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  scale = hi == lo ? C(1) : (hi - lo) / C(255);
  const C z = std::max(C(0), std::min(C(255), C(0) - lo / scale));
  zp = static_cast<int32_t>(std::nearbyint(z));
}

template <typename C>
void quantize(const C* x, int64_t n, C scale, int32_t zp, int32_t* q) {
  for (int64_t i = 0; i < n; ++i) {
    const C v = std::nearbyint(x[i] / scale) + static_cast<C>(zp);
    q[i] = static_cast<int32_t>(std::max(C(0), std::min(C(255), v)));
  }
}

// One direction's quantized matrix, [K, G] row-major as stored (int8 or uint8, read in place: no
// widened copy a run), its zero point, and the scale of each column.
template <typename C>
struct QuantMatrix {
  const int8_t* s8 = nullptr;  // one of the two
  const uint8_t* u8 = nullptr;
  int32_t zp = 0;
  std::vector<C> scale;  // one per column
};

template <typename C>
QuantMatrix<C> load_matrix(const Tensor& m, const Tensor& scale, const Tensor& zp, int64_t d, int64_t K, int64_t G,
                           bool per_column, const char* what) {
  QuantMatrix<C> out;
  const int64_t per_dir = per_column ? G : 1;
  const int64_t z0 = zp.get_as_int(d * per_dir);
  for (int64_t i = 1; i < per_dir; ++i)
    if (zp.get_as_int(d * per_dir + i) != z0)
      fail_unsupported("{}: {} zero point must be one value per direction (onnxruntime requires it)", kOp, what);
  out.zp = static_cast<int32_t>(z0);
  if (m.dtype() == DType::kInt8)
    out.s8 = m.data<int8_t>() + d * K * G;
  else
    out.u8 = m.data<uint8_t>() + d * K * G;
  out.scale.resize(static_cast<size_t>(G));
  for (int64_t n = 0; n < G; ++n) out.scale[static_cast<size_t>(n)] = static_cast<C>(scale.get_as_double(d * per_dir + (per_column ? n : 0)));
  return out;
}

// sum[j] += a * (q[j] - zp) for j < n: products of two values within [-255, 255], exact in int32.
template <typename Q>
void add_scaled_row(int32_t a, const Q* q, int32_t zp, int64_t n, int32_t* sum) {
  for (int64_t j = 0; j < n; ++j) sum[j] += a * (static_cast<int32_t>(q[j]) - zp);
}

// sums[m, n] = sum_k (qa[m, k] - a_zp) * (w[k, n] - w.zp): exact int32 sums, over blocks of
// columns (vectorised along n; in parallel over rows and blocks, also for one row: a step's
// recurrent product is a whole matrix).
template <typename C>
void int_products(const int32_t* qa, int32_t a_zp, int64_t M, int64_t K, int64_t G, const QuantMatrix<C>& w,
                  int32_t* sums) {
  constexpr int64_t kBlock = 256;
  const int64_t blocks = (G + kBlock - 1) / kBlock;
#pragma omp parallel for collapse(2) if (K * G >= 262144)
  for (int64_t m = 0; m < M; ++m)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const int64_t n0 = blk * kBlock, nn = std::min(kBlock, G - n0);
      int32_t* sum = sums + m * G + n0;
      std::fill(sum, sum + nn, 0);
      for (int64_t k = 0; k < K; ++k) {
        const int32_t a = qa[m * K + k] - a_zp;
        if (a == 0) continue;
        if (w.s8)
          add_scaled_row(a, w.s8 + k * G + n0, w.zp, nn, sum);
        else
          add_scaled_row(a, w.u8 + k * G + n0, w.zp, nn, sum);
      }
    }
}

template <typename C>
std::vector<Tensor> run(const QuantLstmConfig& c, const OpEvalContext& ctx) {
  const int64_t S = c.seq, N = c.batch, I = c.input, H = c.hidden, ND = c.num_directions, G = 4 * H;
  auto opt = [&](int i) -> const Tensor* { return ctx.has_input(i) ? &ctx.input(i) : nullptr; };
  if (const Tensor* sl = opt(4))
    for (int64_t b = 0; b < N; ++b)
      if (sl->get_as_int(b) != S)
        fail_unsupported("{}: sequence_lens[{}] = {} is shorter than the sequence ({}); only full-length sequences are supported",
                         kOp, b, sl->get_as_int(b), S);
  auto load = [&](const Tensor* t, int64_t n) {
    std::vector<C> v(static_cast<size_t>(n), C(0));
    if (t) std::copy_n(t->data<C>(), n, v.data());
    return v;
  };
  const std::vector<C> X = load(opt(0), S * N * I);
  const std::vector<C> B = load(opt(3), ND * 2 * G);
  std::vector<C> h = load(opt(5), ND * N * H);     // initial_h in, each direction's last Ht out
  std::vector<C> cell = load(opt(6), ND * N * H);  // likewise initial_c
  const std::vector<C> P = load(opt(7), ND * 3 * H);
  const bool has_p = opt(7) != nullptr;

  const int n_out = ctx.num_outputs();
  std::vector<Tensor> outs;
  for (int i = 0; i < n_out; ++i) outs.emplace_back(ctx.output_type(i));
  auto out_ptr = [&](int i) -> C* {
    return n_out > i && ctx.node.outputs[static_cast<size_t>(i)] != kNoValue ? outs[static_cast<size_t>(i)].data<C>() : nullptr;
  };
  C* y = out_ptr(0);
  C* yh = out_ptr(1);
  C* yc = out_ptr(2);

  // Both directions' matrices first (a zero point this op cannot take is an error before any work).
  std::vector<QuantMatrix<C>> ws, rs;
  for (int64_t d = 0; d < ND; ++d) {
    ws.push_back(load_matrix<C>(ctx.input(1), ctx.input(8), ctx.input(9), d, I, G, c.per_column_w, "W"));
    rs.push_back(load_matrix<C>(ctx.input(2), ctx.input(10), ctx.input(11), d, H, G, c.per_column_r, "R"));
  }
  auto direction = [&](int64_t d) {
    quant_lstm::Direction<C> dir;
    dir.S = S, dir.N = N, dir.I = I, dir.H = H, dir.d = d, dir.ND = ND;
    dir.reverse = c.reverse_only || d == 1;
    dir.x = X.data();
    dir.b = B.data() + d * 2 * G;
    dir.p = has_p ? P.data() + d * 3 * H : nullptr;
    dir.w_scale = ws[static_cast<size_t>(d)].scale.data();
    dir.r_scale = rs[static_cast<size_t>(d)].scale.data();
    dir.act = c.acts.data() + d * 3;
    dir.input_forget = c.input_forget, dir.has_clip = c.has_clip, dir.clip = c.clip;
    dir.h = h.data() + d * N * H;
    dir.cell = cell.data() + d * N * H;
    dir.y = y;
    quant_lstm::run_direction<C>(dir, [&](bool recurrent, const int32_t* qa, int32_t a_zp, int64_t M, int32_t* sums) {
      const QuantMatrix<C>& w = recurrent ? rs[static_cast<size_t>(d)] : ws[static_cast<size_t>(d)];
      int_products(qa, a_zp, M, recurrent ? H : I, G, w, sums);
    });
    if (yh) std::copy_n(h.data() + d * N * H, N * H, yh + d * N * H);
    if (yc) std::copy_n(cell.data() + d * N * H, N * H, yc + d * N * H);
  };
  // The two directions are independent: one thread each when there are two (the products inside
  // then run on that thread), the same numbers as one after the other.
  if (ND == 2 && omp_get_max_threads() >= 2 && !omp_in_parallel()) {
#pragma omp parallel for num_threads(2)
    for (int64_t d = 0; d < 2; ++d) direction(d);
  } else {
    for (int64_t d = 0; d < ND; ++d) direction(d);
  }
  return outs;
}

}  // namespace

namespace quant_lstm {

template <typename C>
void run_direction(const Direction<C>& dir, const Products& products) {
  const int64_t S = dir.S, N = dir.N, I = dir.I, H = dir.H, G = 4 * H;
  std::vector<int32_t> qa(static_cast<size_t>(std::max(S * N * I, N * H)));
  std::vector<int32_t> sums(static_cast<size_t>(S * N * G));
  std::vector<C> xproj(static_cast<size_t>(S * N * G)), xs(static_cast<size_t>(S * N * I));
  std::vector<C> bias(static_cast<size_t>(G), C(0));
  if (dir.b)
    for (int64_t n = 0; n < G; ++n) bias[static_cast<size_t>(n)] = dir.b[n] + dir.b[G + n];
  // X in this direction's step order; its projection through W for every step at once.
  for (int64_t s = 0; s < S; ++s) {
    const int64_t t = dir.reverse ? S - 1 - s : s;
    std::copy_n(dir.x + t * N * I, N * I, xs.data() + s * N * I);
  }
  C x_scale;
  int32_t x_zp;
  dynamic_params(xs.data(), S * N * I, x_scale, x_zp);
  quantize(xs.data(), S * N * I, x_scale, x_zp, qa.data());
  products(false, qa.data(), x_zp, S * N, sums.data());
  for (int64_t i = 0; i < S * N * G; ++i)
    xproj[static_cast<size_t>(i)] += (x_scale * dir.w_scale[i % G]) * static_cast<C>(sums[static_cast<size_t>(i)]);

  for (int64_t s = 0; s < S; ++s) {
    const int64_t t = dir.reverse ? S - 1 - s : s;
    C* pre = xproj.data() + s * N * G;  // becomes the step's pre-activations in place
    for (int64_t b = 0; b < N; ++b) {
      C* row = pre + b * G;
      C* h = dir.h + b * H;
      C h_scale;
      int32_t h_zp;
      dynamic_params(h, H, h_scale, h_zp);
      quantize(h, H, h_scale, h_zp, qa.data());
      products(true, qa.data(), h_zp, 1, sums.data());
      for (int64_t n = 0; n < G; ++n)
        row[n] += (h_scale * dir.r_scale[n]) * static_cast<C>(sums[static_cast<size_t>(n)]);
      for (int64_t n = 0; n < G; ++n) row[n] += bias[static_cast<size_t>(n)];
      rnn::lstm_step(row, dir.p, dir.act, dir.input_forget, dir.has_clip, dir.clip, H, dir.cell + b * H, h);
      if (dir.y) std::copy_n(h, H, dir.y + ((t * dir.ND + dir.d) * N + b) * H);
    }
  }
}

template void run_direction<float>(const Direction<float>&, const Products&);
template void run_direction<double>(const Direction<double>&, const Products&);

}  // namespace quant_lstm

void register_quantized_rnn_ops(OpRegistry& reg) {
  OpDef def;
  def.op_type = kOp;
  def.domain = "com.microsoft";
  def.infer = [](const OpInferContext& ctx) {
    const QuantLstmConfig c = make_config(ctx.node, ctx.input_types, ctx.num_outputs());
    const int64_t nd = c.num_directions;
    std::vector<TensorType> out;
    for (int i = 0; i < ctx.num_outputs(); ++i)
      out.push_back({ctx.input(0).dtype, i == 0 ? Shape{c.seq, nd, c.batch, c.hidden} : Shape{nd, c.batch, c.hidden}});
    return out;
  };
  def.eval = [](const OpEvalContext& ctx) {
    std::vector<TensorType> storage;
    const QuantLstmConfig c = make_config(ctx.node, input_types_of(ctx.inputs, storage), ctx.num_outputs());
    if (ctx.input(0).dtype() == DType::kFloat64) return run<double>(c, ctx);
    return run<float>(c, ctx);
  };
  reg.add(std::move(def));
}

}  // namespace korch
