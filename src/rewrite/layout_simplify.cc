// Layout simplification (see rewrite.h). Every rule removes a layout primitive or merges two into
// one, so it never loses. Worked examples (shapes in brackets):
//
//   normalize_reshapes   Squeeze(x[1,3,1,4], axes=[0,2])         -> Reshape(x, [3,4])
//                        Unsqueeze / Flatten likewise; Transpose(x[2,1,3], perm=[1,0,2]) only moves
//                        a size-1 dim, so it is Reshape(x, [1,2,3]). Afterwards chains of view
//                        changes are Reshape chains, which merge_reshapes collapses.
//   merge_transposes     Transpose(Transpose(x, [0,2,3,1]), [0,3,1,2]) -> x
//                        Transpose(Transpose(x, [1,0,2]), [0,2,1])    -> Transpose(x, [1,2,0])
//   merge_reshapes       Reshape(Reshape(x[2,3,4], [6,4]), [24])     -> Reshape(x, [24])
//   remove_noop_layout   Reshape/Expand/Tile/Squeeze/Unsqueeze/Flatten whose output type is its
//                        input's, Transpose with the identity perm, Slice keeping the shape with
//                        positive steps, Pad with all-zero pads, single-input Concat -> their input
//   slice_of_concat      Slice(Concat(a[2,3], b[2,5], axis=1), starts=[3], ends=[8], axes=[1]) -> b
#include <algorithm>
#include <numeric>

#include "rewrite/rewrite.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

bool is_op(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

std::vector<int64_t> perm_of(const Node& n, int64_t rank) {
  std::vector<int64_t> perm = n.attrs.get_ints("perm");
  if (perm.empty()) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  for (int64_t& p : perm)
    if (p < 0) p += rank;
  return perm;
}

bool is_identity_perm(const std::vector<int64_t>& perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != static_cast<int64_t>(i)) return false;
  return true;
}

// Per-axis start and step of a Slice with constant parameters and positive steps (the output
// shape comes from the node's output type). nullopt when a parameter is not constant or a step
// is not positive.
struct SliceSpec {
  std::vector<int64_t> start, step;
};
std::optional<SliceSpec> slice_spec(const Graph& g, const Node& n) {
  const Shape& in = g.type(n.inputs[0]).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (g.opset >= 10) {
    auto s = constant_ints(g, n.inputs[1]);
    auto e = constant_ints(g, n.inputs[2]);
    if (!s || !e) return std::nullopt;
    starts = *s;
    ends = *e;
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) {
      auto a = constant_ints(g, n.inputs[3]);
      if (!a) return std::nullopt;
      axes = *a;
    }
    if (n.inputs.size() > 4 && n.inputs[4] != kNoValue) {
      auto st = constant_ints(g, n.inputs[4]);
      if (!st) return std::nullopt;
      steps = *st;
    }
  } else {
    starts = n.attrs.get_ints("starts");
    ends = n.attrs.get_ints("ends");
    axes = n.attrs.get_ints("axes");
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
  SliceSpec spec{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1)};
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] <= 0) return std::nullopt;
    const int64_t dim = in[static_cast<size_t>(a)];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    spec.start[static_cast<size_t>(a)] = std::clamp<int64_t>(s, 0, dim);
    spec.step[static_cast<size_t>(a)] = steps[i];
  }
  return spec;
}

bool pads_all_zero(const Graph& g, const Node& n) {
  std::vector<int64_t> pads;
  if (g.opset >= 11) {
    auto p = n.inputs.size() > 1 ? constant_ints(g, n.inputs[1]) : std::nullopt;
    if (!p) return false;
    pads = *p;
  } else {
    pads = n.attrs.get_ints("pads");
  }
  for (int64_t p : pads)
    if (p != 0) return false;
  return true;
}

}  // namespace

bool normalize_reshapes(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (n.outputs.empty() || n.outputs[0] == kNoValue || n.inputs.empty() || n.inputs[0] == kNoValue) continue;
    if (is_op(n, "Squeeze") || is_op(n, "Unsqueeze") || is_op(n, "Flatten")) {
      rw.make_reshape(n, n.inputs[0]);
    } else if (is_op(n, "Transpose")) {
      const Shape& in = g.type(n.inputs[0]).shape;
      std::vector<int64_t> perm = perm_of(n, static_cast<int64_t>(in.size()));
      // Only size-1 dims move when the other dims keep their order: a pure view change.
      int64_t last = -1;
      bool keeps_order = true;
      for (int64_t p : perm) {
        if (in[static_cast<size_t>(p)] == 1) continue;
        keeps_order &= p > last;
        last = p;
      }
      if (keeps_order) rw.make_reshape(n, n.inputs[0]);
    }
  }
  return rw.finish();
}

bool merge_transposes(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!is_op(n, "Transpose") || n.outputs[0] == kNoValue) continue;
    const Node* p = producer_of(g, n.inputs[0]);
    if (!p || !is_op(*p, "Transpose")) continue;
    const ValueId x = p->inputs[0];
    const int64_t rank = g.type(x).rank();
    std::vector<int64_t> p1 = perm_of(*p, rank), p2 = perm_of(n, rank), comp(static_cast<size_t>(rank));
    for (size_t k = 0; k < comp.size(); ++k) comp[k] = p1[static_cast<size_t>(p2[k])];
    if (is_identity_perm(comp) && rw.replace(n.outputs[0], x)) continue;
    n.inputs[0] = x;
    n.attrs.set("perm", comp);
    rw.mark_changed();
  }
  return rw.finish();
}

bool merge_reshapes(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!is_op(n, "Reshape") || n.outputs[0] == kNoValue) continue;
    const Node* p = producer_of(g, n.inputs[0]);
    if (!p || !is_op(*p, "Reshape")) continue;
    const ValueId x = p->inputs[0];
    if (g.type(x) == g.type(n.outputs[0]) && rw.replace(n.outputs[0], x)) continue;
    rw.make_reshape(n, x);  // explicit target shape: 0 / -1 in the old spec referred to the old input
  }
  return rw.finish();
}

bool remove_noop_layout(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] == kNoValue || n.inputs.empty() ||
        n.inputs[0] == kNoValue)
      continue;
    const ValueId x = n.inputs[0], y = n.outputs[0];
    if (g.type(x) != g.type(y)) continue;
    const std::string& op = n.op_type;
    bool noop = false;
    if (op == "Reshape" || op == "Expand" || op == "Tile" || op == "Squeeze" || op == "Unsqueeze" || op == "Flatten") {
      noop = true;
    } else if (op == "Transpose") {
      noop = is_identity_perm(perm_of(n, g.type(x).rank()));
    } else if (op == "Slice") {
      noop = slice_spec(g, n).has_value();  // same shape with positive steps: everything, in order
    } else if (op == "Concat") {
      noop = n.inputs.size() == 1;
    } else if (op == "Pad") {
      noop = pads_all_zero(g, n);
    }
    if (noop) rw.replace(y, x);
  }
  return rw.finish();
}

bool slice_of_concat(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!is_op(n, "Slice") || n.outputs[0] == kNoValue) continue;
    const Node* c = producer_of(g, n.inputs[0]);
    if (!c || !is_op(*c, "Concat")) continue;
    std::optional<SliceSpec> spec = slice_spec(g, n);
    if (!spec) continue;
    const Shape& in = g.type(n.inputs[0]).shape;
    const Shape& out = g.type(n.outputs[0]).shape;
    const int64_t rank = static_cast<int64_t>(in.size());
    int64_t axis = c->attrs.get_int("axis", 0);
    if (axis < 0) axis += rank;
    // Every other axis is kept whole; the concat axis takes one contiguous run.
    bool whole = true;
    for (int64_t a = 0; a < rank; ++a)
      if (a != axis) whole &= out[static_cast<size_t>(a)] == in[static_cast<size_t>(a)];
    const int64_t start = spec->start[static_cast<size_t>(axis)], len = out[static_cast<size_t>(axis)];
    if (!whole || (spec->step[static_cast<size_t>(axis)] != 1 && len > 1)) continue;
    int64_t offset = 0;
    for (ValueId part : c->inputs) {
      const int64_t size = g.type(part).shape[static_cast<size_t>(axis)];
      if (offset == start && size == len && size > 0) {
        rw.replace(n.outputs[0], part);
        break;
      }
      offset += size;
    }
  }
  return rw.finish();
}

}  // namespace korch
