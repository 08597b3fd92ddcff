// Misc family: Constant, Identity, Dropout (inference), Shape, Size, ConstantOfShape, Range, EyeLike,
// Trilu, OneHot, NonZero (constant input only).
#include <cmath>
#include <cstring>
#include <limits>

#include "ir/ops/op_util.h"

namespace korch {
namespace {

using ops::one;

// A value of type T equal to 1 (works for Float16/BFloat16 and bool).
template <typename T>
T one_value() {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
    return T(1.f);
  else
    return static_cast<T>(1);
}

// Element i of `t` as int64, failing (instead of UB) on NaN / out-of-range floats.
int64_t checked_int(const Tensor& t, int64_t i, const char* what) {
  if (is_float(t.dtype())) {
    double d = t.get_as_double(i);
    if (!std::isfinite(d) || std::fabs(d) > 9.0e18) fail("{} value {} is not a valid integer", what, d);
    return static_cast<int64_t>(d);
  }
  return t.get_as_int(i);
}

// Requires a tensor with exactly one element (scalar or [1]); returns it as a scalar-shaped check.
void check_single(const TensorType& t, const char* what) {
  if (t.numel() != 1) fail("{} must have exactly one element, got shape {}", what, shape_str(t.shape));
}

// ---------------------------------------------------------------- Constant
const char* const kConstantAttrs[] = {"value", "value_float", "value_floats", "value_int", "value_ints",
                                      "value_string", "value_strings", "sparse_value"};

Tensor constant_value(const Attributes& a) {
  int count = 0;
  for (const char* n : kConstantAttrs) count += a.has(n) ? 1 : 0;
  if (count != 1) fail("Constant needs exactly one of value/value_float(s)/value_int(s)/value_string(s)/sparse_value, got {}", count);
  if (a.has("sparse_value")) fail_unsupported("Constant: sparse_value (sparse tensors) is not supported");
  if (a.has("value_string") || a.has("value_strings"))
    fail_unsupported("Constant: element type string is not supported");
  if (a.has("value")) {
    const Tensor* t = a.get_tensor("value");
    if (!t) fail("Constant: attribute 'value' is missing");
    if (t->dtype() == DType::kString) fail_unsupported("Constant: element type string is not supported");
    return *t;
  }
  if (a.has("value_float")) return Tensor::scalar<float>(a.get_float("value_float", 0.f));
  if (a.has("value_int")) return Tensor::scalar<int64_t>(a.get_int("value_int"));
  if (a.has("value_floats")) {
    std::vector<float> v = a.get_floats("value_floats");
    int64_t n = static_cast<int64_t>(v.size());
    return Tensor::from_vector<float>(v, {n});
  }
  std::vector<int64_t> v = a.get_ints("value_ints");
  int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(v, {n});
}

OpDef constant_op() {
  OpDef d;
  d.op_type = "Constant";
  d.infer = [](const OpInferContext& ctx) {
    if (ctx.num_inputs() != 0) fail("Constant takes no inputs, got {}", ctx.num_inputs());
    return std::vector<TensorType>{constant_value(ctx.attrs()).type()};
  };
  d.eval = [](const OpEvalContext& ctx) { return std::vector<Tensor>{constant_value(ctx.attrs())}; };
  return d;
}

// ---------------------------------------------------------------- Identity
OpDef identity_op() {
  OpDef d;
  d.op_type = "Identity";
  d.infer = [](const OpInferContext& ctx) { return std::vector<TensorType>{ctx.input(0)}; };
  d.eval = [](const OpEvalContext& ctx) { return std::vector<Tensor>{ctx.input(0)}; };
  return d;
}

// ---------------------------------------------------------------- Dropout
// Inference only: output = input, mask = all true. Training mode is accepted only when it is a
// constant false, or when the drop ratio is a constant 0 (then it is the identity as well).
DType dropout_mask_dtype(int opset, DType x) { return opset >= 10 ? DType::kBool : x; }

OpDef dropout_op() {
  OpDef d;
  d.op_type = "Dropout";
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    if (ctx.opset >= 12) {
      if (ctx.has_input(1)) check_single(ctx.input(1), "Dropout ratio");
      if (ctx.has_input(2)) {
        check_single(ctx.input(2), "Dropout training_mode");
        const Tensor& tm = ctx.require_constant(2, "Dropout training_mode");
        if (tm.get_as_double(0) != 0) {
          double ratio = 0.5;
          if (ctx.has_input(1)) ratio = ctx.require_constant(1, "Dropout ratio (in training mode)").get_as_double(0);
          if (ratio != 0)
            fail_unsupported("Dropout in training mode (random dropping, ratio {}) is not supported", ratio);
        }
      }
    } else {
      float ratio = ctx.attrs().get_float("ratio", 0.5f);
      if (!(ratio >= 0.f && ratio < 1.f)) fail("Dropout ratio must be in [0, 1), got {}", ratio);
    }
    if (ctx.opset < 10 && ctx.num_outputs() > 1 && !is_float(x.dtype))
      fail("Dropout: input must be a float tensor, got {}", dtype_name(x.dtype));
    return std::vector<TensorType>{x, TensorType{dropout_mask_dtype(ctx.opset, x.dtype), x.shape}};
  };
  d.eval = [](const OpEvalContext& ctx) {
    std::vector<Tensor> out{ctx.input(0)};
    if (ctx.num_outputs() > 1) {
      const TensorType& mt = ctx.output_type(1);
      Tensor mask(mt);
      dispatch_dtype<bool, float, double, Float16, BFloat16>(mt.dtype, "Dropout mask", [&](auto tag) {
        using T = decltype(tag);
        T* p = mask.data<T>();
        const T v = one_value<T>();
        for (int64_t i = 0; i < mask.numel(); ++i) p[i] = v;
      });
      out.push_back(std::move(mask));
    }
    return out;
  };
  return d;
}

// ---------------------------------------------------------------- Shape / Size
std::pair<int64_t, int64_t> shape_range(const OpInferContext* ic, const OpEvalContext* ec, int64_t rank) {
  const Attributes& a = ic ? ic->attrs() : ec->attrs();
  int opset = ic ? ic->opset : ec->opset;
  if (opset < 15) return {0, rank};
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::min(std::max<int64_t>(v, 0), rank);
  };
  int64_t start = clamp(a.get_int("start", 0));
  int64_t end = a.has("end") ? clamp(a.get_int("end")) : rank;
  if (end < start) end = start;
  return {start, end};
}

OpDef shape_op() {
  OpDef d;
  d.op_type = "Shape";
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    auto [s, e] = shape_range(&ctx, nullptr, x.rank());
    return one(DType::kInt64, {e - s});
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Shape& sh = ctx.input(0).shape();
    auto [s, e] = shape_range(nullptr, &ctx, static_cast<int64_t>(sh.size()));
    std::vector<int64_t> v(sh.begin() + s, sh.begin() + e);
    return std::vector<Tensor>{Tensor::from_vector<int64_t>(v, {e - s})};
  };
  d.fold_from_types = [](const OpInferContext& ctx) {
    const Shape& sh = ctx.input(0).shape;
    auto [s, e] = shape_range(&ctx, nullptr, static_cast<int64_t>(sh.size()));
    std::vector<int64_t> v(sh.begin() + s, sh.begin() + e);
    return std::vector<Tensor>{Tensor::from_vector<int64_t>(v, {e - s})};
  };
  return d;
}

OpDef size_op() {
  OpDef d;
  d.op_type = "Size";
  d.infer = [](const OpInferContext& ctx) {
    ctx.input(0);
    return one(DType::kInt64, {});
  };
  d.eval = [](const OpEvalContext& ctx) { return std::vector<Tensor>{Tensor::scalar<int64_t>(ctx.input(0).numel())}; };
  d.fold_from_types = [](const OpInferContext& ctx) {
    return std::vector<Tensor>{Tensor::scalar<int64_t>(ctx.input(0).numel())};
  };
  return d;
}

// ---------------------------------------------------------------- ConstantOfShape
Tensor constant_of_shape_fill(const Attributes& a) {
  const Tensor* v = a.get_tensor("value");
  if (!v) return Tensor::scalar<float>(0.f);
  if (v->numel() != 1) fail("ConstantOfShape: 'value' must hold exactly one element, got shape {}", shape_str(v->shape()));
  if (v->dtype() == DType::kString) fail_unsupported("ConstantOfShape: element type string is not supported");
  return *v;
}

Shape shape_from_tensor(const Tensor& t, const char* what) {
  if (t.rank() != 1) fail("{} must be a 1-D tensor, got shape {}", what, shape_str(t.shape()));
  if (!is_integer(t.dtype())) fail("{} must be an integer tensor, got {}", what, dtype_name(t.dtype()));
  Shape s = t.to_int_vector();
  for (int64_t d : s)
    if (d < 0) fail("{} has a negative dimension: {}", what, shape_str(s));
  return s;
}

OpDef constant_of_shape_op() {
  OpDef d;
  d.op_type = "ConstantOfShape";
  d.min_opset = 9;
  d.infer = [](const OpInferContext& ctx) {
    ctx.input(0);
    Tensor fill = constant_of_shape_fill(ctx.attrs());
    Shape s = shape_from_tensor(ctx.require_constant(0, "ConstantOfShape shape"), "ConstantOfShape shape");
    return one(fill.dtype(), s);
  };
  d.eval = [](const OpEvalContext& ctx) {
    Tensor fill = constant_of_shape_fill(ctx.attrs());
    Tensor out(ctx.output_type(0));
    const size_t es = static_cast<size_t>(dtype_size(out.dtype()));
    std::byte* p = out.raw();
    const std::byte* v = fill.raw();
    for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(p + static_cast<size_t>(i) * es, v, es);
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---------------------------------------------------------------- Range
int64_t range_count(const Tensor& start, const Tensor& limit, const Tensor& delta) {
  if (is_float(start.dtype())) {
    double s = start.get_as_double(0), l = limit.get_as_double(0), dl = delta.get_as_double(0);
    if (dl == 0) fail("Range delta must not be zero");
    double n = std::ceil((l - s) / dl);
    if (std::isnan(n)) fail("Range: start/limit/delta ({}, {}, {}) give no element count", s, l, dl);
    if (n > 1e12) fail("Range would produce {} elements", n);
    return n > 0 ? static_cast<int64_t>(n) : 0;
  }
  __int128 s = start.get_as_int(0), l = limit.get_as_int(0), dl = delta.get_as_int(0);
  if (dl == 0) fail("Range delta must not be zero");
  __int128 diff = l - s;
  // ceil(diff / dl) with truncating division.
  __int128 q = diff / dl;
  if (q * dl != diff && ((diff > 0) == (dl > 0))) ++q;
  if (q > static_cast<__int128>(1e12)) fail("Range would produce {} elements", static_cast<double>(q));
  return q > 0 ? static_cast<int64_t>(q) : 0;
}

OpDef range_op() {
  OpDef d;
  d.op_type = "Range";
  d.min_opset = 11;
  d.infer = [](const OpInferContext& ctx) {
    const char* names[3] = {"Range start", "Range limit", "Range delta"};
    DType t = ctx.input(0).dtype;
    for (int i = 0; i < 3; ++i) {
      const TensorType& it = ctx.input(i);
      if (it.dtype != t) fail("Range inputs must share one type, got {} and {}", dtype_name(t), dtype_name(it.dtype));
      check_single(it, names[i]);
    }
    if (t == DType::kBool) fail("Range: element type bool is not valid");
    const Tensor& s = ctx.require_constant(0, names[0]);
    const Tensor& l = ctx.require_constant(1, names[1]);
    const Tensor& dl = ctx.require_constant(2, names[2]);
    return one(t, {range_count(s, l, dl)});
  };
  d.eval = [](const OpEvalContext& ctx) {
    Tensor out(ctx.output_type(0));
    const int64_t n = out.numel();
    dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(out.dtype(), "Range", [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data<T>();
      if constexpr (std::is_integral_v<T>) {
        const int64_t s = ctx.input(0).get_as_int(0), dl = ctx.input(2).get_as_int(0);
        for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(s + i * dl);
      } else {
        const double s = ctx.input(0).get_as_double(0), dl = ctx.input(2).get_as_double(0);
        for (int64_t i = 0; i < n; ++i) {
          double v = s + static_cast<double>(i) * dl;
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
            p[i] = T(static_cast<float>(v));
          else
            p[i] = static_cast<T>(v);
        }
      }
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---------------------------------------------------------------- EyeLike
OpDef eye_like_op() {
  OpDef d;
  d.op_type = "EyeLike";
  d.min_opset = 9;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    if (x.rank() != 2) fail("EyeLike input must be 2-D, got shape {}", shape_str(x.shape));
    DType t = x.dtype;
    if (ctx.attrs().has("dtype")) {
      int64_t code = ctx.attrs().get_int("dtype");
      auto dt = dtype_from_onnx(static_cast<int>(code));
      if (code == 8) fail_unsupported("EyeLike: element type string is not supported");
      if (!dt) fail_unsupported("EyeLike: dtype {} is not supported", code);
      t = *dt;
    }
    return one(t, x.shape);
  };
  d.eval = [](const OpEvalContext& ctx) {
    Tensor out(ctx.output_type(0));
    const int64_t rows = out.dim(0), cols = out.dim(1);
    const int64_t k = ctx.attrs().get_int("k", 0);
    dispatch_dtype<KORCH_ALL_TYPES>(out.dtype(), "EyeLike", [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data<T>();
      for (int64_t i = 0; i < rows; ++i) {
        int64_t j = i + k;
        if (j >= 0 && j < cols) p[i * cols + j] = one_value<T>();
      }
    });
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---------------------------------------------------------------- Trilu
OpDef trilu_op() {
  OpDef d;
  d.op_type = "Trilu";
  d.min_opset = 14;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    if (x.rank() < 2) fail("Trilu input must have rank >= 2, got shape {}", shape_str(x.shape));
    if (ctx.has_input(1)) {
      const TensorType& k = ctx.input(1);
      if (k.dtype != DType::kInt64) fail("Trilu k must be int64, got {}", dtype_name(k.dtype));
      check_single(k, "Trilu k");
    }
    if (x.dtype == DType::kString) fail_unsupported("Trilu: element type string is not supported");
    return std::vector<TensorType>{x};
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor out(x.type());
    const int64_t k = ctx.has_input(1) ? ctx.input(1).get_as_int(0) : 0;
    const bool upper = ctx.attrs().get_int("upper", 1) != 0;
    const int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
    const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
    const size_t es = static_cast<size_t>(dtype_size(x.dtype()));
    const std::byte* src = x.raw();
    std::byte* dst = out.raw();  // zero-initialised
    for (int64_t m = 0; m < mats; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        // Kept columns: upper j >= i + k, lower j <= i + k.
        int64_t lo = upper ? std::max<int64_t>(0, std::min(cols, i + k)) : 0;
        int64_t hi = upper ? cols : std::max<int64_t>(0, std::min(cols, i + k + 1));
        if (hi <= lo) continue;
        size_t off = static_cast<size_t>((m * rows + i) * cols + lo) * es;
        std::memcpy(dst + off, src + off, static_cast<size_t>(hi - lo) * es);
      }
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---------------------------------------------------------------- OneHot
int64_t one_hot_depth(const Tensor& t) {
  if (t.numel() != 1) fail("OneHot depth must have exactly one element, got shape {}", shape_str(t.shape()));
  int64_t depth = checked_int(t, 0, "OneHot depth");
  if (depth < 0) fail("OneHot depth must be non-negative, got {}", depth);
  return depth;
}

OpDef one_hot_op() {
  OpDef d;
  d.op_type = "OneHot";
  d.min_opset = 9;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& idx = ctx.input(0);
    ctx.input(1);
    const TensorType& values = ctx.input(2);
    if (values.numel() != 2 || values.rank() != 1)
      fail("OneHot values must be a 1-D tensor of two elements [off, on], got shape {}", shape_str(values.shape));
    if (idx.dtype == DType::kBool || idx.dtype == DType::kString)
      fail("OneHot indices must be numeric, got {}", dtype_name(idx.dtype));
    int64_t depth = one_hot_depth(ctx.require_constant(1, "OneHot depth"));
    const int64_t r = idx.rank();
    int64_t axis = ctx.attrs().get_int("axis", -1);
    if (axis < -r - 1 || axis > r) fail("OneHot axis {} is out of range for output rank {}", axis, r + 1);
    if (axis < 0) axis += r + 1;
    Shape s = idx.shape;
    s.insert(s.begin() + axis, depth);
    return one(values.dtype, s);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& idx = ctx.input(0);
    const Tensor& values = ctx.input(2);
    Tensor out(ctx.output_type(0));
    const int64_t depth = one_hot_depth(ctx.input(1));
    const int64_t r = idx.rank();
    int64_t axis = ctx.attrs().get_int("axis", -1);
    if (axis < 0) axis += r + 1;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < axis; ++i) outer *= idx.dim(i);
    for (int64_t i = axis; i < r; ++i) inner *= idx.dim(i);
    const size_t es = static_cast<size_t>(dtype_size(out.dtype()));
    const std::byte* off_v = values.raw();
    const std::byte* on_v = values.raw() + es;
    std::byte* p = out.raw();
    for (int64_t i = 0; i < out.numel(); ++i) std::memcpy(p + static_cast<size_t>(i) * es, off_v, es);
    const bool is_f = is_float(idx.dtype());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t in = 0; in < inner; ++in) {
        int64_t flat = o * inner + in;
        int64_t v;
        if (is_f) {
          double dv = idx.get_as_double(flat);
          if (!std::isfinite(dv) || std::fabs(dv) > 9.0e18) continue;
          v = static_cast<int64_t>(dv);
        } else {
          v = idx.get_as_int(flat);
        }
        if (v < 0 && ctx.opset >= 11) v += depth;
        if (v < 0 || v >= depth) continue;  // out of range: all off
        size_t pos = static_cast<size_t>((o * depth + v) * inner + in);
        std::memcpy(p + pos * es, on_v, es);
      }
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

// ---------------------------------------------------------------- NonZero
// Element-wise "is nonzero" flags of any numeric/bool tensor.
std::vector<int64_t> nonzero_positions(const Tensor& x) {
  std::vector<int64_t> pos;
  dispatch_dtype<KORCH_ALL_TYPES>(x.dtype(), "NonZero", [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      bool nz;
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>)
        nz = static_cast<float>(p[i]) != 0.f;
      else
        nz = p[i] != T(0);
      if (nz) pos.push_back(i);
    }
  });
  return pos;
}

OpDef non_zero_op() {
  OpDef d;
  d.op_type = "NonZero";
  d.min_opset = 9;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    const Tensor& c = ctx.require_constant(0, "NonZero input (its output shape depends on the data)");
    int64_t n = static_cast<int64_t>(nonzero_positions(c).size());
    return one(DType::kInt64, {x.rank(), n});
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    std::vector<int64_t> pos = nonzero_positions(x);
    const int64_t n = static_cast<int64_t>(pos.size());
    const int64_t r = x.rank();
    Tensor out(DType::kInt64, {r, n});
    int64_t* p = out.data<int64_t>();
    std::vector<int64_t> strides = shape_strides(x.shape());
    for (int64_t j = 0; j < n; ++j) {
      int64_t rem = pos[static_cast<size_t>(j)];
      for (int64_t a = 0; a < r; ++a) {
        p[a * n + j] = rem / strides[static_cast<size_t>(a)];
        rem %= strides[static_cast<size_t>(a)];
      }
    }
    return std::vector<Tensor>{out};
  };
  return d;
}

}  // namespace

void register_misc_ops(OpRegistry& r) {
  r.add(constant_op());
  r.add(identity_op());
  r.add(dropout_op());
  r.add(shape_op());
  r.add(size_op());
  r.add(constant_of_shape_op());
  r.add(range_op());
  r.add(eye_like_op());
  r.add(trilu_op());
  r.add(one_hot_op());
  r.add(non_zero_op());
}

}  // namespace korch
