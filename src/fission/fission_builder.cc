#include "fission/fission_builder.h"

#include "ir/op_registry.h"

namespace korch {

std::string FissionBuilder::fresh_name(const std::string& what) {
  for (;;) {
    std::string n = fmt::format("{}/{}_{}", prefix_, what, counter_++);
    if (g_.find_value(n) < 0) return n;
  }
}

std::vector<ValueId> FissionBuilder::add(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs,
                                         int num_outputs) {
  Node n;
  n.op_type = op;
  n.name = fresh_name(op);
  n.inputs = inputs;
  n.attrs = std::move(attrs);
  std::vector<const TensorType*> types;
  std::vector<const Tensor*> consts;
  bool all_const = true;
  for (ValueId v : inputs) {
    types.push_back(v == kNoValue ? nullptr : &g_.type(v));
    consts.push_back(v == kNoValue ? nullptr : g_.value(v).constant.get());
    all_const &= v == kNoValue || g_.value(v).is_constant();
  }
  n.outputs.assign(static_cast<size_t>(num_outputs), kNoValue);
  std::vector<TensorType> out_types = infer_node(n, g_.opset, types, consts);
  // Fold constant subexpressions, but never into a bigger constant than its inputs (an Expand of
  // a bias stays a broadcast primitive instead of becoming a materialised weight).
  int64_t in_elems = 0, out_elems = 0;
  for (const TensorType* t : types) in_elems += t ? t->numel() : 0;
  for (const TensorType& t : out_types) out_elems += t.numel();
  if (all_const && (out_elems <= in_elems || out_elems <= 64)) {
    std::vector<Tensor> outs = eval_node(n, g_.opset, consts);
    std::vector<ValueId> ids;
    for (int k = 0; k < num_outputs; ++k) ids.push_back(g_.add_constant(fresh_name(op + "_const"), std::move(outs[static_cast<size_t>(k)])));
    return ids;
  }
  for (int k = 0; k < num_outputs; ++k) n.outputs[static_cast<size_t>(k)] = g_.add_value(fresh_name(op + "_out"), out_types[static_cast<size_t>(k)]);
  std::vector<ValueId> ids = n.outputs;
  g_.add_node(std::move(n));
  return ids;
}

ValueId FissionBuilder::constant(Tensor t) { return g_.add_constant(fresh_name("const"), std::move(t)); }

ValueId FissionBuilder::scalar(double v, DType dt) {
  Tensor t(dt, {});
  dispatch_dtype<KORCH_NUMERIC_TYPES, Float16, BFloat16>(dt, "fission scalar", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) t.data<T>()[0] = T(static_cast<float>(v));
    else t.data<T>()[0] = static_cast<T>(v);
  });
  return constant(std::move(t));
}

ValueId FissionBuilder::int_list(const std::vector<int64_t>& v) {
  return constant(Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}));
}

ValueId FissionBuilder::broadcast_to(ValueId v, const Shape& shape) {
  const Value& val = g_.value(v);
  if (val.type.shape == shape) return v;
  if (val.is_constant() && val.type.numel() == 1) return v;
  if (g_.opset >= 8) return add1("Expand", {v, int_list(shape)});
  // Opset 7 has no Expand: Reshape to the output rank, then Tile (a layout primitive).
  Shape s(shape.size() - val.type.shape.size(), 1);
  s.insert(s.end(), val.type.shape.begin(), val.type.shape.end());
  std::vector<int64_t> reps;
  for (size_t i = 0; i < shape.size(); ++i) reps.push_back(s[i] == shape[i] ? 1 : shape[i]);
  return add1("Tile", {reshape(v, s), int_list(reps)});
}

ValueId FissionBuilder::elementwise(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs) {
  Shape out;
  for (ValueId v : inputs)
    if (v != kNoValue) out = broadcast_shapes(out, g_.type(v).shape);
  std::vector<ValueId> ins;
  for (ValueId v : inputs) ins.push_back(v == kNoValue ? v : broadcast_to(v, out));
  return add1(op, ins, std::move(attrs));
}

ValueId FissionBuilder::reduce(const std::string& op, ValueId x, const std::vector<int64_t>& axes, bool keepdims) {
  Attributes a;
  a.set("keepdims", int64_t{keepdims ? 1 : 0});
  bool axes_as_input = op == "ReduceSum" ? g_.opset >= 13 : g_.opset >= 18;
  if (axes_as_input) return add1(op, {x, int_list(axes)}, std::move(a));
  a.set("axes", axes);
  return add1(op, {x}, std::move(a));
}

ValueId FissionBuilder::reshape(ValueId x, const Shape& shape) {
  if (g_.type(x).shape == shape) return x;
  return add1("Reshape", {x, int_list(shape)});
}

ValueId FissionBuilder::cast(ValueId x, DType to) {
  if (g_.type(x).dtype == to) return x;
  Attributes a;
  a.set("to", static_cast<int64_t>(to));  // DType codes are ONNX TensorProto codes
  return add1("Cast", {x}, std::move(a));
}

}  // namespace korch
