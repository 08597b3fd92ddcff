#include "ir/op_registry.h"

#include <mutex>

namespace korch {

const TensorType& OpInferContext::input(int i) const {
  if (!has_input(i)) fail("input {} is required but missing", i);
  return *input_types[static_cast<size_t>(i)];
}

const Tensor& OpInferContext::require_constant(int i, const char* what) const {
  const Tensor* t = constant(i);
  if (!t) fail_unsupported("{} (input {}) must be a compile-time constant; dynamic shapes are not supported", what, i);
  return *t;
}

const Tensor& OpEvalContext::input(int i) const {
  if (!has_input(i)) fail("input {} is required but missing", i);
  return *inputs[static_cast<size_t>(i)];
}

const OpRegistry& OpRegistry::global() {
  static OpRegistry* r = [] {
    auto* reg = new OpRegistry();
    register_all_ops(*reg);
    return reg;
  }();
  return *r;
}

void OpRegistry::add(OpDef def) {
  KORCH_CHECK(def.infer && def.eval, "op {} registered without infer/eval", def.op_type);
  KORCH_CHECK(!ops_.count(def.op_type), "op {} registered twice", def.op_type);
  std::string key = def.op_type;
  ops_.emplace(std::move(key), std::move(def));
}

const OpDef* OpRegistry::find(const std::string& op_type) const {
  auto it = ops_.find(op_type);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  const OpDef* def = find(op_type);
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  return def && def->domain == d ? def : nullptr;
}

std::vector<const OpDef*> OpRegistry::all() const {
  std::vector<const OpDef*> out;
  for (const auto& [k, v] : ops_) out.push_back(&v);
  return out;
}

std::string node_label(const Node& node, int opset) {
  return fmt::format("node '{}' ({}, opset {})", node.name, node.op_type, opset);
}

const OpDef& lookup_op(const Node& node, int opset) {
  const bool default_domain = node.domain.empty() || node.domain == "ai.onnx";
  const OpDef* def = OpRegistry::global().find(node.domain, node.op_type);
  if (!def && !default_domain)
    fail_unsupported("unsupported operator '{}' in domain '{}'", node.op_type, node.domain);
  if (!def) fail_unsupported("unsupported operator '{}' (opset {})", node.op_type, opset);
  if (default_domain && (opset < def->min_opset || opset > def->max_opset))
    fail_unsupported("operator '{}' is supported for opsets {}..{}, the model uses opset {}", node.op_type,
                     def->min_opset, def->max_opset, opset);
  return *def;
}

std::vector<TensorType> infer_node(const Node& node, int opset, const std::vector<const TensorType*>& types,
                                   const std::vector<const Tensor*>& constants) {
  const OpDef& def = lookup_op(node, opset);
  OpInferContext ctx{node, opset, types, constants};
  std::vector<TensorType> out = def.infer(ctx);
  KORCH_CHECK(out.size() >= node.outputs.size(), "{}: infer returned {} types for {} outputs", node.op_type,
              out.size(), node.outputs.size());
  out.resize(node.outputs.size());
  return out;
}

std::vector<TensorType> infer_node(const Graph& g, const Node& node) {
  std::vector<const TensorType*> types;
  std::vector<const Tensor*> consts;
  for (ValueId v : node.inputs) {
    types.push_back(v == kNoValue ? nullptr : &g.type(v));
    consts.push_back(v == kNoValue ? nullptr : g.value(v).constant.get());
  }
  return infer_node(node, g.opset, types, consts);
}

std::vector<const TensorType*> input_types_of(const std::vector<const Tensor*>& inputs, std::vector<TensorType>& storage) {
  std::vector<const TensorType*> types;
  storage.clear();
  storage.reserve(inputs.size());  // no reallocation: the pointers stay valid
  for (const Tensor* t : inputs) {
    if (t) storage.push_back(t->type());
    types.push_back(t ? &storage.back() : nullptr);
  }
  return types;
}

std::vector<Tensor> eval_node(const Node& node, int opset, const std::vector<const Tensor*>& inputs) {
  std::vector<TensorType> storage;
  const std::vector<const TensorType*> types = input_types_of(inputs, storage);
  std::vector<TensorType> out_types = infer_node(node, opset, types, inputs);
  const OpDef& def = lookup_op(node, opset);
  OpEvalContext ctx{node, opset, inputs, out_types};
  std::vector<Tensor> out = def.eval(ctx);
  KORCH_CHECK(out.size() >= node.outputs.size(), "{}: eval returned {} tensors for {} outputs", node.op_type,
              out.size(), node.outputs.size());
  out.resize(node.outputs.size());
  for (size_t i = 0; i < out.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    KORCH_CHECK(out[i].type() == out_types[i], "{}: output {} evaluated as {} but inferred as {}", node.op_type, i,
                type_str(out[i].type()), type_str(out_types[i]));
  }
  return out;
}

}  // namespace korch
