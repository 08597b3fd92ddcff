#include "ir/graph_stats.h"

#include <numeric>

#include "ir/primitive.h"

namespace korch {

namespace {
double nbytes(const TensorType& t) { return static_cast<double>(t.numel()) * dtype_size(t.dtype); }
}  // namespace

NodeStats node_stats(const Graph& g, const Node& n) {
  NodeStats s;
  for (ValueId v : n.inputs)
    if (v != kNoValue) s.bytes_read += nbytes(g.type(v));
  double out_elems = 0;
  for (ValueId v : n.outputs)
    if (v != kNoValue) {
      s.bytes_written += nbytes(g.type(v));
      out_elems += static_cast<double>(g.type(v).numel());
    }
  auto in = [&](int i) -> const TensorType& { return g.type(n.inputs.at(static_cast<size_t>(i))); };
  const std::string& op = n.op_type;
  if (op == "Conv" || op == "ConvTranspose" || op == "ConvInteger" || op == "QLinearConv") {
    // Each output (Conv) / input (ConvTranspose) element: C_in/group * prod(kernel) MACs.
    const TensorType& w = in(op == "QLinearConv" ? 3 : 1);
    double k = static_cast<double>(w.numel()) / static_cast<double>(w.shape[0]);  // C_in/g * kernel
    if (op != "ConvTranspose") {
      s.flops = 2.0 * out_elems * k;
    } else {
      double per_in = static_cast<double>(w.numel()) / static_cast<double>(n.attrs.get_int("group", 1));
      s.flops = 2.0 * static_cast<double>(in(0).numel()) / static_cast<double>(in(0).shape[1]) * per_in;
    }
  } else if (op == "MatMul" || op == "Gemm" || op == "MatMulInteger" || op == "QLinearMatMul") {
    const TensorType& a = in(0);
    int64_t kdim = a.shape.empty() ? 1 : a.shape.back();
    if (op == "Gemm" && n.attrs.get_int("transA", 0)) kdim = a.shape[0];
    s.flops = 2.0 * out_elems * static_cast<double>(kdim);
  } else if (op == "Einsum") {
    // One multiply-add per point of the full index space (every distinct label's extent).
    std::string eq = n.attrs.get_string("equation", "");
    std::map<char, int64_t> extent;
    size_t operand = 0, axis = 0;
    for (size_t i = 0; i < eq.size() && eq.compare(i, 2, "->") != 0; ++i) {
      char c = eq[i];
      if (c == ',') { ++operand; axis = 0; continue; }
      if (c == '.' || c == ' ') continue;  // ellipsis dims: counted through the output size below
      if (operand < n.inputs.size() && axis < g.type(n.inputs[operand]).shape.size())
        extent[c] = g.type(n.inputs[operand]).shape[axis];
      ++axis;
    }
    double points = 1;
    for (const auto& [c, e] : extent) points *= static_cast<double>(e);
    s.flops = 2.0 * std::max(points, out_elems);
  } else {
    PrimitiveKind kind = primitive_kind(g, n);
    double in_elems = 0;
    for (ValueId v : n.inputs)
      if (v != kNoValue) in_elems = std::max(in_elems, static_cast<double>(g.type(v).numel()));
    if (kind == PrimitiveKind::kLayout || kind == PrimitiveKind::kBroadcast) s.flops = 0;  // data movement only
    else if (kind == PrimitiveKind::kReduce) s.flops = in_elems;                            // one op per input
    else s.flops = std::max(out_elems, in_elems);  // elementwise: one per output; operators: a rough bound
  }
  return s;
}

GraphStats graph_stats(const Graph& g) {
  GraphStats gs;
  for (const Node& n : g.nodes) {
    gs.op_histogram[n.op_type]++;
    NodeStats s = node_stats(g, n);
    gs.flops += s.flops;
    gs.bytes_read += s.bytes_read;
    gs.bytes_written += s.bytes_written;
  }
  gs.parameters = g.parameter_count();
  std::vector<char> used(g.values.size(), 0);
  for (const Node& n : g.nodes)
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[static_cast<size_t>(v)] = 1;
  for (size_t i = 0; i < g.values.size(); ++i)
    if (used[i] && g.values[i].is_constant()) gs.parameter_bytes += nbytes(g.values[i].type);
  return gs;
}

}  // namespace korch
