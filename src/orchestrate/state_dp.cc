#include "orchestrate/state_dp.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "orchestrate/graph_index.h"
#include "support/clock.h"
#include "support/error.h"

namespace korch {

namespace {

// A downset: nodes [0, prefix) are all in it; bit i of `bits` is node prefix + i.
struct State {
  int prefix = 0;
  std::vector<uint64_t> bits;
  bool has(NodeId v) const {
    if (v < prefix) return true;
    const size_t i = static_cast<size_t>(v - prefix);
    return i / 64 < bits.size() && ((bits[i / 64] >> (i % 64)) & 1);
  }
  bool operator==(const State& o) const { return prefix == o.prefix && bits == o.bits; }
  NodeId max_node() const {  // largest node in the state; -1 when empty
    if (bits.empty()) return prefix - 1;
    return prefix + static_cast<int>(64 * (bits.size() - 1)) + 63 - __builtin_clzll(bits.back());
  }
};

struct StateHash {
  size_t operator()(const State& s) const {
    size_t h = static_cast<size_t>(s.prefix) * 0x9e3779b97f4a7c15ull;
    for (uint64_t w : s.bits) h = (h ^ w) * 1099511628211ull;
    return h;
  }
};

State add_nodes(const State& s, const std::vector<NodeId>& nodes) {
  // Expand to absolute bits from s.prefix, set, then advance the prefix over full words/bits.
  std::vector<uint64_t> bits = s.bits;
  for (NodeId v : nodes) {
    const size_t i = static_cast<size_t>(v - s.prefix);
    if (bits.size() <= i / 64) bits.resize(i / 64 + 1, 0);
    bits[i / 64] |= uint64_t{1} << (i % 64);
  }
  int prefix = s.prefix;
  size_t skip_words = 0;
  while (skip_words < bits.size() && bits[skip_words] == ~uint64_t{0}) ++skip_words;
  prefix += static_cast<int>(64 * skip_words);
  bits.erase(bits.begin(), bits.begin() + static_cast<long>(skip_words));
  int shift = 0;
  if (!bits.empty())
    while (shift < 64 && ((bits[0] >> shift) & 1)) ++shift;
  if (shift > 0) {
    for (size_t w = 0; w < bits.size(); ++w) {
      uint64_t lo = shift == 64 ? 0 : bits[w] >> shift;
      uint64_t hi = w + 1 < bits.size() && shift > 0 ? bits[w + 1] << (64 - shift) : 0;
      bits[w] = lo | hi;
    }
    prefix += shift;
  }
  while (!bits.empty() && bits.back() == 0) bits.pop_back();
  return {prefix, std::move(bits)};
}

}  // namespace

DpResult shortest_path_over_states(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                   const std::vector<double>& costs, int64_t state_limit, int window,
                                   double max_seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  KORCH_CHECK(costs.size() == candidates.size());
  const GraphIndex gi(g);
  const int n = gi.num_nodes();
  DpResult r;

  // Candidates usable without recompute, indexed by an anchor node that must be ready for them to
  // run; and their predecessors outside themselves.
  std::vector<std::vector<int>> by_first(static_cast<size_t>(n));
  std::vector<std::vector<NodeId>> ext_preds(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    const KernelCandidate& c = candidates[i];
    if (c.minimal_outputs || !std::isfinite(costs[i]) || c.nodes.empty()) continue;
    // Anchor: the first primitive that is not a source (sources are always ready; see below).
    NodeId anchor = c.nodes.front();
    for (NodeId v : c.nodes)
      if (!gi.preds[static_cast<size_t>(v)].empty()) {
        anchor = v;
        break;
      }
    by_first[static_cast<size_t>(anchor)].push_back(static_cast<int>(i));
    for (NodeId v : c.nodes)
      for (NodeId p : gi.preds[static_cast<size_t>(v)])
        if (!std::binary_search(c.nodes.begin(), c.nodes.end(), p)) ext_preds[i].push_back(p);
  }

  // Nodes that can be ready far past a state's last node: those whose predecessors all come at
  // least two positions earlier. far[m] = {w > m + 1 : every predecessor of w is <= m}.
  std::vector<std::vector<NodeId>> far(static_cast<size_t>(n) + 1);
  for (NodeId w = 0; w < n; ++w) {
    // A source with consumers is only ever pulled in by them (below), never an anchor itself.
    if (gi.preds[static_cast<size_t>(w)].empty() && !gi.succs[static_cast<size_t>(w)].empty()) continue;
    NodeId maxpred = -1;  // last predecessor that is not a source (sources are pulled in)
    for (NodeId p : gi.preds[static_cast<size_t>(w)])
      if (!gi.preds[static_cast<size_t>(p)].empty()) maxpred = p;
    for (NodeId m = std::max(maxpred, 0); m < w - 1; ++m) far[static_cast<size_t>(m)].push_back(w);
  }

  // Source primitives (no producer among the nodes: an Expand of a constant bias, say) can run at
  // any time, and each independent one would double the number of states. A source either sits
  // inside a larger kernel or runs alone; running alone, it can always be moved to just before the
  // first kernel that reads it without changing the cost. So a source's singleton is never a step
  // of its own: it is pulled in by the step whose kernel first reads it (unless nothing reads it).
  std::vector<bool> source(static_cast<size_t>(n));
  std::vector<int> alone(static_cast<size_t>(n), -1);  // full singleton candidate of each node
  for (NodeId v = 0; v < n; ++v) source[static_cast<size_t>(v)] = gi.preds[static_cast<size_t>(v)].empty();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const KernelCandidate& c = candidates[i];
    if (c.nodes.size() == 1 && !c.minimal_outputs && std::isfinite(costs[i])) alone[static_cast<size_t>(c.nodes[0])] = static_cast<int>(i);
  }
  auto pulled_sources = [&](const State& st, int ci, std::vector<NodeId>& pulled) {
    pulled.clear();
    for (NodeId p : ext_preds[static_cast<size_t>(ci)]) {
      if (st.has(p)) continue;
      if (!source[static_cast<size_t>(p)] || alone[static_cast<size_t>(p)] < 0) return false;
      if (std::find(pulled.begin(), pulled.end(), p) == pulled.end()) pulled.push_back(p);
    }
    return true;
  };
  auto is_pulled_singleton = [&](const KernelCandidate& c) {
    const NodeId v = c.nodes.front();
    return c.nodes.size() == 1 && source[static_cast<size_t>(v)] && !gi.succs[static_cast<size_t>(v)].empty();
  };

  // The first node a state has not run that is not a source: the window is measured from it, as
  // sources wait for the step that first reads them (a bias Expand numbered first would otherwise
  // pin the window to the start).
  auto first_open = [&](const State& st) {
    NodeId v = st.prefix;
    while (v < n && (st.has(v) || source[static_cast<size_t>(v)])) ++v;
    return v;
  };

  struct Entry {
    double dist;
    int parent;     // state index
    int candidate;  // candidate taken from parent
  };
  std::vector<State> states;
  std::vector<Entry> entries;
  std::unordered_map<State, int, StateHash> index;
  std::vector<std::vector<int>> by_size(static_cast<size_t>(n) + 1);
  auto visit = [&](State s, double dist, int parent, int cand, int size) {
    auto [it, fresh] = index.try_emplace(s, static_cast<int>(states.size()));
    if (fresh) {
      states.push_back(std::move(s));
      entries.push_back({dist, parent, cand});
      by_size[static_cast<size_t>(size)].push_back(it->second);
    } else if (dist < entries[static_cast<size_t>(it->second)].dist) {
      entries[static_cast<size_t>(it->second)] = {dist, parent, cand};
    }
  };
  visit(State{}, 0, -1, -1, 0);
  int goal = -1;
  for (int size = 0; size <= n && goal < 0; ++size) {
    for (size_t k = 0; k < by_size[static_cast<size_t>(size)].size(); ++k) {
      const int si = by_size[static_cast<size_t>(size)][k];
      if (size == n) {
        goal = si;
        break;
      }
      const bool out_of_time = max_seconds > 0 && (k % 256) == 0 && since(t0) > max_seconds;
      if (static_cast<int64_t>(states.size()) > state_limit || out_of_time) {
        r.states = static_cast<int64_t>(states.size());
        r.seconds = since(t0);
        return r;
      }
      const State s = states[static_cast<size_t>(si)];
      std::vector<NodeId> pulled;
      const double dist = entries[static_cast<size_t>(si)].dist;
      // A candidate's first node must be ready: not done, all predecessors done. Ready nodes lie in
      // [prefix, last + 1] or in far[last].
      const NodeId last = s.max_node();
      std::vector<NodeId> maybe_ready;
      for (NodeId v = s.prefix; v <= std::min(last + 1, n - 1); ++v) maybe_ready.push_back(v);
      if (last >= 0)
        for (NodeId w : far[static_cast<size_t>(last)]) maybe_ready.push_back(w);
      else
        for (NodeId w = 1; w < n; ++w) maybe_ready.push_back(w);
      for (NodeId v : maybe_ready) {
        if (s.has(v) || by_first[static_cast<size_t>(v)].empty()) continue;
        bool ready = true;  // sources not yet run are pulled in by the step
        for (NodeId p : gi.preds[static_cast<size_t>(v)]) ready &= s.has(p) || source[static_cast<size_t>(p)];
        if (!ready) continue;
        for (int ci : by_first[static_cast<size_t>(v)]) {
          const KernelCandidate& c = candidates[static_cast<size_t>(ci)];
          if (is_pulled_singleton(c)) continue;
          bool ok = pulled_sources(s, ci, pulled);
          for (NodeId u : c.nodes) ok &= !s.has(u);
          for (NodeId u : pulled) ok &= !std::binary_search(c.nodes.begin(), c.nodes.end(), u);
          if (!ok) continue;
          double step = costs[static_cast<size_t>(ci)];
          std::vector<NodeId> added = c.nodes;
          for (NodeId u : pulled) {
            step += costs[static_cast<size_t>(alone[static_cast<size_t>(u)])];
            added.push_back(u);
          }
          State next = add_nodes(s, added);
          if (window > 0 && next.max_node() - first_open(next) >= window) continue;
          visit(std::move(next), dist + step, si, ci, size + static_cast<int>(added.size()));
        }
      }
    }
  }
  r.completed = true;
  r.states = static_cast<int64_t>(states.size());
  if (goal >= 0) {
    r.feasible = true;
    r.cost = entries[static_cast<size_t>(goal)].dist;
    std::vector<NodeId> pulled;
    for (int si = goal; entries[static_cast<size_t>(si)].parent >= 0; si = entries[static_cast<size_t>(si)].parent) {
      const Entry& e = entries[static_cast<size_t>(si)];
      r.chosen.push_back(e.candidate);
      pulled_sources(states[static_cast<size_t>(e.parent)], e.candidate, pulled);
      for (auto it = pulled.rbegin(); it != pulled.rend(); ++it) r.chosen.push_back(alone[static_cast<size_t>(*it)]);
    }
    std::reverse(r.chosen.begin(), r.chosen.end());
  }
  r.seconds = since(t0);
  return r;
}

}  // namespace korch
