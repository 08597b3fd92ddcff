// Normalizations: BatchNormalization (inference), InstanceNormalization, LayerNormalization,
// GroupNormalization, LpNormalization, MeanVarianceNormalization, LRN.
//
// Statistics (mean, variance, norms) are computed in double with a two-pass mean/variance;
// the per-element affine part is applied in double and rounded once to the output type.
#include <cmath>

#include "ir/ops/op_util.h"

namespace korch {
namespace {

using namespace ops;

#define KORCH_NORM_TYPES float, double, Float16, BFloat16

// All elements of a float tensor as doubles (parameters: scale, bias, mean, var).
std::vector<double> param_values(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[static_cast<size_t>(i)] = t.get_as_double(i);
  return out;
}

// Mean and population variance of n values x[0], x[stride], ... (two passes, double).
template <typename T>
std::pair<double, double> mean_var(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += to_double(x[i]);
  double mean = n > 0 ? s / static_cast<double>(n) : 0.0;
  double v = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = to_double(x[i]) - mean;
    v += d * d;
  }
  return {mean, n > 0 ? v / static_cast<double>(n) : 0.0};
}

// y[f, s] = x[f, s] * a[f % F] + b[f % F] over rows f of length S (BatchNorm, folded affine).
template <typename T>
void affine_rows(const T* x, T* y, int64_t rows, int64_t F, int64_t S, const std::vector<double>& a,
                 const std::vector<double>& b) {
#pragma omp parallel for schedule(static) if (rows * S > 32768)
  for (int64_t row = 0; row < rows; ++row) {
    size_t f = static_cast<size_t>(row % F);
    const T* p = x + row * S;
    T* q = y + row * S;
    for (int64_t s = 0; s < S; ++s) q[s] = from_double<T>(to_double(p[s]) * a[f] + b[f]);
  }
}

// ---------------------------------------------------------------------------------------------
// BatchNormalization (inference mode only)

std::vector<TensorType> infer_batchnorm(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("BatchNormalization", x.dtype);
  if (ctx.opset >= 14 && ctx.attrs().get_int("training_mode", 0) != 0)
    fail_unsupported("training_mode=1 is not supported (inference only)");
  for (int k = 1; k < ctx.num_outputs(); ++k) {
    if (ctx.node.outputs[static_cast<size_t>(k)] == kNoValue) continue;
    if (ctx.opset >= 14) fail("output {} exists only with training_mode=1", k);
    fail_unsupported("training-mode outputs (running/saved mean and variance) are not supported (inference only)");
  }
  if (x.rank() < 2) fail("input must have rank >= 2 (N x C x ...), got shape {}", shape_str(x.shape));
  const int64_t C = x.shape[1];
  int64_t CS = 1;
  for (int64_t d = 1; d < x.rank(); ++d) CS *= x.shape[static_cast<size_t>(d)];
  bool non_spatial = ctx.opset < 9 && ctx.attrs().get_int("spatial", 1) == 0;
  static const char* kNames[] = {"", "scale", "B", "mean", "var"};
  for (int i = 1; i <= 4; ++i) {
    const TensorType& p = ctx.input(i);
    check_float_type("BatchNormalization", p.dtype);
    bool ok = p.rank() == 1 && p.shape[0] == C;
    // spatial=0 (opsets 7/8): per-activation parameters of shape C x D1 x ... x Dn.
    if (non_spatial) ok = ok || (p.numel() == CS && p.rank() == x.rank() - 1);
    if (!ok) fail("{} has shape {}, expected [{}]", kNames[i], shape_str(p.shape), C);
    if (p.numel() != ctx.input(1).numel())
      fail("{} has shape {} but scale has shape {}", kNames[i], shape_str(p.shape), shape_str(ctx.input(1).shape));
  }
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_batchnorm(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double eps = ctx.attrs().get_float("epsilon", 1e-5f);
  std::vector<double> scale = param_values(ctx.input(1)), bias = param_values(ctx.input(2)),
                      mean = param_values(ctx.input(3)), var = param_values(ctx.input(4));
  const size_t F = scale.size();  // C, or C*D1*..*Dn for spatial=0
  std::vector<double> a(F), b(F);
  for (size_t f = 0; f < F; ++f) {
    a[f] = scale[f] / std::sqrt(var[f] + eps);
    b[f] = bias[f] - mean[f] * a[f];
  }
  Tensor y(ctx.output_type(0));
  const int64_t N = x.dim(0);
  const int64_t S = x.numel() / std::max<int64_t>(1, N * static_cast<int64_t>(F));
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "BatchNormalization", [&](auto t) {
    using T = decltype(t);
    affine_rows<T>(x.data<T>(), y.data<T>(), N * static_cast<int64_t>(F), static_cast<int64_t>(F), S, a, b);
  });
  return {y};
}

// ---------------------------------------------------------------------------------------------
// InstanceNormalization and GroupNormalization share one kernel: per (n, group) statistics over
// a contiguous block of (channels per group) * spatial elements, then a per-channel affine.

template <typename T>
void group_norm_typed(const T* x, T* y, int64_t N, int64_t C, int64_t G, int64_t S, double eps,
                      const std::vector<double>& scale, const std::vector<double>& bias) {
  const int64_t Cg = C / G;
  const int64_t block = Cg * S;
#pragma omp parallel for schedule(static) if (N * C * S > 32768)
  for (int64_t ng = 0; ng < N * G; ++ng) {
    const T* p = x + ng * block;
    T* q = y + ng * block;
    auto [mean, var] = mean_var(p, block);
    double inv = 1.0 / std::sqrt(var + eps);
    int64_t g = ng % G;
    for (int64_t c = 0; c < Cg; ++c) {
      size_t ch = static_cast<size_t>(g * Cg + c);
      double a = scale[ch] * inv, b = bias[ch] - mean * a;
      for (int64_t s = 0; s < S; ++s) q[c * S + s] = from_double<T>(to_double(p[c * S + s]) * a + b);
    }
  }
}

std::vector<TensorType> infer_instancenorm(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("InstanceNormalization", x.dtype);
  if (x.rank() < 2) fail("input must have rank >= 2 (N x C x ...), got shape {}", shape_str(x.shape));
  const int64_t C = x.shape[1];
  for (int i = 1; i <= 2; ++i) {
    const TensorType& p = ctx.input(i);
    check_float_type("InstanceNormalization", p.dtype);
    if (p.rank() != 1 || p.shape[0] != C)
      fail("{} has shape {}, expected [{}]", i == 1 ? "scale" : "B", shape_str(p.shape), C);
  }
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_instancenorm(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double eps = ctx.attrs().get_float("epsilon", 1e-5f);
  std::vector<double> scale = param_values(ctx.input(1)), bias = param_values(ctx.input(2));
  Tensor y(ctx.output_type(0));
  const int64_t N = x.dim(0), C = x.dim(1);
  if (y.numel() == 0) return {y};
  const int64_t S = x.numel() / (N * C);
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "InstanceNormalization", [&](auto t) {
    using T = decltype(t);
    group_norm_typed<T>(x.data<T>(), y.data<T>(), N, C, C, S, eps, scale, bias);
  });
  return {y};
}

// GroupNormalization: opset 18 has scale/bias per group, opset 21 per channel.
std::vector<TensorType> infer_groupnorm(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("GroupNormalization", x.dtype);
  if (x.rank() < 2) fail("input must have rank >= 2 (N x C x ...), got shape {}", shape_str(x.shape));
  const int64_t C = x.shape[1];
  const int64_t G = ctx.attrs().get_int("num_groups");
  if (G <= 0) fail("num_groups must be positive, got {}", G);
  if (C % G != 0) fail("num_groups {} does not divide the channel count {}", G, C);
  if (ctx.opset >= 21) {
    int64_t stash = ctx.attrs().get_int("stash_type", 1);
    std::optional<DType> st = dtype_from_onnx(static_cast<int>(stash));
    if (!st || !is_float(*st)) fail("stash_type {} is not a floating-point type", stash);
  }
  const int64_t want = ctx.opset >= 21 ? C : G;
  for (int i = 1; i <= 2; ++i) {
    const TensorType& p = ctx.input(i);
    check_float_type("GroupNormalization", p.dtype);
    if (p.rank() != 1 || p.shape[0] != want)
      fail("{} has shape {}, expected [{}] (one value per {} in opset {})", i == 1 ? "scale" : "bias",
           shape_str(p.shape), want, ctx.opset >= 21 ? "channel" : "group", ctx.opset);
  }
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_groupnorm(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double eps = ctx.attrs().get_float("epsilon", 1e-5f);
  const int64_t N = x.dim(0), C = x.dim(1), G = ctx.attrs().get_int("num_groups");
  std::vector<double> scale = param_values(ctx.input(1)), bias = param_values(ctx.input(2));
  if (ctx.opset < 21) {  // expand per-group parameters to per-channel
    std::vector<double> s(static_cast<size_t>(C)), b(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      s[static_cast<size_t>(c)] = scale[static_cast<size_t>(c / (C / G))];
      b[static_cast<size_t>(c)] = bias[static_cast<size_t>(c / (C / G))];
    }
    scale = std::move(s);
    bias = std::move(b);
  }
  Tensor y(ctx.output_type(0));
  if (y.numel() == 0) return {y};
  const int64_t S = x.numel() / (N * C);
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "GroupNormalization", [&](auto t) {
    using T = decltype(t);
    group_norm_typed<T>(x.data<T>(), y.data<T>(), N, C, G, S, eps, scale, bias);
  });
  return {y};
}

// ---------------------------------------------------------------------------------------------
// LayerNormalization (opset 17): normalizes over dims [axis, rank); Scale and B broadcast
// (unidirectionally) to those dims. Optional outputs Mean and InvStdDev have shape
// X.shape[:axis] + [1]*(rank-axis) and the stash_type element type.

struct LayerNormDims {
  int64_t axis, O, R;
  Shape norm_shape;
};

LayerNormDims layernorm_dims(const Attributes& a, const Shape& x) {
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = a.get_int("axis", -1);
  if (rank == 0) fail("input must have rank >= 1");
  if (axis < -rank || axis >= rank) fail("axis {} is out of range for rank {}", axis, rank);
  LayerNormDims d;
  d.axis = axis < 0 ? axis + rank : axis;
  d.O = 1;
  d.R = 1;
  for (int64_t i = 0; i < rank; ++i) {
    if (i < d.axis) d.O *= x[static_cast<size_t>(i)];
    else d.R *= x[static_cast<size_t>(i)], d.norm_shape.push_back(x[static_cast<size_t>(i)]);
  }
  return d;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  size_t off = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[off + i]) return false;
  return true;
}

std::vector<TensorType> infer_layernorm(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("LayerNormalization", x.dtype);
  LayerNormDims d = layernorm_dims(ctx.attrs(), x.shape);
  int64_t stash = ctx.attrs().get_int("stash_type", 1);
  std::optional<DType> st = dtype_from_onnx(static_cast<int>(stash));
  if (!st || !is_float(*st)) fail("stash_type {} is not a floating-point type", stash);
  for (int i = 1; i <= 2; ++i) {
    if (i == 2 && !ctx.has_input(2)) continue;
    const TensorType& p = ctx.input(i);
    check_float_type("LayerNormalization", p.dtype);
    if (!broadcasts_to(p.shape, d.norm_shape))
      fail("{} of shape {} does not broadcast to the normalized shape {}", i == 1 ? "Scale" : "B",
           shape_str(p.shape), shape_str(d.norm_shape));
  }
  Shape stat = x.shape;
  for (size_t i = static_cast<size_t>(d.axis); i < stat.size(); ++i) stat[i] = 1;
  return {TensorType{x.dtype, x.shape}, TensorType{*st, stat}, TensorType{*st, stat}};
}

// Parameter values expanded to the R elements of the normalized shape.
std::vector<double> expand_param(const Tensor& p, const Shape& norm_shape) {
  std::vector<double> v = param_values(p);
  const int64_t R = shape_numel(norm_shape);
  if (static_cast<int64_t>(v.size()) == R) return v;
  std::vector<double> out(static_cast<size_t>(R));
  std::vector<int64_t> st = broadcast_strides(p.shape(), norm_shape);
  for_each_broadcast(norm_shape, {st}, [&](int64_t i, const std::vector<int64_t>& off) {
    out[static_cast<size_t>(i)] = v[static_cast<size_t>(off[0])];
  });
  return out;
}

template <typename T, typename U>
void layernorm_typed(const T* x, T* y, U* mean_out, U* inv_out, int64_t O, int64_t R, double eps,
                     const std::vector<double>& scale, const std::vector<double>& bias) {
#pragma omp parallel for schedule(static) if (O * R > 32768)
  for (int64_t o = 0; o < O; ++o) {
    const T* p = x + o * R;
    T* q = y + o * R;
    auto [mean, var] = mean_var(p, R);
    double inv = 1.0 / std::sqrt(var + eps);
    if (mean_out) mean_out[o] = from_double<U>(mean);
    if (inv_out) inv_out[o] = from_double<U>(inv);
    for (int64_t r = 0; r < R; ++r) {
      size_t ru = static_cast<size_t>(r);
      q[r] = from_double<T>((to_double(p[r]) - mean) * inv * scale[ru] + bias[ru]);
    }
  }
}

std::vector<Tensor> eval_layernorm(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  LayerNormDims d = layernorm_dims(ctx.attrs(), x.shape());
  const double eps = ctx.attrs().get_float("epsilon", 1e-5f);
  std::vector<double> scale = expand_param(ctx.input(1), d.norm_shape);
  std::vector<double> bias = ctx.has_input(2) ? expand_param(ctx.input(2), d.norm_shape)
                                              : std::vector<double>(static_cast<size_t>(d.R), 0.0);
  std::vector<Tensor> out(3);
  out[0] = Tensor(ctx.output_type(0));
  const int n_out = ctx.num_outputs();
  const bool want_mean = n_out > 1 && ctx.node.outputs[1] != kNoValue;
  const bool want_inv = n_out > 2 && ctx.node.outputs[2] != kNoValue;
  if (want_mean) out[1] = Tensor(ctx.output_type(1));
  if (want_inv) out[2] = Tensor(ctx.output_type(2));
  if (x.numel() == 0) return out;
  const DType stash = n_out > 1 ? ctx.output_type(1).dtype : DType::kFloat32;
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "LayerNormalization", [&](auto t) {
    using T = decltype(t);
    dispatch_dtype<KORCH_NORM_TYPES>(stash, "LayerNormalization stash_type", [&](auto u) {
      using U = decltype(u);
      layernorm_typed<T, U>(x.data<T>(), out[0].data<T>(), want_mean ? out[1].data<U>() : nullptr,
                            want_inv ? out[2].data<U>() : nullptr, d.O, d.R, eps, scale, bias);
    });
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// LpNormalization: x / ||x||_p along one axis (p = 1 or 2); zero norm gives zero.

std::pair<int64_t, int64_t> lp_attrs(const Attributes& a, int64_t rank) {
  int64_t axis = a.get_int("axis", -1);
  int64_t p = a.get_int("p", 2);
  if (p != 1 && p != 2) fail("p must be 1 or 2, got {}", p);
  if (axis < -rank || axis >= rank) fail("axis {} is out of range for rank {}", axis, rank);
  return {axis < 0 ? axis + rank : axis, p};
}

std::vector<TensorType> infer_lpnorm(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("LpNormalization", x.dtype);
  lp_attrs(ctx.attrs(), x.rank());
  return one(x.dtype, x.shape);
}

template <typename T>
void lpnorm_typed(const T* x, T* y, int64_t O, int64_t R, int64_t I, int64_t p) {
#pragma omp parallel for schedule(static) if (O * R * I > 32768)
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      const T* src = x + o * R * I + i;
      T* dst = y + o * R * I + i;
      double s = 0;
      for (int64_t r = 0; r < R; ++r) {
        double v = to_double(src[r * I]);
        s += p == 1 ? std::fabs(v) : v * v;
      }
      double norm = p == 1 ? s : std::sqrt(s);
      double inv = norm == 0 ? 0.0 : 1.0 / norm;
      for (int64_t r = 0; r < R; ++r) dst[r * I] = from_double<T>(to_double(src[r * I]) * inv);
    }
  }
}

std::vector<Tensor> eval_lpnorm(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto [axis, p_attr] = lp_attrs(ctx.attrs(), x.rank());
  const auto p = p_attr;  // a plain variable: clang 14 cannot capture structured bindings (the fuzz build)
  Tensor y(ctx.output_type(0));
  if (y.numel() == 0) return {y};
  int64_t O = 1, R = x.rank() == 0 ? 1 : x.dim(axis), I = 1;
  for (int64_t d = 0; d < axis; ++d) O *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) I *= x.dim(d);
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "LpNormalization", [&](auto t) {
    using T = decltype(t);
    lpnorm_typed<T>(x.data<T>(), y.data<T>(), O, R, I, p);
  });
  return {y};
}

// ---------------------------------------------------------------------------------------------
// MeanVarianceNormalization (opset 9+): (X - E[X]) / (sqrt(Var[X]) + 1e-9) over `axes`
// (default [0, 2, 3]); the 1e-9 is the epsilon of the ONNX function definition.

std::vector<bool> mvn_axes(const Attributes& a, int64_t rank) {
  std::vector<int64_t> axes = a.get_ints("axes", {0, 2, 3});
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  for (int64_t ax : axes) {
    if (ax < -rank || ax >= rank) fail("axis {} is out of range for rank {}", ax, rank);
    int64_t n = ax < 0 ? ax + rank : ax;
    if (reduced[static_cast<size_t>(n)]) fail("axis {} is repeated in axes", ax);
    reduced[static_cast<size_t>(n)] = true;
  }
  return reduced;
}

std::vector<TensorType> infer_mvn(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("MeanVarianceNormalization", x.dtype);
  mvn_axes(ctx.attrs(), x.rank());
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_mvn(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<bool> reduced = mvn_axes(ctx.attrs(), x.rank());
  Tensor y(ctx.output_type(0));
  if (y.numel() == 0) return {y};
  Shape stat_shape = x.shape();
  int64_t count = 1;
  for (size_t d = 0; d < reduced.size(); ++d)
    if (reduced[d]) count *= stat_shape[d], stat_shape[d] = 1;
  // Generic walk: `off` is the statistics slot of each input element.
  const std::vector<std::vector<int64_t>> st = {broadcast_strides(stat_shape, x.shape())};
  const size_t n_stat = static_cast<size_t>(shape_numel(stat_shape));
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "MeanVarianceNormalization", [&](auto t) {
    using T = decltype(t);
    const T* p = x.data<T>();
    T* q = y.data<T>();
    std::vector<double> mean(n_stat, 0.0), var(n_stat, 0.0);
    for_each_broadcast(x.shape(), st, [&](int64_t i, const std::vector<int64_t>& off) {
      mean[static_cast<size_t>(off[0])] += to_double(p[i]);
    });
    for (double& m : mean) m /= static_cast<double>(count);
    for_each_broadcast(x.shape(), st, [&](int64_t i, const std::vector<int64_t>& off) {
      double dv = to_double(p[i]) - mean[static_cast<size_t>(off[0])];
      var[static_cast<size_t>(off[0])] += dv * dv;
    });
    for (double& v : var) v = 1.0 / (std::sqrt(v / static_cast<double>(count)) + 1e-9);
    for_each_broadcast(x.shape(), st, [&](int64_t i, const std::vector<int64_t>& off) {
      size_t k = static_cast<size_t>(off[0]);
      q[i] = from_double<T>((to_double(p[i]) - mean[k]) * var[k]);
    });
  });
  return {y};
}

// LRN (local response normalization across channels, AlexNet/GoogLeNet):
//   y[n,c,...] = x[n,c,...] / (bias + alpha/size * sum_{c' in window(c)} x[n,c',...]^2)^beta
// with window(c) = [c - floor((size-1)/2), c + ceil((size-1)/2)] clipped to the channels.
std::vector<TensorType> infer_lrn(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type("LRN", x.dtype);
  if (x.rank() < 3) fail("LRN: input must have rank >= 3 (N, C, D1, ...), got {}", shape_str(x.shape));
  if (ctx.attrs().get_int("size") <= 0) fail("LRN: size must be positive");
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_lrn(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const double alpha = ctx.attrs().get_float("alpha", 1e-4f), beta = ctx.attrs().get_float("beta", 0.75f);
  const double bias = ctx.attrs().get_float("bias", 1.0f);
  const int64_t size = ctx.attrs().get_int("size");
  const int64_t N = x.dim(0), C = x.dim(1), S = x.numel() / std::max<int64_t>(N * C, 1);
  const int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Tensor y(ctx.output_type(0));
  dispatch_dtype<KORCH_NORM_TYPES>(x.dtype(), "LRN", [&](auto t) {
    using T = decltype(t);
    const T* p = x.data<T>();
    T* q = y.data<T>();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t s = 0; s < S; ++s) {
          double sq = 0;
          for (int64_t k = std::max<int64_t>(0, c - lo); k <= std::min(C - 1, c + hi); ++k) {
            double v = to_double(p[(n * C + k) * S + s]);
            sq += v * v;
          }
          int64_t i = (n * C + c) * S + s;
          q[i] = from_double<T>(to_double(p[i]) / std::pow(bias + alpha / static_cast<double>(size) * sq, beta));
        }
  });
  return {y};
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  r.add(make_op("BatchNormalization", 1, infer_batchnorm, eval_batchnorm));
  r.add(make_op("InstanceNormalization", 1, infer_instancenorm, eval_instancenorm));
  r.add(make_op("LayerNormalization", 17, infer_layernorm, eval_layernorm));
  r.add(make_op("GroupNormalization", 18, infer_groupnorm, eval_groupnorm));
  r.add(make_op("LpNormalization", 1, infer_lpnorm, eval_lpnorm));
  r.add(make_op("MeanVarianceNormalization", 9, infer_mvn, eval_mvn));
  r.add(make_op("LRN", 1, infer_lrn, eval_lrn));
}

}  // namespace korch
