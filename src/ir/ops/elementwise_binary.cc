// Elementwise family, part 2: broadcasting binary/variadic/ternary operators.
//   Add Sub Mul Div Pow Mod, Max Min Sum Mean, Equal Less LessOrEqual Greater GreaterOrEqual,
//   And Or Xor, BitShift, BitwiseAnd/Or/Xor, PRelu, Where, Clip.
//
// All broadcasting goes through one plan: the output's dims are merged wherever every input is
// contiguous across them (so same-shape collapses to one flat loop and [N,C,H,W] op [1,C,1,1]
// to [N,C,HW]), then the innermost merged dim is run as a tight loop whose per-input stride is 0
// (broadcast) or 1; outer rows advance an odometer instead of recomputing multi-dim indices.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ir/ops/elementwise_internal.h"

namespace korch::ops::ew {
namespace {

// ---------------------------------------------------------------------------------------------
// Element types

constexpr uint32_t bit(DType t) { return 1u << static_cast<int>(t); }
constexpr uint32_t kFloatSet = bit(DType::kFloat16) | bit(DType::kBFloat16) | bit(DType::kFloat32) | bit(DType::kFloat64);
constexpr uint32_t kSignedSet = bit(DType::kInt8) | bit(DType::kInt16) | bit(DType::kInt32) | bit(DType::kInt64);
constexpr uint32_t kUnsignedSet = bit(DType::kUInt8) | bit(DType::kUInt16) | bit(DType::kUInt32) | bit(DType::kUInt64);
constexpr uint32_t kIntSet = kSignedSet | kUnsignedSet;
constexpr uint32_t kNumericSet = kFloatSet | kIntSet;
constexpr uint32_t kBoolSet = bit(DType::kBool);
constexpr uint32_t kAllSet = kNumericSet | kBoolSet;

void check_dtype(DType t, uint32_t allowed, const std::string& op) {
  if (t == DType::kUndefined || t == DType::kString || !(bit(t) & allowed))
    fail_element_type(op, t);
}

#define EW_FLOATS float, double, Float16, BFloat16
#define EW_NUMERIC EW_FLOATS, KORCH_INT_TYPES
#define EW_ALL EW_NUMERIC, bool

// ---------------------------------------------------------------------------------------------
// Broadcast plan and loop

constexpr int64_t kChunk = int64_t{1} << 14;        // elements per task when splitting one long row

template <size_t N>
struct Plan {
  int64_t n = 0;
  int64_t inner = 1;
  std::array<int64_t, N> inner_stride{};        // 0 (broadcast) or 1
  std::vector<int64_t> dims;                    // outer dims after merging, outermost first
  std::vector<std::array<int64_t, N>> strides;  // per outer dim, per input
};

template <size_t N>
Plan<N> make_plan(const Shape& out, const std::array<const Shape*, N>& ins) {
  Plan<N> p;
  p.n = shape_numel(out);
  std::array<std::vector<int64_t>, N> st;
  for (size_t k = 0; k < N; ++k) st[k] = broadcast_strides(*ins[k], out);
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    std::array<int64_t, N> s;
    for (size_t k = 0; k < N; ++k) s[k] = st[k][d];
    if (!p.dims.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge = merge && p.strides.back()[k] == s[k] * out[d];
      if (merge) {
        p.dims.back() *= out[d];
        p.strides.back() = s;
        continue;
      }
    }
    p.dims.push_back(out[d]);
    p.strides.push_back(s);
  }
  if (!p.dims.empty()) {
    p.inner = p.dims.back();
    p.inner_stride = p.strides.back();
    p.dims.pop_back();
    p.strides.pop_back();
  }
  return p;
}

// Calls row(out_offset, in_offsets, len) over the plan; rows may run in parallel, so `row` must
// not throw.
template <size_t N, typename Row>
void run_plan(const Plan<N>& p, Row&& row) {
  if (p.n == 0) return;
  const int64_t rows = p.n / p.inner;
  const bool par = p.n >= kParallelMin;
  if (rows == 1) {
    const int64_t nchunks = (p.inner + kChunk - 1) / kChunk;
    auto seg = [&](int64_t c) {
      const int64_t c0 = c * kChunk;
      std::array<int64_t, N> off;
      for (size_t k = 0; k < N; ++k) off[k] = c0 * p.inner_stride[k];
      row(c0, off, std::min(kChunk, p.inner - c0));
    };
#pragma omp parallel for schedule(static) if (par)
    for (int64_t c = 0; c < nchunks; ++c) seg(c);
    return;
  }
  auto range = [&](int64_t r0, int64_t r1) {
    const size_t nd = p.dims.size();
    std::vector<int64_t> idx(nd, 0);
    std::array<int64_t, N> off{};
    int64_t rem = r0;
    for (size_t d = nd; d-- > 0;) {
      idx[d] = rem % p.dims[d];
      rem /= p.dims[d];
      for (size_t k = 0; k < N; ++k) off[k] += idx[d] * p.strides[d][k];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(r * p.inner, off, p.inner);
      for (size_t d = nd; d-- > 0;) {
        if (++idx[d] < p.dims[d]) {
          for (size_t k = 0; k < N; ++k) off[k] += p.strides[d][k];
          break;
        }
        for (size_t k = 0; k < N; ++k) off[k] -= p.strides[d][k] * (p.dims[d] - 1);
        idx[d] = 0;
      }
    }
  };
  if (!par) {
    range(0, rows);
    return;
  }
#pragma omp parallel
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = rows * t / nt, r1 = rows * (t + 1) / nt;
    if (r0 < r1) range(r0, r1);
  }
}

// out[i] = f(a[ia], b[ib]) over the broadcast of a and b; f works on storage types.
template <typename A, typename B, typename R, typename F>
Tensor binary_apply(const Tensor& a, const Tensor& b, const TensorType& out_type, F f) {
  Tensor out(out_type);
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  R* po = out.data<R>();
  const Plan<2> plan = make_plan<2>(out_type.shape, {&a.shape(), &b.shape()});
  const int64_t sa = plan.inner_stride[0], sb = plan.inner_stride[1];
  run_plan(plan, [&](int64_t o, const std::array<int64_t, 2>& off, int64_t len) {
    const A* x = pa + off[0];
    const B* y = pb + off[1];
    R* z = po + o;
    if (sa && sb) {
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i], y[i]);
    } else if (sb) {
      const A xv = x[0];
      for (int64_t i = 0; i < len; ++i) z[i] = f(xv, y[i]);
    } else if (sa) {
      const B yv = y[0];
      for (int64_t i = 0; i < len; ++i) z[i] = f(x[i], yv);
    } else {
      const R v = f(x[0], y[0]);
      for (int64_t i = 0; i < len; ++i) z[i] = v;
    }
  });
  return out;
}

// Wraps a functor on compute types into one on storage types T -> R.
template <typename T, typename R, typename F>
auto on_storage(F f) {
  return [f](T x, T y) -> R { return st<R>(f(ld(x), ld(y))); };
}

// ---------------------------------------------------------------------------------------------
// Arithmetic functors (on compute types). Integer math wraps (computed in uint64).

struct AddF {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
    else return a + b;
  }
};
struct SubF {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
    else return a - b;
  }
};
struct MulF {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
    else return a * b;
  }
};
// Integer division truncates toward zero (C semantics, as the ONNX tests expect); x/0 gives 0.
struct DivF {
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(a));
      }
      return static_cast<T>(a / b);
    } else {
      return a / b;
    }
  }
};
// fmod=1: C fmod / truncated remainder (sign of the dividend); fmod=0: sign of the divisor
// (Python / numpy mod). Integer x mod 0 gives 0.
struct ModF {
  bool fmod;
  template <typename T> T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return 0;
      if constexpr (std::is_signed_v<T>) {
        if (b == -1) return 0;
        T r = static_cast<T>(a % b);
        if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
        return r;
      } else {
        return static_cast<T>(a % b);
      }
    } else {
      T r = std::fmod(a, b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r += b;
      return r;
    }
  }
};
// NaN-propagating max/min (numpy maximum/minimum).
struct MaxF {
  template <typename T> T operator()(T a, T b) const { return (a > b || a != a) ? a : b; }
};
struct MinF {
  template <typename T> T operator()(T a, T b) const { return (a < b || a != a) ? a : b; }
};

template <typename F>
Tensor arith(const Tensor& a, const Tensor& b, const TensorType& out_type, const char* op, F f) {
  Tensor out;
  dispatch_dtype<EW_NUMERIC>(a.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    out = binary_apply<T, T, T>(a, b, out_type, on_storage<T, T>(f));
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Inference helpers

void expect_inputs(const OpInferContext& ctx, int lo, int hi) {
  int n = ctx.num_inputs();
  while (n > 0 && !ctx.has_input(n - 1)) --n;
  if (n < lo || n > hi) {
    if (lo == hi) fail("expects {} inputs, got {}", lo, n);
    fail("expects {} to {} inputs, got {}", lo, hi, n);
  }
}

void same_dtype(const TensorType& a, const TensorType& b, const char* what_a, const char* what_b) {
  if (a.dtype != b.dtype)
    fail("{} has element type {} but {} has {}; they must match", what_a, dtype_name(a.dtype), what_b,
         dtype_name(b.dtype));
}

Shape bcast(const Shape& a, const Shape& b) {
  try {
    return broadcast_shapes(a, b);
  } catch (const Error&) {
    fail("input shapes {} and {} are not broadcastable", shape_str(a), shape_str(b));
  }
}

// Two same-typed inputs, numpy broadcasting; output element type `out` (or the input's).
InferFn binary_infer(std::string op, uint32_t types, std::optional<DType> out = std::nullopt) {
  return [op, types, out](const OpInferContext& ctx) {
    expect_inputs(ctx, 2, 2);
    const TensorType& a = ctx.input(0);
    const TensorType& b = ctx.input(1);
    same_dtype(a, b, "input A", "input B");
    check_dtype(a.dtype, types, op);
    return one(out.value_or(a.dtype), bcast(a.shape, b.shape));
  };
}

template <typename F>
void add_arith(OpRegistry& r, const char* name, int min_opset, F f) {
  OpDef d;
  d.op_type = name;
  d.min_opset = min_opset;
  d.infer = binary_infer(name, kNumericSet);
  d.eval = [name, f](const OpEvalContext& ctx) {
    return std::vector<Tensor>{arith(ctx.input(0), ctx.input(1), ctx.output_type(0), name, f)};
  };
  r.add(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// Comparisons and logic

template <typename Cmp>
void add_compare(OpRegistry& r, const char* name, int min_opset, uint32_t types, Cmp cmp) {
  OpDef d;
  d.op_type = name;
  d.min_opset = min_opset;
  d.infer = binary_infer(name, types, DType::kBool);
  d.eval = [name, cmp](const OpEvalContext& ctx) {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    Tensor out;
    dispatch_dtype<EW_ALL>(a.dtype(), name, [&](auto tag) {
      using T = decltype(tag);
      out = binary_apply<T, T, bool>(a, b, ctx.output_type(0), on_storage<T, bool>(cmp));
    });
    return std::vector<Tensor>{out};
  };
  r.add(std::move(d));
}

template <typename F>
void add_logic(OpRegistry& r, const char* name, F f) {
  OpDef d;
  d.op_type = name;
  d.infer = binary_infer(name, kBoolSet);
  d.eval = [f](const OpEvalContext& ctx) {
    return std::vector<Tensor>{binary_apply<bool, bool, bool>(ctx.input(0), ctx.input(1), ctx.output_type(0), f)};
  };
  r.add(std::move(d));
}

template <typename F>
void add_bitwise(OpRegistry& r, const char* name, F f) {
  OpDef d;
  d.op_type = name;
  d.min_opset = 18;
  d.infer = binary_infer(name, kIntSet);
  d.eval = [name, f](const OpEvalContext& ctx) {
    Tensor out;
    dispatch_dtype<KORCH_INT_TYPES>(ctx.input(0).dtype(), name, [&](auto tag) {
      using T = decltype(tag);
      out = binary_apply<T, T, T>(ctx.input(0), ctx.input(1), ctx.output_type(0),
                                  [f](T a, T b) { return static_cast<T>(f(a, b)); });
    });
    return std::vector<Tensor>{out};
  };
  r.add(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// Pow: base T, exponent T1 of any numeric type; the output has the base's type.

template <typename B>
B int_pow(B base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<B>) {
      if (base == -1) return (e & 1) ? B(-1) : B(1);
    }
    return 0;  // |base| > 1: 1/base^e truncates to 0 (x^-e with x = 0 is undefined; 0 here)
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  uint64_t ue = static_cast<uint64_t>(e);
  while (ue) {
    if (ue & 1) result *= b;
    b *= b;
    ue >>= 1;
  }
  return static_cast<B>(result);
}

Tensor pow_eval(const Tensor& base, const Tensor& expo, const TensorType& out_type) {
  const DType bt = base.dtype(), et = expo.dtype();
  if (is_float(bt)) {
    // Float base: the exponent in the base's compute type (f64 for f64, else f32).
    const DType ct = bt == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
    Tensor e = et == ct ? expo : cast_tensor(expo, ct);
    Tensor out;
    dispatch_dtype<EW_FLOATS>(bt, "Pow", [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      out = binary_apply<T, C, T>(base, e, out_type, [](T x, C y) { return st<T>(std::pow(ld(x), y)); });
    });
    return out;
  }
  if (is_float(et)) {
    // Integer base, float exponent: compute in f64, then convert like numpy's astype.
    Tensor b64 = cast_tensor(base, DType::kFloat64);
    Tensor e64 = cast_tensor(expo, DType::kFloat64);
    Tensor r = binary_apply<double, double, double>(b64, e64, TensorType{DType::kFloat64, out_type.shape},
                                                    [](double x, double y) { return std::pow(x, y); });
    return cast_tensor(r, bt);
  }
  Tensor e = et == DType::kInt64 ? expo : cast_tensor(expo, DType::kInt64);
  Tensor out;
  dispatch_dtype<KORCH_INT_TYPES>(bt, "Pow", [&](auto tag) {
    using T = decltype(tag);
    out = binary_apply<T, int64_t, T>(base, e, out_type, [](T x, int64_t y) { return int_pow<T>(x, y); });
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Variadic Max / Min / Sum / Mean

template <typename F>
void add_variadic(OpRegistry& r, const char* name, uint32_t types, bool mean, F f) {
  OpDef d;
  d.op_type = name;
  d.infer = [name, types](const OpInferContext& ctx) {
    if (ctx.num_inputs() < 1) fail("expects at least one input");
    const TensorType& t0 = ctx.input(0);
    check_dtype(t0.dtype, types, name);
    Shape s = t0.shape;
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const TensorType& ti = ctx.input(i);
      if (ti.dtype != t0.dtype)
        fail("input {} has element type {} but input 0 has {}; they must match", i, dtype_name(ti.dtype),
             dtype_name(t0.dtype));
      s = bcast(s, ti.shape);
    }
    return one(t0.dtype, s);
  };
  d.eval = [name, mean, f](const OpEvalContext& ctx) {
    const int n = ctx.num_inputs();
    Tensor acc = ctx.input(0);
    for (int i = 1; i < n; ++i) {
      const Tensor& x = ctx.input(i);
      const TensorType t{acc.dtype(), bcast(acc.shape(), x.shape())};
      acc = arith(acc, x, t, name, f);
    }
    KORCH_CHECK(acc.shape() == ctx.output_type(0).shape, "{}: result shape {}", name, shape_str(acc.shape()));
    if (mean && n > 1) {
      dispatch_dtype<EW_FLOATS>(acc.dtype(), name, [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        T* p = acc.data<T>();
        const int64_t m = acc.numel();
        const C k = static_cast<C>(n);
#pragma omp parallel for if (m >= kParallelMin)
        for (int64_t i = 0; i < m; ++i) p[i] = st<T>(ld(p[i]) / k);
      });
    }
    return std::vector<Tensor>{acc};
  };
  r.add(std::move(d));
}

// ---------------------------------------------------------------------------------------------
// Where

template <typename U>
Tensor where_apply(const Tensor& c, const Tensor& x, const Tensor& y, const TensorType& out_type) {
  Tensor out(out_type);
  const bool* pc = c.data<bool>();
  const U* px = reinterpret_cast<const U*>(x.raw());
  const U* py = reinterpret_cast<const U*>(y.raw());
  U* po = reinterpret_cast<U*>(out.raw());
  const Plan<3> plan = make_plan<3>(out_type.shape, {&c.shape(), &x.shape(), &y.shape()});
  const int64_t sc = plan.inner_stride[0], sx = plan.inner_stride[1], sy = plan.inner_stride[2];
  run_plan(plan, [&](int64_t o, const std::array<int64_t, 3>& off, int64_t len) {
    const bool* cc = pc + off[0];
    const U* xx = px + off[1];
    const U* yy = py + off[2];
    U* z = po + o;
    if (sc && sx && sy) {
      for (int64_t i = 0; i < len; ++i) z[i] = cc[i] ? xx[i] : yy[i];
    } else {
      for (int64_t i = 0; i < len; ++i) z[i] = cc[i * sc] ? xx[i * sx] : yy[i * sy];
    }
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// Clip

template <typename T>
Tensor clip_apply(const Tensor& x, compute_t<T> lo, compute_t<T> hi) {
  Tensor out(x.type());
  const T* px = x.data<T>();
  T* po = out.data<T>();
  const int64_t n = x.numel();
#pragma omp parallel for if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    compute_t<T> v = ld(px[i]);
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    po[i] = st<T>(v);
  }
  return out;
}

}  // namespace

void register_binary_ops(OpRegistry& r) {
  add_arith(r, "Add", 1, AddF{});
  add_arith(r, "Sub", 1, SubF{});
  add_arith(r, "Mul", 1, MulF{});
  add_arith(r, "Div", 1, DivF{});

  {
    OpDef d;
    d.op_type = "Mod";
    d.min_opset = 10;
    d.infer = [](const OpInferContext& ctx) {
      int64_t fmod = ctx.attrs().get_int("fmod", 0);
      if (fmod != 0 && fmod != 1) fail("attribute fmod must be 0 or 1, got {}", fmod);
      return binary_infer("Mod", kNumericSet)(ctx);
    };
    d.eval = [](const OpEvalContext& ctx) {
      ModF f{ctx.attrs().get_int("fmod", 0) != 0};
      return std::vector<Tensor>{arith(ctx.input(0), ctx.input(1), ctx.output_type(0), "Mod", f)};
    };
    r.add(std::move(d));
  }

  {
    OpDef d;
    d.op_type = "Pow";
    d.infer = [](const OpInferContext& ctx) {
      expect_inputs(ctx, 2, 2);
      const TensorType& a = ctx.input(0);
      const TensorType& b = ctx.input(1);
      check_dtype(a.dtype, kNumericSet, "Pow");
      check_dtype(b.dtype, kNumericSet, "Pow");
      if (ctx.opset < 12) same_dtype(a, b, "input X", "input Y");
      return one(a.dtype, bcast(a.shape, b.shape));
    };
    d.eval = [](const OpEvalContext& ctx) {
      return std::vector<Tensor>{pow_eval(ctx.input(0), ctx.input(1), ctx.output_type(0))};
    };
    r.add(std::move(d));
  }

  {
    OpDef d;
    d.op_type = "PRelu";
    d.infer = [](const OpInferContext& ctx) {
      expect_inputs(ctx, 2, 2);
      const TensorType& x = ctx.input(0);
      const TensorType& s = ctx.input(1);
      same_dtype(x, s, "input X", "slope");
      check_dtype(x.dtype, kNumericSet, "PRelu");
      Shape b = bcast(x.shape, s.shape);
      if (b != x.shape)
        fail("slope shape {} is not unidirectionally broadcastable to input shape {}", shape_str(s.shape),
             shape_str(x.shape));
      return one(x.dtype, x.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      Tensor out;
      dispatch_dtype<EW_NUMERIC>(ctx.input(0).dtype(), "PRelu", [&](auto tag) {
        using T = decltype(tag);
        auto f = [](auto x, auto s) { return x < 0 ? MulF{}(s, x) : x; };
        out = binary_apply<T, T, T>(ctx.input(0), ctx.input(1), ctx.output_type(0), on_storage<T, T>(f));
      });
      return std::vector<Tensor>{out};
    };
    r.add(std::move(d));
  }

  add_variadic(r, "Max", kNumericSet, false, MaxF{});
  add_variadic(r, "Min", kNumericSet, false, MinF{});
  add_variadic(r, "Sum", kFloatSet, false, AddF{});
  add_variadic(r, "Mean", kFloatSet, true, AddF{});

  add_compare(r, "Equal", 1, kAllSet, [](auto a, auto b) { return a == b; });
  add_compare(r, "Less", 1, kNumericSet, [](auto a, auto b) { return a < b; });
  add_compare(r, "Greater", 1, kNumericSet, [](auto a, auto b) { return a > b; });
  add_compare(r, "LessOrEqual", 12, kNumericSet, [](auto a, auto b) { return a <= b; });
  add_compare(r, "GreaterOrEqual", 12, kNumericSet, [](auto a, auto b) { return a >= b; });

  add_logic(r, "And", [](bool a, bool b) { return a && b; });
  add_logic(r, "Or", [](bool a, bool b) { return a || b; });
  add_logic(r, "Xor", [](bool a, bool b) { return a != b; });

  add_bitwise(r, "BitwiseAnd", [](auto a, auto b) { return a & b; });
  add_bitwise(r, "BitwiseOr", [](auto a, auto b) { return a | b; });
  add_bitwise(r, "BitwiseXor", [](auto a, auto b) { return a ^ b; });

  {
    OpDef d;
    d.op_type = "BitShift";
    d.min_opset = 11;
    d.infer = [](const OpInferContext& ctx) {
      std::string dir = ctx.attrs().get_string("direction", "");
      if (dir != "LEFT" && dir != "RIGHT") fail("attribute direction must be \"LEFT\" or \"RIGHT\", got \"{}\"", dir);
      return binary_infer("BitShift", kUnsignedSet)(ctx);
    };
    d.eval = [](const OpEvalContext& ctx) {
      const bool left = ctx.attrs().get_string("direction", "") == "LEFT";
      Tensor out;
      dispatch_dtype<uint8_t, uint16_t, uint32_t, uint64_t>(ctx.input(0).dtype(), "BitShift", [&](auto tag) {
        using T = decltype(tag);
        constexpr T kBits = static_cast<T>(sizeof(T) * 8);
        if (left)
          out = binary_apply<T, T, T>(ctx.input(0), ctx.input(1), ctx.output_type(0),
                                      [](T a, T b) { return b >= kBits ? T(0) : static_cast<T>(uint64_t{a} << b); });
        else
          out = binary_apply<T, T, T>(ctx.input(0), ctx.input(1), ctx.output_type(0),
                                      [](T a, T b) { return b >= kBits ? T(0) : static_cast<T>(a >> b); });
      });
      return std::vector<Tensor>{out};
    };
    r.add(std::move(d));
  }

  {
    OpDef d;
    d.op_type = "Where";
    d.min_opset = 9;
    d.infer = [](const OpInferContext& ctx) {
      expect_inputs(ctx, 3, 3);
      const TensorType& c = ctx.input(0);
      const TensorType& x = ctx.input(1);
      const TensorType& y = ctx.input(2);
      if (c.dtype != DType::kBool) fail("condition must be bool, got {}", dtype_name(c.dtype));
      same_dtype(x, y, "input X", "input Y");
      check_dtype(x.dtype, kAllSet, "Where");
      Shape s;
      try {
        s = broadcast_shapes(broadcast_shapes(c.shape, x.shape), y.shape);
      } catch (const Error&) {
        fail("condition/X/Y shapes {}, {}, {} are not broadcastable", shape_str(c.shape), shape_str(x.shape),
             shape_str(y.shape));
      }
      return one(x.dtype, s);
    };
    d.eval = [](const OpEvalContext& ctx) {
      const Tensor& c = ctx.input(0);
      const Tensor& x = ctx.input(1);
      const Tensor& y = ctx.input(2);
      const TensorType& t = ctx.output_type(0);
      switch (dtype_size(x.dtype())) {
        case 1: return std::vector<Tensor>{where_apply<uint8_t>(c, x, y, t)};
        case 2: return std::vector<Tensor>{where_apply<uint16_t>(c, x, y, t)};
        case 4: return std::vector<Tensor>{where_apply<uint32_t>(c, x, y, t)};
        case 8: return std::vector<Tensor>{where_apply<uint64_t>(c, x, y, t)};
        default: fail_unsupported("Where: element type {} is not supported", dtype_name(x.dtype()));
      }
    };
    r.add(std::move(d));
  }

  {
    OpDef d;
    d.op_type = "Clip";
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& x = ctx.input(0);
      if (ctx.opset < 11) {
        expect_inputs(ctx, 1, 1);
        check_dtype(x.dtype, kFloatSet, "Clip");
      } else {
        expect_inputs(ctx, 1, 3);
        check_dtype(x.dtype, ctx.opset < 12 ? kFloatSet : kNumericSet, "Clip");
        for (int i = 1; i < 3; ++i) {
          if (!ctx.has_input(i)) continue;
          const TensorType& b = ctx.input(i);
          const char* what = i == 1 ? "min" : "max";
          if (b.dtype != x.dtype)
            fail("{} has element type {} but input has {}; they must match", what, dtype_name(b.dtype),
                 dtype_name(x.dtype));
          if (b.numel() != 1) fail("{} must be a scalar, got shape {}", what, shape_str(b.shape));
        }
      }
      return one(x.dtype, x.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      const Tensor& x = ctx.input(0);
      Tensor out;
      dispatch_dtype<EW_NUMERIC>(x.dtype(), "Clip", [&](auto tag) {
        using T = decltype(tag);
        using C = compute_t<T>;
        C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
        if constexpr (std::is_floating_point_v<C>) {
          lo = -std::numeric_limits<C>::infinity();
          hi = std::numeric_limits<C>::infinity();
        }
        if (ctx.opset < 11) {
          if constexpr (std::is_floating_point_v<C>) {
            if (ctx.attrs().has("min")) lo = static_cast<C>(ctx.attrs().get_float("min", 0.f));
            if (ctx.attrs().has("max")) hi = static_cast<C>(ctx.attrs().get_float("max", 0.f));
          }
        } else {
          if (ctx.has_input(1)) lo = ld(ctx.input(1).data<T>()[0]);
          if (ctx.has_input(2)) hi = ld(ctx.input(2).data<T>()[0]);
        }
        out = clip_apply<T>(x, lo, hi);
      });
      return std::vector<Tensor>{out};
    };
    r.add(std::move(d));
  }
}

}  // namespace korch::ops::ew
