// FissionBuilder: what a fission rule uses to emit primitives into the output graph.
//
// Every node added gets its output types from the op registry (the same shape inference the
// frontend uses), so a rule only says which primitives to connect. Nodes whose inputs are all
// constants are evaluated immediately (constant folding), so e.g. BatchNormalization's
// scale = gamma / sqrt(var + eps) becomes one constant, not five primitives — unless the result
// would be larger than the inputs (broadcasts of weights stay broadcast primitives).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

class FissionBuilder {
 public:
  // `prefix` names the emitted values/nodes (the original node's name).
  FissionBuilder(Graph& out, std::string prefix) : g_(out), prefix_(std::move(prefix)) {}

  // Adds a node `op` (default domain); returns its output ids. Folds when all inputs are constant.
  std::vector<ValueId> add(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs = {},
                           int num_outputs = 1);
  ValueId add1(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs = {}) {
    return add(op, inputs, std::move(attrs), 1)[0];
  }

  ValueId constant(Tensor t);
  // A scalar constant of dtype `dt` (float or integer) holding `v`.
  ValueId scalar(double v, DType dt);
  ValueId int_list(const std::vector<int64_t>& v);  // 1-D i64 constant (shapes, axes)

  // `v` broadcast to `shape` with an explicit Expand (Reshape + Tile at opset 7, which has no
  // Expand); returned unchanged when it already has that shape, or when it is a scalar constant,
  // which elementwise primitives take as is.
  ValueId broadcast_to(ValueId v, const Shape& shape);
  // Elementwise `op` over `inputs` with numpy broadcasting made explicit.
  ValueId elementwise(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs = {});
  // Reduction over `axes` with keepdims=1 (axes as an input, opset 18 style, or the attribute for
  // ReduceSum < 13 / others < 18 — chosen from the graph's opset).
  ValueId reduce(const std::string& op, ValueId x, const std::vector<int64_t>& axes, bool keepdims = true);
  ValueId reshape(ValueId x, const Shape& shape);
  // Cast to `to` (returns x when it already has that element type).
  ValueId cast(ValueId x, DType to);

  const TensorType& type(ValueId v) const { return g_.type(v); }
  const Tensor* constant_value(ValueId v) const { return g_.value(v).constant.get(); }
  int opset() const { return g_.opset; }
  Graph& graph() { return g_; }

 private:
  std::string fresh_name(const std::string& what);
  Graph& g_;
  std::string prefix_;
  int counter_ = 0;
};

}  // namespace korch
