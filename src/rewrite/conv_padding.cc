#include "rewrite/conv_padding.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/op_registry.h"

namespace korch {

int make_conv_padding_symmetric(Graph& g) {
  int changed = 0;
  const size_t count = g.nodes.size();
  for (size_t i = 0; i < count; ++i) {
    if (g.nodes[i].op_type != "Conv" || !g.nodes[i].domain.empty()) continue;
    const ValueId x = g.nodes[i].inputs[0], w = g.nodes[i].inputs[1];
    const TensorType xt = g.type(x);
    const Shape& ws = g.type(w).shape;
    const size_t rank = xt.shape.size();
    if (rank < 3 || ws.size() != rank || !is_float(xt.dtype)) continue;
    const size_t ns = rank - 2;
    const Attributes& a = g.nodes[i].attrs;
    const std::string auto_pad = a.get_string("auto_pad", "NOTSET");
    const std::vector<int64_t> strides = a.get_ints("strides", std::vector<int64_t>(ns, 1));
    const std::vector<int64_t> dilations = a.get_ints("dilations", std::vector<int64_t>(ns, 1));
    const std::vector<int64_t> pads = a.get_ints("pads", std::vector<int64_t>(2 * ns, 0));
    if (strides.size() != ns || dilations.size() != ns || pads.size() != 2 * ns) continue;
    std::vector<int64_t> before(ns), after(ns);
    for (size_t d = 0; d < ns; ++d) {
      const int64_t in = xt.shape[2 + d], ek = (ws[2 + d] - 1) * dilations[d] + 1, s = strides[d];
      if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        const AxisPads p = same_auto_pads(in, (in + s - 1) / s, s, ek, auto_pad == "SAME_UPPER");
        before[d] = p.before;
        after[d] = p.after;
      } else if (auto_pad == "NOTSET") {
        before[d] = pads[d];
        after[d] = pads[ns + d];
      }
    }
    if (before == after) continue;
    std::vector<int64_t> excess(2 * rank, 0), symmetric(2 * ns);
    Shape padded = xt.shape;
    for (size_t d = 0; d < ns; ++d) {
      const int64_t m = std::min(before[d], after[d]);
      excess[2 + d] = before[d] - m;
      excess[rank + 2 + d] = after[d] - m;
      padded[2 + d] += excess[2 + d] + excess[rank + 2 + d];
      symmetric[d] = symmetric[ns + d] = m;
    }
    const std::string base = g.nodes[i].name.empty() ? fmt::format("conv{}", i) : g.nodes[i].name;
    const ValueId pads_v = g.add_constant(base + "/pad_excess",
                                          Tensor::from_vector<int64_t>(excess, {static_cast<int64_t>(excess.size())}));
    Tensor zero(xt.dtype, {});
    std::fill(zero.raw(), zero.raw() + zero.nbytes(), std::byte{0});
    const ValueId fill = g.add_constant(base + "/pad_zero", std::move(zero));
    const ValueId out = g.add_value(base + "/padded", {xt.dtype, padded});
    Node pad;
    pad.name = base + "/pad";
    pad.op_type = "Pad";
    pad.inputs = {x, pads_v, fill};
    pad.outputs = {out};
    pad.attrs.set("mode", std::string("constant"));
    Node& conv = g.nodes[i];
    conv.inputs[0] = out;
    conv.attrs.set("pads", symmetric);
    conv.attrs.set("auto_pad", std::string("NOTSET"));
    g.add_node(std::move(pad));  // may reallocate g.nodes: `conv` is not used after
    ++changed;
  }
  if (changed) g.topo_sort();
  return changed;
}

}  // namespace korch
