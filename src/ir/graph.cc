#include "ir/graph.h"

#include <algorithm>
#include <atomic>
#include <queue>

namespace korch {

namespace {
template <typename T>
const T* get_typed(const std::map<std::string, AttrValue>& m, const std::string& name, const char* kind) {
  auto it = m.find(name);
  if (it == m.end()) return nullptr;
  const T* p = std::get_if<T>(&it->second);
  if (!p) fail("attribute '{}' is not {}", name, kind);
  return p;
}
}  // namespace

int64_t Attributes::get_int(const std::string& name, int64_t def) const {
  const int64_t* p = get_typed<int64_t>(map_, name, "an int");
  return p ? *p : def;
}
int64_t Attributes::get_int(const std::string& name) const {
  const int64_t* p = get_typed<int64_t>(map_, name, "an int");
  if (!p) fail("required attribute '{}' is missing", name);
  return *p;
}
float Attributes::get_float(const std::string& name, float def) const {
  auto it = map_.find(name);
  if (it != map_.end()) {
    if (auto* i = std::get_if<int64_t>(&it->second)) return static_cast<float>(*i);
  }
  const float* p = get_typed<float>(map_, name, "a float");
  return p ? *p : def;
}
std::string Attributes::get_string(const std::string& name, const std::string& def) const {
  const std::string* p = get_typed<std::string>(map_, name, "a string");
  return p ? *p : def;
}
std::vector<int64_t> Attributes::get_ints(const std::string& name, std::vector<int64_t> def) const {
  const auto* p = get_typed<std::vector<int64_t>>(map_, name, "a list of ints");
  return p ? *p : def;
}
std::vector<float> Attributes::get_floats(const std::string& name, std::vector<float> def) const {
  const auto* p = get_typed<std::vector<float>>(map_, name, "a list of floats");
  return p ? *p : def;
}
std::vector<std::string> Attributes::get_strings(const std::string& name) const {
  const auto* p = get_typed<std::vector<std::string>>(map_, name, "a list of strings");
  return p ? *p : std::vector<std::string>{};
}
const Tensor* Attributes::get_tensor(const std::string& name) const {
  return get_typed<Tensor>(map_, name, "a tensor");
}

bool Attributes::operator==(const Attributes& o) const { return map_ == o.map_; }

uint64_t GraphInstance::next() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

ValueId Graph::add_value(std::string n, TensorType type) {
  values.push_back(Value{std::move(n), std::move(type), -1, nullptr});
  return static_cast<ValueId>(values.size() - 1);
}

ValueId Graph::add_input(std::string n, TensorType type) {
  ValueId id = add_value(std::move(n), std::move(type));
  inputs.push_back(id);
  return id;
}

ValueId Graph::add_constant(std::string n, Tensor t) {
  ValueId id = add_value(std::move(n), t.type());
  values.back().constant = std::make_shared<const Tensor>(std::move(t));
  return id;
}

NodeId Graph::add_node(Node n) {
  NodeId id = static_cast<NodeId>(nodes.size());
  for (ValueId o : n.outputs)
    if (o != kNoValue) value(o).producer = id;
  nodes.push_back(std::move(n));
  return id;
}

ValueId Graph::find_value(const std::string& n) const {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i].name == n) return static_cast<ValueId>(i);
  return -1;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& n : nodes)
    for (ValueId v : n.inputs)
      if (v != kNoValue) ++uses[static_cast<size_t>(v)];
  for (ValueId v : outputs) ++uses[static_cast<size_t>(v)];
  return uses;
}

void Graph::remove_dead_code() {
  // Mark live values backwards from the outputs (nodes are topologically ordered).
  std::vector<char> live_value(values.size(), 0), live_node(nodes.size(), 0);
  for (ValueId v : outputs) live_value[static_cast<size_t>(v)] = 1;
  for (size_t i = nodes.size(); i-- > 0;) {
    const Node& n = nodes[i];
    bool live = false;
    for (ValueId o : n.outputs) live |= o != kNoValue && live_value[static_cast<size_t>(o)];
    if (!live) continue;
    live_node[i] = 1;
    for (ValueId v : n.inputs)
      if (v != kNoValue) live_value[static_cast<size_t>(v)] = 1;
  }
  for (ValueId v : inputs) live_value[static_cast<size_t>(v)] = 1;  // inputs stay (API contract)
  for (size_t i = 0; i < nodes.size(); ++i)
    if (live_node[i])
      for (ValueId o : nodes[i].outputs)
        if (o != kNoValue) live_value[static_cast<size_t>(o)] = 1;

  std::vector<ValueId> remap(values.size(), kNoValue);
  std::vector<Value> new_values;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!live_value[i]) continue;
    remap[i] = static_cast<ValueId>(new_values.size());
    new_values.push_back(std::move(values[i]));
  }
  auto map_id = [&](ValueId v) { return v == kNoValue ? kNoValue : remap[static_cast<size_t>(v)]; };
  std::vector<Node> new_nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!live_node[i]) continue;
    Node n = std::move(nodes[i]);
    for (ValueId& v : n.inputs) v = map_id(v);
    for (ValueId& v : n.outputs) v = map_id(v);  // dead optional outputs become kNoValue
    new_nodes.push_back(std::move(n));
  }
  for (ValueId& v : inputs) v = map_id(v);
  for (ValueId& v : outputs) v = map_id(v);
  values = std::move(new_values);
  nodes = std::move(new_nodes);
  for (Value& v : values) v.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].outputs)
      if (o != kNoValue) values[static_cast<size_t>(o)].producer = static_cast<NodeId>(i);
}

void Graph::topo_sort() {
  // Kahn's algorithm, picking the lowest original index first so sorted graphs keep their order.
  // A reader comes after every node that writes what it reads (one, except in the union of
  // rewrite variants that orchestrate/rewrite_choice.cc sorts).
  std::vector<std::vector<NodeId>> writers(values.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].outputs)
      if (o != kNoValue) writers[static_cast<size_t>(o)].push_back(static_cast<NodeId>(i));
  std::vector<int> indeg(nodes.size(), 0);
  std::vector<std::vector<NodeId>> succ(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs)
      if (v != kNoValue)
        for (NodeId w : writers[static_cast<size_t>(v)]) {
          ++indeg[i];
          succ[static_cast<size_t>(w)].push_back(static_cast<NodeId>(i));
        }
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (indeg[i] == 0) ready.push(static_cast<NodeId>(i));
  std::vector<NodeId> order;
  while (!ready.empty()) {
    NodeId n = ready.top();
    ready.pop();
    order.push_back(n);
    for (NodeId s : succ[static_cast<size_t>(n)])
      if (--indeg[static_cast<size_t>(s)] == 0) ready.push(s);
  }
  if (order.size() != nodes.size()) fail("graph '{}' has a cycle", name);
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  for (NodeId n : order) sorted.push_back(std::move(nodes[static_cast<size_t>(n)]));
  nodes = std::move(sorted);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].outputs)
      if (o != kNoValue) values[static_cast<size_t>(o)].producer = static_cast<NodeId>(i);
}

int64_t Graph::parameter_count() const {
  std::vector<char> used(values.size(), 0);
  for (const Node& n : nodes)
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[static_cast<size_t>(v)] = 1;
  int64_t total = 0;
  for (size_t i = 0; i < values.size(); ++i)
    if (used[i] && values[i].is_constant()) total += values[i].type.numel();
  return total;
}

}  // namespace korch
