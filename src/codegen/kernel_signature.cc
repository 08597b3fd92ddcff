#include "codegen/kernel_signature.h"

#include <fmt/format.h>

#include <map>
#include <sstream>

#include "ir/dtype.h"

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

}  // namespace

std::string kernel_signature(const Graph& g, const KernelCandidate& c) {
  std::ostringstream s;
  std::map<ValueId, std::string> ref;  // value -> canonical reference
  int arg = 0;
  for (ValueId v : c.inputs) {
    const Value& val = g.value(v);
    if (is_baked_constant(g, v)) {
      std::string bytes(reinterpret_cast<const char*>(val.constant->raw()), val.constant->nbytes());
      ref[v] = fmt::format("k{}:{}", type_str(val.type), content_hash(bytes));
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
