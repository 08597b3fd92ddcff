#include "frontend/control_flow.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>

#include "ir/op_registry.h"

namespace korch {

namespace {

using Names = std::unordered_set<std::string>;
using Renames = std::unordered_map<std::string, std::string>;

bool default_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

// Calls f on every graph held by n's attributes (const or mutable, as n is).
template <typename NodeT, typename F>
void for_each_subgraph(NodeT& n, F&& f) {
  if constexpr (std::is_const_v<NodeT>) {
    for (const auto& a : n.attribute()) {
      if (a.has_g()) f(a.g());
      for (const auto& sub : a.graphs()) f(sub);
    }
  } else {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) f(*a.mutable_g());
      for (auto& sub : *a.mutable_graphs()) f(sub);
    }
  }
}

const onnx::GraphProto* graph_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name && a.has_g()) return &a.g();
  return nullptr;
}

// Names a graph defines in its own scope: inputs, initializers, node outputs.
Names defined_names(const onnx::GraphProto& g) {
  Names out;
  for (const auto& v : g.input()) out.insert(v.name());
  for (const auto& t : g.initializer()) out.insert(t.name());
  for (const auto& t : g.sparse_initializer()) out.insert(t.values().name());
  for (const auto& n : g.node())
    for (const auto& o : n.output())
      if (!o.empty()) out.insert(o);
  return out;
}

// Every value name in g and in the graphs nested in it, defined or referenced.
void collect_names(const onnx::GraphProto& g, Names& out) {
  for (const auto& name : defined_names(g)) out.insert(name);
  for (const auto& v : g.output()) out.insert(v.name());
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) out.insert(i);
    for_each_subgraph(n, [&](const onnx::GraphProto& sub) { collect_names(sub, out); });
  }
}

int64_t count_nodes(const onnx::GraphProto& g) {
  int64_t n = g.node_size();
  for (const auto& node : g.node())
    for_each_subgraph(node, [&](const onnx::GraphProto& sub) { n += count_nodes(sub); });
  return n;
}

// Applies `map` to every name g defines or references, and to the references of the graphs nested
// in it, where a nested graph's own names shadow the map.
void rename_graph(onnx::GraphProto& g, const Renames& map) {
  auto rename = [&](std::string& s) {
    if (auto it = map.find(s); it != map.end()) s = it->second;
  };
  for (auto& v : *g.mutable_input()) rename(*v.mutable_name());
  for (auto& t : *g.mutable_initializer()) rename(*t.mutable_name());
  for (auto& v : *g.mutable_output()) rename(*v.mutable_name());
  g.clear_value_info();  // type annotations of old names; nothing reads them
  for (auto& n : *g.mutable_node()) {
    for (auto& s : *n.mutable_input()) rename(s);
    for (auto& s : *n.mutable_output()) rename(s);
    for_each_subgraph(n, [&](onnx::GraphProto& sub) {
      Names own = defined_names(sub);
      if (std::none_of(own.begin(), own.end(), [&](const std::string& s) { return map.count(s) != 0; })) {
        rename_graph(sub, map);
        return;
      }
      Renames inner = map;
      for (const auto& s : own) inner.erase(s);
      rename_graph(sub, inner);
    });
  }
}

// Whether a TensorProto holds the single boolean `true` (a Constant or initializer in a body).
bool is_true_tensor(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  if (n != 1 || t.data_type() != onnx::TensorProto::BOOL) return false;
  if (t.has_raw_data()) return t.raw_data().size() == 1 && t.raw_data()[0] != 0;
  return t.int32_data_size() == 1 && t.int32_data(0) != 0;
}

// Whether a Loop body's condition output is its condition input, directly or through Identity
// nodes, or the constant true: then the loop never exits early.
bool passes_condition_through(const onnx::GraphProto& body) {
  std::unordered_map<std::string, const onnx::NodeProto*> producer;
  for (const auto& n : body.node())
    for (const auto& o : n.output()) producer[o] = &n;
  std::string c = body.output(0).name();
  for (int hops = 0; hops <= body.node_size(); ++hops) {
    if (c == body.input(1).name()) return true;
    auto it = producer.find(c);
    if (it == producer.end()) {
      for (const auto& t : body.initializer())
        if (t.name() == c) return is_true_tensor(t);
      return false;
    }
    const onnx::NodeProto& p = *it->second;
    if (!default_domain(p)) return false;
    if (p.op_type() == "Identity" && p.input_size() == 1) {
      c = p.input(0);
      continue;
    }
    if (p.op_type() == "Constant")
      for (const auto& a : p.attribute())
        if (a.name() == "value" && a.has_t()) return is_true_tensor(a.t());
    return false;
  }
  return false;
}

// The kind of a value that is declared and is not a tensor ("a sequence"...); empty otherwise.
std::string non_tensor_kind(const onnx::ValueInfoProto& v) {
  switch (v.type().value_case()) {
    case onnx::TypeProto::kTensorType:
    case onnx::TypeProto::VALUE_NOT_SET:
      return "";
    case onnx::TypeProto::kSequenceType:
      return "a sequence";
    case onnx::TypeProto::kOptionalType:
      return "an optional";
    case onnx::TypeProto::kMapType:
      return "a map";
    default:
      return "not a tensor";
  }
}

// Korch's graphs hold tensors only: a subgraph passing anything else cannot be spliced, whatever
// its condition (checked first, so that is the reason given).
void check_tensor_values(const std::string& label, const onnx::GraphProto& g, const char* what) {
  for (const auto* list : {&g.input(), &g.output()})
    for (const auto& v : *list)
      if (std::string kind = non_tensor_kind(v); !kind.empty())
        fail_unsupported("{}: its {} passes '{}', {} value; Korch supports tensors only", label, what, v.name(), kind);
}

onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                          const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const auto& i : inputs) n.add_input(i);
  n.add_output(output);
  return n;
}

class Inliner {
 public:
  Inliner(onnx::ModelProto& model, const LoadOptions& options, const FoldModel& fold)
      : model_(model), g_(*model.mutable_graph()), options_(options), fold_(fold) {
    for (const auto& imp : model.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx") opset_ = static_cast<int>(imp.version());
    if (options.assume_opset > 0) opset_ = options.assume_opset;
    collect_names(g_, taken_);
    for (int i = 0; i < g_.initializer_size(); ++i) initializer_[g_.initializer(i).name()] = i;
    for (int i = 0; i < g_.input_size(); ++i) input_[g_.input(i).name()] = i;
    for (int i = 0; i < g_.node_size(); ++i) {
      onnx::NodeProto& n = *g_.mutable_node(i);
      // Unnamed nodes get the names the loader would give them, so messages stay the same.
      if (n.name().empty()) n.set_name(fmt::format("{}_{}", n.op_type(), i));
      for (const auto& o : n.output()) producer_[o] = i;
    }
  }

  void run() {
    // Nodes spliced in are appended (or take the replaced node's place) and visited in turn, so
    // nested control flow is handled in the same sweep. A node whose condition depends on a
    // control-flow node not yet spliced waits for the next sweep.
    for (bool progress = true; progress;) {
      progress = false;
      int waiting = -1;
      for (int i = 0; i < g_.node_size();) {
        if (!is_control_flow(g_.node(i))) {
          ++i;
          continue;
        }
        if (process(i)) {
          progress = true;
          continue;
        }  // index i now holds the first spliced node
        if (waiting < 0) waiting = i;
        ++i;
      }
      if (!progress && waiting >= 0)
        fail("{}: its inputs depend on its own outputs (a cycle through control flow)", label(g_.node(waiting)));
    }
    // Nodes replaced by nothing (control flow without outputs) were left empty; drop them.
    auto* nodes = g_.mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i)
      if (nodes->Get(i).op_type().empty()) nodes->DeleteSubrange(i, 1);
  }

 private:
  std::string label(const onnx::NodeProto& n) const {
    return fmt::format("node '{}' ({}, opset {})", n.name(), n.op_type(), opset_);
  }

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = fmt::format("{}_{}", base, k);
    taken_.insert(name);
    made_.insert(name);
    return name;
  }

  std::string add_initializer(onnx::TensorProto t, const std::string& base) {
    t.set_name(fresh(base));
    initializer_[t.name()] = g_.initializer_size();
    *g_.add_initializer() = std::move(t);
    return g_.initializer(g_.initializer_size() - 1).name();
  }

  std::string add_int64(const std::string& base, int64_t v, bool as_vector) {
    onnx::TensorProto t;
    t.set_data_type(onnx::TensorProto::INT64);
    if (as_vector) t.add_dims(1);
    t.add_int64_data(v);
    return add_initializer(std::move(t), base);
  }

  bool process(int i) {
    const onnx::NodeProto& n = g_.node(i);
    if (n.op_type() == "If") return inline_if(i);
    if (n.op_type() == "Loop") return unroll_loop(i);
    fail_unsupported(
        "node '{}': unsupported operator '{}' (opset {}); of control flow, Korch inlines If with a "
        "compile-time constant condition and unrolls Loop with a constant trip count",
        n.name(), n.op_type(), opset_);
  }

  // The value of `name` when it is a compile-time constant; nullopt when it depends on a
  // control-flow node not spliced yet. Throws when it depends on runtime inputs. `role` and
  // `purpose` word the message: "its condition", "inline the If".
  std::optional<Tensor> evaluate(const onnx::NodeProto& at, const std::string& role, const std::string& name,
                                 const std::string& purpose) {
    // The cone of `name`: the nodes, initializers and inputs it is computed from.
    onnx::ModelProto cone;
    cone.set_ir_version(model_.ir_version());
    *cone.mutable_opset_import() = model_.opset_import();
    onnx::GraphProto& cg = *cone.mutable_graph();
    cg.set_name(name);
    std::vector<std::string> runtime_inputs;
    Names seen{name}, input_names, dim_names;
    std::vector<std::string> stack{name};
    std::vector<int> nodes;
    while (!stack.empty()) {
      std::string v = stack.back();
      stack.pop_back();
      auto in = input_.find(v);
      if (auto it = initializer_.find(v); it != initializer_.end()) {
        *cg.add_initializer() = g_.initializer(it->second);
      } else if (in != input_.end()) {
        const onnx::ValueInfoProto& vi = g_.input(in->second);
        *cg.add_input() = vi;
        input_names.insert(v);
        if (vi.type().tensor_type().has_shape())
          for (const auto& d : vi.type().tensor_type().shape().dim()) dim_names.insert(d.dim_param());
        if (!options_.frozen_inputs.count(v)) runtime_inputs.push_back(v);
      } else if (auto p = producer_.find(v); p != producer_.end()) {
        const onnx::NodeProto& pn = g_.node(p->second);
        if (is_control_flow(pn)) return std::nullopt;
        nodes.push_back(p->second);
        for (const auto& s : pn.input())
          if (!s.empty() && seen.insert(s).second) stack.push_back(s);
      } else {
        fail("{}: {} '{}' is not produced by any node, graph input or initializer", label(at), role, v);
      }
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    for (int k : nodes) *cg.add_node() = g_.node(k);
    cg.add_output()->set_name(name);
    // The load options that concern the cone's inputs.
    LoadOptions sub;
    sub.assume_opset = options_.assume_opset;
    sub.simplify = false;
    for (const auto& [k, shape] : options_.input_shapes)
      if (input_names.count(k) || dim_names.count(k)) sub.input_shapes[k] = shape;
    for (const auto& [k, t] : options_.frozen_inputs)
      if (input_names.count(k)) sub.frozen_inputs[k] = t;
    Graph folded;
    try {
      folded = fold_(cone, sub);
    } catch (const Error& e) {
      rethrow_with_context(e, fmt::format("{}: evaluating {} '{}'", label(at), role, name));
    }
    const Value& out = folded.value(folded.outputs.at(0));
    if (out.is_constant()) return *out.constant;
    std::sort(runtime_inputs.begin(), runtime_inputs.end());
    if (!runtime_inputs.empty()) {
      std::vector<std::string> quoted;
      for (const auto& r : runtime_inputs) quoted.push_back("'" + r + "'");
      const bool one = runtime_inputs.size() == 1;
      fail_unsupported(
          "{}: {} '{}' must be a compile-time constant to {}, but it depends on the runtime {} {} "
          "(control flow on runtime values is not supported); bind {} to {} with --bind {}=FILE.npy",
          label(at), role, name, purpose, one ? "input" : "inputs", fmt::join(quoted, ", "), one ? "it" : "them",
          one ? "a fixed value" : "fixed values", runtime_inputs[0]);
    }
    fail_unsupported(
        "{}: {} '{}' must be a compile-time constant to {}, but it does not fold to one (it is computed "
        "by an operator Korch does not evaluate at load time)",
        label(at), role, name, purpose);
  }

  // One copy of `body` in the main graph: its own names renamed (those in `bound` to the given
  // names, the rest to fresh names under `prefix`), its initializers moved to the main graph, its
  // nodes appended to `out`. Returns the copy's output names.
  std::vector<std::string> instantiate(onnx::GraphProto body, const std::string& prefix, Renames bound,
                                       std::vector<onnx::NodeProto>& out) {
    if (body.sparse_initializer_size() > 0)
      fail_unsupported("subgraph '{}' has sparse initializers, which are not supported", body.name());
    for (const auto& s : defined_names(body))
      if (!s.empty() && !bound.count(s)) bound[s] = fresh(fmt::format("{}/{}", prefix, s));
    rename_graph(body, bound);
    for (auto& t : *body.mutable_initializer()) {
      initializer_[t.name()] = g_.initializer_size();
      *g_.add_initializer() = std::move(t);
    }
    for (int j = 0; j < body.node_size(); ++j) {
      onnx::NodeProto& n = *body.mutable_node(j);
      n.set_name(fmt::format("{}/{}", prefix, n.name().empty() ? fmt::format("{}_{}", n.op_type(), j) : n.name()));
      out.push_back(std::move(n));
    }
    std::vector<std::string> outputs;
    for (const auto& v : body.output()) outputs.push_back(v.name());
    return outputs;
  }

  // Node i becomes nodes[0]; the rest are appended.
  void replace_node(int i, std::vector<onnx::NodeProto> nodes) {
    if (nodes.empty()) {
      g_.mutable_node(i)->Clear();  // dropped at the end of run()
      return;
    }
    for (size_t k = 0; k < nodes.size(); ++k) {
      int index = k == 0 ? i : g_.node_size();
      for (const auto& o : nodes[k].output()) producer_[o] = index;
      if (k == 0)
        *g_.mutable_node(i) = std::move(nodes[0]);
      else
        *g_.add_node() = std::move(nodes[k]);
    }
  }

  bool inline_if(int i) {
    const onnx::NodeProto n = g_.node(i);
    const onnx::GraphProto* then_branch = graph_attr(n, "then_branch");
    const onnx::GraphProto* else_branch = graph_attr(n, "else_branch");
    if (!then_branch || !else_branch) fail("{}: needs the graph attributes then_branch and else_branch", label(n));
    if (n.input_size() != 1 || n.input(0).empty()) fail("{}: needs one input, its condition", label(n));
    check_tensor_values(label(n), *then_branch, "then_branch");
    check_tensor_values(label(n), *else_branch, "else_branch");
    std::optional<Tensor> cond = evaluate(n, "its condition", n.input(0), "inline the branch it takes");
    if (!cond) return false;
    if (cond->numel() != 1)
      fail("{}: its condition '{}' has {} elements (shape {}); If needs a single boolean", label(n), n.input(0),
           cond->numel(), shape_str(cond->shape()));
    const onnx::GraphProto& branch = cond->get_as_double(0) != 0 ? *then_branch : *else_branch;
    const char* which = &branch == then_branch ? "then_branch" : "else_branch";
    if (branch.input_size() != 0) fail("{}: its {} declares inputs; If branches take none", label(n), which);
    if (branch.output_size() != n.output_size())
      fail("{}: its {} has {} outputs, the If has {}", label(n), which, branch.output_size(), n.output_size());
    std::vector<onnx::NodeProto> nodes;
    std::vector<std::string> outs;
    try {
      outs = instantiate(branch, n.name(), {}, nodes);
    } catch (const Error& e) {
      rethrow_with_context(e, label(n));
    }
    for (int k = 0; k < n.output_size(); ++k)
      if (!n.output(k).empty())
        nodes.push_back(make_node("Identity", {outs[k]}, n.output(k), fmt::format("{}/output_{}", n.name(), k)));
    replace_node(i, std::move(nodes));
    return true;
  }

  bool unroll_loop(int i) {
    const onnx::NodeProto n = g_.node(i);
    const onnx::GraphProto* body = graph_attr(n, "body");
    if (!body) fail("{}: needs the graph attribute body", label(n));
    const int carried_count = n.input_size() - 2;
    if (carried_count < 0)
      fail("{}: needs at least two inputs (trip count M and condition, either may be empty)", label(n));
    const int scan_count = body->output_size() - 1 - carried_count;
    if (body->input_size() != carried_count + 2 || scan_count < 0)
      fail("{}: with {} loop-carried values its body needs {} inputs and at least {} outputs; it has {} and {}",
           label(n), carried_count, carried_count + 2, carried_count + 1, body->input_size(), body->output_size());
    if (n.output_size() > carried_count + scan_count)
      fail("{}: has {} outputs; its body gives {} loop-carried and {} scan outputs", label(n), n.output_size(),
           carried_count, scan_count);
    check_tensor_values(label(n), *body, "body");
    if (n.input(0).empty())
      fail_unsupported(
          "{}: it has no trip count, so it runs until its condition turns false (a data-dependent "
          "exit); Korch unrolls only loops with a compile-time constant trip count",
          label(n));
    if (!passes_condition_through(*body))
      fail_unsupported(
          "{}: its body computes its condition output '{}' (a data-dependent exit); Korch unrolls only "
          "loops whose body passes the condition through unchanged",
          label(n), body->output(0).name());
    std::optional<Tensor> trips_t = evaluate(n, "its trip count", n.input(0), "unroll the Loop");
    if (!trips_t) return false;
    if (trips_t->numel() != 1 || is_float(trips_t->dtype()))
      fail("{}: its trip count '{}' is {}{}; Loop needs a single integer", label(n), n.input(0),
           dtype_name(trips_t->dtype()), shape_str(trips_t->shape()));
    int64_t trips = std::max<int64_t>(0, trips_t->get_as_int(0));
    if (!n.input(1).empty()) {
      std::optional<Tensor> cond = evaluate(n, "its condition", n.input(1), "unroll the Loop");
      if (!cond) return false;
      if (cond->numel() != 1)
        fail("{}: its condition '{}' has {} elements; Loop needs a single boolean", label(n), n.input(1),
             cond->numel());
      if (cond->get_as_double(0) == 0) trips = 0;
    }
    for (int s = 0; s < scan_count && trips == 0; ++s)
      if (carried_count + s < n.output_size() && !n.output(carried_count + s).empty())
        fail_unsupported("{}: it runs no iteration, so its scan output '{}' is empty with a shape Korch does not infer",
                         label(n), n.output(carried_count + s));
    const int64_t body_nodes = std::max<int64_t>(1, count_nodes(*body));
    if (trips > (kMaxUnrolledNodes - unrolled_) / body_nodes)
      fail_unsupported(
          "{}: unrolling its {} iterations of a {}-node body would pass Korch's limit of {} unrolled "
          "nodes per model{}",
          label(n), trips, body_nodes, kMaxUnrolledNodes,
          unrolled_ ? fmt::format(" ({} already unrolled)", unrolled_) : "");
    unrolled_ += trips * body_nodes;

    std::vector<onnx::NodeProto> nodes;
    // Body inputs are bound only to names made here: a name of the model (the initial values, a
    // body output that is an outer value) could be captured by a nested subgraph defining it too,
    // so such a value enters through an Identity with a fresh name.
    auto own = [&](const std::string& v, const std::string& base) {
      if (made_.count(v)) return v;
      std::string name = fresh(base);
      nodes.push_back(make_node("Identity", {v}, name, name));
      return name;
    };
    std::vector<std::string> carried;
    for (int j = 0; j < carried_count; ++j)
      carried.push_back(own(n.input(2 + j), fmt::format("{}/initial_{}", n.name(), j)));
    std::vector<std::vector<std::string>> scans(static_cast<size_t>(scan_count));
    std::string cond_true;
    if (trips > 0) {
      onnx::TensorProto t;
      t.set_data_type(onnx::TensorProto::BOOL);
      t.add_int32_data(1);
      cond_true = add_initializer(std::move(t), n.name() + "/cond");
    }
    try {
      for (int64_t k = 0; k < trips; ++k) {
        const std::string prefix = fmt::format("{}/iter{}", n.name(), k);
        Renames bound;
        auto bind = [&](const std::string& local, const std::string& to) {
          if (!local.empty()) bound[local] = to;
        };
        bind(body->input(0).name(), add_int64(prefix + "/iteration", k, false));
        bind(body->input(1).name(), cond_true);
        for (int j = 0; j < carried_count; ++j)
          bind(body->input(2 + j).name(),
               own(carried[static_cast<size_t>(j)], fmt::format("{}/carried_{}", prefix, j)));
        std::vector<std::string> outs = instantiate(*body, prefix, std::move(bound), nodes);
        for (int j = 0; j < carried_count; ++j) carried[static_cast<size_t>(j)] = outs[static_cast<size_t>(1 + j)];
        for (int s = 0; s < scan_count; ++s)
          scans[static_cast<size_t>(s)].push_back(outs[static_cast<size_t>(1 + carried_count + s)]);
      }
    } catch (const Error& e) {
      rethrow_with_context(e, label(n));
    }
    for (int k = 0; k < n.output_size(); ++k) {
      const std::string& out = n.output(k);
      if (out.empty()) continue;
      if (k < carried_count) {
        nodes.push_back(
            make_node("Identity", {carried[static_cast<size_t>(k)]}, out, fmt::format("{}/output_{}", n.name(), k)));
        continue;
      }
      // A scan output: the per-iteration values stacked along a new axis 0.
      std::vector<std::string> parts;
      const std::string axes = opset_ >= 13 ? add_int64(n.name() + "/axes", 0, true) : "";
      int64_t it = 0;
      for (const std::string& v : scans[static_cast<size_t>(k - carried_count)]) {
        std::string part = fresh(fmt::format("{}/scan_{}/{}", n.name(), k - carried_count, it));
        onnx::NodeProto u = make_node("Unsqueeze", {v}, part, part);
        if (!axes.empty())
          u.add_input(axes);
        else {
          auto* a = u.add_attribute();
          a->set_name("axes");
          a->set_type(onnx::AttributeProto::INTS);
          a->add_ints(0);
        }
        nodes.push_back(std::move(u));
        parts.push_back(part);
        ++it;
      }
      onnx::NodeProto concat = make_node("Concat", parts, out, fmt::format("{}/output_{}", n.name(), k));
      auto* a = concat.add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(0);
      nodes.push_back(std::move(concat));
    }
    replace_node(i, std::move(nodes));
    return true;
  }

  onnx::ModelProto& model_;
  onnx::GraphProto& g_;
  const LoadOptions& options_;
  const FoldModel& fold_;
  int opset_ = -1;
  Names taken_;  // every name in the model, all scopes
  Names made_;   // the names fresh() made
  std::unordered_map<std::string, int> producer_, initializer_, input_;
  int64_t unrolled_ = 0;  // nodes made by unrolling so far
};

}  // namespace

bool is_control_flow(const onnx::NodeProto& n) {
  return default_domain(n) && (n.op_type() == "If" || n.op_type() == "Loop" || n.op_type() == "Scan");
}

void inline_control_flow(onnx::ModelProto& model, const LoadOptions& options, const FoldModel& fold) {
  const auto& nodes = model.graph().node();
  if (std::none_of(nodes.begin(), nodes.end(), [](const onnx::NodeProto& n) { return is_control_flow(n); })) return;
  Inliner(model, options, fold).run();
}

const std::vector<InlinedOp>& inlined_control_flow_ops() {
  static const std::vector<InlinedOp> ops = {
      {"If", kMinOpset, kMaxOpset, "only with a compile-time constant condition: the branch taken is inlined"},
      {"Loop", kMinOpset, kMaxOpset,
       fmt::format(
           "only with a constant trip count and no data-dependent exit: unrolled, at most {} unrolled nodes per model",
           kMaxUnrolledNodes)},
  };
  return ops;
}

}  // namespace korch
