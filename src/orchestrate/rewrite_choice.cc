#include "orchestrate/rewrite_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "orchestrate/regions.h"
#include "rewrite/alternatives.h"
#include "support/clock.h"
#include "support/error.h"

namespace korch {

namespace {

std::string value_name(const Graph& g, ValueId v) { return v == kNoValue ? std::string() : g.value(v).name; }

// Same op, attributes, and inputs and outputs by name.
bool same_node(const Graph& a, const Node& x, const Graph& b, const Node& y) {
  if (x.op_type != y.op_type || x.domain != y.domain || x.inputs.size() != y.inputs.size() ||
      x.outputs.size() != y.outputs.size() || !(x.attrs == y.attrs))
    return false;
  for (size_t i = 0; i < x.inputs.size(); ++i)
    if (value_name(a, x.inputs[i]) != value_name(b, y.inputs[i])) return false;
  for (size_t i = 0; i < x.outputs.size(); ++i)
    if (value_name(a, x.outputs[i]) != value_name(b, y.outputs[i])) return false;
  return true;
}

// The site a canonical node name belongs to ("alt<s>/..."), or -1.
int site_of(const std::string& name) {
  if (name.rfind("alt", 0) != 0) return -1;
  const size_t slash = name.find('/');
  if (slash == std::string::npos || slash == 3) return -1;
  int s = 0;
  for (size_t i = 3; i < slash; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    s = s * 10 + (name[i] - '0');
  }
  return s;
}

// `base` with alternative `alt` (site s) applied; nullopt when it does not apply there. The values
// that replace the site's outputs take the old names back (so the nodes after the site read what
// they read before), and everything else the rewrite made is named "alt<s>/...", in graph order.
std::optional<Graph> apply_site(const Graph& base, const Alternative& alt, int s) {
  Graph h = base;
  try {
    alt.apply(h);
  } catch (const Error&) {
    return std::nullopt;
  }
  std::unordered_map<std::string, NodeId> base_node;
  for (size_t i = 0; i < base.nodes.size(); ++i) base_node.emplace(base.nodes[i].name, static_cast<NodeId>(i));
  std::unordered_set<std::string> base_value, names;
  for (const Value& v : base.values) base_value.insert(v.name);
  for (const Value& v : h.values) names.insert(v.name);
  for (const Node& n : h.nodes) {
    auto it = base_node.find(n.name);
    if (it == base_node.end()) continue;
    const Node& o = base.nodes[static_cast<size_t>(it->second)];
    if (o.inputs.size() != n.inputs.size()) continue;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] == kNoValue || o.inputs[i] == kNoValue) continue;
      std::string& now = h.value(n.inputs[i]).name;
      const std::string& was = base.value(o.inputs[i]).name;
      if (now == was || base_value.count(now) || names.count(was)) continue;
      names.erase(now);
      now = was;
      names.insert(was);
    }
  }
  int k = 0;
  for (Node& n : h.nodes) {
    auto it = base_node.find(n.name);
    if (it != base_node.end() && same_node(h, n, base, base.nodes[static_cast<size_t>(it->second)])) continue;
    n.name = fmt::format("alt{}/{}{}", s, n.op_type, k++);
  }
  int v = 0;
  for (Value& val : h.values)
    if (!base_value.count(val.name)) val.name = fmt::format("alt{}/v{}", s, v++);
  return h;
}

// The nodes of `p` that `v` no longer has.
std::set<std::string> removed_nodes(const Graph& p, const Graph& v) {
  std::unordered_set<std::string> in_v;
  for (const Node& n : v.nodes) in_v.insert(n.name);
  std::set<std::string> out;
  for (const Node& n : p.nodes)
    if (!in_v.count(n.name)) out.insert(n.name);
  return out;
}

// Each site applied alone: its graph (nullopt: it does not apply), the nodes of P it removes, and
// the nodes it adds, by name.
struct Singles {
  std::vector<std::optional<Graph>> graph;
  std::vector<std::set<std::string>> removed;
  std::vector<std::unordered_map<std::string, const Node*>> added;
};

// Whether a graph with `sites` applied is what their single applications say: each added node as
// in its site's own variant, and exactly the union of their removed nodes gone.
bool consistent(const Graph& p, const Graph& v, const std::vector<int>& sites, const Singles& singles) {
  std::set<std::string> gone;
  for (int s : sites)
    gone.insert(singles.removed[static_cast<size_t>(s)].begin(), singles.removed[static_cast<size_t>(s)].end());
  if (removed_nodes(p, v) != gone) return false;
  for (const Node& n : v.nodes) {
    const int s = site_of(n.name);
    if (s < 0) continue;
    if (std::find(sites.begin(), sites.end(), s) == sites.end()) return false;
    const auto& own = singles.added[static_cast<size_t>(s)];
    auto it = own.find(n.name);
    if (it == own.end() || !same_node(v, n, *singles.graph[static_cast<size_t>(s)], *it->second)) return false;
  }
  return true;
}

// Sites `sites` applied to `p` one after another; nullopt when one does not apply or the result is
// not consistent().
std::optional<Graph> apply_sites(const Graph& p, const std::vector<int>& sites, const std::vector<Alternative>& alts,
                                 const Singles& singles) {
  std::optional<Graph> g = p;
  for (int s : sites) {
    g = apply_site(*g, alts[static_cast<size_t>(s)], s);
    if (!g) return std::nullopt;
  }
  if (!consistent(p, *g, sites, singles)) return std::nullopt;
  return g;
}

// Costs already asked for (by candidate_names), answered again without the provider; the rest from it.
// The provider still prepares every candidate: a kernel of P* can be written in another order than
// the same primitives in the variant graph that priced it (P* is sorted again after the sites are
// applied), so its signature differs, and later callers ask the provider for P*'s own kernels (the
// closed loop's isolated costs: they were "not measured", infinite, before).
class KnownCosts : public CostProvider {
 public:
  KnownCosts(CostProvider& inner, std::map<std::string, KernelCost> known) : inner_(inner), known_(std::move(known)) {}
  std::string name() const override { return inner_.name(); }
  void prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) override {
    inner_.prepare(g, candidates);
  }
  KernelCost cost(const Graph& g, const KernelCandidate& c) override {
    auto it = known_.find(candidate_names(g, c));
    return it != known_.end() ? it->second : inner_.cost(g, c);
  }

 private:
  CostProvider& inner_;
  std::map<std::string, KernelCost> known_;
};

// The union graph U of the variants (rewrite_choice.h), topologically sorted with every writer of
// a value before its readers; a value written in several variants keeps P's producer.
Graph union_graph(const Graph& p, const std::vector<Graph>& variants) {
  Graph u = p;
  std::unordered_map<std::string, ValueId> value_id;
  std::unordered_set<std::string> node_names;
  for (size_t i = 0; i < u.values.size(); ++i) value_id.emplace(u.values[i].name, static_cast<ValueId>(i));
  for (const Node& n : u.nodes) node_names.insert(n.name);
  for (const Graph& v : variants) {
    auto map_value = [&](ValueId id) {
      if (id == kNoValue) return kNoValue;
      const Value& val = v.value(id);
      auto [it, fresh] = value_id.emplace(val.name, static_cast<ValueId>(u.values.size()));
      if (fresh) {
        Value copy = val;
        copy.producer = -1;
        u.values.push_back(std::move(copy));
      }
      return it->second;
    };
    for (const Node& n : v.nodes) {
      if (!node_names.insert(n.name).second) continue;
      Node copy = n;
      for (ValueId& id : copy.inputs) id = map_value(id);
      for (ValueId& id : copy.outputs) id = map_value(id);
      u.nodes.push_back(std::move(copy));
    }
  }
  u.topo_sort();  // every writer of a value before its readers; P keeps its order
  // A value both variants write keeps P's writer as its producer.
  for (Value& val : u.values)
    if (!val.is_constant()) val.producer = -1;
  for (size_t i = 0; i < u.nodes.size(); ++i)
    for (ValueId o : u.nodes[i].outputs)
      if (o != kNoValue && (u.value(o).producer < 0 || site_of(u.nodes[i].name) < 0))
        u.value(o).producer = static_cast<NodeId>(i);
  return u;
}

// `c` of graph `g` in the ids of `u` (names identify nodes and values across the variants).
KernelCandidate translate(const Graph& g, const KernelCandidate& c, const std::unordered_map<std::string, NodeId>& node_id,
                          const std::unordered_map<std::string, ValueId>& value_id) {
  KernelCandidate t = c;
  for (NodeId& n : t.nodes) n = node_id.at(g.nodes[static_cast<size_t>(n)].name);
  for (ValueId& v : t.inputs) v = value_id.at(g.value(v).name);
  for (ValueId& v : t.outputs) v = value_id.at(g.value(v).name);
  std::sort(t.nodes.begin(), t.nodes.end());
  std::sort(t.outputs.begin(), t.outputs.end());
  return t;
}

// Names identify nodes across the variants (and the union graph): a graph with an unnamed node or
// two nodes of one name (a graph parsed from text, a model's batch-1 split) gets names first, else
// their nodes would merge in the union graph and leave a region without candidates.
std::optional<Graph> with_unique_node_names(const Graph& p) {
  std::set<std::string> taken;
  bool unique = true;
  for (const Node& n : p.nodes) unique = unique && !n.name.empty() && taken.insert(n.name).second;
  if (unique) return std::nullopt;
  Graph g = p;
  Rewriter rw(g);  // its fresh names are new to every value and node of g
  taken.clear();
  for (Node& n : g.nodes)
    if (n.name.empty() || !taken.insert(n.name).second) n.name = rw.fresh_name(n.name.empty() ? n.op_type : n.name);
  return g;
}

}  // namespace

RewriteChoiceResult orchestrate_with_rewrites(const Graph& given, CostProvider& provider,
                                              const OrchestrateOptions& options) {
  const std::optional<Graph> renamed = options.rewrite_choices ? with_unique_node_names(given) : std::nullopt;
  const Graph& p = renamed ? *renamed : given;
  auto say = [&](const std::string& s) {
    if (options.progress) options.progress(s);
  };
  RewriteChoiceResult out;
  const std::vector<Alternative> alts = options.rewrite_choices ? find_alternatives(p) : std::vector<Alternative>{};
  for (const Alternative& a : alts) out.result.rewrites.offered.push_back({a.rule, a.description, a.nodes});
  if (alts.empty()) {
    out.graph = p;
    out.result = orchestrate(p, provider, options);
    return out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int n = static_cast<int>(alts.size());
  Singles singles;
  singles.graph.resize(alts.size());
  singles.removed.resize(alts.size());
  singles.added.resize(alts.size());
  std::vector<int> applicable;
  for (int s = 0; s < n; ++s) {
    std::optional<Graph>& g = singles.graph[static_cast<size_t>(s)];
    g = apply_site(p, alts[static_cast<size_t>(s)], s);
    if (!g) {
      out.result.rewrites.skipped.push_back(fmt::format("{} ({}): does not apply", alts[static_cast<size_t>(s)].rule,
                                                        alts[static_cast<size_t>(s)].description));
      continue;
    }
    singles.removed[static_cast<size_t>(s)] = removed_nodes(p, *g);
    for (const Node& node : g->nodes)
      if (site_of(node.name) == s) singles.added[static_cast<size_t>(s)].emplace(node.name, &node);
    applicable.push_back(s);
  }
  // Sites that replace a node in common exclude each other. Sets that do not apply together for
  // another reason are found where they are applied (the variant graphs below, the chosen set).
  std::set<std::pair<int, int>> incompatible;
  for (size_t i = 0; i < applicable.size(); ++i)
    for (size_t j = i + 1; j < applicable.size(); ++j) {
      const std::set<std::string>& a = singles.removed[static_cast<size_t>(applicable[i])];
      const std::set<std::string>& b = singles.removed[static_cast<size_t>(applicable[j])];
      if (std::any_of(a.begin(), a.end(), [&](const std::string& x) { return b.count(x) != 0; }))
        incompatible.insert({applicable[i], applicable[j]});
    }
  auto compatible_with = [&](const std::vector<int>& set, int t) {
    for (int s : set)
      if (incompatible.count({std::min(s, t), std::max(s, t)})) return false;
    return true;
  };

  // The variant graphs: every compatible combination when few, else layers (each site joins the
  // first layer it applies to with the sites already there).
  std::vector<Graph> variants;
  if (static_cast<int>(applicable.size()) <= kMaxExhaustiveSites) {
    out.result.rewrites.exhaustive = true;
    for (uint32_t mask = 1; mask < (1u << applicable.size()); ++mask) {
      std::vector<int> set;
      bool ok = true;
      for (size_t i = 0; i < applicable.size() && ok; ++i)
        if (mask & (1u << i)) {
          ok = compatible_with(set, applicable[i]);
          set.push_back(applicable[i]);
        }
      if (!ok) continue;
      std::optional<Graph> g =
          set.size() == 1 ? singles.graph[static_cast<size_t>(set[0])] : apply_sites(p, set, alts, singles);
      if (!g) {
        out.result.rewrites.skipped.push_back(
            fmt::format("sites {} together: do not apply as they apply alone", fmt::join(set, ",")));
        continue;
      }
      variants.push_back(std::move(*g));
    }
  } else {
    std::vector<int> rest = applicable;
    while (!rest.empty()) {
      std::vector<int> layer, next;
      std::optional<Graph> g = p;
      for (int t : rest) {
        std::optional<Graph> with_t;
        if (compatible_with(layer, t)) with_t = apply_site(*g, alts[static_cast<size_t>(t)], t);
        std::vector<int> grown = layer;
        grown.push_back(t);
        if (with_t && consistent(p, *with_t, grown, singles)) {
          g = std::move(with_t);
          layer = std::move(grown);
        } else {
          next.push_back(t);
        }
      }
      if (layer.empty()) {  // (cannot happen: a site applies alone)
        for (int t : next) out.result.rewrites.skipped.push_back(fmt::format("site {}: no layer", t));
        break;
      }
      variants.push_back(std::move(*g));
      rest = std::move(next);
    }
  }
  out.result.rewrites.variant_graphs = 1 + static_cast<int>(variants.size());

  // The union graph, its sites, and every variant's candidates in its ids.
  const Graph u = union_graph(p, variants);
  std::unordered_map<std::string, NodeId> node_id;
  std::unordered_map<std::string, ValueId> value_id;
  for (size_t i = 0; i < u.nodes.size(); ++i) node_id.emplace(u.nodes[i].name, static_cast<NodeId>(i));
  for (size_t i = 0; i < u.values.size(); ++i) value_id.emplace(u.values[i].name, static_cast<ValueId>(i));
  RewriteSites sites;
  sites.count = n;
  sites.removed_by.resize(u.nodes.size());
  sites.added_by.assign(u.nodes.size(), -1);
  for (size_t i = 0; i < u.nodes.size(); ++i) sites.added_by[i] = site_of(u.nodes[i].name);
  for (int s : applicable)
    for (const std::string& name : singles.removed[static_cast<size_t>(s)])
      sites.removed_by[static_cast<size_t>(node_id.at(name))].push_back(s);
  for (const auto& [a, b] : incompatible) sites.exclusive.push_back({a, b});

  std::vector<KernelCandidate> cands;
  std::vector<double> seconds;
  double unfused = 0;  // one kernel per primitive of P: the baseline is the graph as given
  std::map<std::string, KernelCost> known;  // by candidate_names, for P*'s candidates below
  std::set<std::pair<std::vector<NodeId>, std::vector<ValueId>>> seen;
  const std::vector<const Graph*> graphs = [&] {
    std::vector<const Graph*> gs{&p};
    for (const Graph& v : variants) gs.push_back(&v);
    return gs;
  }();
  for (const Graph* g : graphs) {
    const CandidateSet cs = enumerate_candidates(*g, options.candidates);
    std::vector<KernelCandidate> fresh;
    for (const KernelCandidate& c : cs.candidates) {
      KernelCandidate t = translate(*g, c, node_id, value_id);
      if (seen.insert({t.nodes, t.outputs}).second) {
        fresh.push_back(c);
        cands.push_back(std::move(t));
      }
    }
    const CostTable costs = fill_cost_table(*g, fresh, provider);
    for (size_t i = 0; i < fresh.size(); ++i) {
      seconds.push_back(costs.costs[i].seconds);
      known.emplace(candidate_names(*g, fresh[i]), costs.costs[i]);
      if (g == &p && fresh[i].nodes.size() == 1 && !fresh[i].minimal_outputs && costs.costs[i].feasible())
        unfused += costs.costs[i].seconds;
    }
  }
  out.result.rewrites.candidates = static_cast<int64_t>(cands.size());
  say(
      fmt::format("rewrite choices: {} sites offered ({} apply), {} variant graphs{}, {} candidate kernels over "
                  "them ({:.2f} s)",
                  n, applicable.size(), out.result.rewrites.variant_graphs,
                  out.result.rewrites.exhaustive ? " (every combination)" : " (layers)", cands.size(), since(t0)));

  OrchestrateOptions with_sites = options;
  with_sites.rewrite_sites = &sites;
  // Compatible in pairs, a set of sites may still not apply together (checked per variant graph,
  // not for every set): such a choice is excluded and the program solved again.
  Selection sel;
  std::set<int> chosen;
  std::optional<Graph> best;
  for (;;) {
    sel = select_kernels(u, cands, seconds, with_sites);
    chosen.clear();
    for (int k : sel.order)
      for (NodeId id : cands[static_cast<size_t>(k)].nodes)
        if (sites.added_by[static_cast<size_t>(id)] >= 0) chosen.insert(sites.added_by[static_cast<size_t>(id)]);
    best = apply_sites(p, std::vector<int>(chosen.begin(), chosen.end()), alts, singles);
    if (best) break;
    sites.exclusive.emplace_back(chosen.begin(), chosen.end());
    out.result.rewrites.skipped.push_back(
        fmt::format("sites {} chosen together do not apply together: excluded, solved again", fmt::join(chosen, ",")));
  }
  out.result.rewrites.objective = sel.objective;
  out.result.rewrites.regions = sel.regions;
  out.result.rewrites.gap = sel.solve.gap;
  out.result.rewrites.solve_seconds = sel.solve.seconds;
  out.result.rewrites.status = sel.solve.status;
  out.result.rewrites.chosen.assign(chosen.begin(), chosen.end());
  // What each choice saved: the site's region (regions.h: a site lies in one) solved again
  // without the site's kernels, while the time lasts (as long as the first solve took, and at
  // least a second, in all).
  const double first_solve = since(t0);
  const auto t_saved = std::chrono::steady_clock::now();
  const std::vector<SelectionRegion> regions =
      split_into_regions(u, cands, usable_candidates(cands, seconds, options.allow_recompute), &sites);
  std::vector<int> region_of(u.nodes.size(), -1);
  for (size_t r = 0; r < regions.size(); ++r)
    for (NodeId id : regions[r].nodes) region_of[static_cast<size_t>(id)] = static_cast<int>(r);
  std::map<int, double> region_optimum;  // by region: its plan with every site it has
  OrchestrateOptions quiet = with_sites;
  quiet.progress = nullptr;
  quiet.split_regions = false;
  quiet.dump_blp_path.clear();
  for (int s : out.result.rewrites.chosen) {
    const double spent = since(t_saved);
    const auto added = std::find(sites.added_by.begin(), sites.added_by.end(), s);
    // (Not under a memory budget: the arena is the whole plan's, not a region's.)
    if (spent > std::max(1.0, first_solve) || added == sites.added_by.end() || options.memory_budget >= 0) {
      out.result.rewrites.saved.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    const int r = region_of[static_cast<size_t>(added - sites.added_by.begin())];
    const SelectionRegion& reg = regions[static_cast<size_t>(r)];
    quiet.rewrite_sites = &reg.sites;
    quiet.time_limit_s = std::max(1.0, std::max(1.0, first_solve) - spent);
    std::vector<double> local, without;
    for (size_t i = 0; i < reg.candidates.size(); ++i) {
      local.push_back(seconds[static_cast<size_t>(reg.candidates[i])]);
      bool adds = false;
      for (NodeId id : reg.local_candidates[i].nodes) adds = adds || reg.sites.added_by[static_cast<size_t>(id)] == s;
      without.push_back(adds ? std::numeric_limits<double>::infinity() : local.back());
    }
    try {
      if (!region_optimum.count(r))
        region_optimum[r] = select_kernels(reg.graph, reg.local_candidates, local, quiet).objective;
      out.result.rewrites.saved.push_back(select_kernels(reg.graph, reg.local_candidates, without, quiet).objective -
                                          region_optimum[r]);
    } catch (const Error&) {
      out.result.rewrites.saved.push_back(std::numeric_limits<double>::quiet_NaN());
    }
  }
  say(fmt::format("rewrite choices: {} of {} sites chosen (plan {:.6g} us over all variants, {} regions, {:.2f} s)",
                  chosen.size(), n, sel.objective * 1e6, sel.regions, since(t0)));

  // The plan on P* itself: its own candidates (the selected ones among them), costs answered from
  // what was asked above, so the rest of the pipeline sees one graph.
  out.graph = std::move(*best);
  KnownCosts again(provider, std::move(known));
  RewriteReport report = std::move(out.result.rewrites);
  out.result = orchestrate(out.graph, again, options);
  out.result.rewrites = std::move(report);
  out.result.unfused_seconds = unfused;
  return out;
}

}  // namespace korch
