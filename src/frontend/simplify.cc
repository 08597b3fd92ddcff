#include "frontend/simplify.h"

#include <algorithm>

namespace korch {

namespace {

// True for a node that forwards input 0 unchanged to output 0 at inference.
bool is_passthrough(const Graph& g, const Node& n) {
  if (n.op_type == "Identity") return true;
  if (n.op_type != "Dropout") return false;
  // training_mode (opset 12+) is input 2; a constant false or absence means inference.
  if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) {
    const Value& tm = g.value(n.inputs[2]);
    if (!tm.is_constant() || tm.constant->get_as_int(0) != 0) return false;
  }
  if (n.attrs.get_int("is_test", 1) == 0 && g.opset < 7) return false;
  bool mask_used = n.outputs.size() > 1 && n.outputs[1] != kNoValue;
  return !mask_used;
}

}  // namespace

void simplify_graph(Graph& g) {
  // Mask outputs of Dropout that nothing uses are dropped first so the node qualifies.
  std::vector<int> uses = g.use_counts();
  for (Node& n : g.nodes)
    if (n.op_type == "Dropout" && n.outputs.size() > 1 && n.outputs[1] != kNoValue && uses[static_cast<size_t>(n.outputs[1])] == 0)
      n.outputs[1] = kNoValue;

  std::vector<ValueId> replace(g.values.size());
  for (size_t i = 0; i < replace.size(); ++i) replace[i] = static_cast<ValueId>(i);
  auto resolve = [&](ValueId v) {
    while (v != kNoValue && replace[static_cast<size_t>(v)] != v) v = replace[static_cast<size_t>(v)];
    return v;
  };
  std::vector<char> is_output(g.values.size(), 0);
  for (ValueId v : g.outputs) is_output[static_cast<size_t>(v)] = 1;

  std::vector<Node> kept;
  for (Node& n : g.nodes) {
    for (ValueId& v : n.inputs) v = resolve(v);
    if (is_passthrough(g, n) && n.inputs[0] != kNoValue) {
      ValueId in = n.inputs[0], out = n.outputs[0];
      if (!is_output[static_cast<size_t>(out)]) {
        replace[static_cast<size_t>(out)] = in;
        continue;
      }
      // The output is a graph output: keep its name by renaming the producer's value instead,
      // unless the input is a graph input/constant/another output (then keep the node).
      Value& iv = g.value(in);
      bool is_graph_input = std::find(g.inputs.begin(), g.inputs.end(), in) != g.inputs.end();
      if (!is_graph_input && !iv.is_constant() && !is_output[static_cast<size_t>(in)]) {
        std::string out_name = g.value(out).name;
        g.value(out).name = "__dead_" + out_name;
        iv.name = out_name;
        replace[static_cast<size_t>(out)] = in;
        for (ValueId& o : g.outputs) if (o == out) o = in;
        is_output[static_cast<size_t>(in)] = 1;
        continue;
      }
    }
    kept.push_back(std::move(n));
  }
  g.nodes = std::move(kept);
  for (ValueId& v : g.outputs) v = resolve(v);
  for (Value& v : g.values) v.producer = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId o : g.nodes[i].outputs)
      if (o != kNoValue) g.value(o).producer = static_cast<NodeId>(i);
  g.remove_dead_code();
}

}  // namespace korch
