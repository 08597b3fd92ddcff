// Layout family, part 1: shared data-movement helpers and the shape/view ops
// (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Expand, Tile,
// DepthToSpace, SpaceToDepth). Gather/Scatter/Compress live in layout_gather.cc, Pad and
// ReverseSequence in layout_pad.cc.
//
// Every op here is pure data movement, so kernels work on raw bytes of dtype_size() per element
// and support every dtype Korch stores. The workhorse is strided_copy(): an N-d copy between
// arbitrary element strides that drops size-1 dims, merges contiguous dims, and memcpys the
// innermost run when it is contiguous on both sides.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "ir/ops/layout_internal.h"

namespace korch {

namespace layout_internal {

int64_t elem_size(DType t) {
  int64_t es = dtype_size(t);
  if (es <= 0) fail_unsupported("element type {} is not supported", dtype_name(t));
  return es;
}

void check_index_type(const TensorType& t, const char* what) {
  if (t.dtype != DType::kInt32 && t.dtype != DType::kInt64)
    fail("{} must be int32 or int64, got {}", what, dtype_name(t.dtype));
}

std::vector<int64_t> index_values(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::kInt64) {
    if (!v.empty()) std::memcpy(v.data(), t.raw(), v.size() * sizeof(int64_t));
  } else if (t.dtype() == DType::kInt32) {
    const int32_t* p = t.data<int32_t>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = p[i];
  } else {
    fail("indices must be int32 or int64, got {}", dtype_name(t.dtype()));
  }
  return v;
}

// Normalises index `i` against an axis of size `n` (negative counts from the end); fails when
// out of range.
int64_t fix_index(int64_t i, int64_t n) {
  if (i < -n || i >= n) fail("index {} is out of range for an axis of size {}", i, n);
  return i < 0 ? i + n : i;
}

namespace {

template <size_t N>
void copy_run_strided(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, int64_t n) {
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dst_stride * N, src + i * src_stride * N, N);
}

void copy_run(std::byte* dst, int64_t dst_stride, const std::byte* src, int64_t src_stride, int64_t n, int64_t es) {
  if (dst_stride == 1 && src_stride == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n * es));
    return;
  }
  switch (es) {
    case 1: copy_run_strided<1>(dst, dst_stride, src, src_stride, n); return;
    case 2: copy_run_strided<2>(dst, dst_stride, src, src_stride, n); return;
    case 4: copy_run_strided<4>(dst, dst_stride, src, src_stride, n); return;
    case 8: copy_run_strided<8>(dst, dst_stride, src, src_stride, n); return;
    default:
      for (int64_t i = 0; i < n; ++i)
        std::memcpy(dst + i * dst_stride * es, src + i * src_stride * es, static_cast<size_t>(es));
  }
}

}  // namespace

void strided_copy(std::byte* dst, const std::vector<int64_t>& dst_strides, const std::byte* src,
                  const std::vector<int64_t>& src_strides, const Shape& shape, int64_t es) {
  KORCH_CHECK(dst_strides.size() == shape.size() && src_strides.size() == shape.size());
  const int64_t total = shape_numel(shape);
  if (total == 0) return;
  // Drop size-1 dims, then merge dim d into d+1 when both sides are contiguous across them.
  Shape s;
  std::vector<int64_t> ds, ss;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!s.empty() && ds.back() == dst_strides[d] * shape[d] && ss.back() == src_strides[d] * shape[d]) {
      s.back() *= shape[d];
      ds.back() = dst_strides[d];
      ss.back() = src_strides[d];
      continue;
    }
    s.push_back(shape[d]);
    ds.push_back(dst_strides[d]);
    ss.push_back(src_strides[d]);
  }
  if (s.empty()) {
    std::memcpy(dst, src, static_cast<size_t>(es));
    return;
  }
  const int r = static_cast<int>(s.size());
  const int64_t inner = s[static_cast<size_t>(r - 1)];
  const int64_t dsi = ds[static_cast<size_t>(r - 1)], ssi = ss[static_cast<size_t>(r - 1)];
  const int64_t rows = total / inner;
  // Chunks of rows, each walking its rows with an odometer (one division per chunk).
  const int64_t nthreads = total * es >= (int64_t{1} << 16) ? omp_get_max_threads() : 1;
  const int64_t chunks = std::min<int64_t>(rows, nthreads * 4);
#pragma omp parallel for schedule(static) if (nthreads > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t r0 = rows * c / chunks, r1 = rows * (c + 1) / chunks;
    int64_t idx[16];
    std::vector<int64_t> big_idx;
    int64_t* id = idx;
    if (r > 16) {
      big_idx.resize(static_cast<size_t>(r));
      id = big_idx.data();
    }
    int64_t doff = 0, soff = 0, rem = r0;
    for (int d = r - 2; d >= 0; --d) {
      id[d] = rem % s[static_cast<size_t>(d)];
      rem /= s[static_cast<size_t>(d)];
      doff += id[d] * ds[static_cast<size_t>(d)];
      soff += id[d] * ss[static_cast<size_t>(d)];
    }
    for (int64_t row = r0; row < r1; ++row) {
      copy_run(dst + doff * es, dsi, src + soff * es, ssi, inner, es);
      for (int d = r - 2; d >= 0; --d) {
        const size_t du = static_cast<size_t>(d);
        if (++id[d] < s[du]) {
          doff += ds[du];
          soff += ss[du];
          break;
        }
        doff -= ds[du] * (s[du] - 1);
        soff -= ss[du] * (s[du] - 1);
        id[d] = 0;
      }
    }
  }
}

}  // namespace layout_internal

namespace {

using namespace layout_internal;
using ops::make_op;
using ops::one;

// --- Reshape / Flatten / Squeeze / Unsqueeze: views sharing the input buffer -----------------------

Shape reshape_shape(const Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  Shape out(spec.size());
  int64_t infer_at = -1, known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t v = spec[i];
    if (v == -1) {
      if (infer_at >= 0) fail("shape {} has more than one -1", shape_str(spec));
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (v < -1) fail("shape {} has invalid dimension {}", shape_str(spec), v);
    if (v == 0 && !allowzero) {
      if (i >= in.size()) fail("shape {}: 0 at position {} but the input has rank {}", shape_str(spec), i, in.size());
      v = in[i];
    }
    if (v == 0) has_zero = true;
    out[i] = v;
    known *= v;
  }
  const int64_t n = shape_numel(in);
  if (infer_at >= 0) {
    if (allowzero && has_zero) fail("shape {} has both -1 and 0 with allowzero=1", shape_str(spec));
    if (known == 0 || n % known != 0)
      fail("cannot reshape {} to {}: -1 cannot be inferred", shape_str(in), shape_str(spec));
    out[static_cast<size_t>(infer_at)] = n / known;
  } else if (known != n) {
    fail("cannot reshape {} ({} elements) to {} ({} elements)", shape_str(in), n, shape_str(out), known);
  }
  return out;
}

std::vector<TensorType> infer_reshape(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& st = ctx.input(1);
  if (st.dtype != DType::kInt64 || st.rank() != 1) fail("shape must be a 1-D int64 tensor, got {}", type_str(st));
  const Tensor& spec = ctx.require_constant(1, "shape");
  bool allowzero = ctx.opset >= 14 && ctx.attrs().get_int("allowzero", 0) != 0;
  return one(x.dtype, reshape_shape(x.shape, spec.to_int_vector(), allowzero));
}

std::vector<Tensor> eval_view(const OpEvalContext& ctx) { return {ctx.input(0).reshaped(ctx.output_type(0).shape)}; }

std::vector<TensorType> infer_flatten(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  int64_t axis = ctx.attrs().get_int("axis", 1);
  const int64_t r = x.rank();
  if (axis < -r || axis > r) fail("axis {} is out of range for rank {}", axis, r);
  if (axis < 0) axis += r;
  int64_t a = 1, b = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? a : b) *= x.shape[static_cast<size_t>(i)];
  return one(x.dtype, {a, b});
}

std::vector<int64_t> normalized_axes(const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    int64_t n = normalize_axis(a, rank);
    if (seen[static_cast<size_t>(n)]) fail("axis {} is repeated", a);
    seen[static_cast<size_t>(n)] = true;
    out.push_back(n);
  }
  return out;
}

std::vector<TensorType> infer_squeeze(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.opset >= 13) {
    if (ctx.has_input(1)) axes = ctx.require_constant(1, "axes").to_int_vector();
  } else if (ctx.attrs().has("axes")) {
    axes = ctx.attrs().get_ints("axes");
  }
  Shape out;
  if (!axes) {
    for (int64_t d : x.shape)
      if (d != 1) out.push_back(d);
  } else {
    std::vector<int64_t> ax = normalized_axes(*axes, x.rank());
    std::vector<bool> drop(x.shape.size(), false);
    for (int64_t a : ax) {
      if (x.shape[static_cast<size_t>(a)] != 1)
        fail("cannot squeeze axis {} of size {}", a, x.shape[static_cast<size_t>(a)]);
      drop[static_cast<size_t>(a)] = true;
    }
    for (size_t i = 0; i < x.shape.size(); ++i)
      if (!drop[i]) out.push_back(x.shape[i]);
  }
  return one(x.dtype, out);
}

std::vector<TensorType> infer_unsqueeze(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  std::vector<int64_t> axes;
  if (ctx.opset >= 13)
    axes = ctx.require_constant(1, "axes").to_int_vector();
  else
    axes = ctx.attrs().get_ints("axes");
  if (axes.empty()) fail("axes must not be empty");
  const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
  std::vector<int64_t> ax = normalized_axes(axes, out_rank);
  std::vector<bool> is_new(static_cast<size_t>(out_rank), false);
  for (int64_t a : ax) is_new[static_cast<size_t>(a)] = true;
  Shape out;
  size_t j = 0;
  for (int64_t i = 0; i < out_rank; ++i) out.push_back(is_new[static_cast<size_t>(i)] ? 1 : x.shape[j++]);
  return one(x.dtype, out);
}

// --- Transpose ------------------------------------------------------------------------------------

std::vector<int64_t> transpose_perm(const Attributes& attrs, int64_t rank) {
  std::vector<int64_t> perm;
  if (attrs.has("perm")) {
    perm = attrs.get_ints("perm");
    if (static_cast<int64_t>(perm.size()) != rank)
      fail("perm has {} entries for an input of rank {}", perm.size(), rank);
    std::vector<bool> seen(static_cast<size_t>(rank), false);
    for (int64_t& p : perm) {
      if (p < -rank || p >= rank) fail("perm entry {} is out of range for rank {}", p, rank);
      if (p < 0) p += rank;
      if (seen[static_cast<size_t>(p)]) fail("perm {} is not a permutation", shape_str(attrs.get_ints("perm")));
      seen[static_cast<size_t>(p)] = true;
    }
  } else {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  return perm;
}

std::vector<TensorType> infer_transpose(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  std::vector<int64_t> perm = transpose_perm(ctx.attrs(), x.rank());
  Shape out;
  for (int64_t p : perm) out.push_back(x.shape[static_cast<size_t>(p)]);
  return one(x.dtype, out);
}

std::vector<Tensor> eval_transpose(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  return {x.transposed(transpose_perm(ctx.attrs(), x.rank()))};
}

// --- Concat / Split ---------------------------------------------------------------------------------

std::vector<TensorType> infer_concat(const OpInferContext& ctx) {
  if (ctx.num_inputs() == 0) fail("needs at least one input");
  const TensorType& x0 = ctx.input(0);
  elem_size(x0.dtype);
  if (x0.rank() == 0) fail("cannot concatenate scalars");
  int64_t axis = normalize_axis(ctx.attrs().get_int("axis"), x0.rank());
  Shape out = x0.shape;
  out[static_cast<size_t>(axis)] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (t.dtype != x0.dtype) fail("input {} has type {} but input 0 has {}", i, dtype_name(t.dtype), dtype_name(x0.dtype));
    if (t.rank() != x0.rank()) fail("input {} has rank {} but input 0 has rank {}", i, t.rank(), x0.rank());
    for (int64_t d = 0; d < t.rank(); ++d)
      if (d != axis && t.shape[static_cast<size_t>(d)] != x0.shape[static_cast<size_t>(d)])
        fail("input {} has shape {}, incompatible with {} for concatenation on axis {}", i, shape_str(t.shape),
             shape_str(x0.shape), axis);
    out[static_cast<size_t>(axis)] += t.shape[static_cast<size_t>(axis)];
  }
  return one(x0.dtype, out);
}

std::vector<Tensor> eval_concat(const OpEvalContext& ctx) {
  Tensor out(ctx.output_type(0));
  const Shape& os = out.shape();
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis"), out.rank());
  const int64_t es = elem_size(out.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= os[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < out.rank(); ++d) inner *= os[static_cast<size_t>(d)];
  const int64_t out_row = os[static_cast<size_t>(axis)] * inner;
  int64_t pos = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t row = t.dim(axis) * inner;
    strided_copy(out.raw() + pos * es, {out_row, 1}, t.raw(), {row, 1}, {outer, row}, es);
    pos += row;
  }
  return {out};
}

std::vector<int64_t> split_sizes(const OpInferContext& ctx, int64_t dim) {
  const int n_out = ctx.num_outputs();
  std::optional<std::vector<int64_t>> split;
  if (ctx.opset >= 13) {
    if (ctx.has_input(1)) split = ctx.require_constant(1, "split").to_int_vector();
  } else if (ctx.attrs().has("split")) {
    split = ctx.attrs().get_ints("split");
  }
  if (split) {
    if (ctx.opset >= 18 && ctx.attrs().has("num_outputs")) fail("split and num_outputs must not both be given");
    if (static_cast<int>(split->size()) != n_out) fail("split has {} entries for {} outputs", split->size(), n_out);
    int64_t sum = 0;
    for (int64_t s : *split) {
      if (s < 0) fail("split has negative size {}", s);
      sum += s;
    }
    if (sum != dim) fail("split sizes {} do not add up to the axis size {}", shape_str(*split), dim);
    return *split;
  }
  if (n_out < 1) fail("needs at least one output");
  if (ctx.opset >= 18 && ctx.attrs().has("num_outputs")) {
    int64_t n = ctx.attrs().get_int("num_outputs");
    if (n != n_out) fail("num_outputs is {} but the node has {} outputs", n, n_out);
    // Chunks of ceil(dim / n); the last one takes the remainder.
    int64_t chunk = (dim + n - 1) / n;
    std::vector<int64_t> sizes(static_cast<size_t>(n), chunk);
    sizes.back() = dim - chunk * (n - 1);
    if (sizes.back() < 0) fail("cannot split an axis of size {} into {} outputs", dim, n);
    return sizes;
  }
  if (dim % n_out != 0) fail("axis of size {} cannot be split evenly into {} outputs", dim, n_out);
  return std::vector<int64_t>(static_cast<size_t>(n_out), dim / n_out);
}

std::vector<TensorType> infer_split(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  if (x.rank() == 0) fail("cannot split a scalar");
  int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  std::vector<TensorType> out;
  for (int64_t s : split_sizes(ctx, x.shape[static_cast<size_t>(axis)])) {
    TensorType t = x;
    t.shape[static_cast<size_t>(axis)] = s;
    out.push_back(t);
  }
  return out;
}

std::vector<Tensor> eval_split(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t axis = normalize_axis(ctx.attrs().get_int("axis", 0), x.rank());
  const int64_t es = elem_size(x.dtype());
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
  for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  const int64_t in_row = x.dim(axis) * inner;
  std::vector<Tensor> outs;
  int64_t pos = 0;
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    Tensor o(ctx.output_type(i));
    const int64_t row = o.dim(axis) * inner;
    strided_copy(o.raw(), {row, 1}, x.raw() + pos * es, {in_row, 1}, {outer, row}, es);
    pos += row;
    outs.push_back(std::move(o));
  }
  return outs;
}

// --- Slice ------------------------------------------------------------------------------------------

struct SliceParams {
  Shape out;
  std::vector<int64_t> start, step;  // per input dim
};

// Spec clamping (Slice-13): negative start/end += dim; then start is clamped to [0, dim] for
// positive steps and [0, dim-1] for negative ones, end to [0, dim] / [-1, dim-1].
SliceParams slice_params(const Shape& in, std::vector<int64_t> starts, std::vector<int64_t> ends,
                         std::optional<std::vector<int64_t>> axes, std::optional<std::vector<int64_t>> steps) {
  const int64_t r = static_cast<int64_t>(in.size());
  if (starts.size() != ends.size())
    fail("starts has {} entries but ends has {}", starts.size(), ends.size());
  const size_t n = starts.size();
  if (!axes) {
    if (static_cast<int64_t>(n) > r) fail("{} starts for an input of rank {}", n, r);
    axes.emplace();
    for (size_t i = 0; i < n; ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (axes->size() != n) fail("axes has {} entries but starts has {}", axes->size(), n);
  if (steps && steps->size() != n) fail("steps has {} entries but starts has {}", steps->size(), n);
  SliceParams p;
  p.out = in;
  p.start.assign(static_cast<size_t>(r), 0);
  p.step.assign(static_cast<size_t>(r), 1);
  std::vector<int64_t> ax = normalized_axes(*axes, r);
  for (size_t i = 0; i < n; ++i) {
    const size_t a = static_cast<size_t>(ax[i]);
    const int64_t dim = in[a];
    const int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0) fail("step must not be 0 (axis {})", ax[i]);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    int64_t count;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count = e > s ? (e - s - 1) / step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      // -step overflows for INT64_MIN; any step below -dim takes at most one element.
      count = s > e ? (step < -dim ? 1 : (s - e - 1) / (-step) + 1) : 0;
    }
    p.out[a] = count;
    p.start[a] = count > 0 ? s : 0;
    p.step[a] = count > 1 ? step : 1;  // keeps stride arithmetic free of overflow
  }
  return p;
}

template <typename Ctx, typename Get>
SliceParams slice_params_from(const Ctx& ctx, const Shape& in, Get get) {
  if (ctx.opset < 10) {
    const Attributes& at = ctx.attrs();
    std::optional<std::vector<int64_t>> axes;
    if (at.has("axes")) axes = at.get_ints("axes");
    return slice_params(in, at.get_ints("starts"), at.get_ints("ends"), axes, std::nullopt);
  }
  std::vector<int64_t> starts = get(1, "starts"), ends = get(2, "ends");
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) axes = get(3, "axes");
  if (ctx.has_input(4)) steps = get(4, "steps");
  return slice_params(in, std::move(starts), std::move(ends), axes, steps);
}

std::vector<TensorType> infer_slice(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  if (ctx.opset >= 10) {
    for (int i = 1; i < std::min(ctx.num_inputs(), 5); ++i)
      if (ctx.has_input(i)) check_index_type(ctx.input(i), "starts/ends/axes/steps");
    ctx.input(1);
    ctx.input(2);
  } else if (!ctx.attrs().has("starts") || !ctx.attrs().has("ends")) {
    fail("attributes starts and ends are required");
  }
  SliceParams p = slice_params_from(ctx, x.shape, [&](int i, const char* what) {
    return ctx.require_constant(i, what).to_int_vector();
  });
  return one(x.dtype, p.out);
}

std::vector<Tensor> eval_slice(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  SliceParams p = slice_params_from(ctx, x.shape(), [&](int i, const char*) { return ctx.input(i).to_int_vector(); });
  Tensor out(ctx.output_type(0));
  if (out.numel() == 0) return {out};
  const int64_t es = elem_size(x.dtype());
  std::vector<int64_t> in_st = shape_strides(x.shape()), src(in_st.size());
  int64_t base = 0;
  for (size_t d = 0; d < in_st.size(); ++d) {
    base += p.start[d] * in_st[d];
    src[d] = p.step[d] * in_st[d];
  }
  strided_copy(out.raw(), shape_strides(out.shape()), x.raw() + base * es, src, out.shape(), es);
  return {out};
}

// --- Expand / Tile ----------------------------------------------------------------------------------

std::vector<TensorType> infer_expand(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& st = ctx.input(1);
  if (st.dtype != DType::kInt64 || st.rank() != 1) fail("shape must be a 1-D int64 tensor, got {}", type_str(st));
  std::vector<int64_t> shape = ctx.require_constant(1, "shape").to_int_vector();
  for (int64_t d : shape)
    if (d < 0) fail("shape {} has a negative dimension", shape_str(shape));
  return one(x.dtype, broadcast_shapes(x.shape, shape));
}

std::vector<Tensor> eval_expand(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(ctx.output_type(0));
  strided_copy(out.raw(), shape_strides(out.shape()), x.raw(), ops::broadcast_strides(x.shape(), out.shape()),
               out.shape(), elem_size(x.dtype()));
  return {out};
}

std::vector<TensorType> infer_tile(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& rt = ctx.input(1);
  if (rt.dtype != DType::kInt64 || rt.rank() != 1) fail("repeats must be a 1-D int64 tensor, got {}", type_str(rt));
  std::vector<int64_t> rep = ctx.require_constant(1, "repeats").to_int_vector();
  if (static_cast<int64_t>(rep.size()) != x.rank()) fail("repeats has {} entries for an input of rank {}", rep.size(), x.rank());
  Shape out = x.shape;
  for (size_t i = 0; i < rep.size(); ++i) {
    if (rep[i] < 0) fail("repeats has a negative entry {}", rep[i]);
    out[i] *= rep[i];
  }
  return one(x.dtype, out);
}

std::vector<Tensor> eval_tile(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(ctx.output_type(0));
  // The output viewed as [r0, d0, r1, d1, ...] reads the input with stride 0 along each r.
  Shape view;
  std::vector<int64_t> src, in_st = shape_strides(x.shape());
  for (int64_t d = 0; d < x.rank(); ++d) {
    view.push_back(out.dim(d) / std::max<int64_t>(x.dim(d), 1));
    view.push_back(x.dim(d));
    src.push_back(0);
    src.push_back(in_st[static_cast<size_t>(d)]);
  }
  if (out.numel() > 0) strided_copy(out.raw(), shape_strides(view), x.raw(), src, view, elem_size(x.dtype()));
  return {out};
}

// --- DepthToSpace / SpaceToDepth --------------------------------------------------------------------

int64_t check_blocksize(const OpInferContext& ctx, const TensorType& x) {
  if (x.rank() != 4) fail("input must have rank 4, got {}", shape_str(x.shape));
  int64_t b = ctx.attrs().get_int("blocksize");
  if (b <= 0) fail("blocksize must be positive, got {}", b);
  return b;
}

std::string d2s_mode(const Attributes& attrs, int opset) {
  std::string mode = opset >= 11 ? attrs.get_string("mode", "DCR") : "DCR";
  if (mode != "DCR" && mode != "CRD") fail("mode must be DCR or CRD, got '{}'", mode);
  return mode;
}

std::vector<TensorType> infer_depth_to_space(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  int64_t b = check_blocksize(ctx, x);
  d2s_mode(ctx.attrs(), ctx.opset);
  if (x.shape[1] % (b * b) != 0) fail("channels {} are not divisible by blocksize^2 = {}", x.shape[1], b * b);
  return one(x.dtype, {x.shape[0], x.shape[1] / (b * b), x.shape[2] * b, x.shape[3] * b});
}

std::vector<Tensor> eval_depth_to_space(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(ctx.output_type(0));
  const int64_t b = ctx.attrs().get_int("blocksize");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), Co = C / (b * b), HW = H * W;
  // Output viewed as [N, Co, H, b1, W, b2].
  Shape view{N, Co, H, b, W, b};
  std::vector<int64_t> src;
  if (d2s_mode(ctx.attrs(), ctx.opset) == "DCR")  // input channel = (b1 * b + b2) * Co + c
    src = {C * HW, HW, W, b * Co * HW, 1, Co * HW};
  else  // CRD: input channel = c * b * b + b1 * b + b2
    src = {C * HW, b * b * HW, W, b * HW, 1, HW};
  strided_copy(out.raw(), shape_strides(view), x.raw(), src, view, elem_size(x.dtype()));
  return {out};
}

std::vector<TensorType> infer_space_to_depth(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  int64_t b = check_blocksize(ctx, x);
  if (x.shape[2] % b != 0 || x.shape[3] % b != 0)
    fail("spatial dims {}x{} are not divisible by blocksize {}", x.shape[2], x.shape[3], b);
  return one(x.dtype, {x.shape[0], x.shape[1] * b * b, x.shape[2] / b, x.shape[3] / b});
}

std::vector<Tensor> eval_space_to_depth(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(ctx.output_type(0));
  const int64_t b = ctx.attrs().get_int("blocksize");
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  // Output viewed as [N, b1, b2, C, H/b, W/b]; reads x[n, c, h*b + b1, w*b + b2].
  Shape view{N, b, b, C, H / b, W / b};
  std::vector<int64_t> src{C * H * W, W, 1, H * W, b * W, b};
  strided_copy(out.raw(), shape_strides(view), x.raw(), src, view, elem_size(x.dtype()));
  return {out};
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  r.add(make_op("Reshape", 1, infer_reshape, eval_view));
  r.add(make_op("Flatten", 1, infer_flatten, eval_view));
  r.add(make_op("Squeeze", 1, infer_squeeze, eval_view));
  r.add(make_op("Unsqueeze", 1, infer_unsqueeze, eval_view));
  r.add(make_op("Transpose", 1, infer_transpose, eval_transpose));
  r.add(make_op("Concat", 1, infer_concat, eval_concat));
  r.add(make_op("Split", 1, infer_split, eval_split));
  r.add(make_op("Slice", 1, infer_slice, eval_slice));
  r.add(make_op("Expand", 8, infer_expand, eval_expand));
  r.add(make_op("Tile", 1, infer_tile, eval_tile));
  r.add(make_op("DepthToSpace", 1, infer_depth_to_space, eval_depth_to_space));
  r.add(make_op("SpaceToDepth", 1, infer_space_to_depth, eval_space_to_depth));
  register_layout_gather_ops(r);
  register_layout_pad_ops(r);
}

}  // namespace korch
