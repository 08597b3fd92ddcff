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
//   merge_view_chains    a chain of Transposes and Reshapes whose composition keeps every element
//                        in memory order is one Reshape: tokens to channels-last and back,
//                        Transpose(Reshape(Transpose(x[1,16384,128], [0,2,1]), [1,128,128,128]),
//                        [0,2,3,1]) -> Reshape(x, [1,128,128,128])
//   remove_noop_layout   Reshape/Expand/Tile/Squeeze/Unsqueeze/Flatten whose output type is its
//                        input's, Transpose with the identity perm, Slice keeping the shape with
//                        positive steps, Pad with all-zero pads, single-input Concat -> their input
//   slice_of_concat      Slice(Concat(a[2,3], b[2,5], axis=1), starts=[3], ends=[8], axes=[1]) -> b
#include <algorithm>
#include <deque>
#include <optional>

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


// A chain of Transposes and Reshapes followed without enumerating elements: each dim of a value
// in the chain is a run of "factors" of the chain's input (outer to inner). A factor is one input
// dim, or a part of one that a Reshape split (key extended by 0 for the outer part, 1 for the
// inner), so keys order the factors as the input's memory does. The chain is a pure reshape when
// the output's factors, outer to inner, are in key order.
struct Factor {
  std::vector<int> key;
  int64_t size = 1;
};
using DimFactors = std::vector<std::vector<Factor>>;

std::optional<DimFactors> reshape_factors(const DimFactors& dims, const Shape& to) {
  std::deque<Factor> seq;
  for (const auto& d : dims) seq.insert(seq.end(), d.begin(), d.end());
  DimFactors out(to.size());
  for (size_t d = 0; d < to.size(); ++d) {
    int64_t need = to[d];
    while (need > 1) {
      if (seq.empty()) return std::nullopt;
      Factor f = seq.front();
      seq.pop_front();
      if (need % f.size == 0) {
        need /= f.size;
        out[d].push_back(std::move(f));
      } else if (f.size % need == 0) {  // the dim takes the outer part of f
        Factor outer{f.key, need}, inner{f.key, f.size / need};
        outer.key.push_back(0);
        inner.key.push_back(1);
        out[d].push_back(std::move(outer));
        seq.push_front(std::move(inner));
        need = 1;
      } else {
        return std::nullopt;  // parts of two factors: not followed (treated as a real move)
      }
    }
  }
  if (!seq.empty()) return std::nullopt;
  return out;
}

bool static_positive(const Shape& s) {
  for (int64_t d : s)
    if (d < 1) return false;
  return true;
}

// chain: the last node first; chain.back() reads the chain's input.
bool chain_is_pure_reshape(const Graph& g, const std::vector<const Node*>& chain) {
  const Shape& root = g.type(chain.back()->inputs[0]).shape;
  if (!static_positive(root)) return false;
  DimFactors dims(root.size());
  for (size_t i = 0; i < root.size(); ++i)
    if (root[i] > 1) dims[i].push_back({{static_cast<int>(i)}, root[i]});
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const Node& n = **it;
    const Shape& out = g.type(n.outputs[0]).shape;
    if (!static_positive(out)) return false;
    if (is_op(n, "Transpose")) {
      const std::vector<int64_t> perm = perm_of(n, static_cast<int64_t>(dims.size()));
      if (perm.size() != dims.size()) return false;
      DimFactors next;
      for (int64_t p : perm) {
        if (p < 0 || p >= static_cast<int64_t>(dims.size())) return false;
        next.push_back(dims[static_cast<size_t>(p)]);
      }
      dims = std::move(next);
    } else {
      std::optional<DimFactors> next = reshape_factors(dims, out);
      if (!next) return false;
      dims = std::move(*next);
    }
  }
  const std::vector<int>* last = nullptr;
  for (const auto& d : dims)
    for (const Factor& f : d) {
      if (last != nullptr && !(*last < f.key)) return false;
      last = &f.key;
    }
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

bool merge_view_chains(Graph& g) {
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!(is_op(n, "Transpose") || is_op(n, "Reshape")) || n.outputs[0] == kNoValue || n.inputs.empty() ||
        n.inputs[0] == kNoValue)
      continue;
    // Back through at most 8 layout producers; the longest chain that is a pure reshape wins.
    // Chains without a Transpose are merge_reshapes' (and a lone Transpose normalize_reshapes').
    std::vector<const Node*> chain{&n};
    bool has_transpose = is_op(n, "Transpose");
    ValueId root = kNoValue;
    for (int depth = 0; depth < 8; ++depth) {
      const Node* p = producer_of(g, chain.back()->inputs[0]);
      if (p == nullptr || !(is_op(*p, "Transpose") || is_op(*p, "Reshape")) || p->inputs.empty() ||
          p->inputs[0] == kNoValue)
        break;
      chain.push_back(p);
      has_transpose |= is_op(*p, "Transpose");
      if (has_transpose && chain_is_pure_reshape(g, chain)) root = p->inputs[0];
    }
    if (root == kNoValue) continue;
    if (g.type(root) == g.type(n.outputs[0]) && rw.replace(n.outputs[0], root)) continue;
    rw.make_reshape(n, root);
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
    // Every other axis is kept whole; the concat axis takes one contiguous run.
    const std::optional<SlicePiece> piece = slice_piece(g, n.outputs[0]);
    if (!piece) continue;
    int64_t axis = c->attrs.get_int("axis", 0);
    if (axis < 0) axis += static_cast<int64_t>(g.type(n.inputs[0]).shape.size());
    if (piece->axis != axis) continue;
    const ValueId part = concat_input_spanning(g, *c, axis, piece->start, piece->len);
    if (part != kNoValue) rw.replace(n.outputs[0], part);
  }
  return rw.finish();
}

}  // namespace korch
