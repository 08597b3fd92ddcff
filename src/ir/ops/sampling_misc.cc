// Sampling family, part 2: MaxUnpool (opsets 9, 11..22), CenterCropPad (18..22), Col2Im (18..22).
// Shape-defining inputs (MaxUnpool's output_shape, CenterCropPad's shape, Col2Im's image_shape and
// block_shape) must be compile-time constants. Semantics follow the ONNX spec and onnx.reference.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ir/ops/op_util.h"
#include "ir/ops/sampling_internal.h"

namespace korch {
namespace {

using ops::kIsHalf;

std::vector<int64_t> int_list(const Tensor& t, const char* op, const char* what) {
  if (t.dtype() != DType::kInt64 && t.dtype() != DType::kInt32)
    fail("{}: {} must be an int64 tensor, got {}", op, what, dtype_name(t.dtype()));
  if (t.rank() != 1) fail("{}: {} must be a 1-D tensor, got shape {}", op, what, shape_str(t.shape()));
  return t.to_int_vector();
}

// ------------------------------------------------------------------------------------------------
// MaxUnpool

struct UnpoolSpec {
  Shape inferred;  // (N, C, (in-1)*stride - pads + kernel ...): the space the indices address
  Shape out;       // inferred, or the output_shape input (inferred placed at its origin)
};

UnpoolSpec unpool_spec(const Attributes& a, const Shape& x, const Shape& ind, const Tensor* out_shape) {
  if (x.size() < 3) fail("MaxUnpool: X must have rank >= 3 (N, C, spatial...), got {}", shape_str(x));
  if (ind != x) fail("MaxUnpool: indices shape {} differs from X shape {}", shape_str(ind), shape_str(x));
  const size_t n = x.size() - 2;
  if (!a.has("kernel_shape")) fail("MaxUnpool requires the 'kernel_shape' attribute");
  std::vector<int64_t> k = a.get_ints("kernel_shape");
  std::vector<int64_t> st = a.get_ints("strides", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (k.size() != n) fail("MaxUnpool: kernel_shape has {} values, expected {}", k.size(), n);
  if (st.size() != n) fail("MaxUnpool: strides has {} values, expected {}", st.size(), n);
  if (pads.size() != 2 * n) fail("MaxUnpool: pads has {} values, expected {}", pads.size(), 2 * n);
  UnpoolSpec s;
  s.inferred = {x[0], x[1]};
  for (size_t i = 0; i < n; ++i) {
    if (k[i] < 1) fail("MaxUnpool: kernel_shape values must be >= 1, got {}", k[i]);
    if (st[i] < 1) fail("MaxUnpool: strides must be >= 1, got {}", st[i]);
    if (pads[i] < 0 || pads[n + i] < 0) fail("MaxUnpool: pads must be non-negative");
    const int64_t d = (x[2 + i] - 1) * st[i] - (pads[i] + pads[n + i]) + k[i];
    if (d < 0) fail("MaxUnpool: computed output dimension {} is negative", d);
    s.inferred.push_back(d);
  }
  s.out = s.inferred;
  if (out_shape) {
    std::vector<int64_t> os = int_list(*out_shape, "MaxUnpool", "output_shape");
    if (os.size() != x.size()) fail("MaxUnpool: output_shape has {} values, expected {}", os.size(), x.size());
    if (os[0] != x[0] || os[1] != x[1])
      fail("MaxUnpool: output_shape {} must keep X's batch and channel dims", shape_str(os));
    for (size_t i = 2; i < os.size(); ++i)
      if (os[i] < s.inferred[i])
        fail("MaxUnpool: output_shape {} is smaller than the unpooled shape {}", shape_str(os), shape_str(s.inferred));
    s.out = os;
  }
  return s;
}

template <typename T>
Tensor run_max_unpool(const Tensor& x, const Tensor& ind, const UnpoolSpec& s) {
  Tensor y(x.dtype(), s.out);  // zero-filled
  const int64_t inferred_n = shape_numel(s.inferred);
  const T* xd = x.data<T>();
  const int64_t* id = ind.data<int64_t>();
  T* yd = y.data<T>();
  const int64_t n = x.numel();
  if (s.out == s.inferred) {
    for (int64_t i = 0; i < n; ++i) {
      if (id[i] < 0 || id[i] >= inferred_n) fail("MaxUnpool: index {} is out of range [0, {})", id[i], inferred_n);
      yd[id[i]] = xd[i];
    }
    return y;
  }
  // Indices address the inferred shape; that block sits at the origin of the larger output.
  const std::vector<int64_t> in_st = shape_strides(s.inferred), out_st = shape_strides(s.out);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = id[i];
    if (v < 0 || v >= inferred_n) fail("MaxUnpool: index {} is out of range [0, {})", v, inferred_n);
    int64_t o = 0;
    for (size_t d = 0; d < s.inferred.size(); ++d) {
      o += (v / in_st[d]) * out_st[d];
      v %= in_st[d];
    }
    yd[o] = xd[i];
  }
  return y;
}

OpDef max_unpool_op() {
  OpDef d;
  d.op_type = "MaxUnpool";
  d.min_opset = 9;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    const TensorType& ind = ctx.input(1);
    if (!is_float(x.dtype)) fail_unsupported("MaxUnpool: element type {} is not supported", dtype_name(x.dtype));
    if (ind.dtype != DType::kInt64) fail("MaxUnpool: indices must be int64, got {}", dtype_name(ind.dtype));
    const Tensor* os = ctx.has_input(2) ? &ctx.require_constant(2, "MaxUnpool output_shape") : nullptr;
    return ops::one(x.dtype, unpool_spec(ctx.attrs(), x.shape, ind.shape, os).out);
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    const Tensor& ind = ctx.input(1);
    UnpoolSpec s = unpool_spec(ctx.attrs(), x.shape(), ind.shape(), ctx.has_input(2) ? &ctx.input(2) : nullptr);
    return dispatch_dtype<float, double, Float16, BFloat16>(x.dtype(), "MaxUnpool", [&](auto t) {
      using T = decltype(t);
      return std::vector<Tensor>{run_max_unpool<T>(x, ind, s)};
    });
  };
  return d;
}

// ------------------------------------------------------------------------------------------------
// CenterCropPad

Shape center_crop_pad_shape(const Attributes& a, const Shape& x, const Tensor& shape_t) {
  const int64_t rank = static_cast<int64_t>(x.size());
  std::vector<int64_t> sh = int_list(shape_t, "CenterCropPad", "shape");
  std::vector<int64_t> axes;
  if (a.has("axes")) {
    for (int64_t ax : a.get_ints("axes")) {
      if (ax < -rank || ax >= rank) fail("CenterCropPad: axis {} is out of range for rank {}", ax, rank);
      if (ax < 0) ax += rank;
      if (std::find(axes.begin(), axes.end(), ax) != axes.end()) fail("CenterCropPad: axis {} is repeated", ax);
      axes.push_back(ax);
    }
  } else {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  }
  if (sh.size() != axes.size()) fail("CenterCropPad: shape has {} values, expected {} (one per axis)", sh.size(), axes.size());
  Shape out = x;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (sh[i] < 0) fail("CenterCropPad: shape values must be non-negative, got {}", sh[i]);
    out[static_cast<size_t>(axes[i])] = sh[i];
  }
  return out;
}

// Copies the centred overlap of `x` into the zero-filled `y` (same rank), element size `es`.
void center_copy(const Tensor& x, Tensor& y) {
  const size_t rank = static_cast<size_t>(x.rank());
  const size_t es = static_cast<size_t>(dtype_size(x.dtype()));
  if (y.numel() == 0 || x.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(y.raw(), x.raw(), es);
    return;
  }
  // Per axis: the copied extent, and the start offsets in x (crop) and y (pad).
  std::vector<int64_t> ext(rank), xs(rank), ys(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t in = x.shape()[i], out = y.shape()[i];
    ext[i] = std::min(in, out);
    xs[i] = in > out ? (in - out) / 2 : 0;
    ys[i] = out > in ? (out - in) / 2 : 0;
  }
  const std::vector<int64_t> xst = shape_strides(x.shape()), yst = shape_strides(y.shape());
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < rank; ++i) rows *= ext[i];
  if (ext[rank - 1] == 0 || rows == 0) return;
  std::vector<int64_t> idx(rank, 0);
  const std::byte* xd = x.raw();
  std::byte* yd = y.raw();
  const size_t row_bytes = static_cast<size_t>(ext[rank - 1]) * es;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t xo = 0, yo = 0;
    for (size_t i = 0; i < rank; ++i) {
      xo += (xs[i] + idx[i]) * xst[i];
      yo += (ys[i] + idx[i]) * yst[i];
    }
    std::memcpy(yd + static_cast<size_t>(yo) * es, xd + static_cast<size_t>(xo) * es, row_bytes);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < ext[d]) break;
      idx[d] = 0;
    }
  }
}

OpDef center_crop_pad_op() {
  OpDef d;
  d.op_type = "CenterCropPad";
  d.min_opset = 18;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    if (x.dtype == DType::kString) fail_unsupported("CenterCropPad: element type string is not supported");
    return ops::one(x.dtype, center_crop_pad_shape(ctx.attrs(), x.shape, ctx.require_constant(1, "CenterCropPad shape")));
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    Tensor y(x.dtype(), center_crop_pad_shape(ctx.attrs(), x.shape(), ctx.input(1)));
    center_copy(x, y);
    return std::vector<Tensor>{y};
  };
  return d;
}

// ------------------------------------------------------------------------------------------------
// Col2Im

struct Col2ImSpec {
  int64_t N = 0, C = 0, K = 1, L = 1;
  std::vector<int64_t> image, block, dil, pads, strides, blocks;  // pads: begin..., end...
};

Col2ImSpec col2im_spec(const Attributes& a, const Shape& x, const Tensor& image_t, const Tensor& block_t) {
  Col2ImSpec s;
  s.image = int_list(image_t, "Col2Im", "image_shape");
  s.block = int_list(block_t, "Col2Im", "block_shape");
  const size_t n = s.image.size();
  if (n == 0) fail("Col2Im: image_shape must not be empty");
  if (s.block.size() != n) fail("Col2Im: block_shape has {} values, image_shape {}", s.block.size(), n);
  if (x.size() != 3) fail("Col2Im: input must be 3-D (N, C*prod(block_shape), L), got {}", shape_str(x));
  s.dil = a.get_ints("dilations", std::vector<int64_t>(n, 1));
  s.pads = a.get_ints("pads", std::vector<int64_t>(2 * n, 0));
  s.strides = a.get_ints("strides", std::vector<int64_t>(n, 1));
  if (s.dil.size() != n) fail("Col2Im: dilations has {} values, expected {}", s.dil.size(), n);
  if (s.strides.size() != n) fail("Col2Im: strides has {} values, expected {}", s.strides.size(), n);
  if (s.pads.size() != 2 * n) fail("Col2Im: pads has {} values, expected {}", s.pads.size(), 2 * n);
  s.K = 1;
  s.L = 1;
  for (size_t i = 0; i < n; ++i) {
    if (s.image[i] < 0) fail("Col2Im: image_shape values must be non-negative, got {}", s.image[i]);
    if (s.block[i] < 1) fail("Col2Im: block_shape values must be >= 1, got {}", s.block[i]);
    if (s.dil[i] < 1) fail("Col2Im: dilations must be >= 1, got {}", s.dil[i]);
    if (s.strides[i] < 1) fail("Col2Im: strides must be >= 1, got {}", s.strides[i]);
    if (s.pads[i] < 0 || s.pads[n + i] < 0) fail("Col2Im: pads must be non-negative");
    const int64_t span = s.image[i] + s.pads[i] + s.pads[n + i] - (s.dil[i] * (s.block[i] - 1) + 1);
    if (span < 0) fail("Col2Im: block {} does not fit the padded image along axis {}", s.block[i], i);
    const int64_t nb = span / s.strides[i] + 1;
    s.blocks.push_back(nb);
    s.K *= s.block[i];
    s.L *= nb;
  }
  s.N = x[0];
  if (x[1] % s.K != 0)
    fail("Col2Im: input dimension 1 ({}) is not divisible by prod(block_shape) = {}", x[1], s.K);
  s.C = x[1] / s.K;
  if (x[2] != s.L) fail("Col2Im: input dimension 2 ({}) does not match the number of blocks {}", x[2], s.L);
  return s;
}

Shape col2im_out(const Col2ImSpec& s) {
  Shape out = {s.N, s.C};
  for (int64_t v : s.image) out.push_back(v);
  return out;
}

template <typename T>
Tensor run_col2im(const Tensor& x, const Col2ImSpec& s) {
  Tensor y(x.dtype(), col2im_out(s));
  const size_t n = s.image.size();
  const int64_t img = shape_numel(s.image);
  const std::vector<int64_t> ist = shape_strides(s.image);
  const T* xd = x.data<T>();
  T* yd = y.data<T>();
  // For every (kernel offset, block) pair: the image offset, or -1 when it falls in the padding.
  std::vector<int64_t> target(static_cast<size_t>(s.K * s.L));
  {
    std::vector<int64_t> kidx(n, 0);
    for (int64_t k = 0; k < s.K; ++k) {
      std::vector<int64_t> bidx(n, 0);
      for (int64_t l = 0; l < s.L; ++l) {
        int64_t off = 0;
        for (size_t i = 0; i < n && off >= 0; ++i) {
          const int64_t p = bidx[i] * s.strides[i] - s.pads[i] + kidx[i] * s.dil[i];
          if (p < 0 || p >= s.image[i]) off = -1;
          else off += p * ist[i];
        }
        target[static_cast<size_t>(k * s.L + l)] = off;
        for (size_t i = n; i-- > 0;) {
          if (++bidx[i] < s.blocks[i]) break;
          bidx[i] = 0;
        }
      }
      for (size_t i = n; i-- > 0;) {
        if (++kidx[i] < s.block[i]) break;
        kidx[i] = 0;
      }
    }
  }
#pragma omp parallel
  {
    std::vector<double> acc(static_cast<size_t>(img));
#pragma omp for schedule(static)
    for (int64_t nc = 0; nc < s.N * s.C; ++nc) {
      std::fill(acc.begin(), acc.end(), 0.0);
      const T* xp = xd + nc * s.K * s.L;
      for (int64_t j = 0; j < s.K * s.L; ++j) {
        const int64_t t = target[static_cast<size_t>(j)];
        if (t >= 0) acc[static_cast<size_t>(t)] += ops::to_double(xp[j]);
      }
      T* yp = yd + nc * img;
      for (int64_t i = 0; i < img; ++i) yp[i] = ops::from_double<T>(acc[static_cast<size_t>(i)]);
    }
  }
  return y;
}

OpDef col2im_op() {
  OpDef d;
  d.op_type = "Col2Im";
  d.min_opset = 18;
  d.infer = [](const OpInferContext& ctx) {
    const TensorType& x = ctx.input(0);
    if (!is_float(x.dtype)) fail_unsupported("Col2Im: element type {} is not supported (float types only)", dtype_name(x.dtype));
    Col2ImSpec s = col2im_spec(ctx.attrs(), x.shape, ctx.require_constant(1, "Col2Im image_shape"),
                               ctx.require_constant(2, "Col2Im block_shape"));
    return ops::one(x.dtype, col2im_out(s));
  };
  d.eval = [](const OpEvalContext& ctx) {
    const Tensor& x = ctx.input(0);
    Col2ImSpec s = col2im_spec(ctx.attrs(), x.shape(), ctx.input(1), ctx.input(2));
    return dispatch_dtype<float, double, Float16, BFloat16>(x.dtype(), "Col2Im", [&](auto t) {
      using T = decltype(t);
      return std::vector<Tensor>{run_col2im<T>(x, s)};
    });
  };
  return d;
}

}  // namespace

namespace detail {
void register_sampling_misc_ops(OpRegistry& r) {
  r.add(max_unpool_op());
  r.add(center_crop_pad_op());
  r.add(col2im_op());
}
}  // namespace detail

}  // namespace korch
