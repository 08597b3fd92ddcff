// The channels-last layout pass (channels_last.h has the rules and a worked example).
#include "rewrite/channels_last.h"

#include <algorithm>
#include <set>

#include "ir/op_registry.h"
#include "ir/primitive.h"
#include "rewrite/rewrite_util.h"

namespace korch {

namespace {

bool is_default(const Node& n, const char* op) { return n.domain.empty() && n.op_type == op; }

// `v` is Transpose(a, channels_first_perm(rank)) of a rank >= 3 tensor: a, else kNoValue.
ValueId channels_first_source(const Graph& g, ValueId v) {
  const Node* p = producer_of(g, v);
  if (!p || !is_default(*p, "Transpose") || p->inputs.size() != 1) return kNoValue;
  const int64_t rank = g.type(v).rank();
  if (rank < 3 || p->attrs.get_ints("perm") != channels_first_perm(rank)) return kNoValue;
  return p->inputs[0];
}

Shape padded(const Shape& s, size_t rank) {
  Shape out(rank - std::min(rank, s.size()), 1);
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

int non_unit_dims(const Shape& s) {
  return static_cast<int>(std::count_if(s.begin(), s.end(), [](int64_t d) { return d != 1; }));
}

class Sinker {
 public:
  explicit Sinker(Graph& g) : g_(g), rw_(g) {}

  bool walk(int* moved) {
    for (size_t i = 0, end = g_.nodes.size(); i < end; ++i) {
      Node& n = rw_.visit(i);
      if (n.outputs.size() != 1 || n.outputs[0] == kNoValue || n.inputs.empty()) continue;
      const Node copy = n;  // append_node invalidates `n`
      bool done = false;
      if (primitive_kind(g_, copy) == PrimitiveKind::kElementwise) done = elementwise(copy);
      else if (reduce_ops().count(copy.op_type) && copy.domain.empty()) done = reduce(copy);
      else if (is_default(copy, "Concat")) done = concat(copy);
      else if (is_default(copy, "MaxPool") || is_default(copy, "AveragePool")) done = pool(copy);
      if (done) ++*moved;
    }
    return rw_.finish();
  }

 private:
  static const std::set<std::string>& reduce_ops() {
    static const std::set<std::string> s = {"ReduceMean", "ReduceSum",   "ReduceMax",       "ReduceMin",
                                            "ReduceProd", "ReduceL1",    "ReduceL2",        "ReduceSumSquare",
                                            "ReduceLogSum", "ReduceLogSumExp"};
    return s;
  }

  // `v` (an operand of a rank-`rank` elementwise node) as the channels-last operand, or kNoValue
  // when that would cost a real transpose. `dry`: only says whether it can (kNoValue or v), adds
  // nothing to the graph.
  ValueId operand(ValueId v, size_t rank, bool dry) {
    if (v == kNoValue) return v;
    const TensorType t = g_.type(v);  // a copy: adding nodes grows the value table
    if (t.numel() == 1 && t.rank() <= static_cast<int64_t>(rank)) return v;  // a scalar broadcasts anywhere
    if (t.rank() > static_cast<int64_t>(rank)) return kNoValue;
    const auto last = channels_last_perm(static_cast<int64_t>(rank));
    if (t.rank() == static_cast<int64_t>(rank))
      if (ValueId a = channels_first_source(g_, v); a != kNoValue) return a;
    const Shape target = permute_shape(padded(t.shape, rank), last);
    if (const Tensor* c = constant_of(g_, v))
      return dry ? v : rw_.add_constant("channels_last/const", c->reshaped(padded(t.shape, rank)).transposed(last));
    if (non_unit_dims(t.shape) <= 1) return dry ? v : rw_.append_node("Reshape", {v, rw_.int_list(target)})[0];
    const Node* p = producer_of(g_, v);
    if (p && is_default(*p, "Expand") && p->inputs.size() == 2) {
      const ValueId in = p->inputs[0];
      const ValueId src = operand(in, rank, dry);
      if (src != kNoValue) return dry ? v : rw_.append_node("Expand", {src, rw_.int_list(target)})[0];
    }
    return kNoValue;
  }

  // Appends Transpose(y, channels_first) and makes every reader of `old` read it.
  bool finish_node(ValueId old, ValueId y) {
    const ValueId t = rw_.append_node("Transpose", {y}, perm_attrs(channels_first_perm(g_.type(y).rank())))[0];
    return rw_.replace(old, t);
  }

  static Attributes perm_attrs(const std::vector<int64_t>& perm) {
    Attributes a;
    a.set("perm", perm);
    return a;
  }

  bool elementwise(const Node& n) {
    const size_t rank = static_cast<size_t>(g_.type(n.outputs[0]).rank());
    if (rank < 3) return false;
    bool any = false;
    for (ValueId v : n.inputs)
      any |= v != kNoValue && g_.type(v).rank() == static_cast<int64_t>(rank) && channels_first_source(g_, v) != kNoValue;
    if (!any) return false;
    for (ValueId v : n.inputs)
      if (v != kNoValue && operand(v, rank, true) == kNoValue) return false;
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(operand(v, rank, false));
    return finish_node(n.outputs[0], rw_.append_node(n.op_type, ins, n.attrs)[0]);
  }

  bool reduce(const Node& n) {
    const ValueId a = channels_first_source(g_, n.inputs[0]);
    if (a == kNoValue) return false;
    const int64_t rank = g_.type(a).rank();
    const bool axes_attr = n.attrs.has("axes");
    std::optional<std::vector<int64_t>> axes;
    if (axes_attr) axes = n.attrs.get_ints("axes");
    else if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) axes = constant_ints(g_, n.inputs[1]);
    if (!axes || axes->empty()) return false;  // all axes, or not constant: left alone
    const auto p = channels_first_perm(rank);
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    std::vector<int64_t> mapped;
    for (int64_t ax : *axes) {
      const int64_t m = p[static_cast<size_t>(normalize_axis(ax, rank))];
      reduced[static_cast<size_t>(m)] = true;
      mapped.push_back(m);
    }
    const bool keepdims = n.attrs.get_int("keepdims", 1) != 0;
    if (!keepdims) {  // the kept dims must come out in the same order
      std::vector<int64_t> kept;
      for (int64_t i = 0; i < rank; ++i)
        if (!std::count(axes->begin(), axes->end(), i) && !std::count(axes->begin(), axes->end(), i - rank))
          kept.push_back(p[static_cast<size_t>(i)]);
      if (!std::is_sorted(kept.begin(), kept.end())) return false;
    }
    std::sort(mapped.begin(), mapped.end());
    Attributes attrs = n.attrs;
    std::vector<ValueId> ins = {a};
    if (axes_attr) attrs.set("axes", mapped);
    else ins.push_back(rw_.int_list(mapped));
    for (size_t i = 2; i < n.inputs.size(); ++i) ins.push_back(n.inputs[i]);
    const ValueId y = rw_.append_node(n.op_type, ins, attrs)[0];
    return keepdims ? finish_node(n.outputs[0], y) : rw_.replace(n.outputs[0], y);
  }

  bool concat(const Node& n) {
    const int64_t rank = g_.type(n.outputs[0]).rank();
    if (rank < 3) return false;
    std::vector<ValueId> ins;
    bool any = false;
    for (ValueId v : n.inputs) {
      ValueId a = channels_first_source(g_, v);
      if (a == kNoValue) {
        const Tensor* c = constant_of(g_, v);
        if (!c) return false;
        a = rw_.add_constant("channels_last/const", c->transposed(channels_last_perm(rank)));
      } else {
        any = true;
      }
      ins.push_back(a);
    }
    if (!any) return false;
    Attributes attrs = n.attrs;
    attrs.set("axis", channels_first_perm(rank)[static_cast<size_t>(normalize_axis(n.attrs.get_int("axis"), rank))]);
    return finish_node(n.outputs[0], rw_.append_node("Concat", ins, attrs)[0]);
  }

  // MaxPool / AveragePool of T_first(a): the channels-last pool of a (ir/ops/pool.cc), then T_first.
  bool pool(const Node& n) {
    if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return false;  // Indices count NCHW positions
    if (channels_last_layout(n.attrs)) return false;
    const ValueId a = channels_first_source(g_, n.inputs[0]);
    if (a == kNoValue || g_.type(a).rank() > 5) return false;
    Attributes attrs = n.attrs;
    attrs.set("channels_last", int64_t{1});
    return finish_node(n.outputs[0], rw_.append_node(n.op_type, {a}, attrs)[0]);
  }

  Graph& g_;
  Rewriter rw_;
};

// Conv(x, W) -> T_first(Conv_cl(T_last(x), W)) for every eligible Conv.
int convert_convolutions(Graph& g) {
  Rewriter rw(g);
  int count = 0;
  for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
    const Node n = rw.visit(i);
    // Conv (f32, no bias) and ConvInteger (int8 x, its zero point a third input, no weight zero point)
    const bool integer = is_default(n, "ConvInteger");
    if ((!is_default(n, "Conv") && !integer) || n.outputs.size() != 1 || n.inputs.size() < 2) continue;
    if (n.inputs.size() > (integer ? 3 : 2) && n.inputs.back() != kNoValue) continue;
    if (channels_last_layout(n.attrs)) continue;
    const TensorType x = g.type(n.inputs[0]);  // a copy: append_node grows the value table
    const bool int8 = x.dtype == DType::kUInt8 || x.dtype == DType::kInt8;
    if ((integer ? !int8 : x.dtype != DType::kFloat32) || x.rank() < 3 || x.rank() > 5) continue;
    Attributes to_last, conv = n.attrs;
    to_last.set("perm", channels_last_perm(x.rank()));
    conv.set("channels_last", int64_t{1});
    const ValueId xt = rw.append_node("Transpose", {n.inputs[0]}, to_last)[0];
    std::vector<ValueId> ins = {xt, n.inputs[1]};
    if (integer && n.inputs.size() > 2) ins.push_back(n.inputs[2]);
    const ValueId y = rw.append_node(n.op_type, ins, conv)[0];
    Attributes to_first;
    to_first.set("perm", channels_first_perm(x.rank()));
    const ValueId yt = rw.append_node("Transpose", {y}, to_first)[0];
    if (rw.replace(n.outputs[0], yt)) ++count;
  }
  rw.finish();
  return count;
}

}  // namespace

bool to_channels_last(Graph& g, ChannelsLastReport* report) {
  ChannelsLastReport rep;
  rep.convolutions = convert_convolutions(g);
  if (rep.convolutions > 0) {
    g.remove_dead_code();
    for (int round = 0; round < 16; ++round) {  // one walk moves a Transpose as far as it goes; more are rare
      Sinker s(g);
      const bool changed = s.walk(&rep.moved);
      g.remove_dead_code();  // the nodes moved past are dead now: the next walk must not see them
      if (!changed) break;
    }
  }
  if (report) *report = rep;
  return rep.convolutions > 0;
}

}  // namespace korch
