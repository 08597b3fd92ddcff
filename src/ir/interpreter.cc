#include "ir/interpreter.h"

#include "ir/op_registry.h"

namespace korch {

void check_input(const Graph& g, size_t index, const Tensor& t) {
  KORCH_CHECK(index < g.inputs.size());
  const Value& v = g.value(g.inputs[index]);
  if (t.dtype() != v.type.dtype || t.shape() != v.type.shape)
    fail("input '{}' expects {} but got {}", v.name, type_str(v.type), type_str(t.type()));
}

std::vector<Tensor> interpret(const Graph& g, const std::vector<Tensor>& inputs, const InterpreterOptions& options) {
  if (inputs.size() != g.inputs.size())
    fail("graph '{}' takes {} inputs, got {}", g.name, g.inputs.size(), inputs.size());
  std::vector<Tensor> env(g.values.size());
  std::vector<int> remaining = g.use_counts();
  for (size_t i = 0; i < g.values.size(); ++i)
    if (g.values[i].is_constant()) env[i] = *g.values[i].constant;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_input(g, i, inputs[i]);
    env[static_cast<size_t>(g.inputs[i])] = inputs[i];
  }
  for (size_t ni = 0; ni < g.nodes.size(); ++ni) {
    const Node& node = g.nodes[ni];
    std::vector<const Tensor*> args;
    args.reserve(node.inputs.size());
    for (ValueId v : node.inputs) {
      if (v == kNoValue) { args.push_back(nullptr); continue; }
      const Tensor& t = env[static_cast<size_t>(v)];
      KORCH_CHECK(t.defined(), "value '{}' used before it is computed", g.value(v).name);
      args.push_back(&t);
    }
    std::vector<Tensor> outs;
    try {
      outs = eval_node(node, g.opset, args);
    } catch (const Error& e) {
      rethrow_with_context(e, node_label(node, g.opset));
    }
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (node.outputs[k] != kNoValue) env[static_cast<size_t>(node.outputs[k])] = std::move(outs[k]);
    if (options.on_node) {
      std::vector<Tensor> view;
      for (ValueId o : node.outputs) view.push_back(o == kNoValue ? Tensor() : env[static_cast<size_t>(o)]);
      options.on_node(static_cast<NodeId>(ni), view);
    }
    // Release inputs whose last use this was (constants stay: they are shared anyway).
    for (ValueId v : node.inputs) {
      if (v == kNoValue) continue;
      if (--remaining[static_cast<size_t>(v)] == 0 && !g.value(v).is_constant()) env[static_cast<size_t>(v)] = Tensor();
    }
  }
  std::vector<Tensor> out;
  for (ValueId v : g.outputs) {
    KORCH_CHECK(env[static_cast<size_t>(v)].defined(), "output '{}' not computed", g.value(v).name);
    out.push_back(env[static_cast<size_t>(v)]);
  }
  return out;
}

}  // namespace korch
