// Resize family: Resize (opsets 10..22) and Upsample (opsets 7..9).
//
// Every resized axis gets a table computed once: for each output coordinate, the input indices
// (already clamped, i.e. edge padding) and weights of its taps, plus a tf_crop_and_resize
// "extrapolated" flag. Interpolation is separable, so the output is the tensor product of the
// per-axis tables. When only the last two axes are resized (NCHW images, the common case) one
// fused 2-D loop per plane does the work; otherwise axes are resampled one at a time in double.
// Semantics follow the ONNX spec (and onnx.reference for the details the spec leaves open).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/op_util.h"

namespace korch {
namespace {

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord { kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfCropAndResize,
                   kTfHalfPixelForNN };
// kSimple: Resize-10 / Upsample ("floor" when upsampling, "ceil" when downsampling, as ONNX Runtime).
enum class Nearest { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeSpec {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  Nearest nearest = Nearest::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
  std::vector<int64_t> axes;   // the axes roi/scales/sizes refer to (all axes when not given)
  std::vector<double> scales;  // per axis of X (1 for axes not resized)
  Shape out;                   // output shape
};

Mode parse_mode(const std::string& s, bool upsample) {
  if (s == "nearest") return Mode::kNearest;
  if (s == "linear" || (upsample && s == "bilinear")) return Mode::kLinear;
  if (s == "cubic" && !upsample) return Mode::kCubic;
  fail("{}: unknown mode '{}'", upsample ? "Upsample" : "Resize", s);
}

Coord parse_coord(const std::string& s, int opset) {
  if (s == "half_pixel") return Coord::kHalfPixel;
  if (s == "half_pixel_symmetric") return Coord::kHalfPixelSymmetric;
  if (s == "pytorch_half_pixel") return Coord::kPytorchHalfPixel;
  if (s == "align_corners") return Coord::kAlignCorners;
  if (s == "asymmetric") return Coord::kAsymmetric;
  if (s == "tf_crop_and_resize") return Coord::kTfCropAndResize;
  if (s == "tf_half_pixel_for_nn" && opset < 13) return Coord::kTfHalfPixelForNN;
  fail("Resize: unknown coordinate_transformation_mode '{}'", s);
}

Nearest parse_nearest(const std::string& s) {
  if (s == "round_prefer_floor") return Nearest::kRoundPreferFloor;
  if (s == "round_prefer_ceil") return Nearest::kRoundPreferCeil;
  if (s == "floor") return Nearest::kFloor;
  if (s == "ceil") return Nearest::kCeil;
  fail("Resize: unknown nearest_mode '{}'", s);
}

std::vector<double> float_values(const Tensor& t, const char* what) {
  if (!is_float(t.dtype())) fail("{} must be a float tensor, got {}", what, dtype_name(t.dtype()));
  if (t.rank() != 1) fail("{} must be a 1-D tensor, got shape {}", what, shape_str(t.shape()));
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_as_double(i);
  return v;
}

// The op's scales/sizes inputs: each is "absent" when omitted or empty.
struct ResizeArgs {
  bool upsample = false;
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
};

ResizeSpec resize_spec(const Attributes& a, int opset, const Shape& in, const ResizeArgs& args) {
  ResizeSpec s;
  const int64_t rank = static_cast<int64_t>(in.size());
  s.mode = parse_mode(a.get_string("mode", "nearest"), args.upsample);
  const bool modern = !args.upsample && opset >= 11;
  if (modern) {
    s.coord = parse_coord(a.get_string("coordinate_transformation_mode", "half_pixel"), opset);
    s.nearest = parse_nearest(a.get_string("nearest_mode", "round_prefer_floor"));
    s.cubic_a = a.get_float("cubic_coeff_a", -0.75f);
    s.exclude_outside = a.get_int("exclude_outside", 0) != 0;
    s.extrapolation = a.get_float("extrapolation_value", 0.f);
  } else {
    s.coord = Coord::kAsymmetric;
    s.nearest = Nearest::kSimple;
  }
  std::string policy = "stretch";
  if (modern && opset >= 18) {
    s.antialias = a.get_int("antialias", 0) != 0;
    policy = a.get_string("keep_aspect_ratio_policy", "stretch");
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
      fail("Resize: unknown keep_aspect_ratio_policy '{}'", policy);
    if (a.has("axes")) {
      for (int64_t ax : a.get_ints("axes")) {
        if (ax < -rank || ax >= rank) fail("Resize: axis {} is out of range for rank {}", ax, rank);
        if (ax < 0) ax += rank;
        if (std::find(s.axes.begin(), s.axes.end(), ax) != s.axes.end()) fail("Resize: axis {} is repeated", ax);
        s.axes.push_back(ax);
      }
    }
  }
  if (s.axes.empty() && !(modern && opset >= 18 && a.has("axes")))
    for (int64_t i = 0; i < rank; ++i) s.axes.push_back(i);
  const size_t naxes = s.axes.size();

  s.scales.assign(static_cast<size_t>(rank), 1.0);
  s.out = in;
  const char* op = args.upsample ? "Upsample" : "Resize";
  const bool have_scales = args.scales && args.scales->numel() > 0;
  const bool have_sizes = args.sizes && args.sizes->numel() > 0;
  if (have_scales && have_sizes) fail("Resize: only one of 'scales' and 'sizes' may be given");
  if (!have_scales && !have_sizes) fail("{}: one of 'scales' and 'sizes' must be given", op);
  if (have_scales) {
    std::vector<double> sc = float_values(*args.scales, "scales");
    if (sc.size() != naxes) fail("{}: scales has {} values, expected {}", op, sc.size(), naxes);
    for (size_t i = 0; i < naxes; ++i) {
      const double v = sc[i];
      if (!(v > 0) || !std::isfinite(v)) fail("{}: scales must be positive, got {}", op, v);
      if (args.upsample && v < 1) fail("Upsample: scales must be >= 1, got {}", v);
      const size_t ax = static_cast<size_t>(s.axes[i]);
      s.scales[ax] = v;
      const double o = std::floor(v * static_cast<double>(in[ax]));
      if (o > 4.0e12) fail("{}: output dimension {} is too large", op, o);
      s.out[ax] = static_cast<int64_t>(o);
    }
  } else {
    const Tensor& t = *args.sizes;
    if (t.dtype() != DType::kInt64) fail("Resize: sizes must be int64, got {}", dtype_name(t.dtype()));
    if (t.rank() != 1) fail("Resize: sizes must be a 1-D tensor, got shape {}", shape_str(t.shape()));
    std::vector<int64_t> sz = t.to_int_vector();
    if (sz.size() != naxes) fail("Resize: sizes has {} values, expected {}", sz.size(), naxes);
    for (size_t i = 0; i < naxes; ++i) {
      const size_t ax = static_cast<size_t>(s.axes[i]);
      if (sz[i] < 0) fail("Resize: sizes must be non-negative, got {}", sz[i]);
      if (in[ax] == 0 && sz[i] != 0) fail("Resize: cannot resize axis {} of size 0 to {}", ax, sz[i]);
      s.scales[ax] = in[ax] == 0 ? 1.0 : static_cast<double>(sz[i]) / static_cast<double>(in[ax]);
      s.out[ax] = sz[i];
    }
    if (policy != "stretch") {
      double scale = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (int64_t ax : s.axes) {
        const double v = s.scales[static_cast<size_t>(ax)];
        scale = policy == "not_larger" ? std::min(scale, v) : std::max(scale, v);
      }
      for (int64_t ax : s.axes) {
        const size_t u = static_cast<size_t>(ax);
        s.scales[u] = scale;
        s.out[u] = static_cast<int64_t>(std::floor(scale * static_cast<double>(in[u]) + 0.5));
      }
    }
  }
  for (size_t ax = 0; ax < s.scales.size(); ++ax)
    if (s.out[ax] > 0 && in[ax] == 0) fail("{}: cannot resize axis {} of size 0", op, ax);
  return s;
}

// ---------------------------------------------------------------- per-axis tables

struct AxisTable {
  int64_t taps = 1;
  std::vector<int64_t> idx;       // out * taps input indices (clamped)
  std::vector<double> w;          // out * taps weights (empty for nearest)
  std::vector<uint8_t> extrap;    // out flags (empty when none)
  bool identity = true;
};

void cubic_coeffs(double r, double A, double* c) {
  const double r1 = r + 1, q = 1 - r, q1 = q + 1;
  c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
  c[1] = ((A + 2) * r - (A + 3)) * r * r + 1;
  c[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
  c[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
}

double cubic_kernel(double x, double A) {
  x = std::fabs(x);
  const double x2 = x * x, x3 = x2 * x;
  if (x <= 1) return (A + 2) * x3 - (A + 3) * x2 + 1;
  if (x < 2) return A * x3 - 5 * A * x2 + 8 * A * x - 4 * A;
  return 0.0;
}

// Number of taps per output coordinate for `mode` at `scale`.
int64_t tap_count(const ResizeSpec& s, double scale) {
  if (s.mode == Mode::kNearest) return 1;
  if (!s.antialias) return s.mode == Mode::kLinear ? 2 : 4;
  const double sc = std::min(scale, 1.0);
  const int64_t start = static_cast<int64_t>(std::floor((s.mode == Mode::kLinear ? -1.0 : -2.0) / sc)) + 1;
  return 2 - 2 * start;
}

AxisTable make_table(const ResizeSpec& s, int64_t axis, int64_t in_w, int64_t out_w, double roi_start,
                     double roi_end, bool has_roi) {
  AxisTable t;
  const double scale = s.scales[static_cast<size_t>(axis)];
  const bool crop = s.coord == Coord::kTfCropAndResize;
  const bool roi_default = !crop || !has_roi || (std::fabs(roi_start) < 1e-9 && std::fabs(roi_end - 1.0) < 1e-9);
  if (in_w == out_w && std::fabs(scale - 1.0) <= 1e-9 && roi_default) {
    t.identity = true;
    t.idx.resize(static_cast<size_t>(out_w));
    for (int64_t i = 0; i < out_w; ++i) t.idx[static_cast<size_t>(i)] = i;
    return t;
  }
  t.identity = false;
  const int64_t n = tap_count(s, scale);
  t.taps = n;
  t.idx.resize(static_cast<size_t>(out_w * n));
  if (s.mode != Mode::kNearest) t.w.resize(static_cast<size_t>(out_w * n));
  if (crop) t.extrap.assign(static_cast<size_t>(out_w), 0);
  const double W = static_cast<double>(in_w);
  const double out_f = scale * W;  // possibly fractional output width
  const double aa_scale = std::min(scale, 1.0);
  for (int64_t y = 0; y < out_w; ++y) {
    const double yd = static_cast<double>(y);
    double x = 0;
    switch (s.coord) {
      case Coord::kHalfPixel: x = (yd + 0.5) / scale - 0.5; break;
      case Coord::kHalfPixelSymmetric: {
        const double adjustment = static_cast<double>(out_w) / out_f;
        const double center = W / 2;
        x = center * (1 - adjustment) + (yd + 0.5) / scale - 0.5;
        break;
      }
      case Coord::kPytorchHalfPixel: x = out_w > 1 ? (yd + 0.5) / scale - 0.5 : 0.0; break;
      case Coord::kAlignCorners: x = out_w > 1 ? yd * (W - 1) / (out_f - 1) : 0.0; break;
      case Coord::kAsymmetric: x = yd / scale; break;
      case Coord::kTfHalfPixelForNN: x = (yd + 0.5) / scale; break;
      case Coord::kTfCropAndResize:
        x = out_w > 1 ? yd * (roi_end - roi_start) * (W - 1) / (out_f - 1) : (roi_end - roi_start) * (W - 1) / 2;
        x += roi_start * (W - 1);
        if (x < 0 || x > W - 1) t.extrap[static_cast<size_t>(y)] = 1;
        break;
    }
    int64_t* ip = &t.idx[static_cast<size_t>(y * n)];
    const double fl = std::floor(x);
    if (s.mode == Mode::kNearest) {
      int64_t i;
      const double r = x - fl;
      if (r == 0) {
        i = static_cast<int64_t>(fl);
      } else {
        bool up = false;
        switch (s.nearest) {
          case Nearest::kRoundPreferFloor: up = r > 0.5; break;
          case Nearest::kRoundPreferCeil: up = r >= 0.5; break;
          case Nearest::kFloor: up = false; break;
          case Nearest::kCeil: up = true; break;
          case Nearest::kSimple: up = scale < 1; break;
        }
        i = static_cast<int64_t>(fl) + (up ? 1 : 0);
      }
      ip[0] = std::clamp<int64_t>(i, 0, in_w - 1);
      continue;
    }
    // ratio in (0, 1]: an integral x counts as ratio 1 from the pixel on its left.
    const double ratio = x == fl ? 1.0 : x - fl;
    double* wp = &t.w[static_cast<size_t>(y * n)];
    if (!s.antialias) {
      if (s.mode == Mode::kLinear) {
        wp[0] = 1 - ratio;
        wp[1] = ratio;
      } else {
        cubic_coeffs(ratio, s.cubic_a, wp);
      }
    } else {
      const int64_t start = 1 - n / 2;  // first tap offset relative to the pixel left of x
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const double arg = (static_cast<double>(start + k) - ratio) * aa_scale;
        const double c = s.mode == Mode::kLinear ? std::clamp(1 - std::fabs(arg), 0.0, 1.0) : cubic_kernel(arg, s.cubic_a);
        wp[k] = c;
        sum += c;
      }
      if (sum != 0)
        for (int64_t k = 0; k < n; ++k) wp[k] /= sum;
    }
    // Taps: the n indices nearest to x, ties to the smaller index.
    const double pad = std::ceil(static_cast<double>(n) / 2);
    const double xp = x + pad;
    const double pf = std::floor(xp);
    const double frac = xp - pf;
    int64_t off;
    if (n % 2 == 0)
      off = frac == 0 ? -(n / 2) : -(n / 2) + 1;
    else
      off = frac <= 0.5 ? -((n - 1) / 2) : -((n - 1) / 2) + 1;
    const int64_t first = static_cast<int64_t>(pf) + off - static_cast<int64_t>(pad);
    if (s.exclude_outside) {
      double sum = 0;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t i = first + k;
        if (i < 0 || i >= in_w) wp[k] = 0;
        sum += wp[k];
      }
      if (sum == 0) sum = 1;
      for (int64_t k = 0; k < n; ++k) wp[k] /= sum;
    }
    for (int64_t k = 0; k < n; ++k) ip[k] = std::clamp<int64_t>(first + k, 0, in_w - 1);
  }
  return t;
}

// ---------------------------------------------------------------- kernels

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kParallelWork = int64_t{1} << 16;

template <typename T>
T store(double v) {
  if constexpr (ops::kIsHalf<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    v = std::nearbyint(v);
    const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    const double hi = static_cast<double>(std::numeric_limits<T>::max());
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

// Only the last two axes are resized: planes [P, H, W] -> [P, OH, OW].
template <typename T>
void resize_2d(const T* in, T* out, int64_t planes, int64_t H, int64_t W, const AxisTable& ty, const AxisTable& tx,
               int64_t OH, int64_t OW, double extrap) {
  const T ev = store<T>(extrap);
  const bool nearest = ty.w.empty() && tx.w.empty() && ty.taps == 1 && tx.taps == 1;
  const int64_t rows = planes * OH;
  const int64_t ky = ty.taps, kx = tx.taps;
  const bool parallel = rows * OW * ky * kx >= kParallelWork;
  // Unit weights for an axis that is not resized (identity tables carry none).
  const std::vector<double> wys = ty.w.empty() ? std::vector<double>(static_cast<size_t>(OH * ky), 1.0) : ty.w;
  const std::vector<double> wxs = tx.w.empty() ? std::vector<double>(static_cast<size_t>(OW * kx), 1.0) : tx.w;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t p = row / OH, oy = row % OH;
    const T* src = in + p * H * W;
    T* dst = out + row * OW;
    const bool ey = !ty.extrap.empty() && ty.extrap[static_cast<size_t>(oy)];
    if (ey) {
      for (int64_t ox = 0; ox < OW; ++ox) dst[ox] = ev;
      continue;
    }
    const int64_t* iy = &ty.idx[static_cast<size_t>(oy * ky)];
    if (nearest) {
      const T* srow = src + iy[0] * W;
      const int64_t* ix = tx.idx.data();
      if (tx.extrap.empty()) {
        for (int64_t ox = 0; ox < OW; ++ox) dst[ox] = srow[ix[ox]];
      } else {
        for (int64_t ox = 0; ox < OW; ++ox) dst[ox] = tx.extrap[static_cast<size_t>(ox)] ? ev : srow[ix[ox]];
      }
      continue;
    }
    const double* wy = &wys[static_cast<size_t>(oy * ky)];
    auto row_loop = [&](auto KY, auto KX) {
      constexpr int64_t CY = decltype(KY)::value, CX = decltype(KX)::value;
      const int64_t ny = CY ? CY : ky, nx = CX ? CX : kx;
      for (int64_t ox = 0; ox < OW; ++ox) {
        if (!tx.extrap.empty() && tx.extrap[static_cast<size_t>(ox)]) {
          dst[ox] = ev;
          continue;
        }
        const int64_t* ix = &tx.idx[static_cast<size_t>(ox * nx)];
        const double* wx = &wxs[static_cast<size_t>(ox * nx)];
        double acc = 0;
        for (int64_t a = 0; a < ny; ++a) {
          const T* srow = src + iy[a] * W;
          double racc = 0;
          for (int64_t b = 0; b < nx; ++b) racc += wx[b] * ops::to_double(srow[ix[b]]);
          acc += wy[a] * racc;
        }
        dst[ox] = store<T>(acc);
      }
    };
    using I0 = std::integral_constant<int64_t, 0>;
    using I1 = std::integral_constant<int64_t, 1>;
    using I2 = std::integral_constant<int64_t, 2>;
    using I4 = std::integral_constant<int64_t, 4>;
    if (ky == 2 && kx == 2) row_loop(I2{}, I2{});
    else if (ky == 1 && kx == 2) row_loop(I1{}, I2{});
    else if (ky == 2 && kx == 1) row_loop(I2{}, I1{});
    else if (ky == 4 && kx == 4) row_loop(I4{}, I4{});
    else row_loop(I0{}, I0{});
  }
}

// General case: resample one axis at a time in double (as the ONNX reference does).
std::vector<double> resample_axis(const std::vector<double>& in, const Shape& shape, int64_t axis, const AxisTable& t,
                                  int64_t out_w, double extrap) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[static_cast<size_t>(i)];
  for (size_t i = static_cast<size_t>(axis) + 1; i < shape.size(); ++i) inner *= shape[i];
  const int64_t in_w = shape[static_cast<size_t>(axis)];
  std::vector<double> out(static_cast<size_t>(outer * out_w * inner));
  const int64_t k = t.taps;
  const bool parallel = outer * out_w * inner * k >= kParallelWork;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t y = 0; y < out_w; ++y) {
      double* dst = &out[static_cast<size_t>((o * out_w + y) * inner)];
      if (!t.extrap.empty() && t.extrap[static_cast<size_t>(y)]) {
        for (int64_t i = 0; i < inner; ++i) dst[i] = extrap;
        continue;
      }
      for (int64_t i = 0; i < inner; ++i) dst[i] = 0;
      for (int64_t a = 0; a < k; ++a) {
        const double w = t.w.empty() ? 1.0 : t.w[static_cast<size_t>(y * k + a)];
        const double* src = &in[static_cast<size_t>((o * in_w + t.idx[static_cast<size_t>(y * k + a)]) * inner)];
        for (int64_t i = 0; i < inner; ++i) dst[i] += w * src[i];
      }
    }
  }
  return out;
}

// Nearest in the general case: a pure gather, exact for every type.
template <typename T>
void gather_nd(const T* in, T* out, const Shape& in_shape, const Shape& out_shape, const std::vector<AxisTable>& tables,
               double extrap) {
  const T ev = store<T>(extrap);
  const int64_t rank = static_cast<int64_t>(out_shape.size());
  const std::vector<int64_t> in_strides = shape_strides(in_shape);
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    bool ex = false;
    for (int64_t d = 0; d < rank; ++d) {
      const AxisTable& t = tables[static_cast<size_t>(d)];
      const size_t y = static_cast<size_t>(idx[static_cast<size_t>(d)]);
      if (!t.extrap.empty() && t.extrap[y]) ex = true;
      off += t.idx[y] * in_strides[static_cast<size_t>(d)];
    }
    out[e] = ex ? ev : in[off];
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < out_shape[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
}

Tensor run_resize(const Tensor& x, const ResizeSpec& s, const Tensor* roi) {
  const Shape& in = x.shape();
  const int64_t rank = x.rank();
  std::vector<double> roi_start(static_cast<size_t>(rank), 0.0), roi_end(static_cast<size_t>(rank), 1.0);
  bool has_roi = false;
  if (s.coord == Coord::kTfCropAndResize && roi && roi->numel() > 0) {
    std::vector<double> r = float_values(*roi, "roi");
    const size_t na = s.axes.size();
    if (r.size() != 2 * na) fail("Resize: roi has {} values, expected {}", r.size(), 2 * na);
    for (size_t i = 0; i < na; ++i) {
      roi_start[static_cast<size_t>(s.axes[i])] = r[i];
      roi_end[static_cast<size_t>(s.axes[i])] = r[na + i];
    }
    has_roi = true;
  }
  std::vector<AxisTable> tables;
  for (int64_t d = 0; d < rank; ++d) {
    const size_t u = static_cast<size_t>(d);
    tables.push_back(make_table(s, d, in[u], s.out[u], roi_start[u], roi_end[u], has_roi));
  }
  Tensor out(x.dtype(), s.out);
  if (out.numel() == 0) return out;
  bool leading_identity = true;
  for (int64_t d = 0; d + 2 < rank; ++d) leading_identity &= tables[static_cast<size_t>(d)].identity;
  const bool nearest = s.mode == Mode::kNearest;

  if (leading_identity) {
    const int64_t H = rank >= 2 ? in[static_cast<size_t>(rank - 2)] : 1;
    const int64_t W = rank >= 1 ? in[static_cast<size_t>(rank - 1)] : 1;
    const int64_t OH = rank >= 2 ? s.out[static_cast<size_t>(rank - 2)] : 1;
    const int64_t OW = rank >= 1 ? s.out[static_cast<size_t>(rank - 1)] : 1;
    AxisTable unit;
    unit.idx = {0};
    const AxisTable& ty = rank >= 2 ? tables[static_cast<size_t>(rank - 2)] : unit;
    const AxisTable& tx = rank >= 1 ? tables[static_cast<size_t>(rank - 1)] : unit;
    const int64_t planes = H * W == 0 ? 0 : x.numel() / (H * W);
    auto body = [&](auto tag) {
      using T = decltype(tag);
      resize_2d<T>(x.data<T>(), out.data<T>(), planes, H, W, ty, tx, OH, OW, s.extrapolation);
    };
    if (nearest)
      dispatch_dtype<KORCH_ALL_TYPES>(x.dtype(), "Resize", body);
    else
      dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(x.dtype(), "Resize", body);
    return out;
  }
  if (nearest) {
    dispatch_dtype<KORCH_ALL_TYPES>(x.dtype(), "Resize", [&](auto tag) {
      using T = decltype(tag);
      gather_nd<T>(x.data<T>(), out.data<T>(), in, s.out, tables, s.extrapolation);
    });
    return out;
  }
  dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(x.dtype(), "Resize", [&](auto tag) {
    using T = decltype(tag);
    const T* src = x.data<T>();
    std::vector<double> buf(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) buf[static_cast<size_t>(i)] = ops::to_double(src[i]);
    Shape cur = in;
    for (int64_t d = 0; d < rank; ++d) {
      const AxisTable& t = tables[static_cast<size_t>(d)];
      if (t.identity) continue;
      buf = resample_axis(buf, cur, d, t, s.out[static_cast<size_t>(d)], s.extrapolation);
      cur[static_cast<size_t>(d)] = s.out[static_cast<size_t>(d)];
    }
    T* dst = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) dst[i] = store<T>(buf[static_cast<size_t>(i)]);
  });
  return out;
}

// ---------------------------------------------------------------- op definitions

// An input that is "absent" when omitted or statically empty; otherwise its constant value.
const Tensor* shape_input(const OpInferContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i) || ctx.input(i).numel() == 0) return nullptr;
  return &ctx.require_constant(i, what);
}
const Tensor* shape_input(const OpEvalContext& ctx, int i) {
  if (!ctx.has_input(i) || ctx.input(i).numel() == 0) return nullptr;
  return &ctx.input(i);
}

OpDef resize_op() {
  OpDef d;
  d.op_type = "Resize";
  d.min_opset = 10;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    ResizeArgs args;
    if (ctx.opset < 11) {
      args.scales = shape_input(ctx, 1, "Resize scales");
    } else {
      args.scales = shape_input(ctx, 2, "Resize scales");
      args.sizes = shape_input(ctx, 3, "Resize sizes");
      if (ctx.has_input(1) && !is_float(ctx.input(1).dtype))
        fail("Resize: roi must be a float tensor, got {}", dtype_name(ctx.input(1).dtype));
    }
    if (x.dtype == DType::kString) fail_unsupported("Resize: element type string is not supported");
    ResizeSpec s = resize_spec(ctx.attrs(), ctx.opset, x.shape, args);
    if (s.mode != Mode::kNearest && (x.dtype == DType::kBool))
      fail_unsupported("Resize: element type bool is not supported for mode linear/cubic");
    return ops::one(x.dtype, s.out);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    ResizeArgs args;
    const Tensor* roi = nullptr;
    if (ctx.opset < 11) {
      args.scales = shape_input(ctx, 1);
    } else {
      args.scales = shape_input(ctx, 2);
      args.sizes = shape_input(ctx, 3);
      roi = ctx.has_input(1) ? &ctx.input(1) : nullptr;
    }
    ResizeSpec s = resize_spec(ctx.attrs(), ctx.opset, x.shape(), args);
    return std::vector<Tensor>{run_resize(x, s, roi)};
  };
  return d;
}

OpDef upsample_op() {
  OpDef d;
  d.op_type = "Upsample";
  d.min_opset = 7;
  d.max_opset = 9;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    ResizeArgs args;
    args.upsample = true;
    Tensor attr_scales;
    if (ctx.opset < 9) {
      if (!ctx.attrs().has("scales")) fail("Upsample: attribute 'scales' is required");
      std::vector<float> v = ctx.attrs().get_floats("scales");
      attr_scales = Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
      args.scales = &attr_scales;
    } else {
      args.scales = &ctx.require_constant(1, "Upsample scales");
    }
    if (x.dtype == DType::kString) fail_unsupported("Upsample: element type string is not supported");
    ResizeSpec s = resize_spec(ctx.attrs(), ctx.opset, x.shape, args);
    if (s.mode != Mode::kNearest && x.dtype == DType::kBool)
      fail_unsupported("Upsample: element type bool is not supported for mode linear");
    return ops::one(x.dtype, s.out);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    ResizeArgs args;
    args.upsample = true;
    Tensor attr_scales;
    if (ctx.opset < 9) {
      std::vector<float> v = ctx.attrs().get_floats("scales");
      attr_scales = Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
      args.scales = &attr_scales;
    } else {
      args.scales = &ctx.input(1);
    }
    ResizeSpec s = resize_spec(ctx.attrs(), ctx.opset, x.shape(), args);
    return std::vector<Tensor>{run_resize(x, s, nullptr)};
  };
  return d;
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add(resize_op());
  r.add(upsample_op());
}

}  // namespace korch
