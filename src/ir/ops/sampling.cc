// Sampling family, part 1: GridSample (opsets 16, 20..22), AffineGrid (20..22), RoiAlign (10, 16..22).
// Part 2 (sampling_misc.cc): MaxUnpool, CenterCropPad, Col2Im.
//
// Semantics follow the ONNX spec and onnx.reference (which mirrors PyTorch for GridSample/AffineGrid
// and ONNX Runtime for RoiAlign). Float inputs (f32, f64, f16, bf16) are computed in double, except
// GridSample's denormalised coordinates, which are computed in float as in the reference (this
// decides the nearest-mode ties).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ir/ops/op_util.h"
#include "ir/ops/sampling_internal.h"

namespace korch {

namespace {

using ops::kIsHalf;

#define SAMPLING_FLOAT_TYPES float, double, Float16, BFloat16

void require_float(DType t, const char* op, const char* what) {
  if (!is_float(t)) fail_unsupported("{}: element type {} of {} is not supported (float types only)", op, dtype_name(t), what);
}

// ------------------------------------------------------------------------------------------------
// GridSample

enum class GsMode { kNearest, kLinear, kCubic };
enum class GsPad { kZeros, kBorder, kReflection };

constexpr int kMaxGsDims = 6;  // spatial dims

struct GsSpec {
  GsMode mode = GsMode::kLinear;
  GsPad pad = GsPad::kZeros;
  bool align = false;
};

GsSpec gs_spec(const Attributes& a, int opset) {
  GsSpec s;
  const std::string mode = a.get_string("mode", opset >= 20 ? "linear" : "bilinear");
  if (mode == "nearest") s.mode = GsMode::kNearest;
  else if (mode == (opset >= 20 ? "linear" : "bilinear")) s.mode = GsMode::kLinear;
  else if (mode == (opset >= 20 ? "cubic" : "bicubic")) s.mode = GsMode::kCubic;
  else fail("GridSample: unknown mode '{}' (opset {})", mode, opset);
  const std::string pad = a.get_string("padding_mode", "zeros");
  if (pad == "zeros") s.pad = GsPad::kZeros;
  else if (pad == "border") s.pad = GsPad::kBorder;
  else if (pad == "reflection") s.pad = GsPad::kReflection;
  else fail("GridSample: unknown padding_mode '{}'", pad);
  const int64_t ac = a.get_int("align_corners", 0);
  if (ac != 0 && ac != 1) fail("GridSample: align_corners must be 0 or 1, got {}", ac);
  s.align = ac != 0;
  return s;
}

Shape gs_output_shape(const Shape& x, const Shape& grid, int opset) {
  const size_t rank = x.size();
  if (opset < 20 && rank != 4) fail("GridSample-{}: X must be 4-D (N, C, H, W), got {}", opset, shape_str(x));
  if (rank < 3) fail("GridSample: X must have rank >= 3, got {}", shape_str(x));
  if (rank - 2 > kMaxGsDims) fail_unsupported("GridSample with {} spatial dimensions is not supported (at most {})", rank - 2, kMaxGsDims);
  if (grid.size() != rank) fail("GridSample: grid must have the rank of X ({}), got {}", rank, shape_str(grid));
  if (grid[0] != x[0]) fail("GridSample: grid batch {} does not match X batch {}", grid[0], x[0]);
  if (grid[rank - 1] != static_cast<int64_t>(rank - 2))
    fail("GridSample: last grid dimension must be {} (spatial rank of X), got {}", rank - 2, grid[rank - 1]);
  Shape out = {x[0], x[1]};
  for (size_t i = 1; i + 1 < rank; ++i) out.push_back(grid[i]);
  return out;
}

// Reflects x into [lo, hi] by the nearer border (repeatedly).
double gs_reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (!(rng > 0)) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = std::floor(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = std::floor(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double c[4]) {
  constexpr double A = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  c[0] = ((A * x0 - 5 * A) * x0 + 8 * A) * x0 - 4 * A;
  c[1] = ((A + 2) * x1 - (A + 3)) * x1 * x1 + 1;
  c[2] = ((A + 2) * x2 - (A + 3)) * x2 * x2 + 1;
  c[3] = ((A * x3 - 5 * A) * x3 + 8 * A) * x3 - 4 * A;
}

// Taps of one spatial axis for one sample point: input indices (-1: contributes zero) and weights.
struct AxisTaps {
  int n = 0;
  int64_t idx[4];
  double w[4];
};

// Resolves an integer tap index against the padding mode; -1 when it contributes zero.
inline int64_t gs_resolve(int64_t i, int64_t dim, GsPad pad, double lo, double hi) {
  if (i >= 0 && i < dim) return i;
  switch (pad) {
    case GsPad::kZeros: return -1;
    case GsPad::kBorder: return std::clamp<int64_t>(i, 0, dim - 1);
    default: {
      int64_t r = static_cast<int64_t>(gs_reflect(static_cast<double>(i), lo, hi));
      return std::clamp<int64_t>(r, 0, dim - 1);
    }
  }
}

void gs_axis_taps(float g, int64_t dim, const GsSpec& s, AxisTaps& t) {
  const float fd = static_cast<float>(dim);
  float xf = s.align ? (g + 1.f) / 2.f * (fd - 1.f) : ((g + 1.f) * fd - 1.f) / 2.f;
  if (s.mode == GsMode::kNearest) xf = std::nearbyint(xf);
  double x = xf;
  const double lo = s.align ? 0.0 : -0.5;
  const double hi = s.align ? static_cast<double>(dim) - 1.0 : static_cast<double>(dim) - 0.5;
  if (x < lo || x > hi) {
    if (s.pad == GsPad::kBorder) x = std::clamp(x, 0.0, static_cast<double>(dim) - 1.0);
    else if (s.pad == GsPad::kReflection) x = gs_reflect(x, lo, hi);
  }
  // Far outside (or NaN): every tap lies outside; keep the integer conversions below defined.
  if (!(x >= -4.0)) x = -4.0;
  if (x > static_cast<double>(dim) + 3.0) x = static_cast<double>(dim) + 3.0;
  if (s.mode == GsMode::kNearest) {
    t.n = 1;
    t.idx[0] = gs_resolve(static_cast<int64_t>(x), dim, s.pad, lo, hi);
    t.w[0] = 1.0;
    return;
  }
  const double x0 = std::floor(x);
  const int64_t i0 = static_cast<int64_t>(x0);
  const double f = x - x0;
  if (s.mode == GsMode::kLinear) {
    t.n = 2;
    t.idx[0] = gs_resolve(i0, dim, s.pad, lo, hi);
    t.idx[1] = gs_resolve(i0 + 1, dim, s.pad, lo, hi);
    t.w[0] = 1.0 - f;
    t.w[1] = f;
    return;
  }
  t.n = 4;
  cubic_coeffs(f, t.w);
  for (int k = 0; k < 4; ++k) t.idx[k] = gs_resolve(i0 - 1 + k, dim, s.pad, lo, hi);
}

template <typename T>
Tensor run_grid_sample(const Tensor& x, const Tensor& grid, const GsSpec& s, const Shape& out_shape) {
  Tensor y(x.dtype(), out_shape);
  const int64_t N = x.dim(0), C = x.dim(1);
  const int r = static_cast<int>(x.rank()) - 2;
  int64_t in_sp = 1, out_sp = 1;
  for (int i = 0; i < r; ++i) {
    in_sp *= x.dim(2 + i);
    out_sp *= out_shape[static_cast<size_t>(2 + i)];
  }
  if (y.numel() == 0) return y;
  std::vector<float> g = grid.to_float_vector();
  std::vector<int64_t> in_strides(static_cast<size_t>(r));
  {
    int64_t st = 1;
    for (int i = r - 1; i >= 0; --i) {
      in_strides[static_cast<size_t>(i)] = st;
      st *= x.dim(2 + i);
    }
  }
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  int64_t max_taps = 1;
  const int per_axis = s.mode == GsMode::kNearest ? 1 : s.mode == GsMode::kLinear ? 2 : 4;
  for (int i = 0; i < r; ++i) max_taps *= per_axis;
  const int64_t total = N * out_sp;
#pragma omp parallel
  {
    std::vector<int64_t> off(static_cast<size_t>(max_taps));
    std::vector<double> wt(static_cast<size_t>(max_taps));
    AxisTaps taps[kMaxGsDims];
#pragma omp for schedule(static)
    for (int64_t q = 0; q < total; ++q) {
      const int64_t n = q / out_sp, p = q % out_sp;
      const float* gp = g.data() + q * r;
      // grid components are (x, y, z...): component j addresses spatial axis r-1-j.
      for (int i = 0; i < r; ++i) gs_axis_taps(gp[r - 1 - i], x.dim(2 + i), s, taps[i]);
      // Tensor product of the per-axis taps, dropping zero-contributing ones.
      int64_t nt = 1;
      off[0] = 0;
      wt[0] = 1.0;
      for (int i = 0; i < r && nt > 0; ++i) {
        int valid = 0;
        for (int k = 0; k < taps[i].n; ++k) valid += taps[i].idx[k] >= 0;
        // Expand in place, from the back so entries are read before they are overwritten.
        for (int64_t a = nt - 1; a >= 0; --a) {
          const int64_t base_off = off[static_cast<size_t>(a)];
          const double base_w = wt[static_cast<size_t>(a)];
          int64_t dst = a * valid + valid - 1;
          for (int k = taps[i].n - 1; k >= 0; --k) {
            if (taps[i].idx[k] < 0) continue;
            off[static_cast<size_t>(dst)] = base_off + taps[i].idx[k] * in_strides[static_cast<size_t>(i)];
            wt[static_cast<size_t>(dst)] = base_w * taps[i].w[k];
            --dst;
          }
        }
        nt *= valid;
      }
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = xd + (n * C + c) * in_sp;
        double acc = 0.0;
        for (int64_t k = 0; k < nt; ++k) acc += wt[static_cast<size_t>(k)] * ops::to_double(xp[off[static_cast<size_t>(k)]]);
        yd[(n * C + c) * out_sp + p] = ops::from_double<T>(acc);
      }
    }
  }
  return y;
}

OpDef grid_sample_op() {
  OpDef d;
  d.op_type = "GridSample";
  d.min_opset = 16;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    const TensorType& grid = ctx.input(1);
    gs_spec(ctx.attrs(), ctx.opset);
    require_float(x.dtype, "GridSample", "X");
    require_float(grid.dtype, "GridSample", "grid");
    return ops::one(x.dtype, gs_output_shape(x.shape, grid.shape, ctx.opset));
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& grid = ctx.input(1);
    GsSpec s = gs_spec(ctx.attrs(), ctx.opset);
    const Shape out = ctx.output_type(0).shape;
    return dispatch_dtype<SAMPLING_FLOAT_TYPES>(x.dtype(), "GridSample", [&](auto t) {
      using T = decltype(t);
      return std::vector<Tensor>{run_grid_sample<T>(x, grid, s, out)};
    });
  };
  return d;
}

// ------------------------------------------------------------------------------------------------
// AffineGrid

struct AgSpec {
  int nd = 2;          // 2 or 3
  Shape out;           // (N, H, W, 2) or (N, D, H, W, 3)
  std::vector<int64_t> spatial;  // (H, W) or (D, H, W)
};

AgSpec ag_spec(const Shape& theta, const Tensor& size_t_) {
  if (size_t_.rank() != 1) fail("AffineGrid: size must be a 1-D tensor, got shape {}", shape_str(size_t_.shape()));
  if (!is_integer(size_t_.dtype())) fail("AffineGrid: size must be int64, got {}", dtype_name(size_t_.dtype()));
  std::vector<int64_t> sz = size_t_.to_int_vector();
  if (sz.size() != 4 && sz.size() != 5) fail("AffineGrid: size must have 4 (2-D) or 5 (3-D) values, got {}", sz.size());
  for (int64_t v : sz)
    if (v < 0) fail("AffineGrid: size values must be non-negative, got {}", v);
  AgSpec s;
  s.nd = static_cast<int>(sz.size()) - 2;
  const int64_t nd = s.nd;
  if (theta.size() != 3 || theta[1] != nd || theta[2] != nd + 1)
    fail("AffineGrid: theta must have shape (N, {}, {}) for a {}-D size, got {}", nd, nd + 1, nd, shape_str(theta));
  if (theta[0] != sz[0]) fail("AffineGrid: theta batch {} does not match size[0] = {}", theta[0], sz[0]);
  s.out = {sz[0]};
  for (size_t i = 2; i < sz.size(); ++i) {
    s.spatial.push_back(sz[i]);
    s.out.push_back(sz[i]);
  }
  s.out.push_back(nd);
  return s;
}

// Evenly spaced base coordinates in [-1, 1] for one axis.
std::vector<double> ag_base(int64_t n, bool align) {
  std::vector<double> v(static_cast<size_t>(n));
  if (n <= 1) return std::vector<double>(static_cast<size_t>(n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    if (align) v[static_cast<size_t>(i)] = -1.0 + static_cast<double>(i) * (2.0 / static_cast<double>(n - 1));
    else {
      const double step = 2.0 / static_cast<double>(n);
      v[static_cast<size_t>(i)] = (-1.0 + step / 2.0) + static_cast<double>(i) * step;
    }
  }
  return v;
}

template <typename T>
Tensor run_affine_grid(const Tensor& theta, const AgSpec& s, bool align) {
  Tensor y(theta.dtype(), s.out);
  const T* th = theta.data<T>();
  T* yd = y.data<T>();
  const int nd = s.nd;
  const int64_t N = s.out[0];
  // Axis order: x varies along the last spatial axis (W), y along H, z along D.
  std::vector<std::vector<double>> base;
  for (int i = 0; i < nd; ++i) base.push_back(ag_base(s.spatial[static_cast<size_t>(i)], align));
  const int64_t D = nd == 3 ? s.spatial[0] : 1;
  const int64_t H = s.spatial[static_cast<size_t>(nd - 2)], W = s.spatial[static_cast<size_t>(nd - 1)];
  const std::vector<double>& bw = base[static_cast<size_t>(nd - 1)];
  const std::vector<double>& bh = base[static_cast<size_t>(nd - 2)];
  int64_t o = 0;
  for (int64_t n = 0; n < N; ++n) {
    double m[3][4];
    for (int i = 0; i < nd; ++i)
      for (int j = 0; j <= nd; ++j) m[i][j] = ops::to_double(th[(n * nd + i) * (nd + 1) + j]);
    for (int64_t dz = 0; dz < D; ++dz)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          double p[4];
          if (nd == 2) {
            p[0] = bw[static_cast<size_t>(w)];
            p[1] = bh[static_cast<size_t>(h)];
            p[2] = 1.0;
          } else {
            p[0] = bw[static_cast<size_t>(w)];
            p[1] = bh[static_cast<size_t>(h)];
            p[2] = base[0][static_cast<size_t>(dz)];
            p[3] = 1.0;
          }
          for (int i = 0; i < nd; ++i) {
            double acc = 0.0;
            for (int j = 0; j <= nd; ++j) acc += m[i][j] * p[j];
            yd[o++] = ops::from_double<T>(acc);
          }
        }
  }
  return y;
}

OpDef affine_grid_op() {
  OpDef d;
  d.op_type = "AffineGrid";
  d.min_opset = 20;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& theta = ctx.input(0);
    require_float(theta.dtype, "AffineGrid", "theta");
    const int64_t ac = ctx.attrs().get_int("align_corners", 0);
    if (ac != 0 && ac != 1) fail("AffineGrid: align_corners must be 0 or 1, got {}", ac);
    AgSpec s = ag_spec(theta.shape, ctx.require_constant(1, "AffineGrid size"));
    return ops::one(theta.dtype, s.out);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& theta = ctx.input(0);
    AgSpec s = ag_spec(theta.shape(), ctx.input(1));
    const bool align = ctx.attrs().get_int("align_corners", 0) != 0;
    return dispatch_dtype<SAMPLING_FLOAT_TYPES>(theta.dtype(), "AffineGrid", [&](auto t) {
      using T = decltype(t);
      return std::vector<Tensor>{run_affine_grid<T>(theta, s, align)};
    });
  };
  return d;
}

// ------------------------------------------------------------------------------------------------
// RoiAlign

struct RoiSpec {
  bool max_mode = false;
  bool half_pixel = true;  // opset 16+ default; opset 10 behaves as output_half_pixel
  int64_t oh = 1, ow = 1;
  int64_t sampling_ratio = 0;
  double spatial_scale = 1.0;
};

RoiSpec roi_spec(const Attributes& a, int opset) {
  RoiSpec s;
  const std::string mode = a.get_string("mode", "avg");
  if (mode == "max") s.max_mode = true;
  else if (mode != "avg") fail("RoiAlign: unknown mode '{}'", mode);
  if (opset >= 16) {
    const std::string ctm = a.get_string("coordinate_transformation_mode", "half_pixel");
    if (ctm == "output_half_pixel") s.half_pixel = false;
    else if (ctm != "half_pixel") fail("RoiAlign: unknown coordinate_transformation_mode '{}'", ctm);
  } else {
    s.half_pixel = false;
  }
  s.oh = a.get_int("output_height", 1);
  s.ow = a.get_int("output_width", 1);
  if (s.oh < 1 || s.ow < 1) fail("RoiAlign: output_height/output_width must be >= 1, got {}x{}", s.oh, s.ow);
  s.sampling_ratio = a.get_int("sampling_ratio", 0);
  if (s.sampling_ratio < 0) fail("RoiAlign: sampling_ratio must be >= 0, got {}", s.sampling_ratio);
  s.spatial_scale = a.get_float("spatial_scale", 1.f);
  return s;
}

Shape roi_output_shape(const Shape& x, const Shape& rois, const Shape& bi, const RoiSpec& s) {
  if (x.size() != 4) fail("RoiAlign: X must be 4-D (N, C, H, W), got {}", shape_str(x));
  if (rois.size() != 2 || rois[1] != 4) fail("RoiAlign: rois must have shape (num_rois, 4), got {}", shape_str(rois));
  if (bi.size() != 1 || bi[0] != rois[0])
    fail("RoiAlign: batch_indices must have shape ({}), got {}", rois[0], shape_str(bi));
  return {rois[0], x[1], s.oh, s.ow};
}

constexpr int64_t kMaxRoiSamples = int64_t{1} << 24;  // per output bin: guards against absurd rois

template <typename T>
Tensor run_roi_align(const Tensor& x, const Tensor& rois, const Tensor& bi, const RoiSpec& s, const Shape& out_shape) {
  Tensor y(x.dtype(), out_shape);
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const int64_t R = rois.dim(0), PH = s.oh, PW = s.ow;
  const T* xd = x.data<T>();
  const T* rd = rois.data<T>();
  std::vector<int64_t> bidx = bi.to_int_vector();
  T* yd = y.data<T>();
  struct Sample {
    int64_t pos[4];
    double w[4];
  };
  for (int64_t n = 0; n < R; ++n) {
    const int64_t b = bidx[static_cast<size_t>(n)];
    if (b < 0 || b >= N) fail("RoiAlign: batch index {} of roi {} is out of range [0, {})", b, n, N);
    const double off = s.half_pixel ? 0.5 : 0.0;
    const double sw = ops::to_double(rd[n * 4 + 0]) * s.spatial_scale - off;
    const double sh = ops::to_double(rd[n * 4 + 1]) * s.spatial_scale - off;
    const double ew = ops::to_double(rd[n * 4 + 2]) * s.spatial_scale - off;
    const double eh = ops::to_double(rd[n * 4 + 3]) * s.spatial_scale - off;
    double rw = ew - sw, rh = eh - sh;
    if (!s.half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / static_cast<double>(PH), bw = rw / static_cast<double>(PW);
    auto grid_count = [&](double v) -> int64_t {
      if (s.sampling_ratio > 0) return s.sampling_ratio;
      const double c = std::ceil(v);
      if (!(c > 0)) return 0;
      if (c > static_cast<double>(kMaxRoiSamples)) fail("RoiAlign: roi {} is too large to sample", n);
      return static_cast<int64_t>(c);
    };
    const int64_t gh = grid_count(bh), gw = grid_count(bw);
    if (gh * gw > kMaxRoiSamples) fail("RoiAlign: roi {} is too large to sample", n);
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    // Sample positions and bilinear weights, shared by all channels.
    std::vector<Sample> samples(static_cast<size_t>(PH * PW * gh * gw));
    size_t si = 0;
    for (int64_t ph = 0; ph < PH; ++ph)
      for (int64_t pw = 0; pw < PW; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy) {
          const double yy0 = sh + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            const double xx0 = sw + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
            Sample& sm = samples[si++];
            double yy = yy0, xx = xx0;
            if (!(yy >= -1.0 && yy <= static_cast<double>(H) && xx >= -1.0 && xx <= static_cast<double>(W))) {
              for (int k = 0; k < 4; ++k) {
                sm.pos[k] = 0;
                sm.w[k] = 0.0;
              }
              continue;
            }
            yy = std::max(yy, 0.0);
            xx = std::max(xx, 0.0);
            int64_t yl = static_cast<int64_t>(yy), xl = static_cast<int64_t>(xx), yh, xh;
            if (yl >= H - 1) {
              yh = yl = H - 1;
              yy = static_cast<double>(yl);
            } else {
              yh = yl + 1;
            }
            if (xl >= W - 1) {
              xh = xl = W - 1;
              xx = static_cast<double>(xl);
            } else {
              xh = xl + 1;
            }
            const double ly = yy - static_cast<double>(yl), lx = xx - static_cast<double>(xl);
            const double hy = 1.0 - ly, hx = 1.0 - lx;
            sm.pos[0] = yl * W + xl;
            sm.pos[1] = yl * W + xh;
            sm.pos[2] = yh * W + xl;
            sm.pos[3] = yh * W + xh;
            sm.w[0] = hy * hx;
            sm.w[1] = hy * lx;
            sm.w[2] = ly * hx;
            sm.w[3] = ly * lx;
          }
        }
    const int64_t per_bin = gh * gw;
#pragma omp parallel for schedule(static) if (C * PH * PW * per_bin > 4096)
    for (int64_t c = 0; c < C; ++c) {
      const T* xp = xd + (b * C + c) * H * W;
      T* yp = yd + (n * C + c) * PH * PW;
      for (int64_t bin = 0; bin < PH * PW; ++bin) {
        const Sample* sm = samples.data() + bin * per_bin;
        double v = 0.0;
        if (!s.max_mode) {
          for (int64_t k = 0; k < per_bin; ++k)
            v += sm[k].w[0] * ops::to_double(xp[sm[k].pos[0]]) + sm[k].w[1] * ops::to_double(xp[sm[k].pos[1]]) +
                 sm[k].w[2] * ops::to_double(xp[sm[k].pos[2]]) + sm[k].w[3] * ops::to_double(xp[sm[k].pos[3]]);
          v /= count;
        } else {
          // As onnx.reference / ONNX Runtime: the max over samples of the max weighted corner.
          for (int64_t k = 0; k < per_bin; ++k) {
            double m = sm[k].w[0] * ops::to_double(xp[sm[k].pos[0]]);
            for (int j = 1; j < 4; ++j) m = std::max(m, sm[k].w[j] * ops::to_double(xp[sm[k].pos[j]]));
            v = k == 0 ? m : std::max(v, m);
          }
        }
        yp[bin] = ops::from_double<T>(v);
      }
    }
  }
  return y;
}

OpDef roi_align_op() {
  OpDef d;
  d.op_type = "RoiAlign";
  d.min_opset = 10;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    const TensorType& rois = ctx.input(1);
    const TensorType& bi = ctx.input(2);
    RoiSpec s = roi_spec(ctx.attrs(), ctx.opset);
    require_float(x.dtype, "RoiAlign", "X");
    if (rois.dtype != x.dtype) fail("RoiAlign: rois type {} differs from X type {}", dtype_name(rois.dtype), dtype_name(x.dtype));
    if (bi.dtype != DType::kInt64) fail("RoiAlign: batch_indices must be int64, got {}", dtype_name(bi.dtype));
    return ops::one(x.dtype, roi_output_shape(x.shape, rois.shape, bi.shape, s));
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    RoiSpec s = roi_spec(ctx.attrs(), ctx.opset);
    const Shape out = ctx.output_type(0).shape;
    if (x.dim(2) == 0 || x.dim(3) == 0) {
      if (ctx.input(1).dim(0) > 0 && x.dim(1) > 0) fail("RoiAlign: X has an empty spatial extent {}", shape_str(x.shape()));
    }
    return dispatch_dtype<SAMPLING_FLOAT_TYPES>(x.dtype(), "RoiAlign", [&](auto t) {
      using T = decltype(t);
      return std::vector<Tensor>{run_roi_align<T>(x, ctx.input(1), ctx.input(2), s, out)};
    });
  };
  return d;
}

}  // namespace

void register_sampling_ops(OpRegistry& r) {
  r.add(grid_sample_op());
  r.add(affine_grid_op());
  r.add(roi_align_op());
  detail::register_sampling_misc_ops(r);
}

}  // namespace korch
