// Test helpers for the linear step: a tiny graph builder with shape inference.
#pragma once

#include <fmt/format.h>

#include <random>

#include "ir/graph.h"
#include "ir/op_registry.h"
#include "ir/random.h"

namespace korch::cpu::linear_test {

struct Builder {
  Graph g;
  std::mt19937_64 rng{42};

  ValueId input(const Shape& s) { return g.add_input(fmt::format("in{}", g.values.size()), {DType::kFloat32, s}); }
  ValueId weight(const Shape& s) {
    return g.add_constant(fmt::format("w{}", g.values.size()), random_tensor({DType::kFloat32, s}, rng));
  }
  ValueId scalar(float v) { return g.add_constant(fmt::format("k{}", g.values.size()), Tensor::scalar(v)); }
  ValueId ints(const std::vector<int64_t>& v) {
    return g.add_constant(fmt::format("s{}", g.values.size()),
                          Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}));
  }
  ValueId op(const std::string& type, std::vector<ValueId> in, Attributes a = {}) {
    Node n;
    n.name = fmt::format("n{}", g.nodes.size());
    n.op_type = type;
    n.inputs = std::move(in);
    n.attrs = std::move(a);
    n.outputs = {kNoValue};  // infer_node sizes its answer by the output count
    std::vector<const TensorType*> types;
    std::vector<const Tensor*> consts;
    for (ValueId v : n.inputs) {
      types.push_back(v == kNoValue ? nullptr : &g.type(v));
      consts.push_back(v == kNoValue ? nullptr : g.value(v).constant.get());
    }
    TensorType t = infer_node(n, g.opset, types, consts).at(0);
    ValueId out = g.add_value(n.name, t);
    n.outputs = {out};
    g.add_node(std::move(n));
    return out;
  }
  // Conv with attributes; `bias` adds Add(., Expand(c[1,M,1..])) like fission does.
  ValueId conv(ValueId x, const Shape& w, Attributes a = {}) { return op("Conv", {x, weight(w)}, std::move(a)); }
  ValueId bias(ValueId y) {
    const Shape& s = g.type(y).shape;
    Shape cs(s.size(), 1);
    cs[1] = s[1];
    return op("Add", {y, op("Expand", {weight(cs), ints(s)})});
  }
  ValueId expand_const(const Shape& small, const Shape& full) { return op("Expand", {weight(small), ints(full)}); }
};

inline Attributes attrs(std::initializer_list<std::pair<const char*, std::vector<int64_t>>> list, int64_t group = 1) {
  Attributes a;
  for (auto& [k, v] : list) a.set(k, v);
  if (group != 1) a.set("group", group);
  return a;
}

}  // namespace korch::cpu::linear_test
