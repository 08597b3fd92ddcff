// Softmax, LogSoftmax, Hardmax, CumSum and TopK (registered by register_reduce_ops).
//
// All of them work along one axis of the input viewed as [O, R, I]: O = dims before the axis,
// R = the axis, I = dims after. Softmax-like ops before opset 13 coerce the input to 2-D at
// `axis`, which is the same view with R = all dims from `axis` on and I = 1.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "ir/ops/op_util.h"
#include "ir/ops/reduce_internal.h"

namespace korch {
namespace {

using namespace ops;

struct AxisView {
  int64_t O = 1, R = 1, I = 1;
};

AxisView axis_view(const Shape& s, int64_t axis, bool coerce_2d) {
  AxisView v;
  const int64_t rank = static_cast<int64_t>(s.size());
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = s[static_cast<size_t>(d)];
    if (d < axis) v.O *= n;
    else if (d == axis || coerce_2d) v.R *= n;
    else v.I *= n;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Softmax / LogSoftmax / Hardmax

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

// Axis and whether the input is coerced to 2-D (opset < 13).
std::pair<int64_t, bool> soft_axis(const Attributes& a, int opset, int64_t rank) {
  bool coerce = opset < 13;
  int64_t axis = a.get_int("axis", coerce ? 1 : -1);
  if (coerce) {
    // Opsets 1..12 accept axis in [-r, r]; axis == r makes every row a single element.
    if (axis < -rank || axis > rank) fail("axis {} is out of range for rank {}", axis, rank);
    return {axis < 0 ? axis + rank : axis, true};
  }
  if (axis < -rank || axis >= rank) fail("axis {} is out of range for rank {}", axis, rank);
  return {axis < 0 ? axis + rank : axis, false};
}

std::vector<TensorType> infer_soft(const char* name, const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  check_float_type(name, x.dtype);
  soft_axis(ctx.attrs(), ctx.opset, x.rank());
  return one(x.dtype, x.shape);
}

template <typename T>
void softmax_typed(SoftKind kind, const T* x, T* y, AxisView v) {
  const int64_t O = v.O, R = v.R, I = v.I;
  if (R == 0) return;
  if (kind == SoftKind::kHardmax) {
#pragma omp parallel for schedule(static) if (O * R * I > 32768)
    for (int64_t o = 0; o < O; ++o) {
      for (int64_t i = 0; i < I; ++i) {
        const T* p = x + o * R * I + i;
        T* q = y + o * R * I + i;
        int64_t best = 0;
        double bv = to_double(p[0]);
        for (int64_t r = 1; r < R; ++r) {
          double val = to_double(p[r * I]);
          if (val > bv) bv = val, best = r;  // first occurrence wins ties
        }
        for (int64_t r = 0; r < R; ++r) q[r * I] = from_double<T>(r == best ? 1.0 : 0.0);
      }
    }
    return;
  }
  const bool log_out = kind == SoftKind::kLogSoftmax;
  if (I == 1) {
    // Contiguous rows (the common case: last axis). exp values are kept in a per-thread buffer.
#pragma omp parallel if (O * R > 32768)
    {
      std::vector<double> e(static_cast<size_t>(R));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < O; ++o) {
        const T* p = x + o * R;
        T* q = y + o * R;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t r = 0; r < R; ++r) m = std::max(m, to_double(p[r]));
        if (std::isinf(m)) m = 0;  // all -inf (or +inf present): keep the IEEE result
        double s = 0;
        for (int64_t r = 0; r < R; ++r) {
          double d = to_double(p[r]) - m;
          e[static_cast<size_t>(r)] = log_out ? d : std::exp(d);
          s += log_out ? std::exp(d) : e[static_cast<size_t>(r)];
        }
        if (log_out) {
          double ls = std::log(s);
          for (int64_t r = 0; r < R; ++r) q[r] = from_double<T>(e[static_cast<size_t>(r)] - ls);
        } else {
          double inv = 1.0 / s;
          for (int64_t r = 0; r < R; ++r) q[r] = from_double<T>(e[static_cast<size_t>(r)] * inv);
        }
      }
    }
    return;
  }
  // Strided axis: per outer index, vectors of I maxima and sums.
#pragma omp parallel if (O * R * I > 32768)
  {
    std::vector<double> m(static_cast<size_t>(I)), s(static_cast<size_t>(I));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < O; ++o) {
      const T* p = x + o * R * I;
      T* q = y + o * R * I;
      std::fill(m.begin(), m.end(), -std::numeric_limits<double>::infinity());
      std::fill(s.begin(), s.end(), 0.0);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) m[static_cast<size_t>(i)] = std::max(m[static_cast<size_t>(i)], to_double(p[r * I + i]));
      for (double& mv : m)
        if (std::isinf(mv)) mv = 0;
      for (int64_t r = 0; r < R; ++r)
        for (int64_t i = 0; i < I; ++i) s[static_cast<size_t>(i)] += std::exp(to_double(p[r * I + i]) - m[static_cast<size_t>(i)]);
      for (int64_t i = 0; i < I; ++i) {
        size_t iu = static_cast<size_t>(i);
        s[iu] = log_out ? std::log(s[iu]) : 1.0 / s[iu];
      }
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t i = 0; i < I; ++i) {
          size_t iu = static_cast<size_t>(i);
          double d = to_double(p[r * I + i]) - m[iu];
          q[r * I + i] = from_double<T>(log_out ? d - s[iu] : std::exp(d) * s[iu]);
        }
      }
    }
  }
}

std::vector<Tensor> eval_soft(const char* name, SoftKind kind, const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto [axis, coerce] = soft_axis(ctx.attrs(), ctx.opset, x.rank());
  AxisView v = axis_view(x.shape(), axis, coerce);
  Tensor y(ctx.output_type(0));
  if (y.numel() == 0) return {y};
  dispatch_dtype<KORCH_FLOAT_TYPES, Float16, BFloat16>(x.dtype(), name, [&](auto t) {
    using T = decltype(t);
    softmax_typed<T>(kind, x.data<T>(), y.data<T>(), v);
  });
  return {y};
}

// ---------------------------------------------------------------------------------------------
// CumSum (opset 11+): axis is a 0-D (or 1-element 1-D) int32/int64 input.

int64_t cumsum_axis(const Tensor& a, int64_t rank) {
  if (a.dtype() != DType::kInt32 && a.dtype() != DType::kInt64)
    fail("axis must be int32 or int64, got {}", dtype_name(a.dtype()));
  if (a.numel() != 1) fail("axis must hold exactly one value, got shape {}", shape_str(a.shape()));
  int64_t axis = a.get_as_int(0);
  if (axis < -rank || axis >= rank) fail("axis {} is out of range for rank {}", axis, rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<TensorType> infer_cumsum(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  const TensorType& a = ctx.input(1);
  if (x.dtype == DType::kBool || !(is_float(x.dtype) || is_integer(x.dtype)))
    fail_element_type("CumSum", x.dtype);
  if (a.dtype != DType::kInt32 && a.dtype != DType::kInt64) fail("axis must be int32 or int64, got {}", dtype_name(a.dtype));
  if (a.rank() > 1 || a.numel() != 1) fail("axis must be a scalar, got shape {}", shape_str(a.shape));
  if (x.rank() == 0) fail("CumSum input must have rank >= 1");
  if (const Tensor* c = ctx.constant(1)) cumsum_axis(*c, x.rank());
  return one(x.dtype, x.shape);
}

template <typename T>
void cumsum_typed(const T* x, T* y, AxisView v, bool exclusive, bool reverse) {
  using C = std::conditional_t<std::is_integral_v<T>, std::conditional_t<std::is_unsigned_v<T>, uint64_t, int64_t>, double>;
  const int64_t O = v.O, R = v.R, I = v.I;
#pragma omp parallel for schedule(static) if (O * R * I > 32768)
  for (int64_t o = 0; o < O; ++o) {
    for (int64_t i = 0; i < I; ++i) {
      const T* p = x + o * R * I + i;
      T* q = y + o * R * I + i;
      C acc = 0;
      for (int64_t k = 0; k < R; ++k) {
        int64_t r = reverse ? R - 1 - k : k;
        C val;
        if constexpr (std::is_integral_v<T>) val = static_cast<C>(p[r * I]);
        else val = to_double(p[r * I]);
        if (exclusive) {
          q[r * I] = std::is_integral_v<T> ? static_cast<T>(acc) : from_double<T>(static_cast<double>(acc));
          acc += val;
        } else {
          acc += val;
          q[r * I] = std::is_integral_v<T> ? static_cast<T>(acc) : from_double<T>(static_cast<double>(acc));
        }
      }
    }
  }
}

std::vector<Tensor> eval_cumsum(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = cumsum_axis(ctx.input(1), x.rank());
  bool exclusive = ctx.attrs().get_int("exclusive", 0) != 0;
  bool reverse = ctx.attrs().get_int("reverse", 0) != 0;
  Tensor y(ctx.output_type(0));
  if (y.numel() == 0) return {y};
  AxisView v = axis_view(x.shape(), axis, false);
  dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(x.dtype(), "CumSum", [&](auto t) {
    using T = decltype(t);
    cumsum_typed<T>(x.data<T>(), y.data<T>(), v, exclusive, reverse);
  });
  return {y};
}

// ---------------------------------------------------------------------------------------------
// TopK: k is an attribute before opset 10, a constant 1-element int64 input from 10 on.
// largest/sorted exist from opset 11. Ties go to the lower index; the output is always sorted.
// NaN counts as larger than every number (so it comes first for largest=1, last otherwise).

int64_t topk_k_infer(const OpInferContext& ctx) {
  if (ctx.opset < 10) return ctx.attrs().get_int("k");
  const TensorType& kt = ctx.input(1);
  if (kt.dtype != DType::kInt64) fail("k must be int64, got {}", dtype_name(kt.dtype));
  if (kt.numel() != 1 || kt.rank() > 1) fail("k must be a 1-D tensor with one element, got shape {}", shape_str(kt.shape));
  return ctx.require_constant(1, "k").get_as_int(0);
}

struct TopKAttrs {
  int64_t axis;
  bool largest;
};

TopKAttrs topk_attrs(const Attributes& a, int opset, int64_t rank) {
  int64_t axis = a.get_int("axis", -1);
  if (axis < -rank || axis >= rank) fail("axis {} is out of range for rank {}", axis, rank);
  if (opset < 11 && axis < 0) fail("negative axis {} requires opset 11", axis);
  bool largest = opset < 11 || a.get_int("largest", 1) != 0;
  return {axis < 0 ? axis + rank : axis, largest};
}

std::vector<TensorType> infer_topk(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  if (x.dtype == DType::kBool || !(is_float(x.dtype) || is_integer(x.dtype)))
    fail_element_type("TopK", x.dtype);
  TopKAttrs a = topk_attrs(ctx.attrs(), ctx.opset, x.rank());
  int64_t k = topk_k_infer(ctx);
  int64_t n = x.shape[static_cast<size_t>(a.axis)];
  if (k < 0 || k > n) fail("k = {} is out of range for axis {} of size {}", k, a.axis, n);
  Shape s = x.shape;
  s[static_cast<size_t>(a.axis)] = k;
  return {TensorType{x.dtype, s}, TensorType{DType::kInt64, s}};
}

template <typename T>
auto topk_key(T v) {
  if constexpr (kIsHalf<T>) return static_cast<float>(v);
  else return v;
}

template <typename T>
void topk_typed(const T* x, T* vals, int64_t* idx, int64_t O, int64_t R, int64_t I, int64_t k, bool largest) {
  using K = decltype(topk_key(T{}));
  // Strict total order on (value, index): NaN above every number, ties by lower index first.
  auto before = [largest](K a, int64_t ia, K b, int64_t ib) {
    bool na = false, nb = false;
    if constexpr (std::is_floating_point_v<K>) na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) {
      if (na && nb) return ia < ib;
      return largest ? na : nb;
    }
    if (a != b) return largest ? a > b : a < b;
    return ia < ib;
  };
#pragma omp parallel if (O * I * R > 32768)
  {
    std::vector<int64_t> order(static_cast<size_t>(R));
    std::vector<K> keys(static_cast<size_t>(R));
#pragma omp for schedule(static) collapse(2)
    for (int64_t o = 0; o < O; ++o) {
      for (int64_t i = 0; i < I; ++i) {
        const T* p = x + o * R * I + i;
        for (int64_t r = 0; r < R; ++r) keys[static_cast<size_t>(r)] = topk_key(p[r * I]);
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
          return before(keys[static_cast<size_t>(a)], a, keys[static_cast<size_t>(b)], b);
        });
        for (int64_t j = 0; j < k; ++j) {
          int64_t r = order[static_cast<size_t>(j)];
          vals[(o * k + j) * I + i] = p[r * I];
          idx[(o * k + j) * I + i] = r;
        }
      }
    }
  }
}

std::vector<Tensor> eval_topk(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  TopKAttrs a = topk_attrs(ctx.attrs(), ctx.opset, x.rank());
  int64_t k = ctx.opset < 10 ? ctx.attrs().get_int("k") : ctx.input(1).get_as_int(0);
  Tensor vals(ctx.output_type(0)), idx(ctx.output_type(1));
  AxisView v = axis_view(x.shape(), a.axis, false);
  if (k < 0 || k > v.R) fail("k = {} is out of range for axis {} of size {}", k, a.axis, v.R);
  if (vals.numel() == 0) return {vals, idx};
  dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(x.dtype(), "TopK", [&](auto t) {
    using T = decltype(t);
    topk_typed<T>(x.data<T>(), vals.data<T>(), idx.data<int64_t>(), v.O, v.R, v.I, k, a.largest);
  });
  return {vals, idx};
}

}  // namespace

namespace ops {

void register_softmax_family_ops(OpRegistry& r) {
  const std::pair<const char*, SoftKind> softs[] = {
      {"Softmax", SoftKind::kSoftmax}, {"LogSoftmax", SoftKind::kLogSoftmax}, {"Hardmax", SoftKind::kHardmax}};
  for (const auto& soft : softs) {
    const char* name = soft.first;  // plain variables: clang 14 cannot capture structured bindings
    const SoftKind kind = soft.second;
    OpDef d;
    d.op_type = name;
    d.infer = [name](const OpInferContext& ctx) { return infer_soft(name, ctx); };
    d.eval = [name, kind](const OpEvalContext& ctx) { return eval_soft(name, kind, ctx); };
    r.add(std::move(d));
  }
  OpDef cs;
  cs.op_type = "CumSum";
  cs.min_opset = 11;
  cs.infer = infer_cumsum;
  cs.eval = eval_cumsum;
  r.add(std::move(cs));

  OpDef tk;
  tk.op_type = "TopK";
  tk.infer = infer_topk;
  tk.eval = eval_topk;
  r.add(std::move(tk));
}

}  // namespace ops
}  // namespace korch
