#include "orchestrate/kernel_candidate.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "ir/primitive.h"
#include "orchestrate/graph_index.h"
#include "orchestrate/kernel_cost.h"
#include "runtime/memory_plan.h"
#include "support/error.h"

namespace korch {

namespace {

struct NodeSetHash {
  size_t operator()(const std::vector<NodeId>& v) const {
    size_t h = 1469598103934665603ull;
    for (NodeId x : v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

bool runs_alone(const Graph& g, NodeId id) {
  const PrimitiveKind k = primitive_kind(g, g.nodes[static_cast<size_t>(id)]);
  return k == PrimitiveKind::kOpaque || k == PrimitiveKind::kOperator;
}

// Scalar arithmetic (kernel_candidate.h): every value it reads and writes holds one element.
bool is_scalar_arithmetic(const Graph& g, const Node& n) {
  bool writes = false;
  for (ValueId v : n.outputs) {
    if (v == kNoValue) continue;
    if (g.value(v).type.numel() != 1) return false;
    writes = true;
  }
  for (ValueId v : n.inputs)
    if (v != kNoValue && g.value(v).type.numel() != 1) return false;
  return writes;
}

KernelCandidate build_candidate(const Graph& g, const GraphIndex& gi, std::vector<NodeId> nodes,
                                bool minimal, std::vector<int>& mark, int stamp) {
  KernelCandidate c;
  c.nodes = std::move(nodes);
  c.minimal_outputs = minimal;
  for (NodeId id : c.nodes) mark[static_cast<size_t>(id)] = stamp;
  auto inside = [&](NodeId id) { return id >= 0 && mark[static_cast<size_t>(id)] == stamp; };
  std::vector<ValueId> seen_inputs;
  for (NodeId id : c.nodes) {
    const Node& n = g.nodes[static_cast<size_t>(id)];
    if (primitive_kind(g, n) == PrimitiveKind::kLinear) ++c.linear;
    for (ValueId v : n.inputs) {
      if (v == kNoValue || inside(g.value(v).producer)) continue;
      if (std::find(c.inputs.begin(), c.inputs.end(), v) == c.inputs.end()) c.inputs.push_back(v);
    }
  }
  for (NodeId id : c.nodes) {
    bool sink = true;
    for (NodeId s : gi.succs[static_cast<size_t>(id)]) sink &= !inside(s);
    if (minimal && !sink) continue;
    for (ValueId v : g.nodes[static_cast<size_t>(id)].outputs) {
      if (v == kNoValue) continue;
      bool external = gi.is_output[static_cast<size_t>(v)];
      for (NodeId user : gi.consumers[static_cast<size_t>(v)]) external |= !inside(user);
      if (external) c.outputs.push_back(v);
    }
  }
  std::sort(c.outputs.begin(), c.outputs.end());
  return c;
}

// Convex closure of `x` (sorted): every node on a path between two of its nodes, i.e.
// descendants(x) ∩ ancestors(x). Paths between x's nodes stay within [x.front(), x.back()] in
// topological numbering, which bounds both searches. Returns false (and leaves `out`
// unspecified) as soon as the closure exceeds `cap` nodes.
class Closure {
 public:
  explicit Closure(const GraphIndex& gi) : gi_(gi), fwd_(gi.num_nodes(), 0), bwd_(gi.num_nodes(), 0) {}

  bool compute(const std::vector<NodeId>& x, size_t cap, std::vector<NodeId>& out) {
    if (x.size() > cap) return false;
    ++stamp_;
    const NodeId lo = x.front(), hi = x.back();
    stack_.assign(x.begin(), x.end());
    for (NodeId v : x) fwd_[static_cast<size_t>(v)] = stamp_;
    while (!stack_.empty()) {
      const NodeId w = stack_.back();
      stack_.pop_back();
      for (NodeId s : gi_.succs[static_cast<size_t>(w)]) {
        if (s > hi) break;  // succs are ascending
        if (fwd_[static_cast<size_t>(s)] != stamp_) {
          fwd_[static_cast<size_t>(s)] = stamp_;
          stack_.push_back(s);
        }
      }
    }
    out.assign(x.begin(), x.end());
    for (NodeId v : x) bwd_[static_cast<size_t>(v)] = stamp_;
    stack_.assign(x.begin(), x.end());
    while (!stack_.empty()) {
      const NodeId w = stack_.back();
      stack_.pop_back();
      for (NodeId p : gi_.preds[static_cast<size_t>(w)]) {
        if (p < lo || fwd_[static_cast<size_t>(p)] != stamp_ || bwd_[static_cast<size_t>(p)] == stamp_)
          continue;
        bwd_[static_cast<size_t>(p)] = stamp_;
        out.push_back(p);
        if (out.size() > cap) return false;
        stack_.push_back(p);
      }
    }
    std::sort(out.begin(), out.end());
    return true;
  }

 private:
  const GraphIndex& gi_;
  std::vector<int> fwd_, bwd_, stack_;
  int stamp_ = 0;
};

// The row groups of `g` (kernel_candidate.h), each sorted. From each reduce, a connected set of
// elementwise, broadcast, reduce and Reshape primitives that may join others (not `alone`, not in
// a scalar group) grows breadth-first, taking a neighbour with the primitives that keep the set
// convex when those are members too, within kMaxRowGroup. The maximal connected set of members is
// often not convex: a post-norm layer norm's output is read by the next MatMul and by the
// residual Add after it, which leads to the next layer norm through that MatMul.
constexpr size_t kMaxRowGroup = 32;

std::vector<std::vector<NodeId>> row_groups(const Graph& g, const GraphIndex& gi, const std::vector<bool>& alone,
                                            const std::vector<bool>& grouped, Closure& closure) {
  const size_t n = g.nodes.size();
  std::vector<bool> member(n), reduce(n);
  for (size_t i = 0; i < n; ++i) {
    const PrimitiveKind k = primitive_kind(g, g.nodes[i]);
    reduce[i] = k == PrimitiveKind::kReduce;
    member[i] = !alone[i] && !grouped[i] &&
                (k == PrimitiveKind::kElementwise || k == PrimitiveKind::kBroadcast || reduce[i] ||
                 (k == PrimitiveKind::kLayout && g.nodes[i].op_type == "Reshape"));
  }
  std::vector<std::vector<NodeId>> out;
  std::vector<NodeId> grown, closed;
  for (size_t seed = 0; seed < n; ++seed) {
    if (!reduce[seed] || !member[seed]) continue;
    std::vector<NodeId> group{static_cast<NodeId>(seed)};
    std::vector<bool> tried(n, false);
    tried[seed] = true;
    for (size_t next = 0; next < group.size() && group.size() < kMaxRowGroup; ++next) {
      const size_t v = static_cast<size_t>(group[next]);  // breadth-first: in the order taken
      for (const auto* adj : {&gi.preds[v], &gi.succs[v]})
        for (NodeId u : *adj) {
          if (!member[static_cast<size_t>(u)] || tried[static_cast<size_t>(u)] || group.size() >= kMaxRowGroup)
            continue;
          tried[static_cast<size_t>(u)] = true;
          grown = group;
          grown.push_back(u);
          std::sort(grown.begin(), grown.end());
          // With the primitives its convex closure adds when they are members too (a Mul that
          // reads the group's mean through a Sqrt and an Expand comes with them); a closure
          // holding another primitive holds it for every larger group, so u is not tried again.
          if (!closure.compute(grown, kMaxRowGroup, closed) ||
              !std::all_of(closed.begin(), closed.end(), [&](NodeId w) { return member[static_cast<size_t>(w)]; }))
            continue;
          for (NodeId w : closed)
            if (!std::binary_search(grown.begin(), grown.end(), w) || w == u) {
              tried[static_cast<size_t>(w)] = true;
              group.push_back(w);
            }
        }
    }
    if (group.size() < 2) continue;
    std::sort(group.begin(), group.end());
    if (std::find(out.begin(), out.end(), group) == out.end()) out.push_back(std::move(group));
  }
  return out;
}

}  // namespace

void CandidateSet::reject(const std::vector<NodeId>& nodes, const std::string& reason) {
  int64_t& count = rejected[reason];
  if (count++ < 5) rejected_examples.push_back({nodes, reason});
}

bool is_free_value(const Graph& g, ValueId v) { return g.value(v).producer < 0; }

NodeId linear_node(const Graph& g, const KernelCandidate& c) {
  if (c.linear <= 0) return -1;
  for (NodeId n : c.nodes)
    if (primitive_kind(g, g.nodes[static_cast<size_t>(n)]) == PrimitiveKind::kLinear) return n;
  return -1;
}

KernelCandidate make_candidate(const Graph& g, std::vector<NodeId> nodes, bool minimal) {
  std::sort(nodes.begin(), nodes.end());
  GraphIndex gi(g);
  std::vector<int> mark(g.nodes.size(), 0);
  return build_candidate(g, gi, std::move(nodes), minimal, mark, 1);
}

// Grows connected convex sets one neighbour at a time and closes each under convexity. Every
// connected convex set T within the caps is reached: order T's nodes so each prefix is connected;
// the closures of the prefixes are all inside T (T is convex), so none is pruned, and the last is T.
// A hash set of visited closures makes each set processed once.
CandidateSet enumerate_candidates(const Graph& g, const CandidateOptions& options) {
  KORCH_CHECK(options.max_primitives >= 1 && options.max_linear >= 0);
  const GraphIndex gi(g);
  const int n = gi.num_nodes();
  CandidateSet out;
  std::vector<int> mark(static_cast<size_t>(n), 0);
  int stamp = 0;
  auto record = [&](const std::vector<NodeId>& nodes) {
    KernelCandidate full = build_candidate(g, gi, nodes, false, mark, ++stamp);
    if (options.offer_minimal_outputs && nodes.size() > 1) {
      KernelCandidate minimal = build_candidate(g, gi, nodes, true, mark, ++stamp);
      if (minimal.outputs != full.outputs) out.candidates.push_back(std::move(minimal));
    }
    out.candidates.push_back(std::move(full));
    if (static_cast<int64_t>(out.candidates.size()) > options.max_candidates)
      fail_unsupported(
          "more than {} candidate kernels for {} primitives; lower the kernel size cap "
          "(--max-kernel-size, now {})",
          options.max_candidates, n, options.max_primitives);
  };

  // A Concat or view written in place (runtime/memory_plan.h) costs nothing alone. A kernel
  // joining it with its producers only would write what they write in place anyway (and save a
  // launch, the reason disconnected kernels are not offered), so it joins a kernel only together
  // with a reader of its output: what fusing it can save is writing that output at all. One that
  // no node reads (a graph output) runs alone.
  const std::map<NodeId, std::vector<int64_t>> in_place = runtime::in_place_nodes(g);
  std::vector<bool> alone(static_cast<size_t>(n));
  std::vector<int> is_linear(static_cast<size_t>(n));
  for (NodeId i = 0; i < n; ++i) {
    alone[static_cast<size_t>(i)] = runs_alone(g, i) || (in_place.count(i) && gi.succs[static_cast<size_t>(i)].empty());
    is_linear[static_cast<size_t>(i)] =
        primitive_kind(g, g.nodes[static_cast<size_t>(i)]) == PrimitiveKind::kLinear;
  }

  std::unordered_set<std::vector<NodeId>, NodeSetHash> seen;
  std::vector<std::vector<NodeId>> work;
  Closure closure(gi);
  std::vector<NodeId> grown, closed;
  const std::string too_big = fmt::format("more than {} primitives", options.max_primitives);
  const std::string too_wide = fmt::format("more than {} consumers of one primitive", options.max_fanout);
  const std::string too_linear = fmt::format("more than {} linear primitives", options.max_linear);

  // Scalar arithmetic offered as whole groups (kernel_candidate.h): `grouped` marks the scalar
  // primitives that join no other kernel, because their group is offered whole (or is one node).
  std::vector<bool> grouped(static_cast<size_t>(n), false);
  std::vector<std::vector<NodeId>> whole_groups;  // recorded after the singletons
  if (options.whole_scalar_groups && options.max_primitives > 1) {
    std::vector<bool> scalar(static_cast<size_t>(n));
    for (NodeId i = 0; i < n; ++i)
      scalar[static_cast<size_t>(i)] =
          !alone[static_cast<size_t>(i)] && is_scalar_arithmetic(g, g.nodes[static_cast<size_t>(i)]);
    std::vector<bool> visited(static_cast<size_t>(n), false);
    for (NodeId root = 0; root < n; ++root) {
      if (!scalar[static_cast<size_t>(root)] || visited[static_cast<size_t>(root)]) continue;
      std::vector<NodeId> group{root}, stack{root};
      visited[static_cast<size_t>(root)] = true;
      while (!stack.empty()) {
        const NodeId v = stack.back();
        stack.pop_back();
        for (const auto* adj : {&gi.preds[static_cast<size_t>(v)], &gi.succs[static_cast<size_t>(v)]})
          for (NodeId u : *adj)
            if (scalar[static_cast<size_t>(u)] && !visited[static_cast<size_t>(u)]) {
              visited[static_cast<size_t>(u)] = true;
              group.push_back(u);
              stack.push_back(u);
            }
      }
      std::sort(group.begin(), group.end());
      std::string why;
      if (group.size() > 1) {
        int linear = 0;
        for (NodeId v : group) linear += is_linear[static_cast<size_t>(v)];
        if (!closure.compute(group, static_cast<size_t>(n), closed) || closed != group)
          why = "a path through a tensor primitive leaves it and comes back";
        else if (linear > options.max_linear)
          why = too_linear;
        else if (options.prune_unfusable) {
          KernelCandidate probe;
          probe.nodes = group;
          why = unfusable_reason(g, probe, options.rules);
        }
      }
      if (!why.empty()) {  // its primitives are enumerated like any others
        out.reject(group, "a scalar group not offered whole (" + why + ")");
        continue;
      }
      for (NodeId v : group) grouped[static_cast<size_t>(v)] = true;
      out.scalar_primitives += static_cast<int64_t>(group.size());
      if (group.size() > 1) whole_groups.push_back(std::move(group));
    }
  }
  for (NodeId seed = 0; seed < n; ++seed) {
    std::vector<NodeId> single{seed};
    seen.insert(single);
    record(single);
    ++out.connected_sets;
    if (alone[static_cast<size_t>(seed)] || grouped[static_cast<size_t>(seed)] || options.max_primitives == 1) continue;
    if (is_linear[static_cast<size_t>(seed)] > options.max_linear) continue;
    work.push_back(single);
    while (!work.empty()) {
      const std::vector<NodeId> c = std::move(work.back());
      work.pop_back();
      // Neighbours of c outside it, each once.
      std::vector<NodeId> nbrs;
      for (NodeId v : c) {
        for (NodeId u : gi.preds[static_cast<size_t>(v)]) nbrs.push_back(u);
        for (NodeId u : gi.succs[static_cast<size_t>(v)]) nbrs.push_back(u);
      }
      std::sort(nbrs.begin(), nbrs.end());
      nbrs.erase(std::unique(nbrs.begin(), nbrs.end()), nbrs.end());
      for (NodeId u : nbrs) {
        if (std::binary_search(c.begin(), c.end(), u)) continue;
        grown = c;
        grown.insert(std::upper_bound(grown.begin(), grown.end(), u), u);
        if (!closure.compute(grown, static_cast<size_t>(options.max_primitives), closed)) {
          out.reject(grown, too_big);
          continue;
        }
        if (seen.count(closed)) continue;
        int linear = 0;
        NodeId opaque = -1, scalar = -1;
        for (NodeId v : closed) {
          linear += is_linear[static_cast<size_t>(v)];
          if (alone[static_cast<size_t>(v)]) opaque = v;
          if (grouped[static_cast<size_t>(v)]) scalar = v;
        }
        seen.insert(closed);
        ++out.connected_sets;
        if (scalar >= 0) {  // closed under supersets: not grown
          out.reject(closed, "scalar arithmetic joins only its own group, offered whole");
          continue;
        }
        if (opaque >= 0) {
          out.reject(closed, in_place.count(opaque)
                                 ? std::string("a Concat or view written in place that no node reads runs alone")
                                 : fmt::format("{} is opaque: it runs as a kernel of its own",
                                               g.nodes[static_cast<size_t>(opaque)].op_type));
          continue;
        }
        if (linear > options.max_linear) {
          out.reject(closed, too_linear);
          continue;
        }
        bool fan_ok = true;
        for (NodeId v : closed) {
          int inside = 0;
          for (NodeId s : gi.succs[static_cast<size_t>(v)]) inside += std::binary_search(closed.begin(), closed.end(), s);
          fan_ok &= inside <= options.max_fanout;
        }
        if (!fan_ok) {
          out.reject(closed, too_wide);
          continue;
        }
        if (options.prune_unfusable) {
          KernelCandidate probe;
          probe.nodes = closed;
          std::string why = unfusable_reason(g, probe, options.rules);
          if (!why.empty()) {
            out.reject(closed, why);
            continue;
          }
        }
        const auto read_inside = [&](NodeId v) {
          const std::vector<NodeId>& readers = gi.succs[static_cast<size_t>(v)];
          return std::any_of(readers.begin(), readers.end(),
                             [&](NodeId r) { return std::binary_search(closed.begin(), closed.end(), r); });
        };
        const bool unread_in_place = std::any_of(closed.begin(), closed.end(),
                                                 [&](NodeId v) { return in_place.count(v) && !read_inside(v); });
        if (unread_in_place && closed.size() > 1)  // not offered, but grown: a reader may join
          out.reject(closed, "a Concat or view written in place joins a kernel only with a reader of its output "
                             "(not offered; still grown)");
        else
          record(closed);
        work.push_back(closed);
      }
    }
  }
  for (const std::vector<NodeId>& group : whole_groups) {  // no grown set holds a grouped node
    record(group);
    ++out.connected_sets;
    ++out.scalar_groups;
  }
  if (options.whole_row_groups && options.max_primitives > 1) {
    for (std::vector<NodeId>& group : row_groups(g, gi, alone, grouped, closure)) {
      if (seen.count(group)) continue;  // within the caps: enumerated above
      ++out.connected_sets;
      std::string why;
      if (options.prune_unfusable) {
        KernelCandidate probe;
        probe.nodes = group;
        why = unfusable_reason(g, probe, options.rules);
      }
      if (!why.empty()) {
        out.reject(group, "a row group not offered whole (" + why + ")");
        continue;
      }
      record(group);
      ++out.row_groups;
    }
  }
  return out;
}

std::string candidate_names(const Graph& g, const KernelCandidate& c) {
  std::vector<std::string> nodes, outputs;
  for (NodeId n : c.nodes) nodes.push_back(g.nodes.at(static_cast<size_t>(n)).name);
  for (ValueId v : c.outputs) outputs.push_back(g.value(v).name);
  std::sort(nodes.begin(), nodes.end());
  std::sort(outputs.begin(), outputs.end());
  return fmt::format("n,{}|o,{}", fmt::join(nodes, ","), fmt::join(outputs, ","));
}

std::string describe_candidate(const Graph& g, const KernelCandidate& c) {
  std::string ops;
  for (NodeId id : c.nodes) {
    if (!ops.empty()) ops += "+";
    ops += g.nodes[static_cast<size_t>(id)].op_type;
  }
  if (ops.size() > 120) ops = ops.substr(0, 117) + "...";
  return fmt::format("{} [{} prim{}{}{}]", ops, c.nodes.size(), c.nodes.size() == 1 ? "" : "s",
                     c.linear ? fmt::format(", {} linear", c.linear) : "",
                     c.minimal_outputs ? ", minimal outputs" : "");
}

}  // namespace korch
