// Folding a constant per-output-channel scale into the weights of the linear primitive before it
// (see rewrite.h). Removes one elementwise primitive; the linear primitive costs the same.
// After fission a linear primitive has no bias, so BatchNormalization after a Conv becomes
//   y = Conv(x, W);  z = Mul(y, Expand(s[1,M,1,1]));  o = Add(z, Expand(b[1,M,1,1]))
// and this pass turns it into
//   y = Conv(x, W');  o = Add(y, Expand(b[1,M,1,1]))      with W'[m,...] = W[m,...] * s[m]
// (the bias Add stays: it is a separate primitive). Likewise for MatMul with a constant right
// operand and a scale broadcast along the last axis:
//   z = Mul(MatMul(a, B[K,N]), s[N])  ->  MatMul(a, B')      with B'[k,n] = B[k,n] * s[n]
// Conditions: the weights (and a Conv bias input, when present) are constant f32/f64, the scale is
// a constant (or an Expand of one) varying at most along the output-channel axis, and the linear
// output has no other user (nor is a graph output). Exact in real arithmetic; the fp result
// differs by rounding (the product W*s is rounded once, where Mul(y, s) rounded y*s).
#include <cmath>

#include "rewrite/rewrite.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

// `w` (f32/f64) with each slice along `axis` multiplied by scale[index] (scale of size 1: all).
Tensor scale_along_axis(const Tensor& w, int64_t axis, const std::vector<double>& scale) {
  Tensor out = w.clone();
  const int64_t n = w.dim(axis);
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < w.rank(); ++d) inner *= w.dim(d);
  dispatch_dtype<KORCH_FLOAT_TYPES>(w.dtype(), "fold_scale_into_linear", [&](auto tag) {
    using T = decltype(tag);
    T* p = out.data<T>();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const int64_t c = (i / inner) % n;
      p[i] = static_cast<T>(static_cast<double>(p[i]) * scale[scale.size() == 1 ? 0 : static_cast<size_t>(c)]);
    }
  });
  return out;
}

bool all_finite(const std::optional<std::vector<double>>& v) {
  if (!v) return false;
  for (double x : *v)
    if (!std::isfinite(x)) return false;
  return true;
}

bool float_weights(const Tensor* t) {
  return t && (t->dtype() == DType::kFloat32 || t->dtype() == DType::kFloat64);
}

}  // namespace

bool fold_scale_into_linear(Graph& g) {
  Rewriter rw(g);
  UseInfo uses(g);
  std::vector<char> folded(g.nodes.size(), 0);  // linear nodes already changed in this walk
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    Node& n = rw.visit(i);
    if (!n.domain.empty() || n.op_type != "Mul" || n.inputs.size() != 2 || n.outputs[0] == kNoValue) continue;
    const ValueId z = n.outputs[0];
    const int64_t rank = g.type(z).rank();
    for (int j = 0; j < 2; ++j) {
      const ValueId y = n.inputs[static_cast<size_t>(1 - j)];
      const Tensor* s = constant_through_expand(g, n.inputs[static_cast<size_t>(j)]);
      if (!s || g.type(y) != g.type(z) || !has_single_consumer(g, uses, y)) continue;
      const NodeId pid = g.value(y).producer;
      if (pid < 0 || folded[static_cast<size_t>(pid)]) continue;
      Node& lin = g.nodes[static_cast<size_t>(pid)];
      if (!lin.domain.empty() || lin.outputs.size() != 1) continue;
      if (lin.op_type == "Conv" && rank >= 3) {
        const Tensor* w = constant_of(g, lin.inputs[1]);
        const bool has_bias = lin.inputs.size() > 2 && lin.inputs[2] != kNoValue;
        const Tensor* b = has_bias ? constant_of(g, lin.inputs[2]) : nullptr;
        std::optional<std::vector<double>> sc = values_along_axis(*s, rank, 1);
        if (!float_weights(w) || (has_bias && !b) || !all_finite(sc) || w->dtype() != g.type(y).dtype) continue;
        if (!rw.can_replace(z, y)) continue;
        Tensor w2 = scale_along_axis(*w, 0, *sc);
        std::optional<Tensor> b2;
        if (has_bias) b2 = scale_along_axis(*b, 0, *sc);
        const std::string base = lin.name + "/scaled";
        ValueId wv = rw.add_constant(base + "_W", std::move(w2));
        ValueId bv = b2 ? rw.add_constant(base + "_B", std::move(*b2)) : kNoValue;
        Node& l = g.nodes[static_cast<size_t>(pid)];
        l.inputs[1] = wv;
        if (bv != kNoValue) l.inputs[2] = bv;
      } else if (lin.op_type == "MatMul") {
        const Tensor* w = constant_of(g, lin.inputs[1]);
        if (!float_weights(w) || w->rank() < 2 || w->dtype() != g.type(y).dtype) continue;
        std::optional<std::vector<double>> sc = values_along_axis(*s, rank, rank - 1);
        if (!all_finite(sc) || !rw.can_replace(z, y)) continue;
        ValueId wv = rw.add_constant(lin.name + "/scaled_B", scale_along_axis(*w, w->rank() - 1, *sc));
        g.nodes[static_cast<size_t>(pid)].inputs[1] = wv;
      } else {
        continue;
      }
      folded[static_cast<size_t>(pid)] = 1;
      rw.replace(z, y);
      rw.mark_changed();
      break;
    }
  }
  return rw.finish();
}

}  // namespace korch
