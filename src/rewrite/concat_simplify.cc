// Concat simplification (see rewrite.h): detection heads and other decoders often cut a tensor
// into channel Slices, regroup them with Concats, and run the same elementwise op on each piece.
// Every rule below removes nodes and never adds elementwise work or copies, so it never loses.
// Worked examples (shapes in brackets):
//
//   regroup_sliced_concat   Concat(Slice(x[1,255,H,W], 0:2), Slice(x, 85:87), Slice(x, 170:172), axis=1)
//                           -> Reshape(Slice(Reshape(x, [1,3,85,H,W]), axes [1,2] = [0:3, 0:2]),
//                              [1,6,H,W]): the pieces sit at a constant stride, so one Slice of a
//                              view reads them all. Consecutive pieces (Slice 0:2, Slice 2:5) become
//                              one Slice (0:5). Works on any run of such pieces inside a Concat.
//   hoist_elementwise_over_concat
//                           Concat(Mul(Slice(x, 0:1), 4.4), Mul(Slice(x, 2:3), 6.0), axis=1) with each
//                           Mul read only by the Concat -> Mul(Concat(Slice(x, 0:1), Slice(x, 2:3)),
//                           [4.4, 6.0] along axis 1), whose Concat the rule above makes one Slice: one
//                           op instead of two over the same elements; constants that differ per piece
//                           are concatenated (broadcast to the piece), equal ones are kept. Only where
//                           the pieces are such Slices: hoisting a Relu above a Concat of convolutions
//                           would take it out of their epilogues.
//   slice_elementwise_of_concat
//                           Slice(Div(Concat(p, q), 13), selecting exactly q), every reader of the Div
//                           such a Slice -> Div(q, 13): the pieces are never joined only to be cut
//                           apart again.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>
#include <set>

#include "ir/primitive.h"
#include "rewrite/rewrite.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

bool is_op(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

int64_t concat_axis(const Graph& g, const Node& n) {
  int64_t axis = n.attrs.get_int("axis", 0);
  if (axis < 0) axis += static_cast<int64_t>(g.type(n.outputs[0]).shape.size());
  return axis;
}

// `t` broadcast (numpy rules) to rank `rank`, restricted to the box starting at `lo` with `extent`
// per output axis (axes where `t` has size 1 repeat its one element). Bytes are copied as they are,
// so any dtype works.
Tensor constant_box(const Tensor& t, size_t rank, const Shape& lo, const Shape& extent) {
  Tensor out(t.dtype(), extent);
  const size_t esize = dtype_size(t.dtype());
  const size_t pad = rank - static_cast<size_t>(t.rank());
  std::vector<int64_t> tdim(rank, 1), tstride(rank, 0);
  for (size_t a = 0; a < static_cast<size_t>(t.rank()); ++a) tdim[pad + a] = t.dim(static_cast<int64_t>(a));
  for (size_t a = rank, s = 1; a-- > 0;) {
    tstride[a] = tdim[a] == 1 ? 0 : static_cast<int64_t>(s);
    s *= static_cast<size_t>(tdim[a]);
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t src = 0;
    for (size_t a = 0; a < rank; ++a) src += (lo[a] + idx[a]) * tstride[a];  // stride 0 where t repeats
    std::memcpy(out.raw() + static_cast<size_t>(i) * esize, t.raw() + static_cast<size_t>(src) * esize, esize);
    for (size_t a = rank; a-- > 0;) {
      if (++idx[a] < extent[a]) break;
      idx[a] = 0;
    }
  }
  return out;
}

// The size of `t`'s dim aligned with output axis `axis` of a rank-`rank` result (1 when absent).
int64_t aligned_dim(const Tensor& t, size_t rank, int64_t axis) {
  const int64_t a = axis - static_cast<int64_t>(rank) + t.rank();
  return a < 0 ? 1 : t.dim(a);
}

// An elementwise node with one output whose operands are constants (or Expands of constants) except
// one, of the output's shape: the operand's slot.
std::optional<size_t> single_variable_operand(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.outputs[0] == kNoValue || primitive_kind(g, n) != PrimitiveKind::kElementwise)
    return std::nullopt;
  std::optional<size_t> slot;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k] == kNoValue || constant_through_expand(g, n.inputs[k])) continue;
    if (slot) return std::nullopt;
    slot = k;
  }
  if (!slot || g.type(n.inputs[*slot]).shape != g.type(n.outputs[0]).shape) return std::nullopt;
  return slot;
}

// Ops whose operands broadcast numpy-style, so one may hold different values per piece (Clip's
// bounds and QuantizeLinear's scale must stay scalars).
bool broadcasting_op(const std::string& op) {
  static const std::set<std::string> ops = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "PRelu", "Where",
                                            "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                                            "Xor", "BitShift", "Sum", "Mean"};
  return ops.count(op) != 0;
}

// An elementwise operand of shape `shape` holding `t` (broadcast): a scalar constant as it is, `t`
// when it has that shape, else an Expand of it (elementwise primitives take no implicit broadcast).
ValueId operand_of_shape(Rewriter& rw, Tensor t, const Shape& shape) {
  const bool direct = t.numel() == 1 || t.shape() == shape;
  const ValueId c = rw.add_constant("rewrite/concat_constant", direct && t.numel() == 1 ? t.reshaped({}) : std::move(t));
  return direct ? c : rw.append_node("Expand", {c, rw.int_list(shape)})[0];
}

// The longest run pieces[b, end) of Slices of one source along `axis` that one Slice (of a view)
// reads: consecutive pieces (stride 0), or equal-width pieces at a constant stride that divides the
// axis, each within its stride group. end = b + 1 when there is no run of two.
struct SliceRun {
  size_t end = 0;
  int64_t stride = 0;
};
SliceRun slice_run(const Graph& g, const std::vector<std::optional<SlicePiece>>& pieces, size_t b, int64_t axis) {
  const size_t n = pieces.size();
  if (!pieces[b] || pieces[b]->axis != axis || b + 1 >= n || !pieces[b + 1] || pieces[b + 1]->source != pieces[b]->source ||
      pieces[b + 1]->axis != axis)
    return {b + 1, 0};
  const SlicePiece& p0 = *pieces[b];
  const int64_t dim = g.type(p0.source).shape[static_cast<size_t>(axis)];
  int64_t stride = pieces[b + 1]->start - p0.start;
  if (stride == p0.len) stride = 0;
  else if (stride <= p0.len || dim % stride != 0 || p0.start % stride + p0.len > stride) return {b + 1, 0};
  size_t e = b + 1;
  for (; e < n && pieces[e] && pieces[e]->source == p0.source && pieces[e]->axis == axis; ++e) {
    const SlicePiece& prev = *pieces[e - 1];
    if (stride > 0 ? pieces[e]->len != p0.len || pieces[e]->start != prev.start + stride
                   : pieces[e]->start != prev.start + prev.len)
      break;
  }
  return {e, stride};
}

// Rebuilds the Concat `out` of `inputs` along `axis` from runs of its inputs: `next(b)` returns the
// end e of the run that starts at input b and the value replacing inputs [b, e) (kNoValue: keep
// them). The Concat is replaced (by the one part left, or a new Concat) when a run was.
template <typename Next>
void rebuild_concat(Rewriter& rw, ValueId out, const std::vector<ValueId>& inputs, int64_t axis, Next&& next) {
  std::vector<ValueId> parts;
  bool changed = false;
  for (size_t b = 0; b < inputs.size();) {
    const auto [e, v] = next(b);
    if (v == kNoValue) parts.insert(parts.end(), inputs.begin() + static_cast<std::ptrdiff_t>(b), inputs.begin() + static_cast<std::ptrdiff_t>(e));
    else parts.push_back(v);
    changed |= v != kNoValue;
    b = e;
  }
  if (!changed) return;
  if (parts.size() == 1) {
    rw.replace(out, parts[0]);
    return;
  }
  Attributes a;
  a.set("axis", axis);
  rw.replace(out, rw.append_node("Concat", parts, a)[0]);
}

// The constants `cs` of a run of pieces (`widths` along `axis`) as one constant of rank `rank`: each
// broadcast to its piece along the axis and to `dims` (the largest of their dims) elsewhere,
// concatenated along the axis.
Tensor concat_constants(const std::vector<const Tensor*>& cs, const std::vector<int64_t>& widths, Shape dims, size_t rank,
                        int64_t axis) {
  std::vector<Tensor> boxes;
  int64_t total = 0;
  for (size_t r = 0; r < cs.size(); ++r) {
    Shape extent = dims;
    extent[static_cast<size_t>(axis)] = widths[r];
    total += widths[r];
    boxes.push_back(constant_box(*cs[r], rank, Shape(rank, 0), extent));
  }
  dims[static_cast<size_t>(axis)] = total;
  Tensor t(cs[0]->dtype(), dims);
  size_t outer = 1, inner = dtype_size(t.dtype()), at = 0;
  for (size_t a = 0; a < static_cast<size_t>(axis); ++a) outer *= static_cast<size_t>(dims[a]);
  for (size_t a = static_cast<size_t>(axis) + 1; a < rank; ++a) inner *= static_cast<size_t>(dims[a]);
  for (size_t o = 0; o < outer; ++o)
    for (const Tensor& box : boxes) {
      const size_t bytes = static_cast<size_t>(box.dim(axis)) * inner;
      std::memcpy(t.raw() + at, box.raw() + o * bytes, bytes);
      at += bytes;
    }
  return t;
}

// Calls fn(inputs, axis, output) for every Concat of two or more inputs (inputs resolved through
// the replacements so far), in order; then finishes the rewriter.
template <typename Fn>
bool rewrite_concats(Graph& g, Rewriter& rw, Fn&& fn) {
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    const Node& n = rw.visit(i);
    if (!is_op(n, "Concat") || n.inputs.size() < 2) continue;
    const std::vector<ValueId> inputs = n.inputs;
    fn(inputs, concat_axis(g, n), n.outputs[0]);
  }
  return rw.finish();
}

}  // namespace

bool regroup_sliced_concat(Graph& g) {
  if (g.opset < 10) return false;  // Slice with constant inputs
  Rewriter rw(g);
  return rewrite_concats(g, rw, [&](const std::vector<ValueId>& inputs, int64_t axis, ValueId out) {
    std::vector<std::optional<SlicePiece>> pieces;
    for (ValueId v : inputs) pieces.push_back(slice_piece(g, v));
    rebuild_concat(rw, out, inputs, axis, [&](size_t b) -> std::pair<size_t, ValueId> {
      const SliceRun run = slice_run(g, pieces, b, axis);
      if (run.end - b < 2) return {b + 1, kNoValue};
      const SlicePiece p0 = *pieces[b], last = *pieces[run.end - 1];
      if (run.stride == 0)
        return {run.end, rw.append_node("Slice", {p0.source, rw.int_list({p0.start}), rw.int_list({last.start + last.len}),
                                                  rw.int_list({axis})})[0]};
      const int64_t k = static_cast<int64_t>(run.end - b), stride = run.stride;
      const Shape src = g.type(p0.source).shape;
      Shape view = src;
      view[static_cast<size_t>(axis)] = stride;
      view.insert(view.begin() + axis, src[static_cast<size_t>(axis)] / stride);
      const ValueId v = rw.append_node("Reshape", {p0.source, rw.int_list(view)})[0];
      const int64_t first = p0.start / stride, offset = p0.start % stride;
      const ValueId sl = rw.append_node("Slice", {v, rw.int_list({first, offset}), rw.int_list({first + k, offset + p0.len}),
                                                  rw.int_list({axis, axis + 1})})[0];
      Shape joined = src;
      joined[static_cast<size_t>(axis)] = k * p0.len;
      return {run.end, rw.append_node("Reshape", {sl, rw.int_list(joined)})[0]};
    });
  });
}

bool hoist_elementwise_over_concat(Graph& g) {
  const UseInfo uses(g);
  const size_t known_values = g.values.size();
  Rewriter rw(g);
  return rewrite_concats(g, rw, [&](const std::vector<ValueId>& inputs, int64_t axis, ValueId out) {
    const size_t rank = g.type(out).shape.size();
    // Per input: its producer and variable slot when it is an elementwise op read only here.
    // (Copies: appending nodes invalidates references into g.nodes.)
    std::vector<std::optional<Node>> ops;
    std::vector<size_t> slots;
    for (ValueId v : inputs) {
      const Node* p = static_cast<size_t>(v) < known_values ? producer_of(g, v) : nullptr;
      std::optional<size_t> slot = p ? single_variable_operand(g, *p) : std::nullopt;
      ops.push_back(slot && has_single_consumer(g, uses, v) ? std::optional<Node>(*p) : std::nullopt);
      slots.push_back(slot.value_or(0));
    }
    auto same_kind = [&](size_t a, size_t b) {
      const Node &x = *ops[a], &y = *ops[b];
      if (x.op_type != y.op_type || x.domain != y.domain || !(x.attrs == y.attrs) || slots[a] != slots[b] ||
          x.inputs.size() != y.inputs.size() || g.type(x.inputs[slots[a]]).dtype != g.type(y.inputs[slots[b]]).dtype)
        return false;
      for (size_t k = 0; k < x.inputs.size(); ++k)
        if (k != slots[a] && (x.inputs[k] == kNoValue) != (y.inputs[k] == kNoValue)) return false;
      return true;
    };
    // Where the variables are Slices of one value that regroup_sliced_concat joins into one.
    std::vector<std::optional<SlicePiece>> pieces;
    for (size_t r = 0; r < inputs.size(); ++r) pieces.push_back(ops[r] ? slice_piece(g, ops[r]->inputs[slots[r]]) : std::nullopt);
    rebuild_concat(rw, out, inputs, axis, [&](size_t b) -> std::pair<size_t, ValueId> {
      size_t e = b + 1;
      while (ops[b] && e < inputs.size() && ops[e] && same_kind(b, e)) ++e;
      e = std::min(e, slice_run(g, pieces, b, axis).end);
      if (e - b < 2) return {b + 1, kNoValue};
      const Node& first = *ops[b];
      const size_t slot = slots[b];
      std::vector<ValueId> variables;
      std::vector<int64_t> widths;
      std::vector<std::vector<const Tensor*>> consts(first.inputs.size());
      for (size_t r = b; r < e; ++r) {
        variables.push_back(ops[r]->inputs[slot]);
        widths.push_back(g.type(variables.back()).shape[static_cast<size_t>(axis)]);
        for (size_t k = 0; k < first.inputs.size(); ++k)
          if (k != slot && ops[r]->inputs[k] != kNoValue) consts[k].push_back(constant_through_expand(g, ops[r]->inputs[k]));
      }
      Shape joined_shape = g.type(variables[0]).shape;
      joined_shape[static_cast<size_t>(axis)] = std::accumulate(widths.begin(), widths.end(), int64_t{0});
      std::vector<ValueId> operands = first.inputs;
      for (size_t k = 0; k < operands.size(); ++k) {
        if (k == slot || operands[k] == kNoValue) continue;
        const std::vector<const Tensor*>& cs = consts[k];
        bool same = aligned_dim(*cs[0], rank, axis) == 1;
        Shape dims(rank, 1);
        for (const Tensor* c : cs) {
          if (c->rank() > static_cast<int64_t>(rank) || c->dtype() != cs[0]->dtype()) return {e, kNoValue};
          same &= *c == *cs[0];
          for (size_t a = 0; a < rank; ++a) dims[a] = std::max(dims[a], aligned_dim(*c, rank, static_cast<int64_t>(a)));
        }
        if (same && cs[0]->numel() == 1 && constant_of(g, operands[k])) continue;  // a scalar serves every piece
        if (!same && !broadcasting_op(first.op_type)) return {e, kNoValue};  // Clip bounds, quantization scales
        // One constant that broadcasts along the axis serves every piece; else the pieces' constants
        // are concatenated.
        operands[k] = operand_of_shape(rw, same ? *cs[0] : concat_constants(cs, widths, dims, rank, axis), joined_shape);
      }
      Attributes a;
      a.set("axis", axis);
      operands[slot] = rw.append_node("Concat", variables, a)[0];
      return {e, rw.append_node(first.op_type, operands, first.attrs)[0]};
    });
  });
}

bool slice_elementwise_of_concat(Graph& g) {
  const UseInfo uses(g);
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    const Node& n = rw.visit(i);
    const std::optional<size_t> slot = single_variable_operand(g, n);
    if (!slot || uses.is_graph_output[static_cast<size_t>(n.outputs[0])]) continue;
    const Node* cat = producer_of(g, n.inputs[*slot]);
    if (!cat || !is_op(*cat, "Concat")) continue;
    const int64_t axis = concat_axis(g, *cat);
    const size_t rank = g.type(n.outputs[0]).shape.size();
    // Every reader is a Slice along the Concat's axis selecting exactly one of its inputs.
    const std::vector<NodeId>& readers = uses.consumers[static_cast<size_t>(n.outputs[0])];
    struct Cut {
      ValueId slice, part;  // the Slice's output, the Concat input it selects
      int64_t start;        // where that input starts along the axis
    };
    std::vector<Cut> cuts;
    for (NodeId r : readers) {
      const Node& s = g.nodes[static_cast<size_t>(r)];
      std::optional<SlicePiece> p = s.inputs[0] == n.outputs[0] ? slice_piece(g, s.outputs[0]) : std::nullopt;
      if (!p || p->axis != axis) break;
      const ValueId part = concat_input_spanning(g, *cat, axis, p->start, p->len);
      if (part == kNoValue) break;  // selects no single input
      cuts.push_back({s.outputs[0], rw.resolve(part), p->start});
    }
    if (cuts.empty() || cuts.size() != readers.size()) continue;
    const Node e = n;  // appending nodes invalidates `n`
    for (const auto& [old_value, part, start] : cuts) {
      std::vector<ValueId> operands = e.inputs;
      operands[*slot] = part;
      const Shape& shape = g.type(part).shape;
      for (size_t k = 0; k < operands.size(); ++k) {
        const Tensor* c = k == *slot || operands[k] == kNoValue ? nullptr : constant_through_expand(g, operands[k]);
        if (!c || (c->numel() == 1 && constant_of(g, operands[k]))) continue;  // scalars stay
        Shape lo(rank, 0), extent(rank, 1);
        for (size_t a = 0; a < rank; ++a) extent[a] = aligned_dim(*c, rank, static_cast<int64_t>(a));
        if (extent[static_cast<size_t>(axis)] != 1) {
          lo[static_cast<size_t>(axis)] = start;
          extent[static_cast<size_t>(axis)] = shape[static_cast<size_t>(axis)];
        }
        operands[k] = operand_of_shape(rw, constant_box(*c, rank, lo, extent), shape);
      }
      rw.replace(old_value, rw.append_node(e.op_type, operands, e.attrs)[0]);
    }
  }
  return rw.finish();
}

}  // namespace korch
