#include "rewrite/alternatives.h"
#include "rewrite/merge_matmuls.h"

#include "support/error.h"

namespace korch {

namespace {

// What identifies a matched node across copies and unrelated edits: name, op and first output.
std::vector<std::string> signature(const Graph& g, const std::vector<NodeId>& nodes) {
  std::vector<std::string> s;
  for (NodeId id : nodes) {
    const Node& n = g.nodes.at(static_cast<size_t>(id));
    s.push_back(n.name + "|" + n.op_type + "|" + (n.outputs.empty() || n.outputs[0] == kNoValue ? "" : g.value(n.outputs[0]).name));
  }
  return s;
}

Alternative make_alternative(const Graph& g, const AlternativeFamily& fam, NodeId anchor, const AltMatch& m) {
  Alternative a;
  a.rule = fam.rule;
  for (NodeId id : m.nodes) a.nodes.push_back(g.nodes[static_cast<size_t>(id)].name);
  a.description = m.description;
  const std::string anchor_value = g.value(g.nodes[static_cast<size_t>(anchor)].outputs.at(0)).name;
  std::vector<std::string> sig = signature(g, m.nodes);
  AltMatchFn match = fam.match;
  std::string rule = fam.rule;
  a.apply = [match, rule, anchor_value, sig](Graph& h) {
    const ValueId v = h.find_value(anchor_value);
    KORCH_CHECK(v != kNoValue && h.value(v).producer >= 0,
                "alternative '{}' applied to a graph without its anchor value '{}'", rule, anchor_value);
    UseInfo uses(h);
    std::optional<AltMatch> m2 = match(h, uses, h.value(v).producer);
    KORCH_CHECK(m2.has_value(), "alternative '{}' at '{}' no longer matches the graph it is applied to", rule,
                anchor_value);
    KORCH_CHECK(signature(h, m2->nodes) == sig, "alternative '{}' at '{}' matches different nodes than when found",
                rule, anchor_value);
    m2->rewrite(h);
    h.remove_dead_code();
  };
  return a;
}

}  // namespace

std::vector<Alternative> find_alternatives(const Graph& g) {
  std::vector<Alternative> out;
  UseInfo uses(g);
  std::vector<AlternativeFamily> fams = attention_alternative_families();
  for (const AlternativeFamily& f : sparse_matmul_alternative_families()) fams.push_back(f);
  for (const AlternativeFamily& f : matvec_alternative_families()) fams.push_back(f);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.outputs.empty() || n.outputs[0] == kNoValue) continue;
    for (const AlternativeFamily& f : fams)
      if (std::optional<AltMatch> m = f.match(g, uses, static_cast<NodeId>(i)))
        out.push_back(make_alternative(g, f, static_cast<NodeId>(i), *m));
  }
  // MatMuls / Convs sharing an input, merged by concatenating their weights (merge_matmuls.h).
  for (const MergeSite& site : find_matmul_merges(g)) {
    Alternative a;
    a.rule = "merge_matmuls";
    a.nodes = site.matmuls;
    a.description = fmt::format("{} MatMul/Conv nodes sharing an input -> one, then Split", site.matmuls.size());
    a.apply = [site](Graph& h) { apply_matmul_merge(h, site); };
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace korch
