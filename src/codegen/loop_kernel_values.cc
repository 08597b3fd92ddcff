// "The value of v at index idx" for arguments, baked constants, materialised reductions and the
// layout primitives (index remapping only). Elementwise math is in loop_kernel_elementwise.cc.
//
// Every load is in bounds by construction: where a layout op selects between sources (Pad's
// border, Concat's inputs) each source is read at an index clamped into its shape and the select
// picks the right one, so the loop body is branch-free and vectorisable.
#include <fmt/format.h>

#include <algorithm>

#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel_internal.h"
#include "support/error.h"

namespace korch::loop {

namespace {

const Tensor* const_input(const Graph& g, const Node& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return nullptr;
  return g.value(n.inputs[i]).constant.get();
}

std::vector<int64_t> required_ints(const Graph& g, const Node& n, size_t i, const char* what) {
  const Tensor* t = const_input(g, n, i);
  if (!t) unsupported(fmt::format("{}: {} is not a constant", node_ref(n), what));
  return t->to_int_vector();
}

bool has_input(const Node& n, size_t i) { return i < n.inputs.size() && n.inputs[i] != kNoValue; }

}  // namespace

[[noreturn]] void unsupported(std::string reason) { throw Unsupported{std::move(reason)}; }

std::string node_ref(const Node& n) { return fmt::format("{} (node '{}')", n.op_type, n.name); }

int KernelContext::add_table(DType dtype, std::vector<int64_t> values) {
  for (size_t i = 0; i < k.tables.size(); ++i)
    if (k.tables[i].dtype == dtype && k.tables[i].values == values) return static_cast<int>(i);
  k.tables.push_back(Table{dtype, std::move(values)});
  return static_cast<int>(k.tables.size()) - 1;
}

bool loop_dtype_supported(DType t) {
  switch (t) {
    case DType::kFloat32: case DType::kFloat64: case DType::kInt64: case DType::kInt32: case DType::kInt16:
    case DType::kInt8: case DType::kUInt8: case DType::kUInt16: case DType::kUInt32: case DType::kUInt64:
    case DType::kBool:
      return true;
    default:
      return false;
  }
}

int StageBuilder::value_at(ValueId v, const std::vector<int>& idx) {
  auto key = std::make_pair(v, idx);
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  const int e = compute_value(v, idx);
  memo_.emplace(std::move(key), e);
  return e;
}

int StageBuilder::compute_value(ValueId v, const std::vector<int>& idx) {
  const Graph& g = kc_.g;
  const Value& val = g.value(v);
  KORCH_CHECK(idx.size() == val.type.shape.size(), "index of rank {} for value '{}' of shape {}", idx.size(),
              val.name, shape_str(val.type.shape));
  if (auto b = kc_.buffer_of.find(v); b != kc_.buffer_of.end())
    return e_load(b->second, flat_index(idx, val.type.shape));
  auto p = kc_.producer.find(v);
  if (p == kc_.producer.end()) {
    if (!val.is_constant() || !is_baked_constant(g, v))
      unsupported(fmt::format("value '{}' is read but is neither an argument nor a baked constant", val.name));
    const Tensor& t = *val.constant;
    if (t.numel() == 1) {
      if (is_float(t.dtype())) return e_const(t.dtype(), t.get_as_double(0));
      return e_iconst(t.dtype(), t.get_as_int(0));
    }
    if (is_float(t.dtype())) unsupported(fmt::format("baked float constant '{}' with {} elements", val.name, t.numel()));
    auto tb = kc_.table_of.find(v);
    int table;
    if (tb != kc_.table_of.end()) {
      table = tb->second;
    } else {
      std::vector<int64_t> values(static_cast<size_t>(t.numel()));
      for (int64_t i = 0; i < t.numel(); ++i) values[static_cast<size_t>(i)] = t.get_as_int(i);
      table = kc_.add_table(t.dtype(), std::move(values));
      kc_.table_of[v] = table;
    }
    return e_table(table, flat_index(idx, val.type.shape));
  }
  const Node& n = g.nodes[static_cast<size_t>(p->second)];
  int out_pos = 0;
  while (n.outputs[static_cast<size_t>(out_pos)] != v) ++out_pos;
  const PrimitiveKind kind = primitive_kind(g, n);
  if (kind == PrimitiveKind::kElementwise) return elementwise_value(n, idx);
  return layout_value(n, out_pos, idx);
}

int StageBuilder::layout_value(const Node& n, int out_pos, const std::vector<int>& idx) {
  const Graph& g = kc_.g;
  const std::string& op = n.op_type;
  const ValueId x = n.inputs.empty() ? kNoValue : n.inputs[0];
  const Shape& in = g.type(x).shape;
  const Shape& out = g.type(n.outputs[static_cast<size_t>(out_pos)]).shape;
  const size_t r = in.size();

  if (op == "Identity" || op == "Dropout" || op.rfind("Reduce", 0) == 0) {
    // Reduce* here is a no-op reduction (empty axes with noop_with_empty_axes).
    return value_at(x, idx);
  }
  if (op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze") {
    if (in == out) return value_at(x, idx);
    return value_at(x, unflatten(flat_index(idx, out), in));
  }
  if (op == "Expand") {
    std::vector<int> src(r);
    const size_t off = out.size() - r;
    for (size_t d = 0; d < r; ++d) src[d] = in[d] == 1 ? ix_const(0) : idx[d + off];
    return value_at(x, src);
  }
  if (op == "Transpose") {
    std::vector<int64_t> perm = n.attrs.get_ints("perm");
    if (perm.empty())
      for (size_t d = r; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
    std::vector<int> src(r);
    for (size_t i = 0; i < r; ++i) src[static_cast<size_t>(normalize_axis(perm[i], static_cast<int64_t>(r)))] = idx[i];
    return value_at(x, src);
  }
  if (op == "Slice") {
    std::vector<int64_t> starts, ends, axes, steps;
    if (g.opset < 10) {
      starts = n.attrs.get_ints("starts");
      ends = n.attrs.get_ints("ends");
      axes = n.attrs.get_ints("axes");
    } else {
      starts = required_ints(g, n, 1, "starts");
      ends = required_ints(g, n, 2, "ends");
      if (has_input(n, 3)) axes = required_ints(g, n, 3, "axes");
      if (has_input(n, 4)) steps = required_ints(g, n, 4, "steps");
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    std::vector<int64_t> start(r, 0), step(r, 1);
    for (size_t i = 0; i < starts.size(); ++i) {
      const size_t a = static_cast<size_t>(normalize_axis(axes[i], static_cast<int64_t>(r)));
      const int64_t dim = in[a], st = steps.empty() ? 1 : steps[i];
      int64_t s = starts[i];
      if (s < 0) s += dim;
      s = st > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
      start[a] = s;
      step[a] = st;
    }
    std::vector<int> src(r);
    for (size_t d = 0; d < r; ++d) src[d] = out[d] == 0 ? ix_const(0) : ix_add_const(ix_mul(idx[d], step[d]), start[d]);
    return value_at(x, src);
  }
  if (op == "Concat") {
    const size_t axis = static_cast<size_t>(normalize_axis(n.attrs.get_int("axis"), static_cast<int64_t>(out.size())));
    int result = -1;
    int64_t off = 0;
    std::vector<std::pair<int64_t, ValueId>> parts;
    for (ValueId in_v : n.inputs) {
      const int64_t len = g.type(in_v).shape[axis];
      if (len > 0) parts.emplace_back(off, in_v);
      off += len;
    }
    for (size_t k = parts.size(); k-- > 0;) {
      const auto [start, in_v] = parts[k];
      const int64_t len = g.type(in_v).shape[axis];
      std::vector<int> src = idx;
      src[axis] = ix_clamp(ix_add_const(idx[axis], -start), 0, len - 1);
      const int cond = e_in_range(idx[axis], start, start + len);
      if (result < 0) {
        result = value_at(in_v, src);  // the last part: no condition needed
        continue;
      }
      if (is_const(cond) && expr(cond).ivalue == 0) continue;
      result = e_select(cond, value_at(in_v, src), result);
    }
    KORCH_CHECK(result >= 0, "Concat with no non-empty input");
    return result;
  }
  if (op == "Split") {
    const size_t axis = static_cast<size_t>(normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(r)));
    int64_t off = 0;
    for (int k = 0; k < out_pos; ++k) off += g.type(n.outputs[static_cast<size_t>(k)]).shape[axis];
    std::vector<int> src = idx;
    src[axis] = ix_add_const(idx[axis], off);
    return value_at(x, src);
  }
  if (op == "Tile") {
    std::vector<int> src(r);
    for (size_t d = 0; d < r; ++d) src[d] = in[d] == out[d] ? idx[d] : ix_mod(idx[d], in[d]);
    return value_at(x, src);
  }
  if (op == "Gather") {
    const Tensor* ind = const_input(g, n, 1);
    if (!ind) unsupported(fmt::format("{}: indices are not a constant", node_ref(n)));
    if (ind->numel() > (int64_t{1} << 16))
      unsupported(fmt::format("{}: {} constant indices are too many to bake", node_ref(n), ind->numel()));
    const size_t axis = static_cast<size_t>(normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(r)));
    const int64_t dim = in[axis];
    std::vector<int64_t> values = ind->to_int_vector();
    for (int64_t& v : values) {
      if (v < -dim || v >= dim) unsupported(fmt::format("{}: index {} is out of range for an axis of size {}", node_ref(n), v, dim));
      if (v < 0) v += dim;
    }
    const size_t q = static_cast<size_t>(ind->rank());
    std::vector<int> qidx(idx.begin() + static_cast<std::ptrdiff_t>(axis), idx.begin() + static_cast<std::ptrdiff_t>(axis + q));
    int pos;
    if (values.size() == 1) {
      pos = ix_const(values[0]);
    } else {
      const int table = kc_.add_table(DType::kInt64, std::move(values));
      pos = ix_table(table, flat_index(qidx, ind->shape()));
    }
    std::vector<int> src;
    for (size_t d = 0; d < axis; ++d) src.push_back(idx[d]);
    src.push_back(pos);
    for (size_t d = axis + q; d < idx.size(); ++d) src.push_back(idx[d]);
    return value_at(x, src);
  }
  if (op == "Pad") {
    std::vector<int64_t> pads, axes;
    std::string mode = n.attrs.get_string("mode", "constant");
    if (g.opset < 11) {
      pads = n.attrs.get_ints("pads");
    } else {
      pads = required_ints(g, n, 1, "pads");
      if (g.opset >= 18 && has_input(n, 3)) axes = required_ints(g, n, 3, "axes");
    }
    if (axes.empty())
      for (size_t d = 0; d < r; ++d) axes.push_back(static_cast<int64_t>(d));
    std::vector<int64_t> b(r, 0), e(r, 0);
    for (size_t i = 0; i < axes.size(); ++i) {
      const size_t a = static_cast<size_t>(normalize_axis(axes[i], static_cast<int64_t>(r)));
      b[a] = pads[i];
      e[a] = pads[axes.size() + i];
    }
    int cond = e_iconst(DType::kBool, 1);
    std::vector<int> src(r);
    for (size_t d = 0; d < r; ++d) {
      const int64_t lo = std::max<int64_t>(-b[d], 0), m = in[d] - lo - std::max<int64_t>(-e[d], 0);
      const int64_t before = std::max<int64_t>(b[d], 0);
      const int i = ix_add_const(idx[d], -before);  // position in the cropped input
      if (m <= 0) {
        if (mode != "constant") unsupported(fmt::format("{}: mode '{}' over an empty axis", node_ref(n), mode));
        cond = e_iconst(DType::kBool, 0);
        src[d] = ix_const(0);
        continue;
      }
      if (mode == "constant") {
        cond = e_binary(Fn::kAnd, cond, e_in_range(i, 0, m));
        src[d] = ix_add_const(ix_clamp(i, 0, m - 1), lo);
      } else if (mode == "edge") {
        src[d] = ix_add_const(ix_clamp(i, 0, m - 1), lo);
      } else if (mode == "reflect") {
        if (m == 1) {
          src[d] = ix_const(lo);
        } else {
          // r = i mod 2(m-1); src = min(r, 2(m-1) - r), clamped to [0, m) only to tell the range
          // analysis what it cannot see.
          const int rr = ix_mod(i, 2 * (m - 1));
          src[d] = ix_add_const(ix_clamp(ix_min(rr, ix_add_const(ix_mul(rr, -1), 2 * (m - 1))), 0, m - 1), lo);
        }
      } else if (mode == "wrap") {
        src[d] = ix_add_const(ix_mod(i, m), lo);
      } else {
        unsupported(fmt::format("{}: mode '{}'", node_ref(n), mode));
      }
    }
    if (mode != "constant") return value_at(x, src);
    const DType dt = g.type(x).dtype;
    int pad_value;
    if (g.opset < 11) {
      pad_value = e_const(dt, n.attrs.get_float("value", 0.f));
    } else if (has_input(n, 2) && g.type(n.inputs[2]).numel() == 1) {
      pad_value = value_at(n.inputs[2], std::vector<int>(g.type(n.inputs[2]).shape.size(), ix_const(0)));
    } else {
      pad_value = e_iconst(dt, 0);
    }
    if (is_const(cond) && expr(cond).ivalue == 0) return pad_value;
    return e_select(cond, value_at(x, src), pad_value);
  }
  if (op == "DepthToSpace" || op == "SpaceToDepth") {
    const int64_t bs = n.attrs.get_int("blocksize");
    std::vector<int> src(4);
    src[0] = idx[0];
    if (op == "DepthToSpace") {
      const int64_t co = out[1];
      const int b1 = ix_mod(idx[2], bs), b2 = ix_mod(idx[3], bs);
      src[2] = ix_div(idx[2], bs);
      src[3] = ix_div(idx[3], bs);
      const bool crd = g.opset >= 11 && n.attrs.get_string("mode", "DCR") == "CRD";
      if (crd)
        src[1] = ix_add(ix_mul(idx[1], bs * bs), ix_add(ix_mul(b1, bs), b2));
      else
        src[1] = ix_add(ix_mul(ix_add(ix_mul(b1, bs), b2), co), idx[1]);
    } else {
      const int64_t c = in[1];
      const int blk = ix_div(idx[1], c);
      src[1] = ix_mod(idx[1], c);
      src[2] = ix_add(ix_mul(idx[2], bs), ix_div(blk, bs));
      src[3] = ix_add(ix_mul(idx[3], bs), ix_mod(blk, bs));
    }
    return value_at(x, src);
  }
  unsupported(fmt::format("{} has no loop-kernel emitter", node_ref(n)));
}

}  // namespace korch::loop
