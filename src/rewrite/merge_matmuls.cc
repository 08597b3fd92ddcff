#include "rewrite/merge_matmuls.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

#include "ir/op_registry.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

const Tensor* weights(const Graph& g, const Node& n) { return n.inputs.size() > 1 ? constant_of(g, n.inputs[1]) : nullptr; }

bool is_mergeable_matmul(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op_type != "MatMul" || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
  if (n.inputs[0] == kNoValue || constant_of(g, n.inputs[0])) return false;  // an all-constant MatMul folds
  const Tensor* w = weights(g, n);
  return w && w->rank() >= 2 && w->numel() > 0;
}

bool is_mergeable_conv(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op_type != "Conv" || n.inputs.size() < 2 || n.outputs.size() != 1) return false;
  if (n.inputs[0] == kNoValue || constant_of(g, n.inputs[0])) return false;
  if (n.attrs.get_int("group", 1) != 1) return false;  // concatenated output channels break the groups
  if (channels_last_layout(n.attrs)) return false;  // its outputs split on the last axis, not 1
  const Tensor* w = weights(g, n);
  if (!w || w->rank() < 3 || w->numel() == 0) return false;
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Tensor* b = constant_of(g, n.inputs[2]);
    if (!b || b->dtype() != w->dtype()) return false;
  }
  return true;
}

// Nodes that can merge share: op, left operand, weight dtype, weight dims except the concatenated
// one (MatMul: the last; Conv: the first), and for Conv the attributes.
bool compatible(const Graph& g, const Node& a, const Node& b) {
  if (a.op_type != b.op_type || a.inputs[0] != b.inputs[0]) return false;
  const Tensor& wa = *weights(g, a);
  const Tensor& wb = *weights(g, b);
  if (wa.dtype() != wb.dtype() || wa.rank() != wb.rank()) return false;
  const int64_t cat = a.op_type == "MatMul" ? wa.rank() - 1 : 0;
  for (int64_t d = 0; d < wa.rank(); ++d)
    if (d != cat && wa.dim(d) != wb.dim(d)) return false;
  if (a.op_type == "Conv" && !(a.attrs == b.attrs)) return false;
  return g.type(a.outputs[0]).dtype == g.type(b.outputs[0]).dtype;
}

// Concatenation of `parts` along `axis` (same dtype, equal other dims).
Tensor concat(const std::vector<const Tensor*>& parts, int64_t axis) {
  Shape shape = parts[0]->shape();
  shape[static_cast<size_t>(axis)] = 0;
  for (const Tensor* t : parts) shape[static_cast<size_t>(axis)] += t->dim(axis);
  Tensor out(parts[0]->dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < static_cast<int64_t>(shape.size()); ++d) inner *= shape[static_cast<size_t>(d)];
  const size_t es = static_cast<size_t>(dtype_size(out.dtype()));
  std::byte* dst = out.raw();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor* t : parts) {
      const size_t chunk = static_cast<size_t>(t->dim(axis) * inner) * es;
      std::memcpy(dst, t->raw() + static_cast<size_t>(o) * chunk, chunk);
      dst += chunk;
    }
  return out;
}

}  // namespace

std::vector<MergeSite> find_matmul_merges(const Graph& g) {
  std::vector<MergeSite> sites;
  std::vector<char> taken(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& a = g.nodes[i];
    if (taken[i] || !(is_mergeable_matmul(g, a) || is_mergeable_conv(g, a))) continue;
    MergeSite site{{a.name}};
    for (size_t j = i + 1; j < g.nodes.size(); ++j) {
      const Node& b = g.nodes[j];
      if (taken[j] || b.op_type != a.op_type || !(is_mergeable_matmul(g, b) || is_mergeable_conv(g, b))) continue;
      if (!compatible(g, a, b)) continue;
      taken[j] = 1;
      site.matmuls.push_back(b.name);
    }
    if (site.matmuls.size() >= 2) sites.push_back(std::move(site));
  }
  return sites;
}

void apply_matmul_merge(Graph& g, const MergeSite& site) {
  if (site.matmuls.size() < 2) fail("apply_matmul_merge: a site needs at least two nodes");
  std::vector<NodeId> ids;
  for (const std::string& name : site.matmuls) {
    auto it = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.name == name; });
    if (it == g.nodes.end()) fail("apply_matmul_merge: no node named '{}'", name);
    if (std::find(ids.begin(), ids.end(), static_cast<NodeId>(it - g.nodes.begin())) != ids.end())
      fail("apply_matmul_merge: node '{}' listed twice", name);
    ids.push_back(static_cast<NodeId>(it - g.nodes.begin()));
  }
  const Node& first = g.nodes[static_cast<size_t>(ids[0])];
  const bool conv = first.op_type == "Conv";
  for (NodeId id : ids) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    if (!(conv ? is_mergeable_conv(g, n) : is_mergeable_matmul(g, n)))
      fail("apply_matmul_merge: '{}' is not a MatMul/Conv with constant weights", n.name);
    if (!compatible(g, first, n)) fail("apply_matmul_merge: '{}' cannot merge with '{}'", n.name, first.name);
  }

  // Merged weights (and Conv biases), and the split sizes.
  std::vector<const Tensor*> ws;
  std::vector<int64_t> sizes;
  for (NodeId id : ids) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    ws.push_back(weights(g, n));
    sizes.push_back(conv ? ws.back()->dim(0) : ws.back()->dim(ws.back()->rank() - 1));
  }
  const int64_t wcat = conv ? 0 : ws[0]->rank() - 1;
  Tensor w = concat(ws, wcat);
  std::optional<Tensor> bias;
  if (conv) {
    bool any_bias = false;
    for (NodeId id : ids) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      any_bias |= n.inputs.size() > 2 && n.inputs[2] != kNoValue;
    }
    if (any_bias) {
      std::vector<Tensor> zeros;  // owned stand-ins for missing biases
      zeros.reserve(ids.size());
      std::vector<const Tensor*> bs;
      for (size_t k = 0; k < ids.size(); ++k) {
        const Node& n = g.nodes[static_cast<size_t>(ids[k])];
        if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
          bs.push_back(constant_of(g, n.inputs[2]));
        } else {
          zeros.emplace_back(w.dtype(), Shape{sizes[k]});
          bs.push_back(&zeros.back());
        }
      }
      bias = concat(bs, 0);
    }
  }

  Rewriter rw(g);
  const ValueId x = g.nodes[static_cast<size_t>(ids[0])].inputs[0];
  const Attributes attrs = g.nodes[static_cast<size_t>(ids[0])].attrs;
  const std::string base = g.nodes[static_cast<size_t>(ids[0])].name + "/merged";
  std::vector<ValueId> ins = {x, rw.add_constant(base + "_W", std::move(w))};
  if (bias) ins.push_back(rw.add_constant(base + "_B", std::move(*bias)));
  const ValueId y = rw.append_node(conv ? "Conv" : "MatMul", ins, conv ? attrs : Attributes{})[0];
  const int64_t axis = conv ? 1 : g.type(y).rank() - 1;
  Attributes sa;
  sa.set("axis", axis);
  std::vector<ValueId> split_ins = {y};
  if (g.opset >= 13) split_ins.push_back(rw.int_list(sizes));
  else sa.set("split", sizes);
  const std::vector<ValueId> parts =
      rw.append_node("Split", split_ins, std::move(sa), static_cast<int>(ids.size()));
  for (size_t k = 0; k < ids.size(); ++k) {
    const ValueId old = g.nodes[static_cast<size_t>(ids[k])].outputs[0];
    KORCH_CHECK(rw.replace(old, parts[k]), "apply_matmul_merge: cannot rewire '{}'", g.value(old).name);
  }
  rw.finish();
  g.remove_dead_code();
}

}  // namespace korch
