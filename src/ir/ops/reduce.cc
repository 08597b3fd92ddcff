// Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare and ArgMax/ArgMin.
// Softmax/LogSoftmax/Hardmax, CumSum and TopK live in reduce_softmax.cc.
//
// Every reduction is planned once per call: dims of size 1 are dropped and adjacent kept/reduced
// dims are merged. When the reduced dims form one contiguous block the input is viewed as
// [outer, reduced, inner] and reduced with plain strided loops (parallel over `outer`); otherwise
// a generic odometer walk maps each input element to its output slot.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/ops/op_util.h"
#include "ir/ops/reduce_internal.h"

namespace korch {
namespace {

using namespace ops;

// Compute type per element type: double for floats (also f16/bf16, converted through float),
// int64/uint64 for integers (exact sums and products with wrap-around), int64 for bool.
template <typename T>
struct Num {
  using C = std::conditional_t<std::is_floating_point_v<T> || kIsHalf<T>,
                               double, std::conditional_t<std::is_unsigned_v<T> && !std::is_same_v<T, bool>, uint64_t, int64_t>>;
  static C load(T v) {
    if constexpr (kIsHalf<T>) return static_cast<double>(static_cast<float>(v));
    else return static_cast<C>(v);
  }
  static T store(C v) {
    if constexpr (kIsHalf<T>) return T(static_cast<float>(v));
    else if constexpr (std::is_same_v<T, bool>) return v != 0;
    else return static_cast<T>(v);
  }
  static C lowest() {
    if constexpr (std::is_same_v<C, double>) return -std::numeric_limits<double>::infinity();
    else if constexpr (std::is_same_v<T, bool>) return 0;
    else return static_cast<C>(std::numeric_limits<T>::lowest());
  }
  static C highest() {
    if constexpr (std::is_same_v<C, double>) return std::numeric_limits<double>::infinity();
    else if constexpr (std::is_same_v<T, bool>) return 1;
    else return static_cast<C>(std::numeric_limits<T>::max());
  }
};

// How to walk a reduction. fast: the input is [O, R, I] with R reduced (after dropping size-1
// dims and merging neighbours); otherwise `strides` maps each input element (odometer over
// `in_shape`) to its output offset.
struct ReducePlan {
  bool fast = false;
  int64_t O = 1, R = 1, I = 1;
  int64_t count = 1;  // input elements per output element
  Shape in_shape;
  std::vector<int64_t> strides;
};

ReducePlan make_plan(const Shape& in, const std::vector<bool>& reduced) {
  ReducePlan p;
  p.in_shape = in;
  Shape kept;  // keepdims output shape
  for (size_t d = 0; d < in.size(); ++d) {
    if (reduced[d]) p.count *= in[d];
    kept.push_back(reduced[d] ? 1 : in[d]);
  }
  // Classify the non-trivial dims: kept* reduced* kept* is the fast case.
  int phase = 0;  // 0: outer kept dims, 1: reduced block, 2: inner kept dims
  bool fast = true;
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == 1) continue;
    if (reduced[d]) {
      if (phase == 2) fast = false;
      phase = 1;
      p.R *= in[d];
    } else if (phase == 0) {
      p.O *= in[d];
    } else {
      phase = 2;
      p.I *= in[d];
    }
  }
  p.fast = fast;
  if (!fast) p.strides = broadcast_strides(kept, in);
  return p;
}

// acc[out] = add(acc[out], load(x[in])) for every input element; add(C& a, C v, int64_t out).
template <typename T, typename C, typename Add>
void accumulate(const T* x, const ReducePlan& p, C* acc, Add add) {
  if (shape_numel(p.in_shape) == 0) return;
  if (!p.fast) {
    for_each_broadcast(p.in_shape, {p.strides}, [&](int64_t i, const std::vector<int64_t>& off) {
      add(acc[off[0]], static_cast<C>(Num<T>::load(x[i])), off[0]);
    });
    return;
  }
  const int64_t O = p.O, R = p.R, I = p.I;
  if (I == 1) {
#pragma omp parallel for schedule(static) if (O * R > 32768 && O > 1)
    for (int64_t o = 0; o < O; ++o) {
      const T* xr = x + o * R;
      C a = acc[o];
      for (int64_t r = 0; r < R; ++r) add(a, static_cast<C>(Num<T>::load(xr[r])), o);
      acc[o] = a;
    }
  } else {
#pragma omp parallel for schedule(static) if (O * R * I > 32768 && O > 1)
    for (int64_t o = 0; o < O; ++o) {
      C* ap = acc + o * I;
      for (int64_t r = 0; r < R; ++r) {
        const T* xr = x + (o * R + r) * I;
        for (int64_t i = 0; i < I; ++i) add(ap[i], static_cast<C>(Num<T>::load(xr[i])), o * I + i);
      }
    }
  }
}

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

struct ReduceOpInfo {
  const char* name;
  ReduceKind kind;
  int axes_input_opset;  // first opset where axes is an input instead of an attribute
};

// Axes after resolution: `reduced` marks the reduced dims; `noop` means return the input unchanged.
struct ResolvedAxes {
  bool noop = false;
  std::vector<bool> reduced;  // per input dim
};

// Shared by infer and eval. `axes` comes from the attribute (old opsets) or the axes input;
// nullopt or empty means "all dims" unless noop_with_empty_axes is set (axes-as-input opsets).
ResolvedAxes resolve_axes(const ReduceOpInfo& info, int opset, const Attributes& attrs, int64_t rank,
                          std::optional<std::vector<int64_t>> axes) {
  ResolvedAxes r;
  bool noop_with_empty = opset >= info.axes_input_opset && attrs.get_int("noop_with_empty_axes", 0) != 0;
  if (!axes || axes->empty()) {
    if (noop_with_empty) {
      r.noop = true;
      r.reduced.assign(static_cast<size_t>(rank), false);
    } else {
      r.reduced.assign(static_cast<size_t>(rank), true);
    }
    return r;
  }
  r.reduced.assign(static_cast<size_t>(rank), false);
  for (int64_t a : *axes) {
    if (a < -rank || a >= rank) fail("axis {} is out of range for rank {}", a, rank);
    int64_t n = a < 0 ? a + rank : a;
    if (r.reduced[static_cast<size_t>(n)]) fail("axis {} is repeated in axes", a);
    r.reduced[static_cast<size_t>(n)] = true;
  }
  return r;
}

std::optional<std::vector<int64_t>> read_axes_infer(const ReduceOpInfo& info, const OpInferContext& ctx) {
  if (ctx.opset < info.axes_input_opset) {
    if (ctx.attrs().has("axes")) return ctx.attrs().get_ints("axes");
    return std::nullopt;
  }
  if (ctx.attrs().has("axes")) fail("'axes' is an input, not an attribute, since opset {}", info.axes_input_opset);
  if (!ctx.has_input(1)) return std::nullopt;
  const TensorType& t = ctx.input(1);
  if (t.dtype != DType::kInt64) fail("axes must be int64, got {}", dtype_name(t.dtype));
  if (t.rank() != 1) fail("axes must be 1-D, got shape {}", shape_str(t.shape));
  // An empty axes tensor is known to be empty without knowing its (non-existent) values.
  if (t.numel() == 0) return std::vector<int64_t>{};
  return ctx.require_constant(1, "axes").to_int_vector();
}

std::optional<std::vector<int64_t>> read_axes_eval(const ReduceOpInfo& info, const OpEvalContext& ctx) {
  if (ctx.opset < info.axes_input_opset) {
    if (ctx.attrs().has("axes")) return ctx.attrs().get_ints("axes");
    return std::nullopt;
  }
  if (!ctx.has_input(1)) return std::nullopt;
  return ctx.input(1).to_int_vector();
}

Shape reduced_shape(const Shape& in, const std::vector<bool>& reduced, bool keepdims) {
  Shape out;
  for (size_t d = 0; d < in.size(); ++d) {
    if (!reduced[d]) out.push_back(in[d]);
    else if (keepdims) out.push_back(1);
  }
  return out;
}

bool reduce_dtype_ok(ReduceKind k, DType t) {
  if (t == DType::kBool) return k == ReduceKind::kMax || k == ReduceKind::kMin;
  return is_float(t) || is_integer(t);
}

std::vector<TensorType> infer_reduce(const ReduceOpInfo& info, const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (!reduce_dtype_ok(info.kind, x.dtype))
    fail_element_type(info.name, x.dtype);
  ResolvedAxes ax = resolve_axes(info, ctx.opset, ctx.attrs(), x.rank(), read_axes_infer(info, ctx));
  if (ax.noop) return one(x.dtype, x.shape);
  bool keepdims = ctx.attrs().get_int("keepdims", 1) != 0;
  return one(x.dtype, reduced_shape(x.shape, ax.reduced, keepdims));
}

// Saturating double -> integer conversion (log/sqrt of integers can produce inf or NaN).
template <typename T>
T store_from_double(double v) {
  if constexpr (std::is_integral_v<T>) {
    if constexpr (std::is_same_v<T, bool>) {
      return v != 0;
    } else {
      if (std::isnan(v)) return T{0};
      if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
      if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
      return static_cast<T>(v);
    }
  } else {
    return Num<T>::store(v);
  }
}

template <typename T>
void eval_reduce_typed(ReduceKind kind, const Tensor& xt, const ReducePlan& plan, Tensor& yt) {
  using C = typename Num<T>::C;
  const T* x = xt.data<T>();
  T* y = yt.data<T>();
  const int64_t n_out = yt.numel();
  const int64_t count = plan.count;
  std::vector<C> acc;

  auto sum_like = [&](auto term) {
    acc.assign(static_cast<size_t>(n_out), C{0});
    accumulate<T, C>(x, plan, acc.data(), [&](C& a, C v, int64_t) { a += term(v); });
  };
  auto abs_c = [](C v) -> C {
    if constexpr (std::is_unsigned_v<C>) return v;
    else return v < 0 ? -v : v;
  };

  switch (kind) {
    case ReduceKind::kSum:
      sum_like([](C v) { return v; });
      for (int64_t i = 0; i < n_out; ++i) y[i] = Num<T>::store(acc[i]);
      break;
    case ReduceKind::kSumSquare:
      sum_like([](C v) { return v * v; });
      for (int64_t i = 0; i < n_out; ++i) y[i] = Num<T>::store(acc[i]);
      break;
    case ReduceKind::kL1:
      sum_like(abs_c);
      for (int64_t i = 0; i < n_out; ++i) y[i] = Num<T>::store(acc[i]);
      break;
    case ReduceKind::kL2:
      sum_like([](C v) { return v * v; });
      for (int64_t i = 0; i < n_out; ++i) y[i] = store_from_double<T>(std::sqrt(static_cast<double>(acc[i])));
      break;
    case ReduceKind::kLogSum:
      sum_like([](C v) { return v; });
      for (int64_t i = 0; i < n_out; ++i) y[i] = store_from_double<T>(std::log(static_cast<double>(acc[i])));
      break;
    case ReduceKind::kMean:
      sum_like([](C v) { return v; });
      for (int64_t i = 0; i < n_out; ++i) {
        if constexpr (std::is_floating_point_v<C>) y[i] = Num<T>::store(acc[i] / static_cast<C>(count));
        else y[i] = count == 0 ? T{0} : Num<T>::store(acc[i] / static_cast<C>(count));
      }
      break;
    case ReduceKind::kProd:
      acc.assign(static_cast<size_t>(n_out), C{1});
      accumulate<T, C>(x, plan, acc.data(), [](C& a, C v, int64_t) { a *= v; });
      for (int64_t i = 0; i < n_out; ++i) y[i] = Num<T>::store(acc[i]);
      break;
    case ReduceKind::kMax:
    case ReduceKind::kMin: {
      bool is_max = kind == ReduceKind::kMax;
      // Empty reductions give the identity: the lowest value (-inf) for Max, the highest for Min.
      C init = is_max ? Num<T>::lowest() : Num<T>::highest();
      acc.assign(static_cast<size_t>(n_out), init);
      if (is_max) {
        accumulate<T, C>(x, plan, acc.data(), [](C& a, C v, int64_t) {
          if (v > a || v != v) a = v;  // NaN propagates
        });
      } else {
        accumulate<T, C>(x, plan, acc.data(), [](C& a, C v, int64_t) {
          if (v < a || v != v) a = v;
        });
      }
      for (int64_t i = 0; i < n_out; ++i) y[i] = Num<T>::store(acc[i]);
      break;
    }
    case ReduceKind::kLogSumExp: {
      // log(sum(exp(x - m))) + m with m the max: no overflow for large inputs.
      std::vector<double> m(static_cast<size_t>(n_out), -std::numeric_limits<double>::infinity());
      accumulate<T, double>(x, plan, m.data(), [](double& a, double v, int64_t) {
        if (v > a) a = v;
      });
      for (double& v : m)
        if (std::isinf(v)) v = 0;  // all -inf (or empty): exp(x - 0) keeps the result -inf / +inf
      std::vector<double> s(static_cast<size_t>(n_out), 0.0);
      const double* mp = m.data();
      accumulate<T, double>(x, plan, s.data(), [mp](double& a, double v, int64_t o) { a += std::exp(v - mp[o]); });
      for (int64_t i = 0; i < n_out; ++i) y[i] = store_from_double<T>(std::log(s[static_cast<size_t>(i)]) + m[static_cast<size_t>(i)]);
      break;
    }
  }
}

std::vector<Tensor> eval_reduce(const ReduceOpInfo& info, const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  ResolvedAxes ax = resolve_axes(info, ctx.opset, ctx.attrs(), x.rank(), read_axes_eval(info, ctx));
  if (ax.noop) return {x};
  Tensor y(ctx.output_type(0));
  ReducePlan plan = make_plan(x.shape(), ax.reduced);
  if (info.kind == ReduceKind::kMax || info.kind == ReduceKind::kMin) {
    dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16, bool>(
        x.dtype(), info.name, [&](auto t) { eval_reduce_typed<decltype(t)>(info.kind, x, plan, y); });
  } else {
    dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(
        x.dtype(), info.name, [&](auto t) { eval_reduce_typed<decltype(t)>(info.kind, x, plan, y); });
  }
  return {y};
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

struct ArgAttrs {
  int64_t axis;
  bool keepdims;
  bool last;
};

ArgAttrs arg_attrs(const Attributes& a, int64_t rank) {
  ArgAttrs r;
  int64_t axis = a.get_int("axis", 0);
  if (axis < -rank || axis >= rank) fail("axis {} is out of range for rank {}", axis, rank);
  r.axis = axis < 0 ? axis + rank : axis;
  r.keepdims = a.get_int("keepdims", 1) != 0;
  r.last = a.get_int("select_last_index", 0) != 0;
  return r;
}

std::vector<TensorType> infer_arg(const char* name, const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (!is_float(x.dtype) && !is_integer(x.dtype))
    fail_element_type(name, x.dtype);
  ArgAttrs a = arg_attrs(ctx.attrs(), x.rank());
  std::vector<bool> reduced(static_cast<size_t>(x.rank()), false);
  reduced[static_cast<size_t>(a.axis)] = true;
  Shape out = reduced_shape(x.shape, reduced, a.keepdims);
  if (x.shape[static_cast<size_t>(a.axis)] == 0 && shape_numel(out) > 0)
    fail("{} over axis {} of size 0 has no result", name, a.axis);
  return one(DType::kInt64, out);
}

template <typename T>
void eval_arg_typed(bool is_max, bool last, const Tensor& xt, int64_t O, int64_t R, int64_t I, Tensor& yt) {
  using C = typename Num<T>::C;
  const T* x = xt.data<T>();
  int64_t* y = yt.data<int64_t>();
#pragma omp parallel for schedule(static) if (O * R * I > 32768)
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      const T* p = x + o * R * I + i;
      C best = Num<T>::load(p[0]);
      int64_t best_r = 0;
      for (int64_t r = 1; r < R; ++r) {
        C v = Num<T>::load(p[r * I]);
        bool better = is_max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
        if (better) {
          best = v;
          best_r = r;
        }
      }
      y[o * I + i] = best_r;
    }
  }
}

std::vector<Tensor> eval_arg(const char* name, bool is_max, const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  ArgAttrs a = arg_attrs(ctx.attrs(), x.rank());
  Tensor y(ctx.output_type(0));
  if (y.numel() == 0) return {y};
  int64_t O = 1, I = 1, R = x.dim(a.axis);
  for (int64_t d = 0; d < a.axis; ++d) O *= x.dim(d);
  for (int64_t d = a.axis + 1; d < x.rank(); ++d) I *= x.dim(d);
  dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(
      x.dtype(), name, [&](auto t) { eval_arg_typed<decltype(t)>(is_max, a.last, x, O, R, I, y); });
  return {y};
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  static const ReduceOpInfo kInfos[] = {
      {"ReduceSum", ReduceKind::kSum, 13},         {"ReduceMean", ReduceKind::kMean, 18},
      {"ReduceMax", ReduceKind::kMax, 18},         {"ReduceMin", ReduceKind::kMin, 18},
      {"ReduceProd", ReduceKind::kProd, 18},       {"ReduceL1", ReduceKind::kL1, 18},
      {"ReduceL2", ReduceKind::kL2, 18},           {"ReduceLogSum", ReduceKind::kLogSum, 18},
      {"ReduceLogSumExp", ReduceKind::kLogSumExp, 18}, {"ReduceSumSquare", ReduceKind::kSumSquare, 18},
  };
  for (const ReduceOpInfo& info : kInfos) {
    OpDef d;
    d.op_type = info.name;
    d.infer = [&info](const OpInferContext& ctx) { return infer_reduce(info, ctx); };
    d.eval = [&info](const OpEvalContext& ctx) { return eval_reduce(info, ctx); };
    r.add(std::move(d));
  }
  for (bool is_max : {true, false}) {
    const char* name = is_max ? "ArgMax" : "ArgMin";
    OpDef d;
    d.op_type = name;
    d.infer = [name](const OpInferContext& ctx) { return infer_arg(name, ctx); };
    d.eval = [name, is_max](const OpEvalContext& ctx) { return eval_arg(name, is_max, ctx); };
    r.add(std::move(d));
  }
  ops::register_softmax_family_ops(r);
}

}  // namespace korch
