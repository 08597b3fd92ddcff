#include "frontend/onnx_writer.h"

#include <onnx/onnx_pb.h>

#include <fstream>
#include <set>

namespace korch {

namespace {

void set_type(onnx::ValueInfoProto* vi, const Value& v) {
  vi->set_name(v.name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(v.type.dtype));
  auto* shape = tt->mutable_shape();
  for (int64_t d : v.type.shape) shape->add_dim()->set_dim_value(d);
}

void fill_tensor(onnx::TensorProto* tp, const std::string& name, const Tensor& t) {
  tp->set_name(name);
  tp->set_data_type(static_cast<int>(t.dtype()));
  for (int64_t d : t.shape()) tp->add_dims(d);
  tp->set_raw_data(std::string(reinterpret_cast<const char*>(t.raw()), t.nbytes()));
}

void fill_attribute(onnx::AttributeProto* a, const std::string& name, const AttrValue& v) {
  using A = onnx::AttributeProto;
  a->set_name(name);
  if (auto* i = std::get_if<int64_t>(&v)) {
    a->set_type(A::INT);
    a->set_i(*i);
  } else if (auto* f = std::get_if<float>(&v)) {
    a->set_type(A::FLOAT);
    a->set_f(*f);
  } else if (auto* s = std::get_if<std::string>(&v)) {
    a->set_type(A::STRING);
    a->set_s(*s);
  } else if (auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    a->set_type(A::INTS);
    for (int64_t x : *is) a->add_ints(x);
  } else if (auto* fs = std::get_if<std::vector<float>>(&v)) {
    a->set_type(A::FLOATS);
    for (float x : *fs) a->add_floats(x);
  } else if (auto* ss = std::get_if<std::vector<std::string>>(&v)) {
    a->set_type(A::STRINGS);
    for (const auto& x : *ss) a->add_strings(x);
  } else if (auto* t = std::get_if<Tensor>(&v)) {
    a->set_type(A::TENSOR);
    fill_tensor(a->mutable_t(), "", *t);
  }
}

}  // namespace

std::string save_onnx_bytes(const Graph& g) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("korch");
  auto* imp = m.add_opset_import();
  imp->set_domain("");
  imp->set_version(g.opset);
  // Every other domain a node uses (onnxruntime's contrib ops) is declared at version 1.
  std::set<std::string> domains;
  for (const Node& n : g.nodes)
    if (!n.domain.empty() && n.domain != "ai.onnx" && domains.insert(n.domain).second) {
      auto* other = m.add_opset_import();
      other->set_domain(n.domain);
      other->set_version(1);
    }
  onnx::GraphProto* gp = m.mutable_graph();
  gp->set_name(g.name);

  // Constants that something refers to become initializers.
  std::vector<char> used(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[static_cast<size_t>(v)] = 1;
  for (ValueId v : g.outputs) used[static_cast<size_t>(v)] = 1;
  size_t bytes = 0;
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    if (!v.is_constant() || !used[i]) continue;
    bytes += v.constant->nbytes();
    if (bytes > (size_t{1} << 31) - (size_t{64} << 20))
      fail_unsupported("graph '{}' has more than 2 GB of constants; writing ONNX external data is not implemented", g.name);
    fill_tensor(gp->add_initializer(), v.name, *v.constant);
  }
  for (ValueId v : g.inputs) set_type(gp->add_input(), g.value(v));
  for (ValueId v : g.outputs) set_type(gp->add_output(), g.value(v));
  for (const Node& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    if (!n.domain.empty()) np->set_domain(n.domain);
    for (ValueId v : n.inputs) np->add_input(v == kNoValue ? std::string() : g.value(v).name);
    for (ValueId v : n.outputs) np->add_output(v == kNoValue ? std::string() : g.value(v).name);
    for (const auto& [name, value] : n.attrs.all()) fill_attribute(np->add_attribute(), name, value);
    for (ValueId v : n.outputs)
      if (v != kNoValue) set_type(gp->add_value_info(), g.value(v));
  }
  std::string out;
  if (!m.SerializeToString(&out)) fail("graph '{}': ONNX serialization failed", g.name);
  return out;
}

void save_onnx(const Graph& g, const std::string& path) {
  std::string bytes = save_onnx_bytes(g);
  std::ofstream f(path, std::ios::binary);
  if (!f) fail_io("cannot write '{}'", path);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) fail_io("error writing '{}'", path);
}

}  // namespace korch
