#include "ir/precision.h"

#include <map>
#include <set>

#include "ir/interpreter.h"
#include "ir/op_registry.h"
#include "ir/ops/elementwise_internal.h"

namespace korch {

namespace {

constexpr int64_t kOnnxFloat = 1;    // TensorProto.FLOAT
constexpr int64_t kOnnxDouble = 11;  // TensorProto.DOUBLE

TensorType widen(const TensorType& t) { return t.dtype == DType::kFloat32 ? TensorType{DType::kFloat64, t.shape} : t; }

// The int attribute `name`, or `def` when absent or not an int.
int64_t int_attr(const Attributes& a, const char* name, int64_t def) {
  auto it = a.all().find(name);
  if (it == a.all().end()) return def;
  const int64_t* p = std::get_if<int64_t>(&it->second);
  return p ? *p : def;
}

Tensor f64_vector(const std::vector<float>& f, Shape shape) {
  return Tensor::from_vector<double>(std::vector<double>(f.begin(), f.end()), std::move(shape));
}

// The attributes of node `n` in the float64 graph.
Attributes widen_attrs(const Node& n) {
  Attributes a = n.attrs;
  for (const auto& [name, v] : n.attrs.all())
    if (const Tensor* t = std::get_if<Tensor>(&v); t && t->dtype() == DType::kFloat32) a.set(name, widen_to_f64(*t));
  // Element-type attributes that name float32 (an absent stash_type means float32 too).
  auto retarget = [&](const char* name, int64_t def) {
    if (int_attr(a, name, def) == kOnnxFloat) a.set(name, kOnnxDouble);
  };
  if (n.op_type == "Cast") retarget("to", 0);
  if (n.op_type == "EyeLike") retarget("dtype", 0);
  if (n.op_type == "LayerNormalization") retarget("stash_type", kOnnxFloat);
  if (n.op_type == "GroupNormalization") retarget("stash_type", 0);
  if (n.op_type == "Constant") {
    if (a.has("value_float")) {
      a.set("value", Tensor::scalar<double>(static_cast<double>(a.get_float("value_float", 0.f))));
      a.erase("value_float");
    }
    if (a.has("value_floats")) {
      std::vector<float> f = a.get_floats("value_floats");
      a.set("value", f64_vector(f, {static_cast<int64_t>(f.size())}));
      a.erase("value_floats");
    }
  }
  // ConstantOfShape without a value fills float32 zeros.
  if (n.op_type == "ConstantOfShape" && !a.has("value")) a.set("value", f64_vector({0.f}, {1}));
  return a;
}

Node cast_node(std::string name, ValueId from, ValueId to, int64_t onnx_type) {
  Node c;
  c.name = std::move(name);
  c.op_type = "Cast";
  c.inputs = {from};
  c.outputs = {to};
  c.attrs.set("to", onnx_type);
  return c;
}

class Converter {
 public:
  explicit Converter(const Graph& g) : g_(g) {
    Graph& out = r_.graph;
    out.name = g.name;
    out.opset = g.opset;
    out.inputs = g.inputs;
    out.outputs = g.outputs;
    out.values = g.values;
    for (Value& v : out.values) {
      names_.insert(v.name);
      v.producer = -1;  // set again as the nodes are added
      if (v.type.dtype != DType::kFloat32) continue;
      v.type = widen(v.type);
      if (v.constant) v.constant = std::make_shared<const Tensor>(widen_to_f64(*v.constant));
    }
  }

  F64Graph run() {
    for (const Node& n : g_.nodes) {
      Node w = n;
      w.attrs = widen_attrs(n);
      if (accepts(w)) r_.graph.add_node(std::move(w));
      else keep_f32(n);
    }
    return std::move(r_);
  }

 private:
  // Whether the op infers the converted node to the widened output types.
  bool accepts(const Node& w) const {
    const Graph& out = r_.graph;
    std::vector<TensorType> inferred;
    try {
      inferred = infer_node(out, w);
    } catch (const Error&) {
      return false;
    }
    for (size_t k = 0; k < w.outputs.size(); ++k)
      if (w.outputs[k] != kNoValue && inferred[k] != out.type(w.outputs[k])) return false;
    return true;
  }

  std::string fresh_name(const std::string& base) {
    std::string n = base;
    for (int i = 1; !names_.insert(n).second; ++i) n = fmt::format("{}.{}", base, i);
    return n;
  }

  // The float32 copy of float64 value v (a value that was float32 in g_).
  ValueId narrowed(ValueId v) {
    auto it = narrow_.find(v);
    if (it != narrow_.end()) return it->second;
    Graph& out = r_.graph;
    const Value& orig = g_.value(v);
    ValueId f;
    if (orig.is_constant()) {
      f = out.add_constant(fresh_name(orig.name + "/f32"), *orig.constant);
    } else {
      f = out.add_value(fresh_name(orig.name + "/f32"), orig.type);
      out.add_node(cast_node(orig.name + "/to_f32", v, f, kOnnxFloat));
    }
    narrow_[v] = f;
    return f;
  }

  // Node n as it is (float32), between Casts from and to float64.
  void keep_f32(const Node& n) {
    Graph& out = r_.graph;
    Node k = n;
    for (ValueId& v : k.inputs)
      if (v != kNoValue && g_.type(v).dtype == DType::kFloat32) v = narrowed(v);
    std::vector<std::pair<ValueId, ValueId>> back;  // (float32 output, float64 value)
    for (ValueId& o : k.outputs) {
      if (o == kNoValue || g_.type(o).dtype != DType::kFloat32) continue;
      ValueId f = out.add_value(fresh_name(g_.value(o).name + "/f32"), g_.type(o));
      back.emplace_back(f, o);
      o = f;
    }
    out.add_node(std::move(k));
    for (auto [f, o] : back) out.add_node(cast_node(g_.value(o).name + "/to_f64", f, o, kOnnxDouble));
    r_.kept_f32.push_back(fmt::format("{} ({})", n.name, n.op_type));
  }

  const Graph& g_;
  F64Graph r_;
  std::set<std::string> names_;
  std::map<ValueId, ValueId> narrow_;
};

}  // namespace

Tensor widen_to_f64(const Tensor& t) {
  return t.dtype() == DType::kFloat32 ? ops::ew::cast_tensor(t, DType::kFloat64) : t;
}

F64Graph convert_to_f64(const Graph& g) { return Converter(g).run(); }

std::vector<Tensor> interpret_f64(const Graph& g, const std::vector<Tensor>& inputs, std::vector<std::string>* kept_f32) {
  if (inputs.size() != g.inputs.size())
    fail("graph '{}' takes {} inputs, got {}", g.name, g.inputs.size(), inputs.size());
  std::vector<Tensor> wide;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_input(g, i, inputs[i]);
    wide.push_back(widen_to_f64(inputs[i]));
  }
  F64Graph f = convert_to_f64(g);
  if (kept_f32) *kept_f32 = f.kept_f32;
  return interpret(f.graph, wide);
}

}  // namespace korch
