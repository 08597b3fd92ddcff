// Folding constant per-output-channel scales and shifts into the linear primitive before them
// (see rewrite.h). Every rule removes one elementwise primitive (and its Expand); the linear
// primitive costs the same, so the rules never lose.
//
// After fission a linear primitive has no bias: a Conv with a bias becomes
//   y = Conv(x, W);  o = Add(y, E(b[1,M,1,1]))              (E: an Expand to y's shape)
// and a BatchNormalization with constant parameters becomes Mul(x, E(s)) then Add(E(c)), so
// Conv(bias) + BatchNormalization is, after fission,
//   y = Conv(x, W);  a = Add(y, E(b));  z = Mul(a, E(s));  o = Add(z, E(c))
// The rules below (one pass, fold_scale_into_linear, which simplify() runs to a fixed point):
//   1. scale into the weights:   Mul(Conv(x, W), E(s))          -> Conv(x, W')
//   2. scale through a bias Add: Mul(Add(Conv(x, W), E(b)), E(s)) -> Add(Conv(x, W'), E(b'))
//   3. two bias Adds -> one:     Add(Add(Conv(x, W), E(b1)), E(b2)) -> Add(Conv(x, W), E(b1 + b2))
// with W'[m,...] = W[m,...] * s[m] and b'[m] = b[m] * s[m]. The example above ends as
//   y = Conv(x, W');  o = Add(y, E(b * s + c))
// The same for MatMul with a constant right operand B[..., K, N] and a scale/shift varying along
// the last axis (per column):  Mul(MatMul(a, B), s[N]) -> MatMul(a, B') with B'[k,n] = B[k,n]*s[n],
// and the bias-Add forms likewise.
// A Conv with a bias input (an operator graph) has that bias scaled too in rules 1 and 2.
//
// Conditions: the weights (and a Conv bias input, when present) are constant f32/f64 of the
// output's type; scales and shifts are constants (or Expands of one) varying at most along the
// output-channel axis (1 for Conv, the last for MatMul) with finite values; every value that is
// rewritten (the linear output in rules 1-2, the bias Add's output in rules 2-3) has a single
// consumer and is not a graph output; no broadcasting by the Mul/Add themselves beyond the
// per-channel operand (their output has the linear output's type). New shifts are emitted as
// E(const[1,..,M,..,1]) (rules 2-3 need Expand: opset >= 8). Exact in real arithmetic; the fp
// result differs by rounding (W*s and b*s + c are rounded once).
// One walk changes each linear node / bias Add at most once (uses are counted at the start of the
// walk); chains (rule 2 then rule 3) complete over simplify()'s rounds.
#include <cmath>

#include "ir/op_registry.h"
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

// When the constant `t` (broadcast against an output of rank `rank`) has dims other than 1
// besides `axis` but its values repeat along them (a broadcast that was folded into a constant):
// its values along `axis` (one per index). nullopt otherwise.
std::optional<std::vector<double>> repeated_along_axis(const Tensor& t, int64_t rank, int64_t axis) {
  const int64_t offset = rank - t.rank(), a = axis - offset;
  if (offset < 0 || t.numel() == 0 || t.numel() > (int64_t{1} << 24)) return std::nullopt;
  const int64_t m = a >= 0 ? t.dim(a) : 1;
  int64_t inner = 1;
  for (int64_t d = a + 1; d < t.rank(); ++d) inner *= t.dim(d);
  std::vector<double> vals(static_cast<size_t>(m));
  for (int64_t c = 0; c < m; ++c) vals[static_cast<size_t>(c)] = t.get_as_double(c * inner);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.get_as_double(i), want = vals[static_cast<size_t>((i / inner) % m)];
    if (!(x == want) && !(std::isnan(x) && std::isnan(want))) return std::nullopt;
  }
  return vals;
}

// Per-channel values of `v` along `axis` of an output of rank `rank`: a constant (or an Expand of
// one) of the output's dtype, finite. nullopt otherwise.
std::optional<std::vector<double>> channel_values(const Graph& g, ValueId v, DType dt, int64_t rank, int64_t axis) {
  const Tensor* t = constant_through_expand(g, v);
  if (!t || t->dtype() != dt) return std::nullopt;
  std::optional<std::vector<double>> vals = values_along_axis(*t, rank, axis);
  if (!vals) vals = repeated_along_axis(*t, rank, axis);
  if (!all_finite(vals)) return std::nullopt;
  return vals;
}

double at(const std::vector<double>& v, int64_t i) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; }

class Folder {
 public:
  explicit Folder(Graph& g) : g_(g), rw_(g), uses_(g), touched_(g.nodes.size(), 0) {}

  bool run() {
    for (size_t i = 0, end = g_.nodes.size(); i < end; ++i) {
      Node& n = rw_.visit(i);
      if (!n.domain.empty() || n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] == kNoValue) continue;
      if (touched_[i]) continue;
      if (n.op_type == "Mul") {
        for (int j = 0; j < 2; ++j)
          if (fold_mul(i, j)) break;
      } else if (n.op_type == "Add") {
        for (int j = 0; j < 2; ++j)
          if (merge_adds(i, j)) break;
      }
    }
    return rw_.finish();
  }

 private:
  // The output-channel axis of `y` when it is produced by an untouched MatMul/Conv (default domain,
  // one output) of rank-compatible shape; -1 otherwise.
  int64_t linear_axis(ValueId y) const {
    const NodeId pid = g_.value(y).producer;
    if (pid < 0 || static_cast<size_t>(pid) >= touched_.size() || touched_[static_cast<size_t>(pid)]) return -1;
    const Node& lin = g_.nodes[static_cast<size_t>(pid)];
    if (!lin.domain.empty() || lin.outputs.size() != 1) return -1;
    const int64_t rank = g_.type(y).rank();
    if (lin.op_type == "Conv" && rank >= 3) return channels_last_layout(lin.attrs) ? rank - 1 : 1;
    if (lin.op_type == "MatMul" && rank >= 1) return rank - 1;
    return -1;
  }

  // Whether the linear producer of `y` (axis from linear_axis) has constant float weights of y's
  // dtype that can be scaled per output channel.
  bool scalable(ValueId y) const {
    const Node& lin = g_.nodes[static_cast<size_t>(g_.value(y).producer)];
    const Tensor* w = constant_of(g_, lin.inputs[1]);
    if (!float_weights(w) || w->dtype() != g_.type(y).dtype) return false;
    if (lin.op_type == "MatMul") return w->rank() >= 2;
    const bool has_bias = lin.inputs.size() > 2 && lin.inputs[2] != kNoValue;
    return !has_bias || float_weights(constant_of(g_, lin.inputs[2]));
  }

  // Multiplies the weights (and Conv bias input) of the producer of `y` by `sc` per channel.
  void scale_weights(ValueId y, const std::vector<double>& sc) {
    const NodeId pid = g_.value(y).producer;
    const Node& lin = g_.nodes[static_cast<size_t>(pid)];
    const std::string base = lin.name + "/scaled";
    const Tensor& w = *constant_of(g_, lin.inputs[1]);
    ValueId wv, bv = kNoValue;
    if (lin.op_type == "MatMul") {
      wv = rw_.add_constant(base + "_B", scale_along_axis(w, w.rank() - 1, sc));
    } else {
      wv = rw_.add_constant(base + "_W", scale_along_axis(w, 0, sc));
      if (lin.inputs.size() > 2 && lin.inputs[2] != kNoValue)
        bv = rw_.add_constant(base + "_B", scale_along_axis(*constant_of(g_, lin.inputs[2]), 0, sc));
    }
    Node& l = g_.nodes[static_cast<size_t>(pid)];
    l.inputs[1] = wv;
    if (bv != kNoValue) l.inputs[2] = bv;
    touched_[static_cast<size_t>(pid)] = 1;
  }

  // E(c) with c[1,..,M,..,1] = vals (per channel along `axis`), expanded to `type`'s shape.
  ValueId expanded_channels(const std::vector<double>& vals, const TensorType type, int64_t axis) {
    Shape cs(type.shape.size(), 1);
    cs[static_cast<size_t>(axis)] = type.shape[static_cast<size_t>(axis)];
    Tensor c(type.dtype, cs);
    dispatch_dtype<KORCH_FLOAT_TYPES>(type.dtype, "fold_scale_into_linear", [&](auto tag) {
      using T = decltype(tag);
      T* p = c.data<T>();
      for (int64_t i = 0; i < c.numel(); ++i) p[i] = static_cast<T>(at(vals, i));
    });
    ValueId cv = rw_.add_constant("rewrite/bias", std::move(c));
    if (cs == type.shape) return cv;
    return rw_.append_node("Expand", {cv, rw_.int_list(type.shape)})[0];
  }

  // When `v` is the output of an untouched Add(lin, shift) (either order) with a single consumer,
  // `lin` from a linear node and the shift per channel: the Add's node id, the slot of the shift,
  // the shift values and the channel axis.
  struct BiasAdd {
    NodeId id;
    int shift_slot;
    std::vector<double> shift;
    int64_t axis;
  };
  std::optional<BiasAdd> bias_add(ValueId v) const {
    if (g_.opset < 8 || !has_single_consumer(g_, uses_, v)) return std::nullopt;
    const NodeId aid = g_.value(v).producer;
    if (aid < 0 || static_cast<size_t>(aid) >= touched_.size() || touched_[static_cast<size_t>(aid)]) return std::nullopt;
    const Node& add = g_.nodes[static_cast<size_t>(aid)];
    if (!add.domain.empty() || add.op_type != "Add" || add.inputs.size() != 2 || add.outputs.size() != 1) return std::nullopt;
    const TensorType& t = g_.type(v);
    for (int k = 0; k < 2; ++k) {
      const ValueId y = rw_.resolve(add.inputs[static_cast<size_t>(1 - k)]);
      if (g_.type(y) != t) continue;
      const int64_t axis = linear_axis(y);
      if (axis < 0) continue;
      auto b = channel_values(g_, rw_.resolve(add.inputs[static_cast<size_t>(k)]), t.dtype, t.rank(), axis);
      if (b) return BiasAdd{aid, k, std::move(*b), axis};
    }
    return std::nullopt;
  }

  // Rules 1 and 2 at Mul node i with the scale in slot j.
  bool fold_mul(size_t i, int j) {
    const Node& n = g_.nodes[i];
    const ValueId z = n.outputs[0];
    const ValueId y = n.inputs[static_cast<size_t>(1 - j)];
    const ValueId s = n.inputs[static_cast<size_t>(j)];
    const TensorType t = g_.type(z);  // a copy: appending values reallocates
    if (g_.type(y) != t) return false;
    // Rule 1: Mul(lin, s).
    if (const int64_t axis = linear_axis(y); axis >= 0) {
      auto sc = channel_values(g_, s, t.dtype, t.rank(), axis);
      if (!sc || !has_single_consumer(g_, uses_, y) || !scalable(y) || !rw_.can_replace(z, y)) return false;
      scale_weights(y, *sc);
      rw_.replace(z, y);
      rw_.mark_changed();
      return true;
    }
    // Rule 2: Mul(Add(lin, b), s).
    std::optional<BiasAdd> ba = bias_add(y);
    if (!ba) return false;
    const ValueId lin = rw_.resolve(g_.nodes[static_cast<size_t>(ba->id)].inputs[static_cast<size_t>(1 - ba->shift_slot)]);
    auto sc = channel_values(g_, s, t.dtype, t.rank(), ba->axis);
    if (!sc || !has_single_consumer(g_, uses_, lin) || !scalable(lin) || !rw_.can_replace(z, y)) return false;
    const int64_t m = t.shape[static_cast<size_t>(ba->axis)];
    std::vector<double> b2(static_cast<size_t>(m));
    for (int64_t c = 0; c < m; ++c) b2[static_cast<size_t>(c)] = at(ba->shift, c) * at(*sc, c);
    scale_weights(lin, *sc);
    const ValueId shift = expanded_channels(b2, t, ba->axis);  // invalidates node references
    g_.nodes[static_cast<size_t>(ba->id)].inputs[static_cast<size_t>(ba->shift_slot)] = shift;
    touched_[static_cast<size_t>(ba->id)] = 1;
    rw_.replace(z, y);
    rw_.mark_changed();
    return true;
  }

  // Rule 3 at Add node i with the outer shift in slot j.
  bool merge_adds(size_t i, int j) {
    const Node& n = g_.nodes[i];
    const ValueId z = n.outputs[0];
    const ValueId y = n.inputs[static_cast<size_t>(1 - j)];
    const TensorType t = g_.type(z);  // a copy: appending values reallocates
    if (g_.type(y) != t) return false;
    std::optional<BiasAdd> ba = bias_add(y);
    if (!ba) return false;
    auto c = channel_values(g_, n.inputs[static_cast<size_t>(j)], t.dtype, t.rank(), ba->axis);
    if (!c || !rw_.can_replace(z, y)) return false;
    const int64_t m = t.shape[static_cast<size_t>(ba->axis)];
    std::vector<double> b2(static_cast<size_t>(m));
    for (int64_t k = 0; k < m; ++k) b2[static_cast<size_t>(k)] = at(ba->shift, k) + at(*c, k);
    const ValueId shift = expanded_channels(b2, t, ba->axis);  // invalidates node references
    g_.nodes[static_cast<size_t>(ba->id)].inputs[static_cast<size_t>(ba->shift_slot)] = shift;
    touched_[static_cast<size_t>(ba->id)] = 1;
    rw_.replace(z, y);
    rw_.mark_changed();
    return true;
  }

  Graph& g_;
  Rewriter rw_;
  UseInfo uses_;
  std::vector<char> touched_;  // nodes (linear, bias Add) changed in this walk
};

// ---- fold_linear_into_linear ------------------------------------------------------------------

// `v` read through Reshapes that keep its last dim (each read once, none a graph output): the
// value at the top of that chain (v itself when no Reshape produces it).
ValueId through_row_reshapes(const Graph& g, const UseInfo& uses, ValueId v) {
  const int64_t n = g.type(v).shape.empty() ? -1 : g.type(v).shape.back();
  for (const Node* p = producer_of(g, v); p && p->domain.empty() && p->op_type == "Reshape" && p->inputs.size() == 2;
       p = producer_of(g, v)) {
    const ValueId in = p->inputs[0];
    if (!has_single_consumer(g, uses, v) || g.type(in).shape.empty() || g.type(in).shape.back() != n) break;
    v = in;
  }
  return v;
}

// The constant [K, N] right operand of a MatMul, or nullptr.
const Tensor* matmul_weights(const Graph& g, const Node& n, DType dt) {
  const Tensor* b = constant_of(g, n.inputs[1]);
  return float_weights(b) && b->dtype() == dt && b->rank() == 2 ? b : nullptr;
}

// a [K, N] x b [N, M] in double, stored as `dt`.
Tensor matrix_product(const Tensor& a, const Tensor& b, DType dt) {
  const int64_t k = a.dim(0), n = a.dim(1), m = b.dim(1);
  Tensor out(dt, {k, m});
  std::vector<double> row(static_cast<size_t>(m));
  for (int64_t i = 0; i < k; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t j = 0; j < n; ++j) {
      const double x = a.get_as_double(i * n + j);
      for (int64_t c = 0; c < m; ++c) row[static_cast<size_t>(c)] += x * b.get_as_double(j * m + c);
    }
    dispatch_dtype<KORCH_FLOAT_TYPES>(dt, "fold_linear_into_linear", [&](auto tag) {
      using T = decltype(tag);
      T* p = out.data<T>() + i * m;
      for (int64_t c = 0; c < m; ++c) p[c] = static_cast<T>(row[static_cast<size_t>(c)]);
    });
  }
  return out;
}

// A channels-first Conv's input [N, C, spatial..] as a view of rows: Transpose(u, channels_first)
// of u [N, .., C], or Reshape([N, C, P] -> [N, C, spatial..]) of such a Transpose, each read once:
// u, else kNoValue.
ValueId channels_first_rows(const Graph& g, const UseInfo& uses, ValueId v) {
  const Shape vs = g.type(v).shape;
  const Node* p = producer_of(g, v);
  if (p && p->domain.empty() && p->op_type == "Reshape" && has_single_consumer(g, uses, v)) {
    const Shape& in = g.type(p->inputs[0]).shape;
    if (in.size() < 3 || in[0] != vs[0] || in[1] != vs[1]) return kNoValue;
    v = p->inputs[0];
    p = producer_of(g, v);
  }
  if (!p || !p->domain.empty() || p->op_type != "Transpose" || !has_single_consumer(g, uses, v)) return kNoValue;
  const int64_t rank = g.type(v).rank();
  return p->attrs.get_ints("perm") == channels_first_perm(rank) ? p->inputs[0] : kNoValue;
}

bool fold_linear_pair(Graph& g, Rewriter& rw, const UseInfo& uses, const Node& outer) {
  const ValueId y = outer.outputs[0];
  const TensorType yt = g.type(y);  // a copy: appending values reallocates
  std::optional<Tensor> b2;
  ValueId rows = outer.inputs[0];  // the outer map's operand with its input channels last
  if (outer.op_type == "MatMul") {
    if (const Tensor* w = matmul_weights(g, outer, yt.dtype)) b2 = *w;
  } else {
    // A 1x1 Conv's weights [M, N, 1..] as [N, M] (input channel, output channel).
    const Tensor* w = pointwise_conv_weight(g, outer);
    if (w && w->dtype() == yt.dtype) b2 = w->reshaped({w->dim(0), w->dim(1)}).transposed({1, 0});
    if (!channels_last_layout(outer.attrs)) rows = channels_first_rows(g, uses, rows);
  }
  if (!b2 || yt.shape.empty() || rows == kNoValue || g.type(rows).shape.back() != b2->dim(0)) return false;
  const Shape rows_shape = g.type(rows).shape;
  // The inner linear: h = MatMul(x, B1), or h = Add(MatMul(x, B1), E(b1)), read through row Reshapes.
  const ValueId h = through_row_reshapes(g, uses, rows);
  if (!has_single_consumer(g, uses, h)) return false;
  const Node* p = producer_of(g, h);
  if (!p || !p->domain.empty() || p->inputs.size() != 2 || p->outputs.size() != 1) return false;
  const TensorType ht = g.type(h);
  std::optional<std::vector<double>> shift;
  if (p->op_type == "Add") {
    for (int k = 0; k < 2 && !shift; ++k) {
      const Node* mm = producer_of(g, p->inputs[static_cast<size_t>(1 - k)]);
      if (!mm || mm->op_type != "MatMul" || g.type(p->inputs[static_cast<size_t>(1 - k)]) != ht) continue;
      shift = channel_values(g, p->inputs[static_cast<size_t>(k)], ht.dtype, ht.rank(), ht.rank() - 1);
      if (shift) p = has_single_consumer(g, uses, mm->outputs[0]) ? mm : nullptr;
    }
    if (!shift || !p) return false;
  }
  if (!p->domain.empty() || p->op_type != "MatMul" || p->inputs.size() != 2) return false;
  const Tensor* b1 = matmul_weights(g, *p, yt.dtype);
  if (!b1 || b1->dim(1) != b2->dim(0)) return false;
  const int64_t k = b1->dim(0), n = b1->dim(1), m = b2->dim(1);
  if (k * m >= k * n + n * m) return false;  // only where it removes multiply-adds
  const ValueId x = p->inputs[0];
  const std::string base = outer.name + "/folded";
  ValueId z = rw.append_node("MatMul", {x, rw.add_constant(base + "_B", matrix_product(*b1, *b2, yt.dtype))})[0];
  if (shift) {
    Tensor c(yt.dtype, {m});
    Tensor b1v(DType::kFloat64, {1, n});
    for (int64_t j = 0; j < n; ++j) b1v.data<double>()[j] = at(*shift, j);
    const Tensor bc = matrix_product(b1v, *b2, yt.dtype).reshaped({m});
    const Shape zs = g.type(z).shape;
    ValueId e = rw.append_node("Expand", {rw.add_constant(base + "_bias", bc), rw.int_list(zs)})[0];
    z = rw.append_node("Add", {z, e})[0];
  }
  if (outer.op_type == "Conv" && !channels_last_layout(outer.attrs)) {  // back to channels-first
    Shape zs = rows_shape;
    zs.back() = m;
    if (g.type(z).shape != zs) z = rw.append_node("Reshape", {z, rw.int_list(zs)})[0];
    Attributes perm;
    perm.set("perm", channels_first_perm(static_cast<int64_t>(zs.size())));
    z = rw.append_node("Transpose", {z}, perm)[0];
  }
  if (g.type(z).shape != yt.shape) z = rw.append_node("Reshape", {z, rw.int_list(yt.shape)})[0];
  return rw.replace(y, z);
}

}  // namespace

bool fold_scale_into_linear(Graph& g) { return Folder(g).run(); }

bool fold_linear_into_linear(Graph& g) {
  if (g.opset < 8) return false;  // the new bias is an Expand
  Rewriter rw(g);
  const UseInfo uses(g);
  const size_t known = g.values.size();  // values made by this walk have no use counts: left for the next
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    const Node n = rw.visit(i);  // a copy: append_node invalidates references
    if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0] == kNoValue || n.inputs.size() < 2) continue;
    if ((n.op_type != "MatMul" && n.op_type != "Conv") || static_cast<size_t>(n.inputs[0]) >= known) continue;
    fold_linear_pair(g, rw, uses, n);
  }
  return rw.finish();
}

}  // namespace korch
