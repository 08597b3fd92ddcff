// The operator graph: ONNX semantics, static shapes, a dtype on every tensor.
//
// Values and nodes live in vectors and are named by integer ids (ValueId/NodeId), which keeps
// graphs cheap to copy and passes simple: a pass builds new node lists rather than unlinking
// pointers. `nodes` is kept in topological order by every producer of a Graph (the frontend,
// the text parser, passes); verify_graph() checks it.
//
// A value is one of: a graph input (producer == -1, constant == nullptr), a constant
// (initializer or folded; producer == -1, constant != nullptr), or a node output.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace korch {

using ValueId = int;
using NodeId = int;
constexpr ValueId kNoValue = -1;  // an omitted optional input

using AttrValue = std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                               std::vector<std::string>, Tensor>;

// Node attributes with typed getters. A getter throws korch::Error (kInvalid) when the
// attribute is present with the wrong kind; the caller (frontend) adds the node's name.
class Attributes {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void set(const std::string& name, AttrValue v) { map_[name] = std::move(v); }
  void erase(const std::string& name) { map_.erase(name); }
  const std::map<std::string, AttrValue>& all() const { return map_; }

  int64_t get_int(const std::string& name, int64_t def) const;
  int64_t get_int(const std::string& name) const;  // required
  float get_float(const std::string& name, float def) const;
  std::string get_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> get_floats(const std::string& name, std::vector<float> def = {}) const;
  std::vector<std::string> get_strings(const std::string& name) const;
  const Tensor* get_tensor(const std::string& name) const;  // nullptr when absent

  bool operator==(const Attributes& o) const;

 private:
  std::map<std::string, AttrValue> map_;
};

struct Value {
  std::string name;
  TensorType type;
  NodeId producer = -1;
  std::shared_ptr<const Tensor> constant;  // set for initializers and folded values
  bool is_constant() const { return constant != nullptr; }
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;               // "" for the default ONNX domain
  std::vector<ValueId> inputs;      // kNoValue marks an omitted optional input
  std::vector<ValueId> outputs;     // kNoValue marks an unused optional output
  Attributes attrs;
};

// A number no other Graph object of this process has had: a copy, a move or an assignment
// draws a new one. A cache keyed by it (profile/measured_cost.cc) cannot take another graph, made
// at the address of a freed one, for the graph it saw.
class GraphInstance {
 public:
  GraphInstance() : id_(next()) {}
  GraphInstance(const GraphInstance&) : id_(next()) {}
  GraphInstance& operator=(const GraphInstance&) {
    id_ = next();
    return *this;
  }
  uint64_t id() const { return id_; }

 private:
  static uint64_t next();
  uint64_t id_;
};

class Graph {
 public:
  GraphInstance instance;
  std::string name = "main";
  int opset = 17;  // default-domain opset the op semantics follow
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;

  ValueId add_value(std::string name, TensorType type);
  ValueId add_input(std::string name, TensorType type);
  ValueId add_constant(std::string name, Tensor t);
  // Appends a node (caller keeps topological order) and sets its outputs' producer.
  NodeId add_node(Node n);

  const Value& value(ValueId id) const { return values.at(static_cast<size_t>(id)); }
  Value& value(ValueId id) { return values.at(static_cast<size_t>(id)); }
  const TensorType& type(ValueId id) const { return value(id).type; }
  // Finds a value by name; -1 when absent. Linear scan: for tools and tests.
  ValueId find_value(const std::string& name) const;

  // Number of consumers of each value (node inputs + graph outputs).
  std::vector<int> use_counts() const;
  // Removes nodes whose outputs reach no graph output and values nothing refers to; renumbers.
  void remove_dead_code();
  // Re-sorts `nodes` topologically (stable for already-sorted graphs). Throws on a cycle. A value
  // several nodes write (only in orchestrate/rewrite_choice.cc's union of variants) is read after
  // all of them; its producer is then the last.
  void topo_sort();

  int64_t parameter_count() const;  // elements in constant values used by nodes
};

// Checks the invariants every stage relies on: ids in range, each value produced at most once,
// nodes topologically ordered (so acyclic), constants match their declared types, graph outputs
// exist. When `registry_check` is true, also re-runs shape inference on every node and compares
// with the recorded types. Throws korch::Error (kInvalid) naming the first violation.
void verify_graph(const Graph& g, bool registry_check = true);

}  // namespace korch
