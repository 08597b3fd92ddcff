// Elementwise family, part 1: unary math and activations, IsNaN/IsInf, Not/BitwiseNot, and the
// family's registration entry point. Binary/variadic/Where/Clip live in elementwise_binary.cc,
// Cast/CastLike in elementwise_cast.cc.
//
// Math runs in the element's own precision: float for f32 (std::exp(float)...), double for f64,
// float for f16/bf16 (rounded back on store).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ir/ops/elementwise_internal.h"

namespace korch {
namespace {

using ops::ld;
using ops::st;
using ops::ew::kParallelMin;

// Which element types a unary op accepts.
enum class Cat {
  kFloat,    // f16, bf16, f32, f64
  kSigned,   // floats and signed integers
  kNumeric,  // floats and all integers
};

bool cat_allows(Cat c, DType t) {
  if (is_float(t)) return true;
  if (c == Cat::kSigned) return is_signed_integer(t);
  if (c == Cat::kNumeric) return is_integer(t);
  return false;
}

template <Cat C, typename F>
void dispatch_cat(DType t, const char* what, F&& f) {
  if constexpr (C == Cat::kFloat)
    dispatch_dtype<float, double, Float16, BFloat16>(t, what, f);
  else if constexpr (C == Cat::kSigned)
    dispatch_dtype<float, double, Float16, BFloat16, int8_t, int16_t, int32_t, int64_t>(t, what, f);
  else
    dispatch_dtype<float, double, Float16, BFloat16, KORCH_INT_TYPES>(t, what, f);
}

// out[i] = f(in[i]) with f on storage types.
template <typename T, typename R, typename F>
Tensor map_unary(const Tensor& x, DType out_dtype, F f) {
  Tensor out(out_dtype, x.shape());
  const T* px = x.data<T>();
  R* po = out.data<R>();
  const int64_t n = x.numel();
#pragma omp parallel for if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) po[i] = f(px[i]);
  return out;
}

// A unary op of category C whose functor is built from the node's attributes:
// make(attrs) returns a generic callable on compute types (float, double or an integer type).
template <Cat C, typename Make>
void add_unary(OpRegistry& r, const char* name, int min_opset, Make make,
               std::function<void(const OpInferContext&)> check_attrs = nullptr) {
  OpDef d;
  d.op_type = name;
  d.min_opset = min_opset;
  d.infer = [name, check_attrs](const OpInferContext& ctx) {
    const TensorType& t = ctx.input(0);
    if (!cat_allows(C, t.dtype)) ops::fail_element_type(name, t.dtype);
    if (check_attrs) check_attrs(ctx);
    return ops::one(t.dtype, t.shape);
  };
  d.eval = [name, make](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    auto f = make(ctx.attrs());
    Tensor out;
    dispatch_cat<C>(x.dtype(), name, [&](auto tag) {
      using T = decltype(tag);
      out = map_unary<T, T>(x, x.dtype(), [f](T v) { return st<T>(f(ld(v))); });
    });
    return std::vector<Tensor>{out};
  };
  r.add(std::move(d));
}

// Attribute-free unary op.
template <Cat C, typename F>
void add_simple(OpRegistry& r, const char* name, int min_opset, F f) {
  add_unary<C>(r, name, min_opset, [f](const Attributes&) { return f; });
}

// Float-only unary op with no attributes.
template <typename F>
void add_math(OpRegistry& r, const char* name, int min_opset, F f) {
  add_simple<Cat::kFloat>(r, name, min_opset, f);
}

template <typename T>
T wrap_neg(T x) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(uint64_t{0} - static_cast<uint64_t>(x));
  else return -x;
}

template <typename T>
T softplus(T x) {
  // log(1 + exp(x)) without overflow for large x.
  return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

void register_unary_ops(OpRegistry& r) {
  // --- plain math ---
  add_math(r, "Exp", 1, [](auto x) { return std::exp(x); });
  add_math(r, "Log", 1, [](auto x) { return std::log(x); });
  add_math(r, "Sqrt", 1, [](auto x) { return std::sqrt(x); });
  add_math(r, "Reciprocal", 1, [](auto x) { return decltype(x)(1) / x; });
  add_math(r, "Floor", 1, [](auto x) { return std::floor(x); });
  add_math(r, "Ceil", 1, [](auto x) { return std::ceil(x); });
  // Half to even under the default rounding mode.
  add_math(r, "Round", 11, [](auto x) { return std::nearbyint(x); });
  add_math(r, "Sin", 1, [](auto x) { return std::sin(x); });
  add_math(r, "Cos", 1, [](auto x) { return std::cos(x); });
  add_math(r, "Tan", 1, [](auto x) { return std::tan(x); });
  add_math(r, "Asin", 1, [](auto x) { return std::asin(x); });
  add_math(r, "Acos", 1, [](auto x) { return std::acos(x); });
  add_math(r, "Atan", 1, [](auto x) { return std::atan(x); });
  add_math(r, "Sinh", 9, [](auto x) { return std::sinh(x); });
  add_math(r, "Cosh", 9, [](auto x) { return std::cosh(x); });
  add_math(r, "Asinh", 9, [](auto x) { return std::asinh(x); });
  add_math(r, "Acosh", 9, [](auto x) { return std::acosh(x); });
  add_math(r, "Atanh", 9, [](auto x) { return std::atanh(x); });
  add_math(r, "Erf", 9, [](auto x) { return std::erf(x); });
  add_math(r, "Tanh", 1, [](auto x) { return std::tanh(x); });
  add_math(r, "Sigmoid", 1, [](auto x) {
    using T = decltype(x);
    // exp of -|x| never overflows; sigmoid(x) = r for x >= 0, e * r = 1 - r otherwise.
    const T e = std::exp(-std::abs(x));
    const T r = T(1) / (T(1) + e);
    return x >= T(0) ? r : e * r;
  });
  add_math(r, "Softplus", 1, [](auto x) { return softplus(x); });
  add_math(r, "Softsign", 1, [](auto x) { return x / (decltype(x)(1) + std::abs(x)); });
  add_math(r, "Mish", 18, [](auto x) { return x * std::tanh(softplus(x)); });
  add_math(r, "HardSwish", 14, [](auto x) {
    using T = decltype(x);
    return x * std::max(T(0), std::min(T(1), x / T(6) + T(0.5)));
  });

  // --- integer-capable ---
  add_simple<Cat::kNumeric>(r, "Abs", 1, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_unsigned_v<T>) return x;
    else return x < T(0) ? wrap_neg(x) : x;
  });
  add_simple<Cat::kSigned>(r, "Neg", 1, [](auto x) { return wrap_neg(x); });
  add_simple<Cat::kNumeric>(r, "Sign", 9, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(x)) return x;
    }
    return x > T(0) ? T(1) : (x < T(0) ? static_cast<T>(-1) : T(0));
  });
  add_simple<Cat::kSigned>(r, "Relu", 1, [](auto x) {
    using T = decltype(x);
    return x < T(0) ? T(0) : x;  // NaN passes through
  });

  // --- activations with attributes ---
  add_unary<Cat::kFloat>(r, "LeakyRelu", 1, [](const Attributes& a) {
    float alpha = a.get_float("alpha", 0.01f);
    return [alpha](auto x) {
      using T = decltype(x);
      return x < T(0) ? T(alpha) * x : x;
    };
  });
  add_unary<Cat::kFloat>(r, "Elu", 1, [](const Attributes& a) {
    float alpha = a.get_float("alpha", 1.0f);
    return [alpha](auto x) {
      using T = decltype(x);
      return x < T(0) ? T(alpha) * (std::exp(x) - T(1)) : x;
    };
  });
  add_unary<Cat::kFloat>(r, "Selu", 1, [](const Attributes& a) {
    float alpha = a.get_float("alpha", 1.67326319217681884765625f);
    float gamma = a.get_float("gamma", 1.05070102214813232421875f);
    return [alpha, gamma](auto x) {
      using T = decltype(x);
      return x > T(0) ? T(gamma) * x : T(gamma) * (T(alpha) * std::exp(x) - T(alpha));
    };
  });
  add_unary<Cat::kFloat>(
      r, "Celu", 12,
      [](const Attributes& a) {
        float alpha = a.get_float("alpha", 1.0f);
        return [alpha](auto x) {
          using T = decltype(x);
          const T al = T(alpha);
          return std::max(T(0), x) + std::min(T(0), al * (std::exp(x / al) - T(1)));
        };
      },
      [](const OpInferContext& ctx) {
        if (ctx.attrs().get_float("alpha", 1.0f) == 0.f) fail("attribute alpha must be non-zero");
      });
  add_unary<Cat::kFloat>(r, "ThresholdedRelu", 10, [](const Attributes& a) {
    float alpha = a.get_float("alpha", 1.0f);
    return [alpha](auto x) {
      using T = decltype(x);
      return x > T(alpha) ? x : T(0);
    };
  });
  add_unary<Cat::kFloat>(r, "HardSigmoid", 1, [](const Attributes& a) {
    float alpha = a.get_float("alpha", 0.2f);
    float beta = a.get_float("beta", 0.5f);
    return [alpha, beta](auto x) {
      using T = decltype(x);
      return std::max(T(0), std::min(T(1), T(alpha) * x + T(beta)));
    };
  });
  add_unary<Cat::kFloat>(r, "Shrink", 9, [](const Attributes& a) {
    float bias = a.get_float("bias", 0.0f);
    float lambd = a.get_float("lambd", 0.5f);
    return [bias, lambd](auto x) {
      using T = decltype(x);
      return x < -T(lambd) ? x + T(bias) : (x > T(lambd) ? x - T(bias) : T(0));
    };
  });
  add_unary<Cat::kFloat>(
      r, "Gelu", 20,
      [](const Attributes& a) {
        bool tanh_approx = a.get_string("approximate", "none") == "tanh";
        return [tanh_approx](auto x) {
          using T = decltype(x);
          if (tanh_approx) {
            const T k = static_cast<T>(0.79788456080286535587989211986876);  // sqrt(2/pi)
            return T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
          }
          const T inv_sqrt2 = static_cast<T>(0.70710678118654752440084436210485);
          return T(0.5) * x * (T(1) + std::erf(x * inv_sqrt2));
        };
      },
      [](const OpInferContext& ctx) {
        std::string ap = ctx.attrs().get_string("approximate", "none");
        if (ap != "none" && ap != "tanh") fail("attribute approximate must be \"none\" or \"tanh\", got \"{}\"", ap);
      });

  // --- predicates and bit ops ---
  {
    OpDef d;
    d.op_type = "IsNaN";
    d.min_opset = 9;
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& t = ctx.input(0);
      ops::check_float_type("IsNaN", t.dtype);
      return ops::one(DType::kBool, t.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      const Tensor& x = ctx.input(0);
      Tensor out;
      dispatch_cat<Cat::kFloat>(x.dtype(), "IsNaN", [&](auto tag) {
        using T = decltype(tag);
        out = map_unary<T, bool>(x, DType::kBool, [](T v) { return std::isnan(ld(v)); });
      });
      return std::vector<Tensor>{out};
    };
    r.add(std::move(d));
  }
  {
    OpDef d;
    d.op_type = "IsInf";
    d.min_opset = 10;
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& t = ctx.input(0);
      ops::check_float_type("IsInf", t.dtype);
      return ops::one(DType::kBool, t.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      const Tensor& x = ctx.input(0);
      const bool neg = ctx.attrs().get_int("detect_negative", 1) != 0;
      const bool pos = ctx.attrs().get_int("detect_positive", 1) != 0;
      Tensor out;
      dispatch_cat<Cat::kFloat>(x.dtype(), "IsInf", [&](auto tag) {
        using T = decltype(tag);
        out = map_unary<T, bool>(x, DType::kBool, [neg, pos](T v) {
          auto c = ld(v);
          return std::isinf(c) && ((c > 0 && pos) || (c < 0 && neg));
        });
      });
      return std::vector<Tensor>{out};
    };
    r.add(std::move(d));
  }
  {
    OpDef d;
    d.op_type = "Not";
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& t = ctx.input(0);
      if (t.dtype != DType::kBool) ops::fail_element_type("Not", t.dtype);
      return ops::one(t.dtype, t.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      return std::vector<Tensor>{map_unary<bool, bool>(ctx.input(0), DType::kBool, [](bool v) { return !v; })};
    };
    r.add(std::move(d));
  }
  {
    OpDef d;
    d.op_type = "BitwiseNot";
    d.min_opset = 18;
    d.infer = [](const OpInferContext& ctx) {
      const TensorType& t = ctx.input(0);
      if (!is_integer(t.dtype)) ops::fail_element_type("BitwiseNot", t.dtype);
      return ops::one(t.dtype, t.shape);
    };
    d.eval = [](const OpEvalContext& ctx) {
      const Tensor& x = ctx.input(0);
      Tensor out;
      dispatch_dtype<KORCH_INT_TYPES>(x.dtype(), "BitwiseNot", [&](auto tag) {
        using T = decltype(tag);
        out = map_unary<T, T>(x, x.dtype(), [](T v) { return static_cast<T>(~v); });
      });
      return std::vector<Tensor>{out};
    };
    r.add(std::move(d));
  }
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  register_unary_ops(r);
  ops::ew::register_binary_ops(r);
  ops::ew::register_cast_ops(r);
}

}  // namespace korch
