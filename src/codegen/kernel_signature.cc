#include "codegen/kernel_signature.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "ir/dtype.h"
#include "support/error.h"

namespace korch {

bool is_baked_constant(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (!val.is_constant()) return false;
  if (val.type.numel() <= 1) return true;
  DType d = val.type.dtype;
  // int8/uint8 tensors are quantized weights: library calls read them as arguments.
  bool integer = d == DType::kInt64 || d == DType::kInt32 || d == DType::kBool || d == DType::kInt16 ||
                 d == DType::kUInt16;
  return integer && val.type.numel() <= kMaxBakedIntegerConstant;
}

std::vector<ValueId> kernel_arg_inputs(const Graph& g, const KernelCandidate& c) {
  std::vector<ValueId> out;
  for (ValueId v : c.inputs)
    if (!is_baked_constant(g, v)) out.push_back(v);
  return out;
}

namespace {

std::string attr_text(const AttrValue& a) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) return fmt::format("i{}", x);
        else if constexpr (std::is_same_v<T, float>) return fmt::format("f{}", x);
        else if constexpr (std::is_same_v<T, std::string>) return "s" + x;
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return fmt::format("I[{}]", fmt::join(x, ","));
        else if constexpr (std::is_same_v<T, std::vector<float>>) return fmt::format("F[{}]", fmt::join(x, ","));
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) return fmt::format("S[{}]", fmt::join(x, ","));
        else return fmt::format("T{}:{}", type_str(x.type()),
                                content_hash(std::string(reinterpret_cast<const char*>(x.raw()), x.nbytes())));
      },
      a);
}

// A baked constant in a signature: its type and the hash of its bytes.
std::string baked_ref(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  std::string bytes(reinterpret_cast<const char*>(val.constant->raw()), val.constant->nbytes());
  return fmt::format("k{}:{}", type_str(val.type), content_hash(bytes));
}

}  // namespace

std::string kernel_signature(const Graph& g, const KernelCandidate& c) {
  std::ostringstream s;
  std::map<ValueId, std::string> ref;  // value -> canonical reference
  int arg = 0;
  for (ValueId v : c.inputs) {
    const Value& val = g.value(v);
    if (is_baked_constant(g, v)) {
      ref[v] = baked_ref(g, v);
    } else {
      ref[v] = fmt::format("a{}", arg++);
      s << ref[v] << ":" << type_str(val.type) << ";";
    }
  }
  s << "\n";
  int local = 0;
  for (NodeId n : c.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    s << node.domain << ":" << node.op_type << "(";
    for (ValueId in : node.inputs) s << (in == kNoValue ? std::string("_") : ref.at(in)) << ",";
    s << "){";
    for (const auto& [name, a] : node.attrs.all()) s << name << "=" << attr_text(a) << ";";
    s << "}->";
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      ValueId out = node.outputs[o];
      if (out == kNoValue) { s << "_,"; continue; }
      ref[out] = fmt::format("n{}.{}", local, o);
      s << type_str(g.type(out)) << ",";
    }
    s << "\n";
    ++local;
  }
  s << "out:";
  for (ValueId v : c.outputs) s << ref.at(v) << ",";
  return s.str();
}

std::string kernel_cost_signature(const Graph& g, const KernelCandidate& c) {
  const size_t n = c.nodes.size();
  std::map<NodeId, size_t> local;  // node -> position in c.nodes
  for (size_t i = 0; i < n; ++i) local.emplace(c.nodes[i], i);
  auto inside = [&](ValueId v) {
    const NodeId p = g.value(v).producer;
    return p >= 0 && local.count(p) != 0;
  };
  std::vector<int> waiting(n, 0);  // inputs from nodes inside not yet placed
  for (size_t i = 0; i < n; ++i)
    for (ValueId in : g.nodes[static_cast<size_t>(c.nodes[i])].inputs) waiting[i] += in != kNoValue && inside(in);
  std::map<ValueId, std::string> ref;  // outputs of placed nodes -> their canonical reference
  auto key_of = [&](size_t i) {
    const Node& node = g.nodes[static_cast<size_t>(c.nodes[i])];
    std::string k = node.domain + ":" + node.op_type + "(";
    for (ValueId in : node.inputs) {
      if (in == kNoValue)
        k += "_";
      else if (inside(in))
        k += ref.at(in);
      else if (is_baked_constant(g, in))
        k += baked_ref(g, in);
      else
        k += "x" + type_str(g.type(in));
      k += ",";
    }
    k += "){";
    for (const auto& [name, a] : node.attrs.all()) k += name + "=" + attr_text(a) + ";";
    k += "}->";
    for (ValueId out : node.outputs) k += (out == kNoValue ? std::string("_") : type_str(g.type(out))) + ",";
    return k;
  };
  std::vector<std::pair<std::string, size_t>> ready;  // (key, position in c.nodes)
  for (size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) ready.emplace_back(key_of(i), i);
  KernelCandidate canon;
  std::map<ValueId, size_t> placed_by;  // output -> canonical position of its producer
  while (!ready.empty()) {
    const auto first = std::min_element(ready.begin(), ready.end());
    const size_t i = first->second;
    ready.erase(first);
    const Node& node = g.nodes[static_cast<size_t>(c.nodes[i])];
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      ref[node.outputs[o]] = fmt::format("n{}.{}", canon.nodes.size(), o);
      placed_by[node.outputs[o]] = canon.nodes.size() * 1024 + o;
    }
    canon.nodes.push_back(c.nodes[i]);
    for (size_t j = 0; j < n; ++j) {
      if (waiting[j] == 0) continue;
      for (ValueId in : g.nodes[static_cast<size_t>(c.nodes[j])].inputs)
        if (in != kNoValue && inside(in) && g.value(in).producer == c.nodes[i]) --waiting[j];
      if (waiting[j] == 0) ready.emplace_back(key_of(j), j);
    }
  }
  KORCH_CHECK(canon.nodes.size() == n, "kernel_cost_signature: the kernel's nodes form a cycle");
  for (NodeId id : canon.nodes)
    for (ValueId in : g.nodes[static_cast<size_t>(id)].inputs)
      if (in != kNoValue && !inside(in) &&
          std::find(canon.inputs.begin(), canon.inputs.end(), in) == canon.inputs.end())
        canon.inputs.push_back(in);
  canon.outputs = c.outputs;
  std::sort(canon.outputs.begin(), canon.outputs.end(),
            [&](ValueId a, ValueId b) { return placed_by.at(a) < placed_by.at(b); });
  return kernel_signature(g, canon);
}

Graph kernel_subgraph(const Graph& g, const KernelCandidate& c) {
  Graph sub;
  sub.name = "kernel";
  sub.opset = g.opset;
  std::map<ValueId, ValueId> map;
  for (ValueId v : c.inputs) {
    const Value& val = g.value(v);
    if (is_baked_constant(g, v)) map[v] = sub.add_constant(val.name, *val.constant);
    else map[v] = sub.add_input(val.name, val.type);
  }
  // Graph inputs must follow kernel_arg_inputs order: add_input appends in c.inputs order, which
  // is that order with the baked constants skipped.
  for (NodeId n : c.nodes) {
    Node node = g.nodes[static_cast<size_t>(n)];
    for (ValueId& in : node.inputs)
      if (in != kNoValue) in = map.at(in);
    for (ValueId& out : node.outputs) {
      if (out == kNoValue) continue;
      ValueId nv = sub.add_value(g.value(out).name, g.type(out));
      map[out] = nv;
      out = nv;
    }
    sub.add_node(std::move(node));
  }
  for (ValueId v : c.outputs) sub.outputs.push_back(map.at(v));
  return sub;
}

}  // namespace korch
