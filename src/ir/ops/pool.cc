// Pooling operators: MaxPool, AveragePool, LpPool and their Global* forms.
//
// Spatial dims (1..3) are padded at the front to 3 (extent 1, kernel 1) so one loop nest covers
// 1-D, 2-D and 3-D. Semantics follow the ONNX reference: in ceil_mode the last window must start
// inside the input or the left padding; AveragePool with count_include_pad counts window positions
// inside the padded extent [-pad_begin, in + pad_end) (not those beyond it that ceil_mode adds).
//
// Korch's channels-last MaxPool / AveragePool (attribute channels_last = 1, written only by the
// channels_last layout pass, rewrite/channels_last.h): X and Y are [N, spatial.., C]; the same
// result as Transpose(Pool(Transpose(X))). No Indices output in that form.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/op_util.h"

namespace korch {
namespace {

using namespace ops;

enum class PoolKind { kMax, kAvg, kLp };

struct PoolGeom {
  int64_t nsp = 0;
  int64_t N = 0, C = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
};

const char* kind_name(PoolKind k) {
  switch (k) {
    case PoolKind::kMax: return "MaxPool";
    case PoolKind::kAvg: return "AveragePool";
    default: return "LpPool";
  }
}

PoolGeom pool_geometry(const Attributes& attrs, const Shape& x, PoolKind kind) {
  const char* op = kind_name(kind);
  if (x.size() < 3) fail("{} input must have rank >= 3 (N, C, spatial...), got {}", op, shape_str(x));
  PoolGeom g;
  g.nsp = static_cast<int64_t>(x.size()) - 2;
  if (g.nsp > 3) fail_unsupported("{} with {} spatial dimensions is not supported (at most 3)", op, g.nsp);
  const size_t n = static_cast<size_t>(g.nsp), o = 3 - n;
  g.N = x[0];
  g.C = x[1];
  if (!attrs.has("kernel_shape")) fail("{} requires the 'kernel_shape' attribute", op);
  auto ks = spatial_ints(attrs, "kernel_shape", n, 1, 1);
  auto st = spatial_ints(attrs, "strides", n, 1, 1);
  auto dl = spatial_ints(attrs, "dilations", n, 1, 1);
  std::vector<int64_t> pads = attrs.get_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (pads.size() != 2 * n) fail("attribute 'pads' has {} values, expected {}", pads.size(), 2 * n);
  for (int64_t p : pads)
    if (p < 0) fail("attribute 'pads' has negative value {}", p);
  const bool ceil_mode = attrs.get_int("ceil_mode", 0) != 0;
  std::string ap = attrs.get_string("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    fail("attribute 'auto_pad' has invalid value '{}'", ap);
  for (size_t j = o; j < 3; ++j) {
    const size_t i = j - o;
    g.in[j] = x[2 + i];
    g.k[j] = ks[i];
    g.s[j] = st[i];
    g.d[j] = dl[i];
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      g.out[j] = (g.in[j] + g.s[j] - 1) / g.s[j];
      const AxisPads p = same_auto_pads(g.in[j], g.out[j], g.s[j], ek, ap == "SAME_UPPER");
      g.pb[j] = p.before;
      g.pe[j] = p.after;
      continue;
    }
    if (ap == "NOTSET") {
      g.pb[j] = pads[i];
      g.pe[j] = pads[n + i];
    }
    const int64_t span = g.in[j] + g.pb[j] + g.pe[j] - ek;
    if (span < 0) fail("{} kernel extent {} exceeds the padded input extent {} in spatial dim {}", op, ek, span + ek, i);
    if (ceil_mode && ap == "NOTSET") {
      g.out[j] = (span + g.s[j] - 1) / g.s[j] + 1;
      if ((g.out[j] - 1) * g.s[j] >= g.in[j] + g.pb[j]) --g.out[j];
    } else {
      g.out[j] = span / g.s[j] + 1;
    }
  }
  return g;
}

Shape pool_out_shape(const PoolGeom& g) {
  Shape s{g.N, g.C};
  for (int64_t j = 3 - g.nsp; j < 3; ++j) s.push_back(g.out[j]);
  return s;
}

void check_pool_dtype(DType t, PoolKind kind) {
  const bool ok = is_float(t) || (kind == PoolKind::kMax && (t == DType::kInt8 || t == DType::kUInt8));
  if (!ok) fail_element_type(kind_name(kind), t);
}

// Window positions t in [0, k) of one dim for output o: [t_lo, t_hi) are inside the input;
// n_pad counts positions inside the padded extent.
struct DimWindow {
  int64_t start, t_lo, t_hi, n_pad;
};
DimWindow dim_window(const PoolGeom& g, int j, int64_t o) {
  DimWindow w{};
  w.start = o * g.s[j] - g.pb[j];
  auto first_at_least = [&](int64_t bound) {  // smallest t with start + t*d >= bound
    int64_t num = bound - w.start;
    if (num <= 0) return int64_t{0};
    return std::min<int64_t>(g.k[j], (num + g.d[j] - 1) / g.d[j]);
  };
  w.t_lo = first_at_least(0);
  w.t_hi = std::max(w.t_lo, first_at_least(g.in[j]));
  w.n_pad = first_at_least(g.in[j] + g.pe[j]);
  return w;
}

template <typename T>
void run_pool(const PoolGeom& g, PoolKind kind, bool count_include_pad, double p, int storage_order, const T* x, T* y,
              int64_t* indices) {
  const int64_t IHW = g.in[0] * g.in[1] * g.in[2], OHW = g.out[0] * g.out[1] * g.out[2];
#pragma omp parallel for schedule(static) if (g.N * g.C * OHW > 10000)
  for (int64_t nc = 0; nc < g.N * g.C; ++nc) {
    const T* xp = x + nc * IHW;
    T* yp = y + nc * OHW;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const DimWindow wd = dim_window(g, 0, od);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const DimWindow wh = dim_window(g, 1, oh);
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const DimWindow ww = dim_window(g, 2, ow);
          const int64_t oi = (od * g.out[1] + oh) * g.out[2] + ow;
          double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
          int64_t best = -1;
          for (int64_t td = wd.t_lo; td < wd.t_hi; ++td) {
            const int64_t id = wd.start + td * g.d[0];
            for (int64_t th = wh.t_lo; th < wh.t_hi; ++th) {
              const int64_t ih = wh.start + th * g.d[1];
              const T* row = xp + (id * g.in[1] + ih) * g.in[2];
              for (int64_t tw = ww.t_lo; tw < ww.t_hi; ++tw) {
                const int64_t iw = ww.start + tw * g.d[2];
                const double v = to_double(row[iw]);
                if (kind == PoolKind::kMax) {
                  if (best < 0 || v > acc) {  // first maximum wins; NaN never replaces a value
                    acc = v;
                    best = storage_order == 1 ? id + ih * g.in[0] + iw * g.in[0] * g.in[1]
                                              : (id * g.in[1] + ih) * g.in[2] + iw;
                  }
                } else if (kind == PoolKind::kAvg) {
                  acc += v;
                } else {
                  acc += std::pow(std::fabs(v), p);
                }
              }
            }
          }
          double r = acc;
          if (kind == PoolKind::kAvg) {
            const int64_t cnt = count_include_pad
                                    ? wd.n_pad * wh.n_pad * ww.n_pad
                                    : (wd.t_hi - wd.t_lo) * (wh.t_hi - wh.t_lo) * (ww.t_hi - ww.t_lo);
            r = cnt > 0 ? acc / static_cast<double>(cnt) : std::numeric_limits<double>::quiet_NaN();
          } else if (kind == PoolKind::kLp) {
            r = std::pow(acc, 1.0 / p);
          } else if (best < 0) {
            r = std::is_floating_point_v<T> || kIsHalf<T> ? -std::numeric_limits<double>::infinity()
                                                          : to_double(std::numeric_limits<T>::lowest());
          }
          yp[oi] = from_double<T>(r);
          if (indices) indices[nc * OHW + oi] = best < 0 ? -1 : nc * IHW + best;
        }
      }
    }
  }
}

double lp_p(const Attributes& attrs) {
  const int64_t p = attrs.get_int("p", 2);
  if (p < 1) fail("attribute 'p' must be >= 1, got {}", p);
  return static_cast<double>(p);
}

std::vector<TensorType> infer_pool(const OpInferContext& ctx, PoolKind kind) {
  const TensorType& x = ctx.input(0);
  check_pool_dtype(x.dtype, kind);
  if (channels_last_layout(ctx.attrs())) {
    if (kind == PoolKind::kLp) fail("channels-last LpPool is not supported");
    if (x.rank() < 3) fail("channels-last {} needs an input of rank >= 3, got {}", kind_name(kind), shape_str(x.shape));
    const int64_t rank = x.rank();
    const PoolGeom g = pool_geometry(ctx.attrs(), permute_shape(x.shape, channels_first_perm(rank)), kind);
    return {TensorType{x.dtype, permute_shape(pool_out_shape(g), channels_last_perm(rank))}};
  }
  if (kind == PoolKind::kMax) {
    const int64_t so = ctx.attrs().get_int("storage_order", 0);
    if (so != 0 && so != 1) fail("attribute 'storage_order' must be 0 or 1, got {}", so);
  }
  if (kind == PoolKind::kLp) lp_p(ctx.attrs());
  PoolGeom g = pool_geometry(ctx.attrs(), x.shape, kind);
  Shape s = pool_out_shape(g);
  std::vector<TensorType> out{TensorType{x.dtype, s}};
  if (kind == PoolKind::kMax) out.push_back(TensorType{DType::kInt64, s});
  return out;
}

std::vector<Tensor> eval_pool(const OpEvalContext& ctx, PoolKind kind) {
  const bool cl = channels_last_layout(ctx.attrs());
  const int64_t rank = ctx.input(0).rank();
  const Tensor x = cl ? ctx.input(0).transposed(channels_first_perm(rank)) : ctx.input(0);
  PoolGeom g = pool_geometry(ctx.attrs(), x.shape(), kind);
  Tensor y(ctx.output_type(0).dtype, pool_out_shape(g));
  Tensor idx;
  const bool want_indices = !cl && kind == PoolKind::kMax && ctx.num_outputs() > 1 && ctx.node.outputs.size() > 1 &&
                            ctx.node.outputs[1] != kNoValue;
  if (want_indices) idx = Tensor(ctx.output_type(1));
  const bool cip = ctx.attrs().get_int("count_include_pad", 0) != 0;
  const double p = kind == PoolKind::kLp ? lp_p(ctx.attrs()) : 1.0;
  const int so = static_cast<int>(ctx.attrs().get_int("storage_order", 0));
  dispatch_dtype<float, double, Float16, BFloat16, int8_t, uint8_t>(x.dtype(), kind_name(kind), [&](auto tag) {
    using T = decltype(tag);
    run_pool<T>(g, kind, cip, p, so, x.data<T>(), y.data<T>(), want_indices ? idx.data<int64_t>() : nullptr);
  });
  if (cl) return {y.transposed(channels_last_perm(rank))};
  std::vector<Tensor> out{y};
  if (kind == PoolKind::kMax) out.push_back(idx);
  return out;
}

// Global pools: reduce all spatial dims.
std::vector<TensorType> infer_global(const OpInferContext& ctx, PoolKind kind) {
  const TensorType& x = ctx.input(0);
  const char* op = kind == PoolKind::kMax ? "GlobalMaxPool" : kind == PoolKind::kAvg ? "GlobalAveragePool" : "GlobalLpPool";
  check_float_type(op, x.dtype);
  if (x.rank() < 3) fail("{} input must have rank >= 3 (N, C, spatial...), got {}", op, shape_str(x.shape));
  if (kind == PoolKind::kLp) lp_p(ctx.attrs());
  Shape s = x.shape;
  for (size_t i = 2; i < s.size(); ++i) s[i] = 1;
  return ops::one(x.dtype, s);
}

std::vector<Tensor> eval_global(const OpEvalContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  Tensor y(ctx.output_type(0));
  const int64_t nc = x.dim(0) * x.dim(1);
  const int64_t sp = nc ? x.numel() / nc : 0;
  const double p = kind == PoolKind::kLp ? lp_p(ctx.attrs()) : 1.0;
  dispatch_dtype<float, double, Float16, BFloat16>(x.dtype(), "global pool", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = x.data<T>();
    T* yp = y.data<T>();
#pragma omp parallel for if (nc * sp > 100000)
    for (int64_t i = 0; i < nc; ++i) {
      const T* r = xp + i * sp;
      double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t j = 0; j < sp; ++j) {
        const double v = to_double(r[j]);
        if (kind == PoolKind::kMax) acc = (v > acc || std::isnan(v)) ? v : acc;
        else if (kind == PoolKind::kAvg) acc += v;
        else acc += std::pow(std::fabs(v), p);
      }
      if (kind == PoolKind::kAvg) acc = sp ? acc / static_cast<double>(sp) : std::numeric_limits<double>::quiet_NaN();
      if (kind == PoolKind::kLp) acc = std::pow(acc, 1.0 / p);
      yp[i] = from_double<T>(acc);
    }
  });
  return {y};
}

template <PoolKind K>
std::vector<TensorType> infer_pool_t(const OpInferContext& c) { return infer_pool(c, K); }
template <PoolKind K>
std::vector<Tensor> eval_pool_t(const OpEvalContext& c) { return eval_pool(c, K); }
template <PoolKind K>
std::vector<TensorType> infer_global_t(const OpInferContext& c) { return infer_global(c, K); }
template <PoolKind K>
std::vector<Tensor> eval_global_t(const OpEvalContext& c) { return eval_global(c, K); }

}  // namespace

void register_pool_ops(OpRegistry& r) {
  r.add(OpDef{"MaxPool", 1, kMaxOpset, infer_pool_t<PoolKind::kMax>, eval_pool_t<PoolKind::kMax>});
  r.add(OpDef{"AveragePool", 1, kMaxOpset, infer_pool_t<PoolKind::kAvg>, eval_pool_t<PoolKind::kAvg>});
  r.add(OpDef{"LpPool", 1, kMaxOpset, infer_pool_t<PoolKind::kLp>, eval_pool_t<PoolKind::kLp>});
  r.add(OpDef{"GlobalMaxPool", 1, kMaxOpset, infer_global_t<PoolKind::kMax>, eval_global_t<PoolKind::kMax>});
  r.add(OpDef{"GlobalAveragePool", 1, kMaxOpset, infer_global_t<PoolKind::kAvg>, eval_global_t<PoolKind::kAvg>});
  r.add(OpDef{"GlobalLpPool", 1, kMaxOpset, infer_global_t<PoolKind::kLp>, eval_global_t<PoolKind::kLp>});
}

}  // namespace korch
