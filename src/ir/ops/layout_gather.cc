// Layout family, part 2: index-driven data movement (Gather, GatherElements, GatherND,
// ScatterElements/Scatter, ScatterND, Compress). Copies are byte-wise over dtype_size(), so all
// dtypes work; only scatter reductions other than "none" need typed arithmetic.
#include <cstring>

#include "ir/ops/layout_internal.h"

namespace korch {

namespace {

using namespace layout_internal;
using ops::make_op;
using ops::one;

// --- Gather -----------------------------------------------------------------------------------------

std::vector<TensorType> infer_gather(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& idx = ctx.input(1);
  check_index_type(idx, "indices");
  if (x.rank() == 0) fail("data must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  Shape out(x.shape.begin(), x.shape.begin() + axis);
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
  return one(x.dtype, out);
}

std::vector<Tensor> eval_gather(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  std::vector<int64_t> idx = index_values(ctx.input(1));
  const int64_t n = x.dim(axis);
  for (int64_t& i : idx) i = fix_index(i, n);
  Tensor out(ctx.output_type(0));
  const int64_t es = elem_size(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t k = static_cast<int64_t>(idx.size());
  const size_t block = static_cast<size_t>(inner * es);
  const std::byte* src = x.raw();
  std::byte* dst = out.raw();
#pragma omp parallel for schedule(static) if (out.nbytes() >= (1u << 16))
  for (int64_t ok = 0; ok < outer * k; ++ok) {
    const int64_t o = ok / k, j = ok % k;
    std::memcpy(dst + static_cast<size_t>(ok) * block, src + static_cast<size_t>(o * n + idx[static_cast<size_t>(j)]) * block,
                block);
  }
  return {out};
}

// --- GatherElements ---------------------------------------------------------------------------------

// Walks every element of `shape` in row-major order, calling f(linear, multi_index).
template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  const int64_t n = shape_numel(shape);
  std::vector<int64_t> id(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    f(i, id);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++id[d] < shape[d]) break;
      id[d] = 0;
    }
  }
}

void check_elements_shapes(const TensorType& x, const TensorType& idx, int64_t axis) {
  if (idx.rank() != x.rank()) fail("indices have rank {} but data has rank {}", idx.rank(), x.rank());
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != axis && idx.shape[static_cast<size_t>(d)] > x.shape[static_cast<size_t>(d)])
      fail("indices shape {} exceeds data shape {} on axis {}", shape_str(idx.shape), shape_str(x.shape), d);
}

std::vector<TensorType> infer_gather_elements(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& idx = ctx.input(1);
  check_index_type(idx, "indices");
  if (x.rank() == 0) fail("data must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  check_elements_shapes(x, idx, axis);
  return one(x.dtype, idx.shape);
}

// Data offset for element `id` of an index tensor, with the index value `v` along `axis`.
int64_t elements_offset(const std::vector<int64_t>& id, const std::vector<int64_t>& st, int64_t axis, int64_t v) {
  int64_t off = 0;
  for (size_t d = 0; d < id.size(); ++d) off += (static_cast<int64_t>(d) == axis ? v : id[d]) * st[d];
  return off;
}

std::vector<Tensor> eval_gather_elements(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  std::vector<int64_t> idx = index_values(it);
  const int64_t n = x.dim(axis), es = elem_size(x.dtype());
  std::vector<int64_t> st = shape_strides(x.shape());
  Tensor out(ctx.output_type(0));
  const std::byte* src = x.raw();
  std::byte* dst = out.raw();
  for_each_index(it.shape(), [&](int64_t i, const std::vector<int64_t>& id) {
    int64_t v = fix_index(idx[static_cast<size_t>(i)], n);
    std::memcpy(dst + i * es, src + elements_offset(id, st, axis, v) * es, static_cast<size_t>(es));
  });
  return {out};
}

// --- GatherND ---------------------------------------------------------------------------------------

std::vector<TensorType> infer_gather_nd(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& idx = ctx.input(1);
  check_index_type(idx, "indices");
  const int64_t b = ctx.opset >= 12 ? ctx.attrs().get_int("batch_dims", 0) : 0;
  const int64_t r = x.rank(), q = idx.rank();
  if (r < 1 || q < 1) fail("data and indices must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) fail("batch_dims {} must be in [0, min(rank(data), rank(indices)))", b);
  for (int64_t d = 0; d < b; ++d)
    if (x.shape[static_cast<size_t>(d)] != idx.shape[static_cast<size_t>(d)])
      fail("batch dim {} differs: data {} vs indices {}", d, shape_str(x.shape), shape_str(idx.shape));
  const int64_t k = idx.shape.back();
  if (k < 1 || k > r - b) fail("indices last dim {} must be in [1, {}]", k, r - b);
  Shape out(idx.shape.begin(), idx.shape.end() - 1);
  out.insert(out.end(), x.shape.begin() + b + k, x.shape.end());
  return one(x.dtype, out);
}

std::vector<Tensor> eval_gather_nd(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const int64_t b = ctx.opset >= 12 ? ctx.attrs().get_int("batch_dims", 0) : 0;
  const int64_t k = it.shape().back(), es = elem_size(x.dtype());
  std::vector<int64_t> idx = index_values(it);
  int64_t batches = 1, slice = 1;
  for (int64_t d = 0; d < b; ++d) batches *= x.dim(d);
  for (int64_t d = b + k; d < x.rank(); ++d) slice *= x.dim(d);
  const int64_t tuples = static_cast<int64_t>(idx.size()) / k;  // over all batches
  Tensor out(ctx.output_type(0));
  if (tuples == 0) return {out};
  const int64_t per_batch = tuples / batches;
  int64_t batch_stride = 1;
  for (int64_t d = b; d < x.rank(); ++d) batch_stride *= x.dim(d);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = (t / per_batch) * batch_stride, mul = slice;
    for (int64_t j = k - 1; j >= 0; --j) {
      const int64_t dim = x.dim(b + j);
      off += fix_index(idx[static_cast<size_t>(t * k + j)], dim) * mul;
      mul *= dim;
    }
    std::memcpy(out.raw() + t * slice * es, x.raw() + off * es, static_cast<size_t>(slice * es));
  }
  return {out};
}

// --- ScatterElements / Scatter / ScatterND ----------------------------------------------------------

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction scatter_reduction(const Attributes& attrs, int opset) {
  std::string r = attrs.get_string("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (opset >= 16 && r == "add") return Reduction::kAdd;
  if (opset >= 16 && r == "mul") return Reduction::kMul;
  if (opset >= 18 && r == "max") return Reduction::kMax;
  if (opset >= 18 && r == "min") return Reduction::kMin;
  fail("reduction '{}' is not valid at opset {}", r, opset);
}

template <typename T>
void reduce_into(std::byte* dst, const std::byte* src, Reduction red) {
  T a, b;
  std::memcpy(&a, dst, sizeof(T));
  std::memcpy(&b, src, sizeof(T));
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    float fa = static_cast<float>(a), fb = static_cast<float>(b);
    switch (red) {
      case Reduction::kAdd: fa = fa + fb; break;
      case Reduction::kMul: fa = fa * fb; break;
      case Reduction::kMax: fa = fb > fa ? fb : fa; break;
      case Reduction::kMin: fa = fb < fa ? fb : fa; break;
      case Reduction::kNone: fa = fb; break;
    }
    a = T(fa);
  } else if constexpr (std::is_same_v<T, bool>) {
    switch (red) {
      case Reduction::kAdd: case Reduction::kMax: a = a || b; break;
      case Reduction::kMul: case Reduction::kMin: a = a && b; break;
      case Reduction::kNone: a = b; break;
    }
  } else {
    switch (red) {
      case Reduction::kAdd: a = static_cast<T>(a + b); break;
      case Reduction::kMul: a = static_cast<T>(a * b); break;
      case Reduction::kMax: a = b > a ? b : a; break;
      case Reduction::kMin: a = b < a ? b : a; break;
      case Reduction::kNone: a = b; break;
    }
  }
  std::memcpy(dst, &a, sizeof(T));
}

using ReduceFn = void (*)(std::byte*, const std::byte*, Reduction);

ReduceFn reducer_for(DType t) {
  return dispatch_dtype<KORCH_ALL_TYPES>(t, "scatter reduction", [](auto v) -> ReduceFn {
    return &reduce_into<decltype(v)>;
  });
}

std::vector<TensorType> infer_scatter_elements(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& idx = ctx.input(1);
  const TensorType& upd = ctx.input(2);
  check_index_type(idx, "indices");
  if (x.rank() == 0) fail("data must have rank >= 1");
  if (upd.dtype != x.dtype) fail("updates have type {} but data has {}", dtype_name(upd.dtype), dtype_name(x.dtype));
  if (upd.shape != idx.shape) fail("updates shape {} differs from indices shape {}", shape_str(upd.shape), shape_str(idx.shape));
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  check_elements_shapes(x, idx, axis);
  if (ctx.node.op_type != "Scatter") scatter_reduction(ctx.attrs(), ctx.opset);
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_scatter_elements(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  const Reduction red = ctx.node.op_type == "Scatter" ? Reduction::kNone : scatter_reduction(ctx.attrs(), ctx.opset);
  ReduceFn fn = red == Reduction::kNone ? nullptr : reducer_for(x.dtype());
  std::vector<int64_t> idx = index_values(it);
  const int64_t n = x.dim(axis), es = elem_size(x.dtype());
  std::vector<int64_t> st = shape_strides(x.shape());
  Tensor out = x.clone();
  for_each_index(it.shape(), [&](int64_t i, const std::vector<int64_t>& id) {
    int64_t v = fix_index(idx[static_cast<size_t>(i)], n);
    std::byte* d = out.raw() + elements_offset(id, st, axis, v) * es;
    const std::byte* s = upd.raw() + i * es;
    if (fn) fn(d, s, red);
    else std::memcpy(d, s, static_cast<size_t>(es));
  });
  return {out};
}

std::vector<TensorType> infer_scatter_nd(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& idx = ctx.input(1);
  const TensorType& upd = ctx.input(2);
  check_index_type(idx, "indices");
  if (upd.dtype != x.dtype) fail("updates have type {} but data has {}", dtype_name(upd.dtype), dtype_name(x.dtype));
  if (x.rank() < 1 || idx.rank() < 1) fail("data and indices must have rank >= 1");
  const int64_t k = idx.shape.back();
  if (k < 1 || k > x.rank()) fail("indices last dim {} must be in [1, {}]", k, x.rank());
  Shape want(idx.shape.begin(), idx.shape.end() - 1);
  want.insert(want.end(), x.shape.begin() + k, x.shape.end());
  if (upd.shape != want) fail("updates shape {} should be {}", shape_str(upd.shape), shape_str(want));
  scatter_reduction(ctx.attrs(), ctx.opset);
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_scatter_nd(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const Reduction red = scatter_reduction(ctx.attrs(), ctx.opset);
  ReduceFn fn = red == Reduction::kNone ? nullptr : reducer_for(x.dtype());
  const int64_t k = it.shape().back(), es = elem_size(x.dtype());
  std::vector<int64_t> idx = index_values(it);
  int64_t slice = 1;
  for (int64_t d = k; d < x.rank(); ++d) slice *= x.dim(d);
  const int64_t tuples = static_cast<int64_t>(idx.size()) / k;
  Tensor out = x.clone();
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0, mul = slice;
    for (int64_t j = k - 1; j >= 0; --j) {
      off += fix_index(idx[static_cast<size_t>(t * k + j)], x.dim(j)) * mul;
      mul *= x.dim(j);
    }
    std::byte* d = out.raw() + off * es;
    const std::byte* s = upd.raw() + t * slice * es;
    if (!fn) {
      std::memcpy(d, s, static_cast<size_t>(slice * es));
    } else {
      for (int64_t e = 0; e < slice; ++e) fn(d + e * es, s + e * es, red);
    }
  }
  return {out};
}

// --- Compress ---------------------------------------------------------------------------------------

// Positions selected by the condition, validated against an axis of size n.
std::vector<int64_t> compress_selection(const Tensor& cond, int64_t n) {
  if (cond.rank() != 1) fail("condition must be 1-D, got {}", shape_str(cond.shape()));
  std::vector<int64_t> sel;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (cond.get_as_double(i) == 0) continue;
    if (i >= n) fail("condition selects position {} but the axis has size {}", i, n);
    sel.push_back(i);
  }
  return sel;
}

std::optional<int64_t> compress_axis(const Attributes& attrs, int64_t rank) {
  if (!attrs.has("axis")) return std::nullopt;
  return normalize_axis(attrs.get_int("axis"), rank);
}

std::vector<TensorType> infer_compress(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  ctx.input(1);
  const Tensor& cond = ctx.require_constant(1, "condition");
  if (x.rank() == 0) fail("input must have rank >= 1");
  std::optional<int64_t> axis = compress_axis(ctx.attrs(), x.rank());
  const int64_t n = axis ? x.shape[static_cast<size_t>(*axis)] : x.numel();
  const int64_t count = static_cast<int64_t>(compress_selection(cond, n).size());
  if (!axis) return one(x.dtype, {count});
  Shape out = x.shape;
  out[static_cast<size_t>(*axis)] = count;
  return one(x.dtype, out);
}

std::vector<Tensor> eval_compress(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::optional<int64_t> axis = compress_axis(ctx.attrs(), x.rank());
  const int64_t es = elem_size(x.dtype());
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (axis) {
    n = x.dim(*axis);
    for (int64_t d = 0; d < *axis; ++d) outer *= x.dim(d);
    for (int64_t d = *axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  }
  std::vector<int64_t> sel = compress_selection(ctx.input(1), n);
  Tensor out(ctx.output_type(0));
  const int64_t m = static_cast<int64_t>(sel.size());
  for (int64_t j = 0; j < m; ++j)
    strided_copy(out.raw() + j * inner * es, {m * inner, 1}, x.raw() + sel[static_cast<size_t>(j)] * inner * es,
                 {n * inner, 1}, {outer, inner}, es);
  return {out};
}

}  // namespace

void register_layout_gather_ops(OpRegistry& r) {
  r.add(make_op("Gather", 1, infer_gather, eval_gather));
  r.add(make_op("GatherElements", 11, infer_gather_elements, eval_gather_elements));
  r.add(make_op("GatherND", 11, infer_gather_nd, eval_gather_nd));
  r.add(make_op("ScatterElements", 11, infer_scatter_elements, eval_scatter_elements));
  r.add(make_op("Scatter", 9, infer_scatter_elements, eval_scatter_elements));  // deprecated alias of ScatterElements
  r.add(make_op("ScatterND", 11, infer_scatter_nd, eval_scatter_nd));
  r.add(make_op("Compress", 9, infer_compress, eval_compress));
}

}  // namespace korch
