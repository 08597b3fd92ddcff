#include "orchestrate/regions.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <numeric>
#include <queue>
#include <set>

#include "orchestrate/graph_index.h"
#include "support/error.h"

namespace korch {

namespace {

struct UnionFind {
  std::vector<int> parent;
  explicit UnionFind(int n) : parent(static_cast<size_t>(n)) { std::iota(parent.begin(), parent.end(), 0); }
  int find(int x) {
    while (parent[static_cast<size_t>(x)] != x) {
      parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
      x = parent[static_cast<size_t>(x)];
    }
    return x;
  }
  void unite(int a, int b) {
    a = find(a);
    b = find(b);
    if (a != b) parent[static_cast<size_t>(std::max(a, b))] = std::min(a, b);
  }
};

// Strongly connected components of a small digraph (Tarjan, iterative): comp[v] per vertex.
std::vector<int> strongly_connected(const std::vector<std::vector<int>>& succ) {
  const int n = static_cast<int>(succ.size());
  std::vector<int> index(static_cast<size_t>(n), -1), low(static_cast<size_t>(n), 0), comp(static_cast<size_t>(n), -1);
  std::vector<bool> on_stack(static_cast<size_t>(n), false);
  std::vector<int> stack;
  int counter = 0, comps = 0;
  for (int root = 0; root < n; ++root) {
    if (index[static_cast<size_t>(root)] >= 0) continue;
    std::vector<std::pair<int, size_t>> call{{root, 0}};  // (vertex, next successor to look at)
    index[static_cast<size_t>(root)] = low[static_cast<size_t>(root)] = counter++;
    stack.push_back(root);
    on_stack[static_cast<size_t>(root)] = true;
    while (!call.empty()) {
      auto& [v, next] = call.back();
      const auto& out = succ[static_cast<size_t>(v)];
      if (next < out.size()) {
        const int w = out[next++];
        if (index[static_cast<size_t>(w)] < 0) {
          index[static_cast<size_t>(w)] = low[static_cast<size_t>(w)] = counter++;
          stack.push_back(w);
          on_stack[static_cast<size_t>(w)] = true;
          call.emplace_back(w, 0);
        } else if (on_stack[static_cast<size_t>(w)]) {
          low[static_cast<size_t>(v)] = std::min(low[static_cast<size_t>(v)], index[static_cast<size_t>(w)]);
        }
        continue;
      }
      const int done = v;
      call.pop_back();
      if (!call.empty())
        low[static_cast<size_t>(call.back().first)] =
            std::min(low[static_cast<size_t>(call.back().first)], low[static_cast<size_t>(done)]);
      if (low[static_cast<size_t>(done)] == index[static_cast<size_t>(done)]) {
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[static_cast<size_t>(w)] = false;
          comp[static_cast<size_t>(w)] = comps;
        } while (w != done);
        ++comps;
      }
    }
  }
  return comp;
}

// Rewrite sites in one region each (see regions.h): the nodes a site removes and adds, the
// producers of values read by only one of the two, and the sites it excludes.
void unite_sites(const Graph& g, const RewriteSites& sites, UnionFind& uf) {
  std::vector<std::vector<NodeId>> removed(static_cast<size_t>(sites.count)), added(static_cast<size_t>(sites.count));
  for (size_t v = 0; v < g.nodes.size(); ++v) {
    if (sites.added_by[v] >= 0) added[static_cast<size_t>(sites.added_by[v])].push_back(static_cast<NodeId>(v));
    for (int s : sites.removed_by[v]) removed[static_cast<size_t>(s)].push_back(static_cast<NodeId>(v));
  }
  // The values a set of nodes reads from outside itself.
  auto reads = [&](const std::vector<NodeId>& nodes) {
    std::set<ValueId> written, read;
    for (NodeId id : nodes)
      for (ValueId o : g.nodes[static_cast<size_t>(id)].outputs) written.insert(o);
    for (NodeId id : nodes)
      for (ValueId i : g.nodes[static_cast<size_t>(id)].inputs)
        if (i != kNoValue && !written.count(i)) read.insert(i);
    return read;
  };
  std::vector<NodeId> anchor(static_cast<size_t>(sites.count), -1);
  for (int s = 0; s < sites.count; ++s) {
    std::vector<NodeId> all = removed[static_cast<size_t>(s)];
    all.insert(all.end(), added[static_cast<size_t>(s)].begin(), added[static_cast<size_t>(s)].end());
    if (all.empty()) continue;
    anchor[static_cast<size_t>(s)] = all.front();
    for (NodeId id : all) uf.unite(all.front(), id);
    const std::set<ValueId> a = reads(removed[static_cast<size_t>(s)]), b = reads(added[static_cast<size_t>(s)]);
    std::vector<ValueId> only;
    std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only));
    for (ValueId v : only)
      if (g.value(v).producer >= 0) uf.unite(all.front(), g.value(v).producer);
  }
  for (const std::vector<int>& set : sites.exclusive)
    for (int s : set)
      if (anchor[static_cast<size_t>(s)] >= 0 && anchor[static_cast<size_t>(set.front())] >= 0)
        uf.unite(anchor[static_cast<size_t>(set.front())], anchor[static_cast<size_t>(s)]);
}

}  // namespace

std::vector<bool> usable_candidates(const std::vector<KernelCandidate>& candidates, const std::vector<double>& costs,
                                    bool allow_recompute) {
  std::vector<bool> usable(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) usable[i] = usable_candidate(candidates[i], costs[i], allow_recompute);
  return usable;
}

std::vector<SelectionRegion> split_into_regions(const Graph& g, const std::vector<KernelCandidate>& candidates,
                                                const std::vector<bool>& usable, const RewriteSites* sites) {
  KORCH_CHECK(usable.size() == candidates.size());
  const GraphIndex gi(g);
  const int n = gi.num_nodes();
  UnionFind uf(n);
  for (size_t i = 0; i < candidates.size(); ++i)
    if (usable[i])
      for (NodeId v : candidates[i].nodes) uf.unite(candidates[i].nodes.front(), v);
  if (sites) unite_sites(g, *sites, uf);

  // Components, numbered by their smallest node; then merge those on a cycle of the quotient.
  std::vector<int> comp_of(static_cast<size_t>(n), -1);
  int comps = 0;
  for (NodeId v = 0; v < n; ++v) {
    const int r = uf.find(v);
    if (comp_of[static_cast<size_t>(r)] < 0) comp_of[static_cast<size_t>(r)] = comps++;
    comp_of[static_cast<size_t>(v)] = comp_of[static_cast<size_t>(r)];
  }
  std::vector<std::vector<int>> succ(static_cast<size_t>(comps));
  for (NodeId v = 0; v < n; ++v)
    for (NodeId s : gi.succs[static_cast<size_t>(v)])
      if (comp_of[static_cast<size_t>(s)] != comp_of[static_cast<size_t>(v)])
        succ[static_cast<size_t>(comp_of[static_cast<size_t>(v)])].push_back(comp_of[static_cast<size_t>(s)]);
  const std::vector<int> scc = strongly_connected(succ);
  const int num_regions = scc.empty() ? 0 : *std::max_element(scc.begin(), scc.end()) + 1;
  std::vector<int> region_of(static_cast<size_t>(n));
  for (NodeId v = 0; v < n; ++v) region_of[static_cast<size_t>(v)] = scc[static_cast<size_t>(comp_of[static_cast<size_t>(v)])];

  // Topological order of the regions (a DAG now), smallest first node first among the ready ones.
  std::vector<std::set<int>> rsucc(static_cast<size_t>(num_regions));
  std::vector<int> indegree(static_cast<size_t>(num_regions), 0), first(static_cast<size_t>(num_regions), n);
  for (NodeId v = 0; v < n; ++v) {
    const int r = region_of[static_cast<size_t>(v)];
    first[static_cast<size_t>(r)] = std::min(first[static_cast<size_t>(r)], v);
    for (NodeId s : gi.succs[static_cast<size_t>(v)]) {
      const int rs = region_of[static_cast<size_t>(s)];
      if (rs != r && rsucc[static_cast<size_t>(r)].insert(rs).second) ++indegree[static_cast<size_t>(rs)];
    }
  }
  std::priority_queue<std::pair<int, int>, std::vector<std::pair<int, int>>, std::greater<>> ready;
  for (int r = 0; r < num_regions; ++r)
    if (indegree[static_cast<size_t>(r)] == 0) ready.emplace(first[static_cast<size_t>(r)], r);
  std::vector<int> position(static_cast<size_t>(num_regions), -1);
  int placed = 0;
  while (!ready.empty()) {
    const int r = ready.top().second;
    ready.pop();
    position[static_cast<size_t>(r)] = placed++;
    for (int s : rsucc[static_cast<size_t>(r)])
      if (--indegree[static_cast<size_t>(s)] == 0) ready.emplace(first[static_cast<size_t>(s)], s);
  }
  KORCH_CHECK(placed == num_regions);

  std::vector<SelectionRegion> out(static_cast<size_t>(num_regions));
  for (NodeId v = 0; v < n; ++v)
    out[static_cast<size_t>(position[static_cast<size_t>(region_of[static_cast<size_t>(v)])])].nodes.push_back(v);
  std::vector<int> region_at(static_cast<size_t>(n)), local_id(static_cast<size_t>(n));
  for (size_t r = 0; r < out.size(); ++r)
    for (size_t k = 0; k < out[r].nodes.size(); ++k) {
      region_at[static_cast<size_t>(out[r].nodes[k])] = static_cast<int>(r);
      local_id[static_cast<size_t>(out[r].nodes[k])] = static_cast<int>(k);
    }
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!usable[i]) continue;
    SelectionRegion& reg = out[static_cast<size_t>(region_at[static_cast<size_t>(candidates[i].nodes.front())])];
    reg.candidates.push_back(static_cast<int>(i));
    KernelCandidate local = candidates[i];
    for (NodeId& v : local.nodes) v = local_id[static_cast<size_t>(v)];
    reg.local_candidates.push_back(std::move(local));
  }
  if (sites) {
    for (SelectionRegion& reg : out) {
      reg.sites.count = sites->count;
      std::set<int> here;
      for (NodeId v : reg.nodes) {
        reg.sites.removed_by.push_back(sites->removed_by[static_cast<size_t>(v)]);
        reg.sites.added_by.push_back(sites->added_by[static_cast<size_t>(v)]);
        here.insert(sites->removed_by[static_cast<size_t>(v)].begin(), sites->removed_by[static_cast<size_t>(v)].end());
        if (sites->added_by[static_cast<size_t>(v)] >= 0) here.insert(sites->added_by[static_cast<size_t>(v)]);
      }
      for (const std::vector<int>& set : sites->exclusive)
        if (std::all_of(set.begin(), set.end(), [&](int s) { return here.count(s) != 0; }))
          reg.sites.exclusive.push_back(set);
    }
  }
  std::vector<bool> graph_output(g.values.size(), false);
  for (ValueId v : g.outputs) graph_output[static_cast<size_t>(v)] = true;
  for (size_t r = 0; r < out.size(); ++r) {
    SelectionRegion& reg = out[r];
    Graph& sub = reg.graph;
    sub.name = g.name;
    sub.opset = g.opset;
    sub.values = g.values;
    for (Value& val : sub.values) val.producer = -1;
    sub.inputs = g.inputs;
    for (NodeId v : reg.nodes) {
      const Node& node = g.nodes[static_cast<size_t>(v)];
      for (ValueId o : node.outputs) {
        if (o == kNoValue) continue;
        sub.values[static_cast<size_t>(o)].producer = local_id[static_cast<size_t>(v)];
        bool read_outside = graph_output[static_cast<size_t>(o)];
        for (NodeId c : gi.consumers[static_cast<size_t>(o)]) read_outside |= region_at[static_cast<size_t>(c)] != static_cast<int>(r);
        if (read_outside) sub.outputs.push_back(o);
      }
      sub.nodes.push_back(node);
    }
  }
  return out;
}

}  // namespace korch
