// Fission of the composite reductions and the global pools into reduce + elementwise primitives.
//
// Every rule resolves the reduced axes (attribute `axes` before opset 18, constant input 1 from
// opset 18; absent/empty axes = all dims, or the input itself when noop_with_empty_axes is set),
// reduces with keepdims=1 and, when keepdims=0, ends with a Reshape (layout) to the squeezed shape.
// Worked mini examples, x: f32[2,3,4], axes=[1], keepdims=0 (so the result is f32[2,4]):
//
//   ReduceL1         y = Reshape(ReduceSum(Abs(x)))
//   ReduceSumSquare  y = Reshape(ReduceSum(Mul(x, x)))
//   ReduceL2         y = Reshape(Sqrt(ReduceSum(Mul(x, x))))
//   ReduceLogSum     y = Reshape(Log(ReduceSum(x)))
//   ReduceLogSumExp  m = ReduceMax(x) [2,1,4];  m' = Where(IsInf(m), 0, m)   (all -inf rows stay -inf)
//                    s = ReduceSum(Exp(Sub(x, Expand(m'))));  y = Reshape(Add(Log(s), m'))
//                    (the max is subtracted first: x = 1e4 gives no inf)
//   GlobalAveragePool x: [N,C,H,W] -> ReduceMean(x, axes=[2,3], keepdims=1)
//   GlobalMaxPool     x: [N,C,H,W] -> ReduceMax(x, axes=[2,3], keepdims=1)
//   GlobalLpPool      p=1: ReduceSum(Abs(x));  p=2: Sqrt(ReduceSum(Mul(x, x)));
//                     else Pow(ReduceSum(Pow(Abs(x), p)), 1/p)   (axes [2..], keepdims=1)
//   MaxPool (separable_max_pool: 2-D, large window)
//                     y = MaxPool(MaxPool(x, kernel [kh,1], strides [sh,1], dilations [dh,1],
//                         pads [pt,0,pb,0]), kernel [1,kw], strides [1,sw], dilations [1,dw],
//                         pads [0,pl,0,pr]), ceil_mode kept: each spatial dim's windows are those
//                     of the 2-D pool, and padding is -inf in both passes (a window of padding
//                     alone is -inf either way)
//
// Work dtype: the reference accumulates in double and rounds once, so f16/bf16 inputs are Cast to
// f32 around the whole expression (squares of f16 values overflow at 256), and integer inputs of
// ReduceL2/LogSum/LogSumExp (whose Sqrt/Log/Exp primitives are float-only) are Cast to f64 and the
// result Clipped to the integer range (the reference saturates: log(0) = -inf -> lowest) and Cast
// back (truncating, as the reference's store does).
#include "fission/fission.h"

#include <algorithm>
#include <limits>
#include <optional>

namespace korch {

namespace {


bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

struct ReduceAxes {
  bool noop = false;          // noop_with_empty_axes with empty axes: the result is the input
  std::vector<int64_t> axes;  // normalised, ascending
};

// Same resolution as the reference interpreter (src/ir/ops/reduce.cc): the axes attribute before
// opset 18, the (constant) axes input from 18.
ReduceAxes resolve_axes(FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
  const int64_t rank = b.type(in[0]).rank();
  std::optional<std::vector<int64_t>> axes;
  const bool axes_input = b.opset() >= 18;
  if (!axes_input) {
    if (n.attrs.has("axes")) axes = n.attrs.get_ints("axes");
  } else if (in.size() > 1 && in[1] != kNoValue) {
    if (b.type(in[1]).numel() == 0) {
      axes = std::vector<int64_t>{};
    } else {
      const Tensor* t = b.constant_value(in[1]);
      if (!t) fail("{}: the axes input must be a constant", n.op_type);
      axes = t->to_int_vector();
    }
  }
  ReduceAxes r;
  if (!axes || axes->empty()) {
    if (axes_input && n.attrs.get_int("noop_with_empty_axes", 0) != 0) {
      r.noop = true;
      return r;
    }
    for (int64_t d = 0; d < rank; ++d) r.axes.push_back(d);
    return r;
  }
  for (int64_t a : *axes) r.axes.push_back(a < 0 ? a + rank : a);
  std::sort(r.axes.begin(), r.axes.end());
  return r;
}

// keepdims=1 shape of `x` reduced over `axes` -> the operator's output shape.
Shape squeezed_shape(const Shape& kept, const std::vector<int64_t>& axes) {
  Shape s;
  for (size_t d = 0; d < kept.size(); ++d)
    if (!std::binary_search(axes.begin(), axes.end(), static_cast<int64_t>(d))) s.push_back(kept[d]);
  return s;
}

enum class Kind { kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// The reduction over `axes` (keepdims=1) of `x`, already in the work dtype.
ValueId reduce_expr(FissionBuilder& b, Kind kind, ValueId x, const std::vector<int64_t>& axes) {
  switch (kind) {
    case Kind::kL1: return b.reduce("ReduceSum", b.add1("Abs", {x}), axes);
    case Kind::kSumSquare: return b.reduce("ReduceSum", b.add1("Mul", {x, x}), axes);
    case Kind::kL2: return b.add1("Sqrt", {b.reduce("ReduceSum", b.add1("Mul", {x, x}), axes)});
    case Kind::kLogSum: return b.add1("Log", {b.reduce("ReduceSum", x, axes)});
    case Kind::kLogSumExp: {
      DType dt = b.type(x).dtype;
      ValueId m = b.reduce("ReduceMax", x, axes);
      // A max of +-inf (all -inf, or an inf present) would give inf - inf = nan: shift by 0 instead.
      m = b.add1("Where", {b.add1("IsInf", {m}), b.scalar(0, dt), m});
      ValueId e = b.add1("Exp", {b.elementwise("Sub", {x, m})});
      return b.add1("Add", {b.add1("Log", {b.reduce("ReduceSum", e, axes)}), m});
    }
  }
  return kNoValue;
}

FissionRule reduce_rule(Kind kind) {
  return [kind](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
    ReduceAxes ax = resolve_axes(b, n, in);
    if (ax.noop) return std::vector<ValueId>{in[0]};
    const DType dt = b.type(in[0]).dtype;
    DType work = dt;
    if (is_half(dt)) work = DType::kFloat32;
    else if (!is_float(dt) && (kind == Kind::kL2 || kind == Kind::kLogSum || kind == Kind::kLogSumExp))
      work = DType::kFloat64;
    ValueId y = reduce_expr(b, kind, b.cast(in[0], work), ax.axes);
    if (is_integer(dt) && work != dt) {
      // Saturate like the reference's store (log(0) = -inf gives the lowest value, not a wrap).
      double lo = 0, hi = 0;
      dispatch_dtype<KORCH_INT_TYPES>(dt, "fission saturate", [&](auto tag) {
        using T = decltype(tag);
        lo = static_cast<double>(std::numeric_limits<T>::lowest());
        hi = static_cast<double>(std::numeric_limits<T>::max());
      });
      y = b.add1("Clip", {y, b.scalar(lo, work), b.scalar(hi, work)});
    }
    y = b.cast(y, dt);
    if (n.attrs.get_int("keepdims", 1) == 0) y = b.reshape(y, squeezed_shape(b.type(y).shape, ax.axes));
    return std::vector<ValueId>{y};
  };
}

std::vector<int64_t> spatial_axes(FissionBuilder& b, ValueId x) {
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < b.type(x).rank(); ++d) axes.push_back(d);
  return axes;
}

}  // namespace

void register_reduce_fission(FissionRegistry& r) {
  r.add("ReduceL1", reduce_rule(Kind::kL1));
  r.add("ReduceL2", reduce_rule(Kind::kL2));
  r.add("ReduceLogSum", reduce_rule(Kind::kLogSum));
  r.add("ReduceLogSumExp", reduce_rule(Kind::kLogSumExp));
  r.add("ReduceSumSquare", reduce_rule(Kind::kSumSquare));

  r.add("GlobalAveragePool", [](FissionBuilder& b, const Node&, const std::vector<ValueId>& in) {
    return std::vector<ValueId>{b.reduce("ReduceMean", in[0], spatial_axes(b, in[0]))};
  });
  r.add("GlobalMaxPool", [](FissionBuilder& b, const Node&, const std::vector<ValueId>& in) {
    return std::vector<ValueId>{b.reduce("ReduceMax", in[0], spatial_axes(b, in[0]))};
  });
  r.add("MaxPool", [](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
    const auto k = n.attrs.get_ints("kernel_shape");
    const auto st = n.attrs.get_ints("strides", {1, 1});
    const auto dl = n.attrs.get_ints("dilations", {1, 1});
    std::vector<int64_t> pads = n.attrs.get_ints("pads", {0, 0, 0, 0});
    if (n.attrs.get_string("auto_pad", "NOTSET") == "VALID") pads = {0, 0, 0, 0};
    if (k.size() != 2 || st.size() != 2 || dl.size() != 2 || pads.size() != 4)
      fail("MaxPool: kernel_shape, strides, dilations need 2 values and pads 4 for a 2-D pool");
    auto pass = [&](ValueId x, int axis) {
      Attributes a;
      std::vector<int64_t> ks(2, 1), ss(2, 1), ds(2, 1), ps(4, 0);
      ks[axis] = k[axis];
      ss[axis] = st[axis];
      ds[axis] = dl[axis];
      ps[axis] = pads[axis];
      ps[2 + axis] = pads[2 + axis];
      a.set("kernel_shape", ks);
      a.set("strides", ss);
      a.set("dilations", ds);
      a.set("pads", ps);
      if (n.attrs.has("ceil_mode")) a.set("ceil_mode", n.attrs.get_int("ceil_mode", 0));
      return b.add1("MaxPool", {x}, std::move(a));
    };
    std::vector<ValueId> out(n.outputs.size(), kNoValue);  // an omitted Indices output stays omitted
    out[0] = pass(pass(in[0], 0), 1);
    return out;
  });
  r.add("GlobalLpPool", [](FissionBuilder& b, const Node& n, const std::vector<ValueId>& in) {
    const int64_t p = n.attrs.get_int("p", 2);
    if (p < 1) fail("attribute 'p' must be >= 1, got {}", p);
    const DType dt = b.type(in[0]).dtype;
    const DType work = is_half(dt) ? DType::kFloat32 : dt;
    ValueId x = b.cast(in[0], work);
    std::vector<int64_t> axes = spatial_axes(b, x);
    ValueId y;
    if (p == 1) {
      y = b.reduce("ReduceSum", b.add1("Abs", {x}), axes);
    } else if (p == 2) {
      y = b.add1("Sqrt", {b.reduce("ReduceSum", b.add1("Mul", {x, x}), axes)});
    } else {
      ValueId s = b.reduce("ReduceSum", b.add1("Pow", {b.add1("Abs", {x}), b.scalar(static_cast<double>(p), work)}), axes);
      y = b.add1("Pow", {s, b.scalar(1.0 / static_cast<double>(p), work)});
    }
    return std::vector<ValueId>{b.cast(y, dt)};
  });
}

}  // namespace korch
