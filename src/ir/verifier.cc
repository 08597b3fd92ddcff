// verify_graph(): see graph.h.
#include <set>

#include "ir/graph.h"
#include "ir/op_registry.h"

namespace korch {

void verify_graph(const Graph& g, bool registry_check) {
  const int nv = static_cast<int>(g.values.size());
  auto check_id = [&](ValueId v, const std::string& where) {
    if (v < 0 || v >= nv) fail("graph '{}': {} refers to value id {} (graph has {})", g.name, where, v, nv);
  };
  std::set<std::string> names;
  for (const Value& v : g.values) {
    if (!names.insert(v.name).second) fail("graph '{}': two values are named '{}'", g.name, v.name);
    if (v.type.dtype == DType::kUndefined) fail("graph '{}': value '{}' has no dtype", g.name, v.name);
    for (int64_t d : v.type.shape)
      if (d < 0) fail("graph '{}': value '{}' has negative dimension in {}", g.name, v.name, shape_str(v.type.shape));
    if (v.constant && v.constant->type() != v.type)
      fail("graph '{}': constant '{}' holds {} but is declared {}", g.name, v.name, type_str(v.constant->type()),
           type_str(v.type));
  }
  std::vector<char> available(g.values.size(), 0);
  std::vector<int> produced(g.values.size(), 0);
  for (ValueId v : g.inputs) {
    check_id(v, "graph input");
    if (g.value(v).is_constant()) fail("graph '{}': input '{}' is a constant", g.name, g.value(v).name);
    available[static_cast<size_t>(v)] = 1;
    produced[static_cast<size_t>(v)]++;
  }
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].is_constant()) { available[i] = 1; produced[i]++; }

  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& n = g.nodes[ni];
    const std::string label = node_label(n, g.opset);
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      check_id(v, label + " input");
      if (!available[static_cast<size_t>(v)])
        fail("graph '{}': {} reads '{}' before it is produced (not topologically ordered, or a cycle)", g.name,
             label, g.value(v).name);
    }
    for (ValueId v : n.outputs) {
      if (v == kNoValue) continue;
      check_id(v, label + " output");
      if (produced[static_cast<size_t>(v)]++)
        fail("graph '{}': value '{}' is produced more than once", g.name, g.value(v).name);
      if (g.value(v).producer != static_cast<NodeId>(ni))
        fail("graph '{}': value '{}' records the wrong producer", g.name, g.value(v).name);
      available[static_cast<size_t>(v)] = 1;
    }
    if (!registry_check) continue;
    std::vector<TensorType> inferred;
    try {
      inferred = infer_node(g, n);
    } catch (const Error& e) {
      rethrow_with_context(e, "graph '" + g.name + "': " + label);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (n.outputs[k] == kNoValue) continue;
      if (inferred[k] != g.type(n.outputs[k]))
        fail("graph '{}': {} output '{}' is declared {} but infers to {}", g.name, label, g.value(n.outputs[k]).name,
             type_str(g.type(n.outputs[k])), type_str(inferred[k]));
    }
  }
  for (ValueId v : g.outputs) {
    check_id(v, "graph output");
    if (!available[static_cast<size_t>(v)]) fail("graph '{}': output '{}' is never produced", g.name, g.value(v).name);
  }
}

}  // namespace korch
