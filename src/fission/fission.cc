#include "fission/fission.h"

#include "ir/op_registry.h"
#include "ir/primitive.h"

namespace korch {

const FissionRegistry& FissionRegistry::global() {
  static FissionRegistry* r = [] {
    auto* reg = new FissionRegistry();
    register_elementwise_fission(*reg);
    register_norm_fission(*reg);
    register_reduce_fission(*reg);
    register_linear_fission(*reg);
    register_layout_fission(*reg);
    register_quant_fission(*reg);
    return reg;
  }();
  return *r;
}

void FissionRegistry::add(const std::string& op_type, FissionRule rule) {
  KORCH_CHECK(!rules_.count(op_type), "fission rule for {} registered twice", op_type);
  rules_[op_type] = std::move(rule);
}

const FissionRule* FissionRegistry::find(const std::string& op_type) const {
  auto it = rules_.find(op_type);
  return it == rules_.end() ? nullptr : &it->second;
}

std::vector<std::string> FissionRegistry::op_types() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : rules_) out.push_back(k);
  return out;
}

Graph fission(const Graph& in, FissionReport* report) {
  Graph out;
  out.name = in.name;
  out.opset = in.opset;
  std::vector<ValueId> map(in.values.size(), kNoValue);
  for (ValueId v : in.inputs) map[static_cast<size_t>(v)] = out.add_input(in.value(v).name, in.type(v));
  for (size_t i = 0; i < in.values.size(); ++i)
    if (in.values[i].is_constant()) {
      map[i] = out.add_value(in.values[i].name, in.values[i].type);
      out.value(map[i]).constant = in.values[i].constant;
    }
  FissionReport rep;
  const FissionRegistry& rules = FissionRegistry::global();
  for (const Node& node : in.nodes) {
    ++rep.operators_in;
    auto mapped = [&](ValueId v) { return v == kNoValue ? kNoValue : map[static_cast<size_t>(v)]; };
    std::vector<ValueId> ins;
    for (ValueId v : node.inputs) ins.push_back(mapped(v));
    const FissionRule* rule = rules.find(node.op_type);
    bool primitive = primitive_kind(in, node) != PrimitiveKind::kOperator;
    FissionBuilder b(out, node.name);
    std::optional<std::vector<ValueId>> qdq;
    try {
      qdq = integer_linear_from_qdq(b, in, node, mapped);
    } catch (const Error& e) {
      rethrow_with_context(e, "fission of " + node_label(node, in.opset));
    }
    if (!qdq && (!rule || primitive)) {
      // A primitive (or an operator without a rule, kept whole as opaque): copied as is.
      if (!primitive) rep.kept_opaque[node.op_type]++;
      Node copy = node;
      copy.inputs = ins;
      for (ValueId& o : copy.outputs)
        if (o != kNoValue) {
          ValueId old = o;
          o = out.add_value(in.value(old).name, in.type(old));
          map[static_cast<size_t>(old)] = o;
        }
      out.add_node(std::move(copy));
      continue;
    }
    std::vector<ValueId> outs;
    try {
      outs = qdq ? std::move(*qdq) : (*rule)(b, node, ins);
    } catch (const Error& e) {
      rethrow_with_context(e, "fission of " + node_label(node, in.opset));
    }
    KORCH_CHECK(outs.size() == node.outputs.size(), "fission rule for {} returned {} outputs for {}", node.op_type,
                outs.size(), node.outputs.size());
    for (size_t k = 0; k < outs.size(); ++k) {
      ValueId old = node.outputs[k];
      if (old == kNoValue) continue;
      KORCH_CHECK(outs[k] != kNoValue, "fission rule for {} did not produce output {}", node.op_type, k);
      KORCH_CHECK(out.type(outs[k]) == in.type(old), "fission of {}: output {} is {} but the operator gives {}",
                  node.op_type, k, type_str(out.type(outs[k])), type_str(in.type(old)));
      map[static_cast<size_t>(old)] = outs[k];
    }
  }
  // Graph outputs keep their names: rename the producing value, or add an Identity (a layout
  // primitive) when that value is an input, a constant, or already another output.
  std::vector<char> renamed(out.values.size(), 0);
  for (ValueId v : in.inputs) renamed[static_cast<size_t>(map[static_cast<size_t>(v)])] = 1;
  for (ValueId old : in.outputs) {
    ValueId nv = map[static_cast<size_t>(old)];
    const std::string& name = in.value(old).name;
    if (out.value(nv).name == name) {
      out.outputs.push_back(nv);
      renamed[static_cast<size_t>(nv)] = 1;
      continue;
    }
    if (!renamed[static_cast<size_t>(nv)] && !out.value(nv).is_constant() && out.find_value(name) < 0) {
      out.value(nv).name = name;
      renamed[static_cast<size_t>(nv)] = 1;
      out.outputs.push_back(nv);
      continue;
    }
    Node id;
    id.op_type = "Identity";
    id.name = name + "/output";
    id.inputs = {nv};
    ValueId o = out.add_value(out.find_value(name) < 0 ? name : name + "/output", out.type(nv));
    id.outputs = {o};
    out.add_node(std::move(id));
    out.outputs.push_back(o);
  }
  out.remove_dead_code();
  rep.primitives_out = static_cast<int>(out.nodes.size());
  if (report) *report = rep;
  return out;
}

}  // namespace korch
