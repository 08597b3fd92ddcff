// build_loop_kernel: plans the stages of a loop kernel.
//
//   1. every reduction (Reduce*, ArgMax/ArgMin, MaxPool/AveragePool), in node order, is a
//      reduction stage writing its result into its output buffer or a scratch buffer;
//   2. the other kernel outputs, grouped by shape, are pointwise stages (one loop nest writes all
//      outputs of one shape, sharing their common subexpressions).
// Each stage's loops start as the non-trivial dims of its domain; adjacent dims are merged
// greedily while merging adds no div/mod to the index arithmetic (weighted heavily when it lands
// in the innermost loop), so elementwise chains and reshapes become one flat loop while a
// per-channel broadcast keeps its channel loop and loads its operand once per row.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <set>

#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel_internal.h"
#include "ir/op_registry.h"
#include "support/error.h"

namespace korch {

namespace loop {
namespace {


const std::set<std::string>& supported_ops() {
  static const std::set<std::string> s = {
      // elementwise
      "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Sqrt", "Reciprocal", "Tanh", "Softplus", "Erf", "HardSwish",
      "Exp", "LeakyRelu", "Clip", "HardSigmoid", "Neg", "Abs", "Log", "Pow", "Max", "Min", "Sum", "Mean", "Where",
      "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Cast", "CastLike",
      "Floor", "Ceil", "Round", "Sin", "Cos", "Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Identity", "Gelu",
      "Mish", "Elu", "Selu", "Celu", "Softsign", "PRelu", "ThresholdedRelu", "Shrink", "Sign", "Mod", "IsNaN",
      "Asinh", "Acosh", "Atanh", "IsInf", "QuantizeLinear", "DequantizeLinear",
      // broadcast / layout
      "Expand", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Concat", "Split", "Gather",
      "Pad", "Tile", "DepthToSpace", "SpaceToDepth", "Dropout",
      // reductions
      "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ArgMax", "ArgMin", "MaxPool",
      "AveragePool"};
  return s;
}

bool is_reduce_op(const std::string& op) {
  return op == "ReduceSum" || op == "ReduceMean" || op == "ReduceMax" || op == "ReduceMin" || op == "ReduceProd";
}

// Reduced axes of a Reduce* node (empty = all), and whether it is a no-op.
std::vector<int64_t> reduce_axes(const Graph& g, const Node& n, bool* noop) {
  std::vector<int64_t> axes;
  if (n.attrs.has("axes")) {
    axes = n.attrs.get_ints("axes");
  } else if (n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    const Value& a = g.value(n.inputs[1]);
    if (!a.is_constant()) unsupported(fmt::format("{}: axes are not a constant", node_ref(n)));
    axes = a.constant->to_int_vector();
  }
  *noop = axes.empty() && n.attrs.get_int("noop_with_empty_axes", 0) != 0;
  return axes;
}

bool materialised(const Graph& g, const Node& n) {
  if (is_reduce_op(n.op_type)) {
    bool noop = false;
    reduce_axes(g, n, &noop);
    return !noop;
  }
  return n.op_type == "ArgMax" || n.op_type == "ArgMin" || n.op_type == "MaxPool" || n.op_type == "AveragePool";
}

// ---- stage construction with dim merging ------------------------------------------------------

using Body = std::function<void(StageBuilder&, const std::vector<int>& kept, const std::vector<int>& red)>;
using Groups = std::vector<std::vector<size_t>>;  // consecutive dims per loop

// Positions [begin, end) of the innermost kept loop, when it is one dim (end < 0: all of it).
struct InnerRange {
  int64_t begin = 0, end = -1;
};

Stage build_stage(KernelContext& kc, const Shape& kept, const Shape& red, const Groups& gk, const Groups& gr,
                  bool reduction, const Body& body, InnerRange range = {}) {
  Stage st;
  st.is_reduction = reduction;
  const bool ranged = range.end >= 0 && !gk.empty() && gk.back().size() == 1;
  for (const auto& grp : gk) {
    int64_t e = 1;
    for (size_t d : grp) e *= kept[d];
    st.loops.push_back(Loop{e, false});
  }
  if (ranged) st.loops[gk.size() - 1].extent = range.end - range.begin;
  for (const auto& grp : gr) {
    int64_t e = 1;
    for (size_t d : grp) e *= red[d];
    st.loops.push_back(Loop{e, true});
  }
  StageBuilder b(kc, st);
  auto assign = [&](const Shape& shape, const Groups& groups, int first_loop) {
    std::vector<int> idx(shape.size(), b.ix_const(0));
    for (size_t k = 0; k < groups.size(); ++k) {
      const int var = b.ix_var(first_loop + static_cast<int>(k));
      int64_t stride = 1;
      for (size_t j = groups[k].size(); j-- > 0;) {
        const size_t d = groups[k][j];
        idx[d] = b.ix_mod(b.ix_div(var, stride), shape[d]);
        stride *= shape[d];
      }
    }
    return idx;
  };
  std::vector<int> kidx = assign(kept, gk, 0);
  if (ranged) kidx[gk.back()[0]] = b.ix_add_const(b.ix_var(static_cast<int>(gk.size()) - 1), range.begin);
  const std::vector<int> ridx = assign(red, gr, static_cast<int>(gk.size()));
  body(b, kidx, ridx);
  return st;
}

// Index arithmetic the stage does per element: div/mod/table lookups, weighted by where they run.
int64_t stage_cost(const Stage& st) {
  std::vector<char> seen_e(st.exprs.size(), 0), seen_i(st.index.size(), 0);
  std::vector<int> estack, istack;
  for (const Store& s : st.stores) {
    estack.push_back(s.value);
    istack.push_back(s.index);
  }
  if (st.is_reduction) {
    estack.push_back(st.reduction.value);
    estack.push_back(st.reduction.result);
  }
  while (!estack.empty()) {
    const int e = estack.back();
    estack.pop_back();
    if (e < 0 || seen_e[static_cast<size_t>(e)]) continue;
    seen_e[static_cast<size_t>(e)] = 1;
    const ExprNode& n = st.exprs[static_cast<size_t>(e)];
    for (int a : n.args) estack.push_back(a);
    if (n.index >= 0) istack.push_back(n.index);
  }
  const int inner = static_cast<int>(st.loops.size()) - 1;
  int64_t cost = 0;
  while (!istack.empty()) {
    const int i = istack.back();
    istack.pop_back();
    if (i < 0 || seen_i[static_cast<size_t>(i)]) continue;
    seen_i[static_cast<size_t>(i)] = 1;
    const IndexNode& n = st.index[static_cast<size_t>(i)];
    for (const auto& [t, c] : n.terms) istack.push_back(t);
    istack.push_back(n.a);
    istack.push_back(n.b);
    if (n.op == IndexOp::kDiv || n.op == IndexOp::kMod || n.op == IndexOp::kTable)
      cost += n.level == inner ? 100 : (n.level >= 0 ? 1 : 0);
  }
  return cost;
}

// Consecutive groups of the dims of `shape` that are not 1 whose sizes are the first extents of
// `target`, in order; false when there are none.
bool groups_matching(const Shape& shape, const std::vector<int64_t>& target, Groups* out) {
  Groups groups;
  std::vector<size_t> cur;
  int64_t size = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (groups.size() >= target.size()) return false;
    cur.push_back(d);
    size *= shape[d];
    const int64_t want = target[groups.size()];
    if (size == want) {
      groups.push_back(std::move(cur));
      cur.clear();
      size = 1;
    } else if (want % size != 0) {
      return false;
    }
  }
  if (!cur.empty()) return false;
  *out = std::move(groups);
  return true;
}

Stage plan_stage(KernelContext& kc, const Shape& kept, const Shape& red, bool reduction, const Body& body,
                 Groups* chosen = nullptr) {
  Groups gk, gr;
  for (size_t d = 0; d < kept.size(); ++d)
    if (kept[d] != 1) gk.push_back({d});
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d] != 1) gr.push_back({d});
  Stage best = build_stage(kc, kept, red, gk, gr, reduction, body);
  int64_t best_cost = stage_cost(best);
  for (bool improved = true; improved;) {
    improved = false;
    for (Groups* groups : {&gk, &gr}) {
      for (size_t j = groups->size(); j-- > 1 && !improved;) {
        Groups trial = *groups;
        trial[j - 1].insert(trial[j - 1].end(), trial[j].begin(), trial[j].end());
        trial.erase(trial.begin() + static_cast<std::ptrdiff_t>(j));
        Stage st = groups == &gk ? build_stage(kc, kept, red, trial, gr, reduction, body)
                                 : build_stage(kc, kept, red, gk, trial, reduction, body);
        const int64_t cost = stage_cost(st);
        if (cost <= best_cost) {
          *groups = std::move(trial);
          best = std::move(st);
          best_cost = cost;
          improved = true;
        }
      }
      if (improved) break;
    }
  }
  Groups preferred;
  if (!kc.prefer_loops.empty() && groups_matching(kept, kc.prefer_loops, &preferred) && preferred != gk) {
    Stage st = build_stage(kc, kept, red, preferred, gr, reduction, body);
    if (stage_cost(st) <= best_cost) {
      best = std::move(st);
      gk = std::move(preferred);
    }
  }
  if (chosen) *chosen = gk;
  return best;
}

// ---- pooling geometry (as the reference, src/ir/ops/pool.cc) -----------------------------------

struct PoolDim {
  int64_t in, out, k, s, d, pb, pe;
};

// A channels-last pool (attribute channels_last = 1) has its spatial dims at 1.. instead of 2...
size_t first_spatial_dim(const Node& n) { return channels_last_layout(n.attrs) ? 1 : 2; }

std::vector<PoolDim> pool_dims(const Node& n, const Shape& x, const Shape& y) {
  const size_t nsp = x.size() - 2, sp = first_spatial_dim(n);
  const auto ks = n.attrs.get_ints("kernel_shape");
  const auto st = n.attrs.get_ints("strides", std::vector<int64_t>(nsp, 1));
  const auto dl = n.attrs.get_ints("dilations", std::vector<int64_t>(nsp, 1));
  const auto pads = n.attrs.get_ints("pads", std::vector<int64_t>(2 * nsp, 0));
  std::string ap = n.attrs.get_string("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  std::vector<PoolDim> dims;
  for (size_t i = 0; i < nsp; ++i) {
    PoolDim p{x[sp + i], y[sp + i], ks[i], st.empty() ? 1 : st[i], dl.empty() ? 1 : dl[i], 0, 0};
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      const AxisPads same = same_auto_pads(p.in, p.out, p.s, (p.k - 1) * p.d + 1, ap == "SAME_UPPER");
      p.pb = same.before;
      p.pe = same.after;
    } else if (ap == "NOTSET") {
      p.pb = pads[i];
      p.pe = pads[nsp + i];
    }
    dims.push_back(p);
  }
  return dims;
}

// Window positions of output o along one dim: inside the input, and inside the padded extent.
void window_counts(const PoolDim& p, int64_t o, int64_t* inside, int64_t* padded) {
  const int64_t start = o * p.s - p.pb;
  auto first_at_least = [&](int64_t bound) {
    const int64_t num = bound - start;
    if (num <= 0) return int64_t{0};
    return std::min<int64_t>(p.k, (num + p.d - 1) / p.d);
  };
  const int64_t lo = first_at_least(0), hi = std::max(lo, first_at_least(p.in));
  *inside = hi - lo;
  *padded = first_at_least(p.in + p.pe);
}

// ---- the stages -------------------------------------------------------------------------------

Stage reduce_stage(KernelContext& kc, const Node& n, int out_buffer) {
  const Graph& g = kc.g;
  const ValueId x = n.inputs[0];
  const Shape& in = g.type(x).shape;
  const ValueId y = n.outputs[0];
  const Shape& out = g.type(y).shape;
  const DType xdt = g.type(x).dtype;
  const std::string& op = n.op_type;

  if (op == "MaxPool" || op == "AveragePool") {
    if (!is_float(xdt)) unsupported(fmt::format("{}: element type {} is not supported", node_ref(n), dtype_name(xdt)));
    const std::vector<PoolDim> dims = pool_dims(n, in, out);
    Shape red;
    for (const PoolDim& p : dims) red.push_back(p.k);
    const bool is_max = op == "MaxPool";
    const bool cip = n.attrs.get_int("count_include_pad", 0) != 0;
    const size_t sp = first_spatial_dim(n);  // [N, C, spatial..] or [N, spatial.., C]
    Stage st = plan_stage(kc, out, red, true, [&](StageBuilder& b, const std::vector<int>& k, const std::vector<int>& r) {
      std::vector<int> src = k;
      int cond = b.e_iconst(DType::kBool, 1);
      for (size_t j = 0; j < dims.size(); ++j) {
        const PoolDim& p = dims[j];
        const int pos = b.ix_add(b.ix_mul(k[sp + j], p.s), b.ix_add_const(b.ix_mul(r[j], p.d), -p.pb));
        cond = b.e_binary(Fn::kAnd, cond, b.e_in_range(pos, 0, p.in));
        src[sp + j] = b.ix_clamp(pos, 0, p.in - 1);
      }
      const int v = b.value_at(x, src);
      const double ident = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
      Reduction& red_desc = b.stage().reduction;
      red_desc.combiner = is_max ? Combiner::kMax : Combiner::kSum;
      red_desc.acc_dtype = xdt;
      red_desc.value = b.e_select(cond, v, b.e_const(xdt, ident));
      int result = b.e_acc(xdt);
      if (!is_max) {
        int count = -1;
        for (size_t j = 0; j < dims.size(); ++j) {
          std::vector<int64_t> counts(static_cast<size_t>(dims[j].out));
          for (int64_t o = 0; o < dims[j].out; ++o) {
            int64_t inside, padded;
            window_counts(dims[j], o, &inside, &padded);
            counts[static_cast<size_t>(o)] = cip ? padded : inside;
          }
          const int table = kc.add_table(DType::kInt64, counts);
          const int cj = b.e_cast(xdt, b.e_table(table, k[sp + j]));
          count = count < 0 ? cj : b.e_binary(Fn::kMul, count, cj);
        }
        if (count >= 0) result = b.e_binary(Fn::kDiv, result, count);
      }
      red_desc.result = result;
      b.stage().stores.push_back(Store{out_buffer, b.flat_index(k, out), result});
    });
    st.comment = op;  // no graph names: kernels with one signature must print identically
    return st;
  }

  // Reduce* and ArgMax/ArgMin: kept loops over the output, reduce loops over the reduced dims.
  std::vector<bool> reduced(in.size(), false);
  bool keepdims = n.attrs.get_int("keepdims", 1) != 0;
  bool select_last = false;
  Combiner comb;
  if (op == "ArgMax" || op == "ArgMin") {
    reduced[static_cast<size_t>(normalize_axis(n.attrs.get_int("axis", 0), static_cast<int64_t>(in.size())))] = true;
    comb = op == "ArgMax" ? Combiner::kArgMax : Combiner::kArgMin;
    select_last = n.attrs.get_int("select_last_index", 0) != 0;
  } else {
    bool noop = false;
    std::vector<int64_t> axes = reduce_axes(g, n, &noop);
    if (axes.empty()) reduced.assign(in.size(), true);
    for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, static_cast<int64_t>(in.size())))] = true;
    comb = op == "ReduceMax" ? Combiner::kMax : op == "ReduceMin" ? Combiner::kMin
         : op == "ReduceProd" ? Combiner::kProd : Combiner::kSum;
    if (xdt == DType::kBool && comb != Combiner::kMax && comb != Combiner::kMin)
      unsupported(fmt::format("{}: element type bool is not supported", node_ref(n)));
  }
  Shape red;
  int64_t count = 1;
  for (size_t d = 0; d < in.size(); ++d)
    if (reduced[d]) {
      red.push_back(in[d]);
      count *= in[d];
    }
  Stage st = plan_stage(kc, out, red, true, [&](StageBuilder& b, const std::vector<int>& k, const std::vector<int>& r) {
    std::vector<int> src(in.size());
    size_t kj = 0, rj = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (reduced[d]) {
        src[d] = r[rj++];
        if (keepdims) ++kj;
      } else {
        src[d] = k[kj++];
      }
    }
    Reduction& rd = b.stage().reduction;
    rd.combiner = comb;
    // f32 sums accumulate in f64, like the reference: a sum that cancels to near zero (a mean of
    // centred values before 1/sqrt, x / sum(x)) keeps its relative accuracy. It costs nothing
    // measurable (softmax f32[12,197,197]: 0.52 ms either way, one thread). Tried f32 (2026-12-07):
    // efficientnet_b0's sum-holding kernels ran 0.80x alone but 0.35 -> 0.28 ms of a 6 ms run in
    // the model, and a layer norm of rows offset by 1e4 times their spread failed at 1.45e-3
    // (loop_cases.cc: layernorm_offset_rows).
    const bool wide = xdt == DType::kFloat32 && comb == Combiner::kSum && count >= 2;
    const DType adt = wide ? DType::kFloat64 : xdt;
    rd.acc_dtype = adt;
    rd.select_last = select_last;
    rd.value = b.e_cast(adt, b.value_at(x, src));
    int result;
    if (comb == Combiner::kArgMax || comb == Combiner::kArgMin) {
      result = b.e_acc(DType::kInt64);
    } else {
      result = b.e_acc(adt);
      if (op == "ReduceMean") result = b.e_binary(Fn::kDiv, result, b.e_iconst(adt, count));
      result = b.e_cast(xdt, result);
    }
    rd.result = result;
    b.stage().stores.push_back(Store{out_buffer, b.flat_index(k, out), result});
  });
  st.comment = op;  // no graph names: kernels with one signature must print identically
  return st;
}

// One stage, or one per interval of its innermost loop where index-set splitting pays
// (loop_kernel_split.cc): at most kMaxPieces, and only when the pieces together evaluate at most
// half the innermost-level tests, clamps and index folds the whole loop does.
std::vector<Stage> pointwise_stages_for(KernelContext& kc, const Shape& shape,
                                        const std::vector<std::pair<ValueId, int>>& outs) {
  constexpr size_t kMaxPieces = 64;
  const Body body = [&](StageBuilder& b, const std::vector<int>& k, const std::vector<int>&) {
    for (const auto& [v, buffer] : outs) b.stage().stores.push_back(Store{buffer, b.flat_index(k, shape), b.value_at(v, k)});
  };
  Groups gk;
  Stage st = plan_stage(kc, shape, {}, false, body, &gk);
  std::string bufs;
  for (const auto& [v, buffer] : outs) bufs += (bufs.empty() ? "buffer " : ", ") + std::to_string(buffer);
  st.comment = "pointwise -> " + bufs;
  std::vector<Stage> out;
  const int64_t irregular = inner_irregularity(st);
  if (irregular == 0 || gk.empty() || gk.back().size() != 1) {
    out.push_back(std::move(st));
    return out;
  }
  // Cut where the whole loop's expressions change form, then again inside each piece (a fold
  // that only the narrower range reveals: reflect padding's mod first, then its mirror), while
  // the pieces stay few.
  const int64_t extent = st.loops.back().extent;
  auto piece = [&](int64_t begin, int64_t end) {
    return build_stage(kc, shape, {}, gk, {}, false, body, InnerRange{begin, end});
  };
  std::vector<std::pair<int64_t, int64_t>> intervals = {{0, extent}};
  for (int pass = 0; pass < 3; ++pass) {
    std::vector<std::pair<int64_t, int64_t>> next;
    for (const auto& [begin, end] : intervals) {
      int64_t from = begin;
      for (int64_t p : inner_split_points(pass == 0 ? st : piece(begin, end))) {
        next.emplace_back(from, begin + p);
        from = begin + p;
      }
      next.emplace_back(from, end);
    }
    if (next.size() > kMaxPieces || next.size() == intervals.size()) break;
    intervals = std::move(next);
  }
  if (intervals.size() == 1) {
    out.push_back(std::move(st));
    return out;
  }
  int64_t after = 0;
  for (const auto& [begin, end] : intervals) {
    Stage p = piece(begin, end);
    after += inner_irregularity(p) * (end - begin);
    p.comment = fmt::format("{} [{}, {}) of the innermost loop", st.comment, begin, end);
    out.push_back(std::move(p));
  }
  if (2 * after > irregular * extent) {
    out.clear();
    out.push_back(std::move(st));
  }
  return out;
}

// The longest row written ahead of a reduction: the CPU printer's row fusion limit (shares_rows,
// cpu/cpu_loop_emitter.cc).
constexpr int64_t kWriteAheadRowMax = 1 << 14;

// Ops whose element costs a math-library call or its inline polynomial (what is worth computing
// once instead of once per reading stage).
bool transcendental(const std::string& op) {
  static const std::set<std::string> s = {"Exp",      "Log",  "Pow",  "Tanh", "Erf",  "Sigmoid",
                                          "Softplus", "Gelu", "Mish", "Elu",  "Selu", "Celu"};
  return s.count(op) > 0;
}

// Whether some value that computing `from` reads inline (`from` itself, then through the kernel's
// values that are not materialised) satisfies `pred` (a value, and its producer or null).
template <typename Pred>
bool reads_inline(const KernelContext& kc, ValueId from, Pred pred) {
  std::vector<ValueId> stack = {from};
  std::set<ValueId> seen;
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    auto p = kc.producer.find(v);
    const Node* n = p == kc.producer.end() ? nullptr : &kc.g.nodes[static_cast<size_t>(p->second)];
    if (pred(v, n)) return true;
    if (!n || kc.buffer_of.count(v) || materialised(kc.g, *n)) continue;
    for (ValueId in : n->inputs)
      if (in != kNoValue) stack.push_back(in);
  }
  return false;
}

// A value written ahead of a reduction into an output's buffer (build_loop_kernel): the buffer,
// the reduction's row (elements reduced into each result), the end of the stages writing it.
struct WriteAhead {
  ValueId value = kNoValue;
  int buffer = -1;
  int64_t row = 0;
  size_t end = 0;
};

// The elements a Reduce* node folds into each result when the dims it reduces are the innermost
// ones of its input (dims of 1 aside): a row contiguous in memory. 0 otherwise.
int64_t inner_row(const Graph& g, const Node& n) {
  const Shape& in = g.type(n.inputs[0]).shape;
  bool noop = false;
  std::vector<int64_t> axes = reduce_axes(g, n, &noop);
  std::vector<bool> reduced(in.size(), axes.empty());
  for (int64_t a : axes) reduced[static_cast<size_t>(normalize_axis(a, static_cast<int64_t>(in.size())))] = true;
  int64_t row = 1;
  bool inner = true;  // no kept dim (of more than 1) seen yet, from the innermost dim out
  for (size_t d = in.size(); d-- > 0;) {
    if (in[d] == 1) continue;
    if (!reduced[d]) {
      inner = false;
    } else {
      if (!inner) return 0;
      row *= in[d];
    }
  }
  return row;
}

// Whether every stage after a write-ahead's reads its buffer only where that is safe: reductions
// anywhere (they all run before the output's own stage), the stage that stores the output only at
// the element it stores (read, then overwritten), no other stage at all.
bool write_ahead_is_safe(const LoopKernel& k, const WriteAhead& w) {
  for (size_t s = w.end; s < k.stages.size(); ++s) {
    const Stage& st = k.stages[s];
    if (st.is_reduction) continue;
    int at = -1;
    for (const Store& store : st.stores)
      if (store.buffer == w.buffer) at = store.index;
    for (const ExprNode& e : st.exprs)
      if (e.op == ExprOp::kLoad && e.buffer == w.buffer && (at < 0 || e.index != at)) return false;
  }
  return true;
}

}  // namespace
}  // namespace loop

bool has_loop_emitter(const std::string& op_type) { return loop::supported_ops().count(op_type) > 0; }

namespace {

LoopKernelBuild build(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& inputs,
                      const std::vector<ValueId>& outputs, bool write_ahead, bool* write_ahead_unsafe) {
  using namespace loop;
  LoopKernelBuild result;
  auto k = std::make_shared<LoopKernel>();
  try {
    KernelContext kc{g, *k, {}, {}, {}};
    for (NodeId id : nodes) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      const PrimitiveKind kind = primitive_kind(g, n);
      if (kind == PrimitiveKind::kLinear || kind == PrimitiveKind::kOpaque || kind == PrimitiveKind::kOperator)
        unsupported(fmt::format("{} is not a loop primitive (it is {})", node_ref(n), primitive_kind_name(kind)));
      if (!supported_ops().count(n.op_type)) unsupported(fmt::format("{} has no loop-kernel emitter", node_ref(n)));
      for (ValueId v : n.outputs)
        if (v != kNoValue) {
          if (!loop_dtype_supported(g.type(v).dtype))
            unsupported(fmt::format("{}: element type {} is not supported", node_ref(n), dtype_name(g.type(v).dtype)));
          kc.producer[v] = id;
        }
      for (ValueId v : n.inputs)
        if (v != kNoValue && !loop_dtype_supported(g.type(v).dtype))
          unsupported(fmt::format("{}: element type {} is not supported", node_ref(n), dtype_name(g.type(v).dtype)));
    }
    auto add_buffer = [&](BufferKind kind, int slot, const TensorType& t) {
      k->buffers.push_back(Buffer{kind, slot, t.dtype, t.numel(), false, false});
      return static_cast<int>(k->buffers.size()) - 1;
    };
    for (size_t i = 0; i < inputs.size(); ++i) kc.buffer_of[inputs[i]] = add_buffer(BufferKind::kInput, static_cast<int>(i), g.type(inputs[i]));
    std::map<ValueId, int> out_buffer;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!kc.producer.count(outputs[i]))
        unsupported(fmt::format("output '{}' is not computed by the kernel", g.value(outputs[i]).name));
      out_buffer[outputs[i]] = add_buffer(BufferKind::kOutput, static_cast<int>(i), g.type(outputs[i]));
    }
    k->num_inputs = static_cast<int>(inputs.size());
    k->num_outputs = static_cast<int>(outputs.size());
    // Outputs that do not depend on a reduction are written first, and later stages read them
    // back instead of recomputing them (same loads, less arithmetic).
    std::set<ValueId> after_reduction;
    for (NodeId id : nodes) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      bool dep = materialised(g, n);
      for (ValueId v : n.inputs) dep |= v != kNoValue && after_reduction.count(v) != 0;
      if (dep)
        for (ValueId v : n.outputs)
          if (v != kNoValue) after_reduction.insert(v);
    }
    auto pointwise_stages = [&](bool late) {
      std::vector<std::pair<Shape, std::vector<std::pair<ValueId, int>>>> groups;
      for (ValueId v : outputs) {
        const Node& n = g.nodes[static_cast<size_t>(kc.producer.at(v))];
        if ((materialised(g, n) && n.outputs[0] == v) || (after_reduction.count(v) != 0) != late) continue;
        const Shape& s = g.type(v).shape;
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& gr) { return gr.first == s; });
        if (it == groups.end()) {
          groups.emplace_back(s, std::vector<std::pair<ValueId, int>>{});
          it = groups.end() - 1;
        }
        it->second.emplace_back(v, out_buffer.at(v));
        k->buffers[static_cast<size_t>(out_buffer.at(v))].written = true;
      }
      for (const auto& [shape, outs] : groups) {
        for (Stage& st : pointwise_stages_for(kc, shape, outs)) k->stages.push_back(std::move(st));
        for (const auto& [v, buffer] : outs) kc.buffer_of[v] = buffer;
      }
    };
    pointwise_stages(false);
    // A reduction's input that costs a transcendental per element (a softmax's exp), that a later
    // output of its shape also reads inline (the Div), is written into that output's buffer by a
    // pointwise stage ahead of the reduction: the reduction and the output's stage read it back
    // (the output's stage overwrites each element after reading it) instead of computing it
    // twice more. Only where the reduction folds rows of its input's innermost dims, of at most
    // kWriteAheadRowMax elements, so that the CPU printer's row fusion can keep each row in L1
    // between the stages (elsewhere the value would make one more trip through memory).
    std::map<NodeId, WriteAhead> ahead;
    if (write_ahead) {
      std::set<int> taken;
      for (NodeId id : nodes) {
        const Node& n = g.nodes[static_cast<size_t>(id)];
        if (!is_reduce_op(n.op_type) || !materialised(g, n)) continue;
        const ValueId e = n.inputs[0];
        const auto pe = kc.producer.find(e);
        if (pe == kc.producer.end() || out_buffer.count(e) || kc.buffer_of.count(e)) continue;
        if (!reads_inline(kc, e, [](ValueId, const Node* p) { return p && transcendental(p->op_type); })) continue;
        const TensorType& et = g.type(e);
        const int64_t row = inner_row(g, n);
        if (row < 2 || row > kWriteAheadRowMax) continue;
        for (ValueId o : outputs) {
          const Node& on = g.nodes[static_cast<size_t>(kc.producer.at(o))];
          const int buffer = out_buffer.at(o);
          if (materialised(g, on) || !after_reduction.count(o) || g.type(o) != et || taken.count(buffer) ||
              !reads_inline(kc, o, [e](ValueId v, const Node*) { return v == e; }))
            continue;
          ahead[id] = WriteAhead{e, buffer, row};
          taken.insert(buffer);
          break;
        }
      }
    }
    // Reductions: materialised, in node order.
    for (NodeId id : nodes) {
      const Node& n = g.nodes[static_cast<size_t>(id)];
      if (!materialised(g, n)) continue;
      if (auto w = ahead.find(id); w != ahead.end()) {
        // Its loops as the reduction's (rows, then the row) where that costs nothing more; then
        // the stages after it take the loops it got.
        const int64_t rows = g.type(w->second.value).numel() / w->second.row;
        kc.prefer_loops = rows > 1 ? std::vector<int64_t>{rows, w->second.row} : std::vector<int64_t>{w->second.row};
        for (Stage& st :
             pointwise_stages_for(kc, g.type(w->second.value).shape, {{w->second.value, w->second.buffer}})) {
          st.comment += " (written ahead of a reduction that reads it)";
          k->stages.push_back(std::move(st));
        }
        w->second.end = k->stages.size();
        kc.prefer_loops.clear();
        for (const Loop& l : k->stages.back().loops) kc.prefer_loops.push_back(l.extent);
        kc.buffer_of[w->second.value] = w->second.buffer;
        k->buffers[static_cast<size_t>(w->second.buffer)].written = true;
      }
      if (n.op_type == "MaxPool" && n.outputs.size() > 1 && n.outputs[1] != kNoValue) {
        bool used = out_buffer.count(n.outputs[1]) != 0;
        for (NodeId c : nodes)
          for (ValueId v : g.nodes[static_cast<size_t>(c)].inputs) used |= v == n.outputs[1];
        if (used) unsupported(fmt::format("{}: the Indices output is not supported", node_ref(n)));
      }
      const ValueId y = n.outputs[0];
      int buffer;
      if (auto it = out_buffer.find(y); it != out_buffer.end()) {
        buffer = it->second;
      } else {
        buffer = add_buffer(BufferKind::kScratch, k->num_scratch++, g.type(y));
        result.scratch_bytes.push_back(g.type(y).byte_size());
      }
      k->stages.push_back(reduce_stage(kc, n, buffer));
      k->buffers[static_cast<size_t>(buffer)].written = true;
      kc.buffer_of[y] = buffer;
    }
    // The other outputs: one pointwise stage per shape.
    pointwise_stages(true);
    for (const auto& [id, w] : ahead)
      if (!write_ahead_is_safe(*k, w)) {
        *write_ahead_unsafe = true;
        return result;
      }
  } catch (const Unsupported& u) {
    result.reason = u.reason;
    result.scratch_bytes.clear();
    return result;
  } catch (const Error& e) {
    result.reason = e.what();
    result.scratch_bytes.clear();
    return result;
  }
  result.kernel = std::move(k);
  return result;
}

}  // namespace

LoopKernelBuild build_loop_kernel(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& inputs,
                                  const std::vector<ValueId>& outputs) {
  bool unsafe = false;
  LoopKernelBuild b = build(g, nodes, inputs, outputs, true, &unsafe);
  return unsafe ? build(g, nodes, inputs, outputs, false, &unsafe) : b;
}

}  // namespace korch
