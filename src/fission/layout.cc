// Fission of layout-family operators: Resize (opsets 10..22), Upsample (7..9), Dropout.
//
// Resize / Upsample
// -----------------
// Every Korch resize is separable: along each resized axis d the output is a fixed function of the
// input's values along d (see ir/ops/resize.cc), so the operator is a chain of per-axis steps.
// The per-axis function is NOT re-derived here: it is read off the interpreter's own Resize by
// evaluating the node's op (same op type, opset, attributes, scale/size/roi of axis d) on small
// probe tensors whose leading axis enumerates basis inputs. Every nearest_mode, coordinate
// transformation mode, cubic_coeff_a, exclude_outside, antialias, keep_aspect_ratio_policy and
// tf_crop_and_resize extrapolation therefore comes out exactly as the interpreter computes it, and
// cannot drift from it. (keep_aspect_ratio_policy couples the axes through one common scale; the
// probe carries the winning axis as a second, reduced axis — see probe_axis.)
//
//  * nearest: probing with rows [0, 1, .., n-1] and [1, 2, .., n] (f64) gives the gathered input
//    index of every output position (or, where both rows give the same value, an extrapolated
//    position). Each axis becomes one Gather with constant indices (a layout primitive); with
//    tf_crop_and_resize extrapolation the axis is first padded with one slot holding the
//    extrapolation value (Pad, layout) and extrapolated positions gather that slot. Bit-exact for
//    every dtype.
//      Resize(X[1,3,4,4], scales [1,1,2,2], nearest)
//        -> Gather(X, [0,0,1,1,2,2,3,3], axis 2) -> Gather(., [0,0,1,1,2,2,3,3], axis 3)
//  * linear / cubic: probing with the identity I_n (f64) gives the n x m interpolation matrix W of
//    the axis (clamped taps, antialias and exclude_outside renormalisation all included); probing
//    with a zero row gives the affine part (tf_crop_and_resize extrapolation_value at extrapolated
//    positions), subtracted from W and added back as a bias. The axis is applied as one MatMul, a
//    linear primitive: X @ W for the last axis, W^T @ X (MatMul broadcasting) for the second-to-last,
//    and W^T @ Reshape(X, [A, n, B]) followed by a Reshape back for any other axis (Reshape is a
//    free layout primitive; this keeps every step a plain MatMul that any library runs, rather than
//    an Einsum or a Transpose pair). An axis whose matrix is a pure selection (every column one-hot
//    with weight 1, e.g. align_corners at an integral ratio) becomes a Gather instead, exactly.
//      Resize(X[1,3,4,4], scales [1,1,2,2], linear)
//        -> MatMul(Wh^T[8,4], X) -> MatMul(., Ww[4,8])
//    f32 and f64 inputs are interpolated in their own type (the reference accumulates in double:
//    rel. L2 error ~1e-7 for f32). Other dtypes (f16, bf16, integers) are cast to f64, interpolated
//    and cast back; integers are first rounded half-to-even (Round, or for opsets < 11, where Round
//    does not exist, x + 1.5*2^52 - 1.5*2^52) and saturated with Max/Min, as the reference stores them.
//    Axes are applied in order of increasing out/in ratio (downsampling first: smaller intermediates).
//
// Dropout (inference)
// -------------------
// output = the input itself (no node at all); the optional mask is a constant one (true for opset
// >= 10, 1 of the input type before) broadcast to the input shape with Expand (Tile at opset 7,
// which has no Expand).
//      Dropout(X[2,3]) -> (X, Expand(true, [2,3]))
//
// Gather / GatherElements / GatherND / Compress with non-constant indices have no rule: they are
// data-dependent index remappings and stay opaque (ir/primitive.cc classifies them).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "fission/fission.h"
#include "ir/op_registry.h"

namespace korch {
namespace {

// ---------------------------------------------------------------- Resize probing

// The node's resize parameters, per axis of X, as the interpreter reads them.
struct ResizeParams {
  bool upsample = false;
  int opset = 0;
  Shape in;
  std::vector<int64_t> axes;      // axes the scales/sizes/roi entries refer to
  std::vector<double> scales;     // per entry of `axes` (empty when sizes are given)
  std::vector<int64_t> sizes;     // per entry of `axes` (empty when scales are given)
  std::vector<double> roi;        // 2 * axes.size() (empty: no roi)
  std::string policy = "stretch";
};

// A resize input that counts as absent when omitted or empty; its constant value otherwise.
const Tensor* optional_constant(FissionBuilder& b, const std::vector<ValueId>& in, size_t i, const char* what,
                                bool required_constant) {
  if (i >= in.size() || in[i] == kNoValue || b.type(in[i]).numel() == 0) return nullptr;
  const Tensor* t = b.constant_value(in[i]);
  if (!t && required_constant) fail("{} must be a constant for fission", what);
  return t;
}

ResizeParams resize_params(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  ResizeParams p;
  p.upsample = n.op_type == "Upsample";
  p.opset = b.opset();
  p.in = b.type(in[0]).shape;
  const int64_t rank = static_cast<int64_t>(p.in.size());
  const bool modern = !p.upsample && p.opset >= 11;
  if (modern && p.opset >= 18) {
    p.policy = n.attrs.get_string("keep_aspect_ratio_policy", "stretch");
    if (n.attrs.has("axes"))
      for (int64_t ax : n.attrs.get_ints("axes")) p.axes.push_back(ax < 0 ? ax + rank : ax);
  }
  if (p.axes.empty() && !(modern && p.opset >= 18 && n.attrs.has("axes")))
    for (int64_t i = 0; i < rank; ++i) p.axes.push_back(i);
  const Tensor* scales = nullptr;
  const Tensor* sizes = nullptr;
  Tensor attr_scales;
  if (p.upsample && p.opset < 9) {
    std::vector<float> v = n.attrs.get_floats("scales");
    attr_scales = Tensor::from_vector<float>(v, {static_cast<int64_t>(v.size())});
    scales = &attr_scales;
  } else if (!modern) {
    scales = optional_constant(b, in, 1, "Resize scales", true);
  } else {
    scales = optional_constant(b, in, 2, "Resize scales", true);
    sizes = optional_constant(b, in, 3, "Resize sizes", true);
    if (n.attrs.get_string("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") {
      const Tensor* roi = optional_constant(b, in, 1, "Resize roi", false);
      if (!roi && in.size() > 1 && in[1] != kNoValue && b.type(in[1]).numel() > 0)
        fail_unsupported("Resize: a tf_crop_and_resize roi that is not a constant cannot be fissioned (the "
                         "interpolation weights would depend on data)");
      if (roi)
        for (int64_t i = 0; i < roi->numel(); ++i) p.roi.push_back(roi->get_as_double(i));
    }
  }
  if (scales)
    for (int64_t i = 0; i < scales->numel(); ++i) p.scales.push_back(scales->get_as_double(i));
  if (sizes) p.sizes = sizes->to_int_vector();
  return p;
}

// Evaluates the node's op on `x` ([B, n] with n = in[d]) resizing only its axis 1 exactly as the
// node resizes axis d of X; returns [B, out[d]].
//
// With keep_aspect_ratio_policy other than "stretch", the common scale is sizes[j] / in[j] of the
// winning axis j; the probe then has a third axis of size in[j] / g with size sizes[j] / g
// (g = gcd: the same rational, so the same correctly rounded double) and the same policy, so the
// interpreter picks the same scale. The probe is constant along that axis; its position 0 is read
// (weights along it sum to one, and position 0 is never extrapolated).
Tensor probe_axis(const Node& n, const ResizeParams& p, size_t k, const Tensor& x) {
  const int64_t B = x.dim(0), len = x.dim(1);
  Node probe;
  probe.op_type = n.op_type;
  probe.name = n.name + "/probe";
  probe.attrs = n.attrs;
  probe.outputs = {0};
  const bool modern = !p.upsample && p.opset >= 11;
  const bool axes_attr = modern && p.opset >= 18;

  // Policy partner axis.
  int64_t partner_in = 0, partner_size = 0;
  if (!p.sizes.empty() && p.policy != "stretch") {
    size_t win = k;
    for (size_t i = 0; i < p.axes.size(); ++i) {
      const size_t ai = static_cast<size_t>(p.axes[i]), aw = static_cast<size_t>(p.axes[win]);
      const double ri = static_cast<double>(p.sizes[i]) / static_cast<double>(p.in[ai]);
      const double rw = static_cast<double>(p.sizes[win]) / static_cast<double>(p.in[aw]);
      if (p.policy == "not_larger" ? ri < rw : ri > rw) win = i;
    }
    if (win != k) {
      const int64_t iw = p.in[static_cast<size_t>(p.axes[win])], sw = p.sizes[win];
      const int64_t g = std::gcd(iw, sw);
      partner_in = g > 0 ? iw / g : iw;
      partner_size = g > 0 ? sw / g : sw;
    }
  }
  const bool partner = partner_in > 0;

  Tensor xp = x;
  if (partner) {
    xp = Tensor(x.dtype(), {B, len, partner_in});
    const size_t es = static_cast<size_t>(dtype_size(x.dtype()));
    for (int64_t i = 0; i < B * len; ++i)
      for (int64_t j = 0; j < partner_in; ++j)
        std::memcpy(xp.raw() + (i * partner_in + j) * static_cast<int64_t>(es), x.raw() + i * static_cast<int64_t>(es), es);
  }
  const int64_t prank = partner ? 3 : 2;

  // Per probe axis: (scale, size, roi start, roi end); the batch axis is left alone.
  std::vector<int64_t> paxes;
  std::vector<double> pscales, proi_s, proi_e;
  std::vector<int64_t> psizes;
  auto add_axis = [&](int64_t ax, double sc, int64_t sz, double rs, double re) {
    paxes.push_back(ax);
    pscales.push_back(sc);
    psizes.push_back(sz);
    proi_s.push_back(rs);
    proi_e.push_back(re);
  };
  if (!axes_attr) add_axis(0, 1.0, B, 0.0, 1.0);
  const size_t na = p.axes.size();
  add_axis(1, p.scales.empty() ? 0.0 : p.scales[k], p.sizes.empty() ? 0 : p.sizes[k],
           p.roi.empty() ? 0.0 : p.roi[k], p.roi.empty() ? 1.0 : p.roi[na + k]);
  if (partner) add_axis(2, 0.0, partner_size, 0.0, 1.0);
  if (axes_attr) probe.attrs.set("axes", paxes);

  const int64_t np = static_cast<int64_t>(paxes.size());
  Tensor scales_t, sizes_t, roi_t;
  if (!p.scales.empty()) scales_t = Tensor::from_vector<double>(pscales, {np});
  if (!p.sizes.empty()) sizes_t = Tensor::from_vector<int64_t>(psizes, {np});
  if (!p.roi.empty()) {
    std::vector<double> r = proi_s;
    r.insert(r.end(), proi_e.begin(), proi_e.end());
    roi_t = Tensor::from_vector<double>(r, {2 * np});
  }
  std::vector<const Tensor*> ins{&xp};
  if (p.upsample && p.opset < 9) {
    std::vector<float> sc;
    for (double v : pscales) sc.push_back(static_cast<float>(v));  // exact: the values came from floats
    probe.attrs.set("scales", sc);
  } else if (!modern) {
    ins.push_back(&scales_t);
  } else {
    ins.push_back(roi_t.defined() ? &roi_t : nullptr);
    ins.push_back(scales_t.defined() ? &scales_t : nullptr);
    ins.push_back(sizes_t.defined() ? &sizes_t : nullptr);
  }
  probe.inputs.assign(ins.size(), 0);
  for (size_t i = 0; i < ins.size(); ++i)
    if (!ins[i]) probe.inputs[i] = kNoValue;
  Tensor y = eval_node(probe, p.opset, ins)[0];
  KORCH_CHECK(y.rank() == prank && y.dim(0) == B, "Resize probe: unexpected shape {}", shape_str(y.shape()));
  if (!partner) return y;
  const int64_t m = y.dim(1), pm = y.dim(2);
  KORCH_CHECK(pm > 0, "Resize probe: empty policy axis");
  Tensor out(y.dtype(), {B, m});
  const size_t es = static_cast<size_t>(dtype_size(y.dtype()));
  for (int64_t i = 0; i < B * m; ++i)
    std::memcpy(out.raw() + i * static_cast<int64_t>(es), y.raw() + i * pm * static_cast<int64_t>(es), es);
  return out;
}

Tensor iota_rows(int64_t rows, int64_t n, double first) {  // row r: first + r, first + r + 1, ...
  Tensor t(DType::kFloat64, {rows, n});
  double* p = t.data<double>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) p[r * n + i] = first + static_cast<double>(r + i);
  return t;
}

// `t` (1-D, length out[d]) as a rank-r tensor along axis d.
Tensor along_axis(Tensor t, int64_t rank, int64_t d) {
  Shape s(static_cast<size_t>(rank), 1);
  s[static_cast<size_t>(d)] = t.numel();
  return t.reshaped(s);
}

Tensor cast_matrix(const std::vector<double>& v, Shape shape, DType dt) {
  if (dt == DType::kFloat64) return Tensor::from_vector<double>(v, std::move(shape));
  std::vector<float> f(v.begin(), v.end());
  return Tensor::from_vector<float>(f, std::move(shape));
}

struct AxisStep {
  int64_t d = 0;
  size_t k = 0;  // entry in ResizeParams::axes
  int64_t n = 0, m = 0;
};

// Nearest: Gather per axis (after a Pad with the extrapolation value when some positions extrapolate).
ValueId nearest_axis(FissionBuilder& b, const Node& node, const ResizeParams& p, const AxisStep& s, ValueId x) {
  Tensor ya = probe_axis(node, p, s.k, iota_rows(2, s.n, 0.0));
  const double* a0 = ya.data<double>();
  const double* a1 = a0 + s.m;
  std::vector<int64_t> idx(static_cast<size_t>(s.m));
  bool extrap = false, is_identity = s.m == s.n;
  for (int64_t o = 0; o < s.m; ++o) {
    if (a0[o] == a1[o]) {
      extrap = true;
      idx[static_cast<size_t>(o)] = s.n;  // the padded slot
      is_identity = false;
      continue;
    }
    const double v = a0[o];
    KORCH_CHECK(a1[o] == v + 1 && v >= 0 && v < static_cast<double>(s.n) && v == std::floor(v),
                "Resize probe: output {} of axis {} is not a gather", o, s.d);
    idx[static_cast<size_t>(o)] = static_cast<int64_t>(v);
    is_identity &= idx[static_cast<size_t>(o)] == o;
  }
  if (is_identity) return x;
  const int64_t rank = static_cast<int64_t>(b.type(x).shape.size());
  if (extrap) {
    // The extrapolation value as the interpreter stores it in X's dtype: probe a zero row.
    Tensor z(b.type(x).dtype, {1, s.n});
    Tensor yz = probe_axis(node, p, s.k, z);
    int64_t at = 0;
    while (idx[static_cast<size_t>(at)] != s.n) ++at;
    Tensor fill(yz.dtype(), {});
    const size_t es = static_cast<size_t>(dtype_size(yz.dtype()));
    std::memcpy(fill.raw(), yz.raw() + at * static_cast<int64_t>(es), es);
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
    pads[static_cast<size_t>(rank + s.d)] = 1;
    Attributes pa;
    pa.set("mode", std::string("constant"));
    x = b.add1("Pad", {x, b.int_list(pads), b.constant(std::move(fill))}, pa);
  }
  Attributes ga;
  ga.set("axis", s.d);
  return b.add1("Gather", {x, b.int_list(idx)}, ga);
}

// Linear / cubic: one MatMul per axis (or a Gather when the matrix is a selection); `x` is f32/f64.
ValueId interp_axis(FissionBuilder& b, const Node& node, const ResizeParams& p, const AxisStep& s, ValueId x) {
  const int64_t n = s.n, m = s.m;
  Tensor eye(DType::kFloat64, {n, n});
  for (int64_t i = 0; i < n; ++i) eye.data<double>()[i * n + i] = 1.0;
  Tensor yw = probe_axis(node, p, s.k, eye);                          // [n, m]
  Tensor y0 = probe_axis(node, p, s.k, Tensor(DType::kFloat64, {1, n}));  // [1, m]
  const double* w = yw.data<double>();
  const double* bias = y0.data<double>();
  std::vector<double> W(static_cast<size_t>(n * m));
  bool has_bias = false;
  for (int64_t o = 0; o < m; ++o) has_bias |= bias[o] != 0;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t o = 0; o < m; ++o) W[static_cast<size_t>(i * m + o)] = w[i * m + o] - bias[o];
  const TensorType xt = b.type(x);
  const int64_t rank = static_cast<int64_t>(xt.shape.size());

  // A selection matrix: a Gather (also covers the identity).
  bool selection = !has_bias;
  std::vector<int64_t> idx(static_cast<size_t>(m), -1);
  for (int64_t o = 0; o < m && selection; ++o)
    for (int64_t i = 0; i < n && selection; ++i) {
      const double v = W[static_cast<size_t>(i * m + o)];
      if (v == 0) continue;
      if (v != 1 || idx[static_cast<size_t>(o)] >= 0) selection = false;
      else idx[static_cast<size_t>(o)] = i;
    }
  for (int64_t o = 0; o < m && selection; ++o) selection = idx[static_cast<size_t>(o)] >= 0;
  if (selection) {
    bool ident = m == n;
    for (int64_t o = 0; o < m && ident; ++o) ident = idx[static_cast<size_t>(o)] == o;
    if (ident) return x;
    Attributes ga;
    ga.set("axis", s.d);
    return b.add1("Gather", {x, b.int_list(idx)}, ga);
  }

  ValueId y;
  if (s.d == rank - 1) {
    y = b.add1("MatMul", {x, b.constant(cast_matrix(W, {n, m}, xt.dtype))});
  } else {
    std::vector<double> Wt(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t o = 0; o < m; ++o) Wt[static_cast<size_t>(o * n + i)] = W[static_cast<size_t>(i * m + o)];
    ValueId wt = b.constant(cast_matrix(Wt, {m, n}, xt.dtype));
    if (s.d == rank - 2) {
      y = b.add1("MatMul", {wt, x});
    } else {
      int64_t A = 1, Bn = 1;
      for (int64_t i = 0; i < s.d; ++i) A *= xt.shape[static_cast<size_t>(i)];
      for (int64_t i = s.d + 1; i < rank; ++i) Bn *= xt.shape[static_cast<size_t>(i)];
      Shape out = xt.shape;
      out[static_cast<size_t>(s.d)] = m;
      y = b.reshape(b.add1("MatMul", {wt, b.reshape(x, {A, n, Bn})}), out);
    }
  }
  if (has_bias) {
    std::vector<double> bv(bias, bias + m);
    y = b.elementwise("Add", {y, b.constant(along_axis(cast_matrix(bv, {m}, xt.dtype), rank, s.d))});
  }
  return y;
}


// Rounds half-to-even and saturates an f64 value to integer type `to`, as the interpreter stores it.
ValueId store_integer(FissionBuilder& b, ValueId x, DType to) {
  if (b.opset() >= 11) {
    x = b.add1("Round", {x});
  } else {
    // Adding and removing 1.5 * 2^52 rounds to the nearest integer, ties to even (|x| < 2^51).
    const double magic = 6755399441055744.0;
    x = b.add1("Sub", {b.add1("Add", {x, b.scalar(magic, DType::kFloat64)}), b.scalar(magic, DType::kFloat64)});
  }
  double lo = 0, hi = 0;
  dispatch_dtype<int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>(to, "Resize store", [&](auto tag) {
    using T = decltype(tag);
    lo = static_cast<double>(std::numeric_limits<T>::lowest());
    hi = static_cast<double>(std::numeric_limits<T>::max());
    // 2^63 / 2^64 are not representable in the type: the largest double below them is.
    if (hi >= 9.2e18) hi = std::nextafter(hi, 0.0);
  });
  x = b.add1("Max", {x, b.scalar(lo, DType::kFloat64)});
  x = b.add1("Min", {x, b.scalar(hi, DType::kFloat64)});
  return b.cast(x, to);
}

std::vector<ValueId> resize_rule(FissionBuilder& b, const Node& node, const std::vector<ValueId>& in) {
  ResizeParams p = resize_params(b, node, in);
  // The output type, from the registry (also validates everything the probes rely on).
  std::vector<const TensorType*> types;
  std::vector<const Tensor*> consts;
  for (ValueId v : in) {
    types.push_back(v == kNoValue ? nullptr : &b.type(v));
    consts.push_back(v == kNoValue ? nullptr : b.constant_value(v));
  }
  Node typed = node;
  typed.outputs.assign(1, 0);
  const TensorType out = infer_node(typed, b.opset(), types, consts)[0];
  if (out.numel() == 0) return {b.constant(Tensor(out))};

  const bool nearest = node.attrs.get_string("mode", "nearest") == "nearest";
  std::vector<AxisStep> steps;
  for (size_t k = 0; k < p.axes.size(); ++k) {
    AxisStep s;
    s.d = p.axes[k];
    s.k = k;
    s.n = p.in[static_cast<size_t>(s.d)];
    s.m = out.shape[static_cast<size_t>(s.d)];
    steps.push_back(s);
  }
  std::stable_sort(steps.begin(), steps.end(), [](const AxisStep& a, const AxisStep& c) {
    return static_cast<double>(a.m) / static_cast<double>(a.n) < static_cast<double>(c.m) / static_cast<double>(c.n);
  });

  ValueId x = in[0];
  if (nearest) {
    for (const AxisStep& s : steps) x = nearest_axis(b, node, p, s, x);
    if (x == in[0]) x = b.add1("Identity", {x});
    return {x};
  }
  const DType dt = out.dtype;
  const bool native = dt == DType::kFloat32 || dt == DType::kFloat64;
  if (!native) x = b.cast(x, DType::kFloat64);
  for (const AxisStep& s : steps) x = interp_axis(b, node, p, s, x);
  if (!native) x = is_float(dt) ? b.cast(x, dt) : store_integer(b, x, dt);
  if (x == in[0]) x = b.add1("Identity", {x});
  return {x};
}

// ---------------------------------------------------------------- Dropout

std::vector<ValueId> dropout_rule(FissionBuilder& b, const Node& node, const std::vector<ValueId>& in) {
  std::vector<ValueId> outs{in[0]};
  if (node.outputs.size() > 1) {
    if (node.outputs[1] == kNoValue) {
      outs.push_back(kNoValue);
    } else {
      const TensorType xt = b.type(in[0]);  // a copy: adding constants may move the value table
      ValueId one = b.opset() >= 10 ? b.constant(Tensor::scalar<bool>(true)) : b.scalar(1.0, xt.dtype);
      if (xt.shape.empty()) {
        outs.push_back(one);
      } else if (b.opset() >= 8) {
        outs.push_back(b.add1("Expand", {one, b.int_list(xt.shape)}));
      } else {  // no Expand before opset 8: Tile a [1, .., 1] one
        ValueId ones = b.reshape(one, Shape(xt.shape.size(), 1));
        outs.push_back(b.add1("Tile", {ones, b.int_list(xt.shape)}));
      }
    }
  }
  for (size_t i = 2; i < node.outputs.size(); ++i) outs.push_back(kNoValue);
  return outs;
}

}  // namespace

void register_layout_fission(FissionRegistry& r) {
  r.add("Resize", resize_rule);
  r.add("Upsample", resize_rule);
  r.add("Dropout", dropout_rule);
}

}  // namespace korch
