// Layout family, part 3: Pad (constant/reflect/edge/wrap, negative pads crop) and ReverseSequence.
#include <algorithm>
#include <cstring>

#include "ir/ops/layout_internal.h"

namespace korch {

namespace {

using namespace layout_internal;
using ops::make_op;
using ops::one;

// --- Pad --------------------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

PadMode pad_mode(const Attributes& attrs, int opset) {
  std::string m = attrs.get_string("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") {
    if (opset < 19) fail("mode 'wrap' needs opset 19, the model uses opset {}", opset);
    return PadMode::kWrap;
  }
  fail("mode must be constant, reflect, edge or wrap, got '{}'", m);
}

// Per input dim: pads before and after (negative = crop).
struct PadSpec {
  std::vector<int64_t> begin, end;
};

template <typename Ctx, typename Get>
PadSpec pad_spec(const Ctx& ctx, int64_t rank, Get get) {
  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  if (ctx.opset < 11) {
    if (!ctx.attrs().has("pads")) fail("attribute pads is required");
    pads = ctx.attrs().get_ints("pads");
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  } else {
    pads = get(1, "pads");
    if (ctx.opset >= 18 && ctx.has_input(3)) {
      std::vector<bool> seen(static_cast<size_t>(rank), false);
      for (int64_t a : get(3, "axes")) {
        int64_t n = normalize_axis(a, rank);
        if (seen[static_cast<size_t>(n)]) fail("axis {} is repeated", a);
        seen[static_cast<size_t>(n)] = true;
        axes.push_back(n);
      }
    } else {
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    }
  }
  const size_t n = axes.size();
  if (pads.size() != 2 * n) fail("pads has {} entries, expected {} (2 per padded axis)", pads.size(), 2 * n);
  PadSpec s{std::vector<int64_t>(static_cast<size_t>(rank), 0), std::vector<int64_t>(static_cast<size_t>(rank), 0)};
  for (size_t i = 0; i < n; ++i) {
    s.begin[static_cast<size_t>(axes[i])] = pads[i];
    s.end[static_cast<size_t>(axes[i])] = pads[n + i];
  }
  return s;
}

void check_pad_input_types(const OpInferContext& ctx) {
  if (ctx.opset < 11) return;
  const TensorType& p = ctx.input(1);
  if (p.dtype != DType::kInt64 || p.rank() != 1) fail("pads must be a 1-D int64 tensor, got {}", type_str(p));
  if (ctx.has_input(2)) {
    const TensorType& v = ctx.input(2);
    if (v.dtype != ctx.input(0).dtype)
      fail("constant_value has type {} but data has {}", dtype_name(v.dtype), dtype_name(ctx.input(0).dtype));
    if (v.numel() > 1) fail("constant_value must be a scalar, got {}", shape_str(v.shape));
  }
  if (ctx.opset >= 18 && ctx.has_input(3)) check_index_type(ctx.input(3), "axes");
}

std::vector<TensorType> infer_pad(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  check_pad_input_types(ctx);
  const PadMode mode = pad_mode(ctx.attrs(), ctx.opset);
  PadSpec s = pad_spec(ctx, x.rank(), [&](int i, const char* what) { return ctx.require_constant(i, what).to_int_vector(); });
  Shape out = x.shape;
  for (size_t d = 0; d < out.size(); ++d) {
    const int64_t b = s.begin[d], e = s.end[d], n = x.shape[d];
    const int64_t crop = std::max<int64_t>(-b, 0) + std::max<int64_t>(-e, 0);
    if (crop > n) fail("pads {}/{} crop more than axis {} of size {}", b, e, d, n);
    if (mode != PadMode::kConstant && n - crop == 0 && (b > 0 || e > 0))
      fail("cannot pad axis {} of size 0 in mode '{}'", d, ctx.attrs().get_string("mode", "constant"));
    out[d] = n + b + e;
  }
  return one(x.dtype, out);
}

// The constant as `es` raw bytes of `dtype`.
std::vector<std::byte> pad_value(const OpEvalContext& ctx, DType dtype, int64_t es) {
  std::vector<std::byte> v(static_cast<size_t>(es), std::byte{0});
  if (ctx.opset >= 11) {
    if (ctx.has_input(2) && ctx.input(2).numel() > 0) std::memcpy(v.data(), ctx.input(2).raw(), static_cast<size_t>(es));
    return v;
  }
  const float f = ctx.attrs().get_float("value", 0.f);
  dispatch_dtype<KORCH_ALL_TYPES>(dtype, "Pad", [&](auto tag) {
    using T = decltype(tag);
    T t;
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16> || std::is_floating_point_v<T>)
      t = static_cast<T>(f);
    else if constexpr (std::is_same_v<T, bool>)
      t = f != 0;
    else
      t = static_cast<T>(static_cast<int64_t>(f));
    std::memcpy(v.data(), &t, sizeof(T));
  });
  return v;
}

// Source index along one axis for every output position; -1 where the constant goes.
std::vector<int64_t> pad_map(int64_t n, int64_t b, int64_t e, int64_t out, PadMode mode) {
  const int64_t lo = std::max<int64_t>(-b, 0);
  const int64_t m = n - lo - std::max<int64_t>(-e, 0);  // size after cropping
  const int64_t before = std::max<int64_t>(b, 0);
  std::vector<int64_t> map(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    int64_t i = o - before, src;
    if (i >= 0 && i < m) {
      src = i;
    } else {
      switch (mode) {
        case PadMode::kConstant: src = -1; break;
        case PadMode::kEdge: src = std::clamp<int64_t>(i, 0, m - 1); break;
        case PadMode::kWrap: src = ((i % m) + m) % m; break;
        case PadMode::kReflect:
        default: {
          if (m == 1) { src = 0; break; }
          const int64_t p = 2 * (m - 1);
          src = ((i % p) + p) % p;
          if (src >= m) src = p - src;
        }
      }
    }
    map[static_cast<size_t>(o)] = src < 0 ? -1 : src + lo;
  }
  return map;
}

std::vector<Tensor> eval_pad(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor out(ctx.output_type(0));
  const int64_t r = x.rank(), es = elem_size(x.dtype());
  if (r == 0) return {x};
  if (out.numel() == 0) return {out};
  const PadMode mode = pad_mode(ctx.attrs(), ctx.opset);
  PadSpec s = pad_spec(ctx, r, [&](int i, const char*) { return ctx.input(i).to_int_vector(); });
  std::vector<std::vector<int64_t>> maps;
  for (int64_t d = 0; d < r; ++d) {
    const size_t du = static_cast<size_t>(d);
    maps.push_back(pad_map(x.dim(d), s.begin[du], s.end[du], out.dim(d), mode));
  }
  const std::vector<std::byte> value = pad_value(ctx, x.dtype(), es);
  const bool zero_value = std::all_of(value.begin(), value.end(), [](std::byte b) { return b == std::byte{0}; });
  // Innermost dim as runs: {dst, src (-1 = constant), len}.
  struct Run { int64_t dst, src, len; };
  std::vector<Run> runs;
  const std::vector<int64_t>& last = maps.back();
  for (int64_t o = 0; o < out.dim(r - 1); ++o) {
    const int64_t src = last[static_cast<size_t>(o)];
    if (!runs.empty()) {
      Run& b = runs.back();
      if ((src < 0 && b.src < 0) || (src >= 0 && b.src >= 0 && src == b.src + b.len)) {
        ++b.len;
        continue;
      }
    }
    runs.push_back({o, src, 1});
  }
  const std::vector<int64_t> in_st = shape_strides(x.shape());
  const int64_t inner = out.dim(r - 1), rows = out.numel() / inner;
  const std::byte* src = x.raw();
  std::byte* dst = out.raw();
  auto fill = [&](std::byte* p, int64_t n) {
    if (zero_value) std::memset(p, 0, static_cast<size_t>(n * es));
    else
      for (int64_t i = 0; i < n; ++i) std::memcpy(p + i * es, value.data(), static_cast<size_t>(es));
  };
#pragma omp parallel for schedule(static) if (out.nbytes() >= (1u << 16))
  for (int64_t row = 0; row < rows; ++row) {
    std::byte* drow = dst + row * inner * es;
    int64_t rem = row, soff = 0;
    bool constant_row = false;
    for (int64_t d = r - 2; d >= 0; --d) {
      const size_t du = static_cast<size_t>(d);
      const int64_t q = rem % out.dim(d);
      rem /= out.dim(d);
      const int64_t m = maps[du][static_cast<size_t>(q)];
      if (m < 0) { constant_row = true; break; }
      soff += m * in_st[du];
    }
    if (constant_row) { fill(drow, inner); continue; }
    for (const Run& run : runs) {
      if (run.src < 0) fill(drow + run.dst * es, run.len);
      else std::memcpy(drow + run.dst * es, src + (soff + run.src) * es, static_cast<size_t>(run.len * es));
    }
  }
  return {out};
}

// --- ReverseSequence --------------------------------------------------------------------------------

void reverse_axes(const Attributes& attrs, int64_t& time_axis, int64_t& batch_axis) {
  time_axis = attrs.get_int("time_axis", 0);
  batch_axis = attrs.get_int("batch_axis", 1);
  if (!((time_axis == 0 && batch_axis == 1) || (time_axis == 1 && batch_axis == 0)))
    fail("time_axis/batch_axis must be 0/1 or 1/0, got {}/{}", time_axis, batch_axis);
}

std::vector<TensorType> infer_reverse_sequence(const OpInferContext& ctx) {
  const TensorType& x = ctx.input(0);
  elem_size(x.dtype);
  const TensorType& lens = ctx.input(1);
  check_index_type(lens, "sequence_lens");
  if (x.rank() < 2) fail("input must have rank >= 2, got {}", shape_str(x.shape));
  int64_t t, b;
  reverse_axes(ctx.attrs(), t, b);
  if (lens.shape != Shape{x.shape[static_cast<size_t>(b)]})
    fail("sequence_lens shape {} should be [{}]", shape_str(lens.shape), x.shape[static_cast<size_t>(b)]);
  return one(x.dtype, x.shape);
}

std::vector<Tensor> eval_reverse_sequence(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t ta, ba;
  reverse_axes(ctx.attrs(), ta, ba);
  std::vector<int64_t> lens = index_values(ctx.input(1));
  const int64_t T = x.dim(ta), es = elem_size(x.dtype());
  const std::vector<int64_t> st = shape_strides(x.shape());
  const int64_t ts = st[static_cast<size_t>(ta)], bs = st[static_cast<size_t>(ba)], block = st[1] * es;
  Tensor out = x.clone();
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t len = lens[b];
    if (len < 0 || len > T) fail("sequence_lens[{}] = {} is out of range [0, {}]", b, len, T);
    const int64_t boff = static_cast<int64_t>(b) * bs;
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(out.raw() + (boff + t * ts) * es, x.raw() + (boff + (len - 1 - t) * ts) * es, static_cast<size_t>(block));
  }
  return {out};
}

}  // namespace

void register_layout_pad_ops(OpRegistry& r) {
  r.add(make_op("Pad", 1, infer_pad, eval_pad));
  r.add(make_op("ReverseSequence", 10, infer_reverse_sequence, eval_reverse_sequence));
}

}  // namespace korch
