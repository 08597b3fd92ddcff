// A 1x1 convolution over a channel Concat of upsampled parts runs on each part before its
// upsampling (see rewrite.h). Feature-pyramid heads (SegFormer's all-MLP decoder, FPN/UPerNet
// fusions) bring every level to the finest resolution, concatenate along channels and mix them
// with a 1x1 convolution; after fission the upsampling is a chain of per-axis spatial steps
// (fission/layout.cc: an interpolation MatMul over H or W, or a Gather with constant indices).
// Channel mixing and spatial steps act on different axes, so they commute, and a convolution over
// a concatenation is the sum of convolutions over its parts with the matching weight columns:
//
//   Conv(Concat(MatMul(Ah, MatMul(y1, Bw)), y0, axis 1), W[O, C1 + C0, 1, 1])
//     -> Add(MatMul(Ah, MatMul(Conv(y1, W[:, :C1]), Bw)), Conv(y0, W[:, C1:]))
//
// It never loses: the rule applies only when no part is downsampled on its way to the Concat and
// the convolutions reading the Concat (all its readers must be such; CSP blocks have two) have
// together no more output channels than any moved part has input channels, so each
// convolution runs on at most as many pixels and each spatial step moves at most as many values
// as before; the concatenated tensor is never written. It applies when at least one part is
// strictly upsampled (otherwise the convolution's work is the same and there is nothing to gain).
// SegFormer-B0 at 512x512: the fuse convolution's 8.6 GFLOP at 128x128 become 2.9 GFLOP.
//
// Conditions: the Conv is 2-D or more, group 1, every kernel dim 1, strides 1, no padding, no bias
// input (fission moves biases to an Add), not channels-last; its weight is a float constant; the
// Concat (axis 1) feeds only such Convs; every spatial step's result feeds only the next step, and
// acts on an axis >= 2 (a MatMul with a constant rank-2 operand on the input's last two axes, or a
// Gather with constant indices).
#include <cstring>

#include "ir/op_registry.h"
#include "rewrite/rewrite.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

bool is_op(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

// One spatial step of an upsampling chain: how to apply it again to another input.
struct SpatialStep {
  std::string op;       // MatMul or Gather
  ValueId constant;     // the MatMul's constant operand, or the Gather's indices
  bool constant_left;   // MatMul(constant, x) rather than MatMul(x, constant)
  Attributes attrs;
};

// The step that produces `v`, when it is one, with its data input.
std::optional<std::pair<SpatialStep, ValueId>> spatial_step(const Graph& g, ValueId v) {
  const Node* p = producer_of(g, v);
  if (p == nullptr || p->inputs.size() != 2) return std::nullopt;
  const int64_t rank = g.type(v).rank();
  if (is_op(*p, "MatMul")) {
    for (int side = 0; side < 2; ++side) {
      const Tensor* c = constant_of(g, p->inputs[static_cast<size_t>(side)]);
      const ValueId x = p->inputs[static_cast<size_t>(1 - side)];
      if (c == nullptr || c->rank() != 2 || g.type(x).rank() != rank) continue;
      // MatMul(C, x) mixes x's axis rank-2, MatMul(x, C) its axis rank-1.
      if ((side == 0 ? rank - 2 : rank - 1) < 2) continue;
      return std::make_pair(SpatialStep{"MatMul", p->inputs[static_cast<size_t>(side)], side == 0, {}}, x);
    }
    return std::nullopt;
  }
  if (is_op(*p, "Gather") && constant_of(g, p->inputs[1]) != nullptr && g.type(p->inputs[0]).rank() == rank &&
      constant_of(g, p->inputs[1])->rank() == 1) {
    int64_t axis = p->attrs.get_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 2) return std::nullopt;
    return std::make_pair(SpatialStep{"Gather", p->inputs[1], false, p->attrs}, p->inputs[0]);
  }
  return std::nullopt;
}

int64_t spatial_size(const Shape& s) {
  int64_t n = 1;
  for (size_t d = 2; d < s.size(); ++d) n *= s[d];
  return n;
}

// W[:, first:first+count, ...] of a weight [O, C, 1, ...].
Tensor weight_columns(const Tensor& w, int64_t first, int64_t count) {
  Shape shape = w.shape();
  shape[1] = count;
  Tensor out(w.dtype(), shape);
  const size_t esize = static_cast<size_t>(dtype_size(w.dtype()));
  const int64_t in_cols = w.dim(1);
  for (int64_t o = 0; o < w.dim(0); ++o)
    std::memcpy(out.raw() + static_cast<size_t>(o * count) * esize,
                w.raw() + static_cast<size_t>(o * in_cols + first) * esize, static_cast<size_t>(count) * esize);
  return out;
}

struct Part {
  ValueId root;                    // the part before its spatial steps
  std::vector<SpatialStep> steps;  // root first
  int64_t channels;
};

}  // namespace

bool conv_over_upsampled_concat(Graph& g) {
  Rewriter rw(g);
  const UseInfo uses(g);
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    const Node& cat = rw.visit(i);
    if (!is_op(cat, "Concat") || cat.outputs.empty() || cat.outputs[0] == kNoValue) continue;
    const ValueId joined = cat.outputs[0];
    // Every reader of the concatenation is such a convolution (CSP blocks read it with two).
    const std::vector<NodeId>& readers = uses.consumers[static_cast<size_t>(joined)];
    if (readers.empty() || uses.uses(joined) != static_cast<int>(readers.size())) continue;
    struct Mix {
      Tensor weight;
      Attributes attrs;
      ValueId out;
    };
    std::vector<Mix> mixes;
    int64_t out_channels = 0;  // of all the readers together
    const int64_t rank = g.type(joined).rank();
    for (NodeId r : readers) {
      const Node& conv = g.nodes[static_cast<size_t>(r)];
      const Tensor* w = channels_last_layout(conv.attrs) ? nullptr : pointwise_conv_weight(g, conv);
      if (w == nullptr || w->rank() < 4 || conv.inputs[0] != joined || conv.inputs[1] == joined || conv.outputs[0] == kNoValue ||
          w->rank() != rank) {
        mixes.clear();
        break;
      }
      mixes.push_back({w->clone(), conv.attrs, conv.outputs[0]});
      out_channels += w->dim(0);
    }
    int64_t axis = cat.attrs.get_int("axis", 0);
    if (axis < 0) axis += rank;
    if (mixes.empty() || axis != 1) continue;
    std::vector<Part> parts;
    bool ok = true, gains = false;
    for (ValueId part : cat.inputs) {
      Part p{part, {}, g.type(part).shape.size() > 1 ? g.type(part).shape[1] : -1};
      while (true) {
        auto step = spatial_step(g, p.root);
        if (!step || !has_single_consumer(g, uses, p.root)) break;
        p.steps.insert(p.steps.begin(), step->first);
        p.root = step->second;
      }
      const Shape& before = g.type(p.root).shape;
      const Shape& after = g.type(part).shape;
      if (!p.steps.empty()) {
        ok &= spatial_size(before) <= spatial_size(after) && out_channels <= p.channels;
        gains |= spatial_size(before) < spatial_size(after);
      }
      ok &= p.channels > 0;
      parts.push_back(std::move(p));
    }
    if (!ok || !gains) continue;
    for (const Mix& mix : mixes) {
      ValueId sum = kNoValue;
      int64_t first = 0;
      for (const Part& p : parts) {
        const ValueId wp = rw.add_constant("rewrite/conv_part_weight", weight_columns(mix.weight, first, p.channels));
        first += p.channels;
        ValueId z = rw.append_node("Conv", {p.root, wp}, mix.attrs)[0];
        for (const SpatialStep& s : p.steps) {
          if (s.op == "MatMul")
            z = rw.append_node("MatMul", s.constant_left ? std::vector<ValueId>{s.constant, z}
                                                         : std::vector<ValueId>{z, s.constant})[0];
          else
            z = rw.append_node("Gather", {z, s.constant}, s.attrs)[0];
        }
        sum = sum == kNoValue ? z : rw.append_node("Add", {sum, z})[0];
      }
      if (g.type(sum) == g.type(mix.out)) rw.replace(mix.out, sum);  // else not expected: steps keep dims' roles
    }
  }
  return rw.finish();
}

}  // namespace korch
