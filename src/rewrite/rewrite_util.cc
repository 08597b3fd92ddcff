#include "rewrite/rewrite_util.h"

#include <algorithm>
#include <numeric>

#include "ir/op_registry.h"

namespace korch {

UseInfo::UseInfo(const Graph& g) : consumers(g.values.size()), is_graph_output(g.values.size(), 0) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ValueId v : g.nodes[i].inputs)
      if (v != kNoValue) consumers[static_cast<size_t>(v)].push_back(static_cast<NodeId>(i));
  for (ValueId v : g.outputs) is_graph_output[static_cast<size_t>(v)]++;
}

int UseInfo::uses(ValueId v) const {
  return static_cast<int>(consumers[static_cast<size_t>(v)].size()) + is_graph_output[static_cast<size_t>(v)];
}

const Node* producer_of(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  NodeId p = g.value(v).producer;
  return p < 0 ? nullptr : &g.nodes[static_cast<size_t>(p)];
}

bool has_single_consumer(const Graph& g, const UseInfo& uses, ValueId v) {
  (void)g;
  return v != kNoValue && !uses.is_graph_output[static_cast<size_t>(v)] &&
         uses.consumers[static_cast<size_t>(v)].size() == 1;
}

const Tensor* constant_of(const Graph& g, ValueId v) { return v == kNoValue ? nullptr : g.value(v).constant.get(); }

const Tensor* pointwise_conv_weight(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.op_type != "Conv" || n.inputs.size() < 2) return nullptr;
  if ((n.inputs.size() > 2 && n.inputs[2] != kNoValue) || n.attrs.get_int("group", 1) != 1) return nullptr;
  const std::string pad = n.attrs.get_string("auto_pad", "NOTSET");  // "" is NOTSET (ir/ops/conv.cc)
  if (pad != "NOTSET" && pad != "VALID" && !pad.empty()) return nullptr;
  auto all = [](const std::vector<int64_t>& v, int64_t x) { return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; }); };
  if (!all(n.attrs.get_ints("strides"), 1) || !all(n.attrs.get_ints("pads"), 0)) return nullptr;
  const Tensor* w = constant_of(g, n.inputs[1]);
  if (w == nullptr || w->rank() < 3 || (w->dtype() != DType::kFloat32 && w->dtype() != DType::kFloat64)) return nullptr;
  for (int64_t d = 2; d < w->rank(); ++d)
    if (w->dim(d) != 1) return nullptr;
  return w;
}

const Tensor* constant_through_expand(const Graph& g, ValueId v) {
  if (const Tensor* t = constant_of(g, v)) return t;
  const Node* p = producer_of(g, v);
  if (p && p->op_type == "Expand" && p->domain.empty()) return constant_of(g, p->inputs[0]);
  return nullptr;
}

bool all_elements_equal(const Tensor& t, double x) {
  if (!is_float(t.dtype()) && !is_integer(t.dtype())) return false;
  for (int64_t i = 0; i < t.numel(); ++i)
    if (t.get_as_double(i) != x) return false;
  return true;
}

std::optional<SliceSpec> slice_spec(const Graph& g, const Node& n) {
  const Shape& in = g.type(n.inputs[0]).shape;
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> starts, ends, axes, steps;
  if (g.opset >= 10) {
    auto s = constant_ints(g, n.inputs[1]);
    auto e = constant_ints(g, n.inputs[2]);
    if (!s || !e) return std::nullopt;
    starts = *s;
    ends = *e;
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) {
      auto a = constant_ints(g, n.inputs[3]);
      if (!a) return std::nullopt;
      axes = *a;
    }
    if (n.inputs.size() > 4 && n.inputs[4] != kNoValue) {
      auto st = constant_ints(g, n.inputs[4]);
      if (!st) return std::nullopt;
      steps = *st;
    }
  } else {
    starts = n.attrs.get_ints("starts");
    ends = n.attrs.get_ints("ends");
    axes = n.attrs.get_ints("axes");
  }
  if (axes.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
  SliceSpec spec{std::vector<int64_t>(in.size(), 0), std::vector<int64_t>(in.size(), 1)};
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (a < 0 || a >= rank || steps[i] <= 0) return std::nullopt;
    const int64_t dim = in[static_cast<size_t>(a)];
    int64_t s = starts[i] < 0 ? starts[i] + dim : starts[i];
    spec.start[static_cast<size_t>(a)] = std::clamp<int64_t>(s, 0, dim);
    spec.step[static_cast<size_t>(a)] = steps[i];
  }
  return spec;
}

std::optional<SlicePiece> slice_piece(const Graph& g, ValueId v) {
  const Node* n = producer_of(g, v);
  if (!n || !n->domain.empty() || n->op_type != "Slice" || n->outputs[0] != v) return std::nullopt;
  std::optional<SliceSpec> spec = slice_spec(g, *n);
  if (!spec) return std::nullopt;
  const Shape& in = g.type(n->inputs[0]).shape;
  const Shape& out = g.type(v).shape;
  SlicePiece p{n->inputs[0], -1, 0, 0};
  for (size_t a = 0; a < in.size(); ++a) {
    if (out[a] == in[a]) continue;
    if (p.axis >= 0 || (spec->step[a] != 1 && out[a] > 1)) return std::nullopt;
    p = {n->inputs[0], static_cast<int64_t>(a), spec->start[a], out[a]};
  }
  if (p.axis < 0) return std::nullopt;
  return p;
}

ValueId concat_input_spanning(const Graph& g, const Node& concat, int64_t axis, int64_t start, int64_t len) {
  int64_t offset = 0;
  for (ValueId part : concat.inputs) {
    const int64_t size = g.type(part).shape[static_cast<size_t>(axis)];
    if (offset == start && size == len && size > 0) return part;
    offset += size;
  }
  return kNoValue;
}

std::optional<std::vector<int64_t>> constant_ints(const Graph& g, ValueId v) {
  const Tensor* t = constant_of(g, v);
  if (!t || (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32)) return std::nullopt;
  return t->to_int_vector();
}

std::optional<std::vector<double>> values_along_axis(const Tensor& t, int64_t out_rank, int64_t axis) {
  if (t.rank() > out_rank || t.numel() == 0) return std::nullopt;
  const int64_t offset = out_rank - t.rank();
  for (int64_t j = 0; j < t.rank(); ++j)
    if (j + offset != axis && t.dim(j) != 1) return std::nullopt;
  std::vector<double> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t.get_as_double(i));
  return out;
}

Rewriter::Rewriter(Graph& g) : g_(g), repl_(g.values.size(), kNoValue), is_output_(g.values.size(), 0),
                               output_taken_(g.values.size(), 0) {
  for (ValueId v : g.outputs) is_output_[static_cast<size_t>(v)] = 1;
  for (const Value& v : g.values) names_.insert(v.name);
  for (const Node& n : g.nodes) names_.insert(n.name);
}

ValueId Rewriter::resolve(ValueId v) const {
  while (v != kNoValue && static_cast<size_t>(v) < repl_.size() && repl_[static_cast<size_t>(v)] != kNoValue)
    v = repl_[static_cast<size_t>(v)];
  return v;
}

Node& Rewriter::visit(size_t i) {
  Node& n = g_.nodes[i];
  for (ValueId& v : n.inputs) {
    ValueId r = resolve(v);
    if (r != v) {
      v = r;
      changed_ = true;
    }
  }
  return n;
}

bool Rewriter::can_replace(ValueId old, ValueId repl) const {
  old = resolve(old);
  repl = resolve(repl);
  if (old == repl || old == kNoValue || repl == kNoValue) return false;
  if (g_.type(old) != g_.type(repl)) return false;
  auto flag = [](const std::vector<char>& f, ValueId v) { return static_cast<size_t>(v) < f.size() && f[static_cast<size_t>(v)]; };
  if (flag(is_output_, old) || flag(output_taken_, old)) {
    // `repl` will carry the output's name: it must be a node output that is no other output.
    const Value& r = g_.value(repl);
    if (r.producer < 0 || r.is_constant() || flag(is_output_, repl) || flag(output_taken_, repl)) return false;
  }
  return true;
}

bool Rewriter::replace(ValueId old, ValueId repl) {
  old = resolve(old);
  repl = resolve(repl);
  if (!can_replace(old, repl)) return false;
  size_t need = g_.values.size();
  if (repl_.size() < need) {
    repl_.resize(need, kNoValue);
    is_output_.resize(need, 0);
    output_taken_.resize(need, 0);
  }
  if (is_output_[static_cast<size_t>(old)] || output_taken_[static_cast<size_t>(old)])
    output_taken_[static_cast<size_t>(repl)] = 1;
  repl_[static_cast<size_t>(old)] = repl;
  return true;
}

std::string Rewriter::fresh_name(const std::string& base) {
  for (;;) {
    std::string n = fmt::format("{}_{}", base, counter_++);
    if (names_.insert(n).second) return n;
  }
}

ValueId Rewriter::add_constant(const std::string& base, Tensor t) { return g_.add_constant(fresh_name(base), std::move(t)); }

std::vector<ValueId> Rewriter::append_node(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs,
                                           int num_outputs) {
  Node n;
  n.op_type = op;
  n.name = fresh_name("rewrite/" + op);
  n.inputs = inputs;
  n.attrs = std::move(attrs);
  std::vector<const TensorType*> types;
  std::vector<const Tensor*> consts;
  for (ValueId v : inputs) {
    types.push_back(v == kNoValue ? nullptr : &g_.type(v));
    consts.push_back(v == kNoValue ? nullptr : g_.value(v).constant.get());
  }
  n.outputs.assign(static_cast<size_t>(num_outputs), kNoValue);
  std::vector<TensorType> out = infer_node(n, g_.opset, types, consts);
  for (int k = 0; k < num_outputs; ++k)
    n.outputs[static_cast<size_t>(k)] = g_.add_value(fresh_name(n.name + "_out"), out[static_cast<size_t>(k)]);
  std::vector<ValueId> ids = n.outputs;
  g_.add_node(std::move(n));
  appended_ = true;
  changed_ = true;
  return ids;
}

bool Rewriter::make_reshape(Node& n, ValueId x) {
  Shape shape = g_.type(n.outputs[0]).shape;
  bool has_zero = false;
  for (int64_t d : shape) has_zero |= d == 0;
  if (has_zero && g_.opset < 14) return false;
  n.op_type = "Reshape";
  n.domain.clear();
  n.attrs = Attributes();
  if (has_zero && g_.opset >= 14) n.attrs.set("allowzero", int64_t{1});
  n.inputs = {x, int_list(shape)};
  changed_ = true;
  return true;
}

bool Rewriter::finish() {
  for (Node& n : g_.nodes)
    for (ValueId& v : n.inputs) {
      ValueId r = resolve(v);
      if (r != v) {
        v = r;
        changed_ = true;
      }
    }
  std::vector<ValueId> renamed;  // outputs listed twice are renamed once
  for (ValueId& o : g_.outputs) {
    ValueId r = resolve(o);
    if (r == o) continue;
    if (std::find(renamed.begin(), renamed.end(), o) != renamed.end()) {
      o = r;
      continue;
    }
    renamed.push_back(o);
    // The replacement takes the output's name (checked legal by replace()).
    std::string name = g_.value(o).name;
    g_.value(o).name = fresh_name(name + "/replaced");
    g_.value(r).name = name;
    o = r;
    changed_ = true;
  }
  if (appended_) g_.topo_sort();
  return changed_;
}

}  // namespace korch
