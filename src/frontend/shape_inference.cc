#include "frontend/shape_inference.h"

#include "ir/op_registry.h"

namespace korch {

void infer_shapes_and_fold(Graph& g, const std::string& model_path) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& node : g.nodes) {
    const std::string label = model_path + ": " + node_label(node, g.opset);
    try {
      const OpDef& def = lookup_op(node, g.opset);
      std::vector<const TensorType*> types;
      std::vector<const Tensor*> consts;
      bool all_const = true;
      for (ValueId v : node.inputs) {
        if (v == kNoValue) { types.push_back(nullptr); consts.push_back(nullptr); continue; }
        const Value& val = g.value(v);
        KORCH_CHECK(val.type.dtype != DType::kUndefined, "value '{}' untyped before its consumer", val.name);
        types.push_back(&val.type);
        consts.push_back(val.constant.get());
        all_const &= val.is_constant();
      }
      std::vector<TensorType> out_types = infer_node(node, g.opset, types, consts);
      int64_t out_elems = 0;
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        if (node.outputs[k] == kNoValue) continue;
        for (int64_t d : out_types[k].shape)
          if (d < 0) fail("inferred a negative dimension in output shape {}", shape_str(out_types[k].shape));
        g.value(node.outputs[k]).type = out_types[k];
        out_elems += out_types[k].numel();
      }
      bool from_types = static_cast<bool>(def.fold_from_types);
      // Replication of constants (Expand, Tile) stays a node once it grows: folding would turn a
      // per-channel bias into a full activation-sized constant, which every later stage (and the
      // cost model) would then read from memory instead of broadcasting.
      int64_t in_elems = 0;
      for (const Tensor* c : consts) in_elems += c ? c->numel() : 0;
      const bool grows = (node.op_type == "Expand" || node.op_type == "Tile") && out_elems > in_elems &&
                         out_elems > kMaxGrowingFoldElements;
      // Quantized weights stay DequantizeLinear(int8 constant) until fission, which runs a linear
      // operator on them as an int8 kernel (integer_linear_from_qdq) or folds them then.
      const bool quantized_weights = node.op_type == "DequantizeLinear" && !types.empty() && types[0] &&
                                     (types[0]->dtype == DType::kInt8 || types[0]->dtype == DType::kUInt8);
      if ((all_const || from_types) && def.foldable && !grows && !quantized_weights && out_elems <= kMaxFoldElements) {
        std::vector<Tensor> outs =
            from_types ? def.fold_from_types(OpInferContext{node, g.opset, types, consts}) : eval_node(node, g.opset, consts);
        for (size_t k = 0; k < node.outputs.size(); ++k) {
          if (node.outputs[k] == kNoValue) continue;
          Value& v = g.value(node.outputs[k]);
          v.constant = std::make_shared<const Tensor>(std::move(outs[k]));
          v.producer = -1;
        }
        continue;  // the node is folded away
      }
    } catch (const Error& e) {
      rethrow_with_context(e, label);
    }
    kept.push_back(std::move(node));
  }
  g.nodes = std::move(kept);
  for (Value& v : g.values) if (!v.is_constant()) v.producer = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId o : g.nodes[i].outputs)
      if (o != kNoValue) g.value(o).producer = static_cast<NodeId>(i);
}

}  // namespace korch
