// Linear-algebra operators, part 2: Conv and ConvTranspose (im2col + the blocked GEMM of gemm.cc).
#include <algorithm>

#include "ir/ops/gemm.h"
#include "ir/ops/linear_internal.h"
#include "ir/ops/op_util.h"

namespace korch {
namespace {

using linear_detail::GemmArgs;

// ---------------------------------------------------------------------------------------------
// Conv / ConvTranspose. Spatial dims (1..3) are padded at the front to 3 (extent 1, kernel 1), so
// one kernel covers 1-D, 2-D and 3-D.

struct ConvGeom {
  int64_t nsp = 0;                          // number of real spatial dims
  int64_t N = 0, C = 0, M = 0, group = 1;   // batch, input channels, output channels, groups
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

// Python-style floor division (the ONNX reference splits negative paddings this way).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string auto_pad_attr(const Attributes& attrs) {
  std::string ap = attrs.get_string("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    fail("attribute 'auto_pad' has invalid value '{}'", ap);
  return ap;
}

// Common validation of X, W and the shared attributes; fills everything but out/pads.
ConvGeom conv_common(const Attributes& attrs, const Shape& x, const Shape& w, bool transpose, const char* op) {
  if (x.size() < 3) fail("{} input X must have rank >= 3 (N, C, spatial...), got {}", op, shape_str(x));
  if (w.size() != x.size()) fail("{} weight W {} must have the same rank as X {}", op, shape_str(w), shape_str(x));
  ConvGeom g;
  g.nsp = static_cast<int64_t>(x.size()) - 2;
  if (g.nsp > 3) fail_unsupported("{} with {} spatial dimensions is not supported (at most 3)", op, g.nsp);
  const size_t n = static_cast<size_t>(g.nsp);
  g.group = attrs.get_int("group", 1);
  if (g.group < 1) fail("attribute 'group' must be >= 1, got {}", g.group);
  g.N = x[0];
  g.C = x[1];
  if (g.C % g.group != 0) fail("{} input channels {} are not divisible by group {}", op, g.C, g.group);
  if (!transpose) {
    if (w[1] * g.group != g.C)
      fail("{} weight W {} expects {} input channels per group, X {} has {} channels in {} groups", op, shape_str(w), w[1],
           shape_str(x), g.C, g.group);
    if (w[0] % g.group != 0) fail("{} output channels {} are not divisible by group {}", op, w[0], g.group);
    g.M = w[0];
  } else {
    if (w[0] != g.C) fail("{} weight W {} expects {} input channels, X {} has {}", op, shape_str(w), w[0], shape_str(x), g.C);
    g.M = w[1] * g.group;
  }
  std::vector<int64_t> ks(w.begin() + 2, w.end());
  if (attrs.has("kernel_shape") && attrs.get_ints("kernel_shape") != ks)
    fail("{} attribute kernel_shape {} does not match weight shape {}", op, shape_str(attrs.get_ints("kernel_shape")),
         shape_str(w));
  auto st = ops::spatial_ints(attrs, "strides", n, 1, 1);
  auto dl = ops::spatial_ints(attrs, "dilations", n, 1, 1);
  const size_t o = 3 - n;
  for (size_t i = 0; i < n; ++i) {
    g.in[o + i] = x[2 + i];
    g.k[o + i] = ks[i];
    g.s[o + i] = st[i];
    g.d[o + i] = dl[i];
  }
  return g;
}

std::vector<int64_t> pads_attr(const Attributes& attrs, size_t n, bool allow_negative) {
  std::vector<int64_t> p = attrs.get_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (p.size() != 2 * n) fail("attribute 'pads' has {} values, expected {}", p.size(), 2 * n);
  if (!allow_negative)
    for (int64_t v : p)
      if (v < 0) fail("attribute 'pads' has negative value {}", v);
  return p;
}

ConvGeom conv_geometry(const Attributes& attrs, const Shape& x, const Shape& w, const char* op = "Conv") {
  ConvGeom g = conv_common(attrs, x, w, false, op);
  const size_t n = static_cast<size_t>(g.nsp), o = 3 - n;
  const std::string ap = auto_pad_attr(attrs);
  std::vector<int64_t> pads = pads_attr(attrs, n, false);
  for (size_t j = o; j < 3; ++j) {
    const size_t i = j - o;
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;  // effective (dilated) kernel extent
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      g.out[j] = (g.in[j] + g.s[j] - 1) / g.s[j];
      const AxisPads p = same_auto_pads(g.in[j], g.out[j], g.s[j], ek, ap == "SAME_UPPER");
      g.pb[j] = p.before;
      g.pe[j] = p.after;
    } else {
      if (ap == "NOTSET") {
        g.pb[j] = pads[i];
        g.pe[j] = pads[n + i];
      }
      const int64_t span = g.in[j] + g.pb[j] + g.pe[j] - ek;
      if (span < 0)
        fail("{} kernel extent {} exceeds the padded input extent {} in spatial dim {}", op, ek, g.in[j] + g.pb[j] + g.pe[j],
             i);
      g.out[j] = span / g.s[j] + 1;
    }
  }
  return g;
}

void check_conv_types(const OpInferContext& ctx, const char* op) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  if (w.dtype != x.dtype) fail("{} weight type {} differs from input type {}", op, dtype_name(w.dtype), dtype_name(x.dtype));
  ops::check_float_type(op, x.dtype);
}

void check_bias(const OpInferContext& ctx, int64_t M, const char* op) {
  if (!ctx.has_input(2)) return;
  const TensorType& b = ctx.input(2);
  if (b.dtype != ctx.input(0).dtype) fail("{} bias type {} differs from input type {}", op, dtype_name(b.dtype), dtype_name(ctx.input(0).dtype));
  if (b.shape != Shape{M}) fail("{} bias B must have shape [{}], got {}", op, M, shape_str(b.shape));
}

Shape conv_out_shape(const ConvGeom& g) {
  Shape s{g.N, g.M};
  for (int64_t j = 3 - g.nsp; j < 3; ++j) s.push_back(g.out[j]);
  return s;
}

// Korch's channels-last Conv (attribute channels_last = 1, written only by the channels_last
// layout pass, rewrite/channels_last.h): X is [N, spatial.., C] and Y is [N, spatial.., M]; the
// weights stay [M, C/group, k..]. Same result as Transpose(Conv(Transpose(X))).

std::vector<TensorType> infer_conv(const OpInferContext& ctx) {
  check_conv_types(ctx, "Conv");
  const bool cl = channels_last_layout(ctx.attrs());
  const Shape& xs = ctx.input(0).shape;
  if (cl && xs.size() < 3) fail("channels-last Conv needs an input of rank >= 3, got {}", shape_str(xs));
  ConvGeom g = conv_geometry(ctx.attrs(), cl ? permute_shape(xs, channels_first_perm(static_cast<int64_t>(xs.size()))) : xs,
                             ctx.input(1).shape);
  check_bias(ctx, g.M, "Conv");
  Shape out = conv_out_shape(g);
  if (cl) out = permute_shape(out, channels_last_perm(static_cast<int64_t>(out.size())));
  return ops::one(ctx.input(0).dtype, out);
}

// Fills col rows (c, kd, kh, kw) x columns (output rows r0..r0+nr of extent out[2]) from one group's
// input channels x (Cg x in-volume).
template <typename T>
void im2col(const ConvGeom& g, const T* x, int64_t Cg, int64_t r0, int64_t nr, T* col) {  // serial
  const int64_t Kk = g.k_size(), rows = Cg * Kk, OW = g.out[2], ncols = nr * OW;
  const int64_t IW = g.in[2], IH = g.in[1], ID = g.in[0], OH = g.out[1];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r / Kk, kk = r % Kk;
    const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
    T* dst = col + r * ncols;
    const int64_t woff = kw * g.d[2] - g.pb[2];
    // Valid output columns: 0 <= ow*s + woff < IW.
    int64_t lo = woff >= 0 ? 0 : (-woff + g.s[2] - 1) / g.s[2];
    int64_t hi = IW - 1 - woff < 0 ? 0 : (IW - 1 - woff) / g.s[2] + 1;  // exclusive
    lo = std::min(lo, OW);
    hi = std::min(std::max(hi, lo), OW);
    for (int64_t q = 0; q < nr; ++q) {
      T* drow = dst + q * OW;
      const int64_t orow = r0 + q, od = orow / OH, oh = orow % OH;
      const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0], ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
      if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
        for (int64_t w = 0; w < OW; ++w) drow[w] = T(0);
        continue;
      }
      const T* src = x + ((c * ID + id) * IH + ih) * IW + woff;
      for (int64_t w = 0; w < lo; ++w) drow[w] = T(0);
      if (g.s[2] == 1) {
        for (int64_t w = lo; w < hi; ++w) drow[w] = src[w];
      } else {
        const int64_t sw = g.s[2];
        for (int64_t w = lo; w < hi; ++w) drow[w] = src[w * sw];
      }
      for (int64_t w = hi; w < OW; ++w) drow[w] = T(0);
    }
  }
}

// Direct convolution for one input channel per group (depthwise): a GEMM would have K = kernel size.
template <typename T>
void conv_depthwise(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t Mg = g.M / g.group, Kk = g.k_size(), OHW = g.out_size(), IHW = g.in_size();
#pragma omp parallel for schedule(static)
  for (int64_t nm = 0; nm < g.N * g.M; ++nm) {
    const int64_t n = nm / g.M, m = nm % g.M, c = m / Mg;
    const T* xc = x + (n * g.C + c) * IHW;
    const T* wm = w + m * Kk;
    T* ym = y + nm * OHW;
    const T b0 = bias ? bias[m] : T(0);
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        T* yrow = ym + (od * g.out[1] + oh) * g.out[2];
        for (int64_t ow = 0; ow < g.out[2]; ++ow) yrow[ow] = T(0);
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const T wv = wm[(kd * g.k[1] + kh) * g.k[2] + kw];
              const int64_t woff = kw * g.d[2] - g.pb[2];
              int64_t lo = woff >= 0 ? 0 : (-woff + g.s[2] - 1) / g.s[2];
              int64_t hi = g.in[2] - 1 - woff < 0 ? 0 : (g.in[2] - 1 - woff) / g.s[2] + 1;
              lo = std::min(lo, g.out[2]);
              hi = std::min(std::max(hi, lo), g.out[2]);
              for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow * g.s[2] + woff];
            }
          }
        }
        for (int64_t ow = 0; ow < g.out[2]; ++ow) yrow[ow] += b0;
      }
  }
}

// One parallel region per Conv: tasks are (image, group, block of output rows); each task runs
// im2col into a thread-local, cache-sized buffer and a serial GEMM into its slice of the output.
template <typename T>
void run_conv(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t Cg = g.C / g.group, Mg = g.M / g.group, Kk = g.k_size(), Krows = Cg * Kk;
  const int64_t OHW = g.out_size(), IHW = g.in_size();
  if (OHW == 0 || g.N == 0 || g.M == 0) return;
  if (Cg == 1 && g.group > 1) {
    conv_depthwise(g, x, w, bias, y);
    return;
  }
  bool pointwise = Kk == 1;
  for (int j = 0; j < 3; ++j) pointwise = pointwise && g.s[j] == 1 && g.pb[j] == 0 && g.pe[j] == 0;
  const int64_t OW = g.out[2], R = g.out[0] * g.out[1];
  // Column block: whole output rows, about 2 MiB of fp32 im2col per block.
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, std::min<int64_t>(R, (int64_t{1} << 19) / std::max<int64_t>(1, Krows * OW)));
  const int64_t chunks = (R + rows_per_chunk - 1) / rows_per_chunk;
  const int64_t tasks = g.N * g.group * chunks;
  const double flops = 2.0 * static_cast<double>(g.N * g.M) * static_cast<double>(OHW) * static_cast<double>(Krows);
#pragma omp parallel if (tasks > 1 && flops > 1e6)
  {
    std::vector<T> col(pointwise ? 0 : static_cast<size_t>(Krows * rows_per_chunk * OW));
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t ng = t / chunks, r0 = (t % chunks) * rows_per_chunk;
      const int64_t n = ng / g.group, gi = ng % g.group;
      const int64_t nr = std::min(rows_per_chunk, R - r0), c0 = r0 * OW, nc = nr * OW;
      T* yg = y + (n * g.M + gi * Mg) * OHW + c0;
      const T* xg = x + (n * g.C + gi * Cg) * IHW;
      if (bias)
        for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * OHW, yg + m * OHW + nc, bias[gi * Mg + m]);
      GemmArgs<T> ga;
      ga.M = Mg;
      ga.N = nc;
      ga.K = Krows;
      ga.A = w + gi * Mg * Krows;
      ga.lda = Krows;
      ga.C = yg;
      ga.ldc = OHW;
      ga.accumulate = bias != nullptr;
      ga.serial = true;
      if (pointwise) {
        ga.B = xg + c0;
        ga.ldb = IHW;
      } else {
        im2col(g, xg, Cg, r0, nr, col.data());
        ga.B = col.data();
        ga.ldb = nc;
      }
      linear_detail::gemm(ga);
    }
  }
}

std::vector<Tensor> eval_conv(const OpEvalContext& ctx) {
  if (ops::is_half(ctx.input(0).dtype())) return linear_detail::eval_via_f32(ctx, eval_conv);
  const bool cl = channels_last_layout(ctx.attrs());
  const int64_t rank = ctx.input(0).rank();
  const Tensor x = cl ? ctx.input(0).transposed(channels_first_perm(rank)) : ctx.input(0);
  const Tensor& w = ctx.input(1);
  ConvGeom g = conv_geometry(ctx.attrs(), x.shape(), w.shape());
  Tensor out(ctx.output_type(0).dtype, conv_out_shape(g));
  dispatch_dtype<KORCH_FLOAT_TYPES>(x.dtype(), "Conv", [&](auto tag) {
    using T = decltype(tag);
    run_conv<T>(g, x.data<T>(), w.data<T>(), ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr, out.data<T>());
  });
  if (cl) return {out.transposed(channels_last_perm(rank))};
  return {out};
}

ConvGeom conv_transpose_geometry(const Attributes& attrs, const Shape& x, const Shape& w) {
  ConvGeom g = conv_common(attrs, x, w, true, "ConvTranspose");
  const size_t n = static_cast<size_t>(g.nsp), o = 3 - n;
  const std::string ap = auto_pad_attr(attrs);
  std::vector<int64_t> opad = attrs.get_ints("output_padding", std::vector<int64_t>(n, 0));
  if (opad.size() == 2 * n) opad.resize(n);  // some exporters write begin/end pairs
  if (opad.size() != n) fail("attribute 'output_padding' has {} values, expected {}", opad.size(), n);
  std::vector<int64_t> oshape;
  if (attrs.has("output_shape")) {
    oshape = attrs.get_ints("output_shape");
    if (oshape.size() == n + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    if (oshape.size() != n) fail("attribute 'output_shape' has {} values, expected {}", oshape.size(), n);
  }
  const bool explicit_pads = attrs.has("pads") && ap == "NOTSET";
  std::vector<int64_t> pads = pads_attr(attrs, n, false);
  for (size_t j = o; j < 3; ++j) {
    const size_t i = j - o;
    if (opad[i] < 0 || (opad[i] >= g.s[j] && opad[i] >= g.d[j]))
      fail("attribute 'output_padding' value {} must be smaller than the stride or dilation", opad[i]);
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;
    const int64_t natural = g.s[j] * (g.in[j] - 1) + opad[i] + ek;
    if (ap == "VALID") {
      g.out[j] = oshape.empty() ? natural : oshape[i];
    } else if (explicit_pads || (ap == "NOTSET" && oshape.empty())) {
      g.pb[j] = pads[i];
      g.pe[j] = pads[n + i];
      g.out[j] = oshape.empty() ? natural - g.pb[j] - g.pe[j] : oshape[i];
    } else {
      g.out[j] = oshape.empty() ? g.in[j] * g.s[j] : oshape[i];
      const int64_t total = natural - g.out[j];
      if (ap == "SAME_UPPER") {
        g.pb[j] = floor_div(total, 2);
        g.pe[j] = total - g.pb[j];
      } else {
        g.pe[j] = floor_div(total, 2);
        g.pb[j] = total - g.pe[j];
      }
    }
    if (g.out[j] <= 0) fail("ConvTranspose output extent {} in spatial dim {} is not positive", g.out[j], i);
  }
  return g;
}

std::vector<TensorType> infer_conv_transpose(const OpInferContext& ctx) {
  check_conv_types(ctx, "ConvTranspose");
  ConvGeom g = conv_transpose_geometry(ctx.attrs(), ctx.input(0).shape, ctx.input(1).shape);
  check_bias(ctx, g.M, "ConvTranspose");
  return ops::one(ctx.input(0).dtype, conv_out_shape(g));
}

template <typename T>
void run_conv_transpose(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t Cg = g.C / g.group, Mg = g.M / g.group, Kk = g.k_size();
  const int64_t OHW = g.out_size(), IHW = g.in_size(), rows = Mg * Kk;
  // Per group: col (Mg*Kk x IHW) = W_g^T (Mg*Kk x Cg) * X_g (Cg x IHW), then scatter-add (col2im).
  std::vector<T> wt(static_cast<size_t>(rows * Cg)), col(static_cast<size_t>(rows * IHW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T* wg = w + gi * Cg * rows;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t r = 0; r < rows; ++r) wt[static_cast<size_t>(r * Cg + c)] = wg[c * rows + r];
      GemmArgs<T> ga;
      ga.M = rows;
      ga.N = IHW;
      ga.K = Cg;
      ga.A = wt.data();
      ga.lda = Cg;
      ga.B = x + (n * g.C + gi * Cg) * IHW;
      ga.ldb = IHW;
      ga.C = col.data();
      ga.ldc = IHW;
      linear_detail::gemm(ga);
#pragma omp parallel for schedule(static)
      for (int64_t m = 0; m < Mg; ++m) {
        T* ym = y + (n * g.M + gi * Mg + m) * OHW;
        std::fill(ym, ym + OHW, bias ? bias[gi * Mg + m] : T(0));
        for (int64_t kk = 0; kk < Kk; ++kk) {
          const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
          const T* src = col.data() + (m * Kk + kk) * IHW;
          for (int64_t id = 0; id < g.in[0]; ++id) {
            const int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
            if (od < 0 || od >= g.out[0]) continue;
            for (int64_t ih = 0; ih < g.in[1]; ++ih) {
              const int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
              if (oh < 0 || oh >= g.out[1]) continue;
              const T* srow = src + (id * g.in[1] + ih) * g.in[2];
              T* yrow = ym + (od * g.out[1] + oh) * g.out[2];
              for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                const int64_t ow = iw * g.s[2] - g.pb[2] + kw * g.d[2];
                if (ow >= 0 && ow < g.out[2]) yrow[ow] += srow[iw];
              }
            }
          }
        }
      }
    }
}

std::vector<Tensor> eval_conv_transpose(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (ops::is_half(x.dtype())) return linear_detail::eval_via_f32(ctx, eval_conv_transpose);
  const Tensor& w = ctx.input(1);
  ConvGeom g = conv_transpose_geometry(ctx.attrs(), x.shape(), w.shape());
  Tensor out(ctx.output_type(0));
  dispatch_dtype<KORCH_FLOAT_TYPES>(x.dtype(), "ConvTranspose", [&](auto tag) {
    using T = decltype(tag);
    run_conv_transpose<T>(g, x.data<T>(), w.data<T>(), ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr,
                          out.data<T>());
  });
  return {out};
}

}  // namespace

// The integer convolutions (ConvInteger) take channels_last = 1 like Conv.
Shape linear_detail::conv_output_shape(const Attributes& attrs, const Shape& x, const Shape& w, const char* op) {
  if (!channels_last_layout(attrs)) return conv_out_shape(conv_geometry(attrs, x, w, op));
  if (x.size() < 3) fail("channels-last {} needs an input of rank >= 3, got {}", op, shape_str(x));
  const auto rank = static_cast<int64_t>(x.size());
  const Shape out = conv_out_shape(conv_geometry(attrs, permute_shape(x, channels_first_perm(rank)), w, op));
  return permute_shape(out, channels_last_perm(rank));
}

Tensor linear_detail::conv_int32(const Attributes& attrs, const Tensor& x, const Tensor& w, const Tensor* bias,
                                 const char* op) {
  const bool cl = channels_last_layout(attrs);
  const int64_t rank = x.rank();
  const Tensor xf = cl ? x.transposed(channels_first_perm(rank)) : x;
  ConvGeom g = conv_geometry(attrs, xf.shape(), w.shape(), op);
  Tensor out(DType::kInt32, conv_out_shape(g));
  run_conv<int32_t>(g, xf.data<int32_t>(), w.data<int32_t>(), bias ? bias->data<int32_t>() : nullptr, out.data<int32_t>());
  return cl ? out.transposed(channels_last_perm(rank)) : out;
}

void linear_detail::register_conv_ops(OpRegistry& r) {
  r.add(OpDef{"Conv", 1, kMaxOpset, infer_conv, eval_conv});
  r.add(OpDef{"ConvTranspose", 1, kMaxOpset, infer_conv_transpose, eval_conv_transpose});
}

}  // namespace korch
