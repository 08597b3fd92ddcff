// Broadcast sinking: an elementwise primitive whose (non-scalar) operands are all Expands of
// same-shaped sources computes on the sources and is expanded once afterwards.
//
//   a[C,1] -Expand-> [C,HW] --.
//                              Mul -> [C,HW]    ==>    Mul(a, b) [C,1] -Expand-> [C,HW]
//   b[C,1] -Expand-> [C,HW] --'
//
// Never loses: each Expand it removes had this node as its only consumer, so k Expands and one
// full-size elementwise op become one small op and one Expand. Scalar constants stay operands.
#include "ir/primitive.h"
#include "rewrite/rewrite.h"
#include "rewrite/rewrite_util.h"

namespace korch {

bool sink_broadcasts(Graph& g) {
  const UseInfo uses(g);
  const size_t known_values = g.values.size();
  Rewriter rw(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
    if (primitive_kind(g, n) != PrimitiveKind::kElementwise) continue;
    std::vector<ValueId> sources;
    std::optional<Shape> source_shape;
    bool ok = true;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) { sources.push_back(v); continue; }
      const Value& val = g.value(v);
      if (val.is_constant() && val.type.numel() == 1) { sources.push_back(v); continue; }
      const Node* p = static_cast<size_t>(v) < known_values ? producer_of(g, v) : nullptr;
      if (!p || p->op_type != "Expand" || !has_single_consumer(g, uses, v)) { ok = false; break; }
      const ValueId src = p->inputs[0];
      if (source_shape && g.type(src).shape != *source_shape) { ok = false; break; }
      source_shape = g.type(src).shape;
      sources.push_back(src);
    }
    if (!ok || !source_shape) continue;
    const TensorType out = g.type(n.outputs[0]);
    if (shape_numel(*source_shape) >= out.numel()) continue;
    const std::string op = n.op_type;
    const Attributes attrs = n.attrs;
    const ValueId old_out = n.outputs[0];
    ValueId small = rw.append_node(op, sources, attrs)[0];  // invalidates `n`
    ValueId big = rw.append_node("Expand", {small, rw.int_list(out.shape)})[0];
    if (!rw.replace(old_out, big)) continue;  // e.g. a graph-output rule refused it: the new nodes die
  }
  return rw.finish();
}

}  // namespace korch
