// split_kernel: a candidate as the parts every backend emits (kernel_parts.h).
#include "codegen/kernel_parts.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "codegen/kernel_signature.h"
#include "codegen/linear_match.h"
#include "codegen/loop_kernel.h"
#include "codegen/rnn_match.h"
#include "ir/primitive.h"
#include "ir/text_format.h"
#include "runtime/memory_plan.h"

namespace korch {

namespace {

// Values the nodes read from outside the set, in order of first use (kNoValue skipped).
std::vector<ValueId> outside_reads(const Graph& g, const std::vector<NodeId>& nodes) {
  std::set<ValueId> produced;
  for (NodeId n : nodes)
    for (ValueId v : g.nodes[static_cast<size_t>(n)].outputs)
      if (v != kNoValue) produced.insert(v);
  std::vector<ValueId> out;
  for (NodeId n : nodes)
    for (ValueId v : g.nodes[static_cast<size_t>(n)].inputs)
      if (v != kNoValue && !produced.count(v) && std::find(out.begin(), out.end(), v) == out.end())
        out.push_back(v);
  return out;
}

bool is_integer_linear(const std::string& op) { return op == "ConvInteger" || op == "MatMulInteger"; }

// The candidate as a graph the reference interpreter runs inside the artifact (runtime/kernel_recipe.h).
std::string reference_graph(const Graph& g, const KernelCandidate& c) {
  PrintOptions po;
  po.max_constant_elements = -1;
  return print_graph(kernel_subgraph(g, c), po);
}

}  // namespace

KernelParts split_kernel(const Graph& g, const KernelCandidate& c, const FusionRules& rules,
                         const std::vector<ValueId>& arg_inputs) {
  KernelParts k;
  if (std::string why = unfusable_reason(g, c, rules); !why.empty()) {
    k.reason = why;
    return k;
  }
  if (c.nodes.size() == 1) {
    if (const auto offsets = runtime::in_place_offsets(g, c.nodes[0])) {
      const std::vector<ValueId> held = runtime::in_place_inputs(g.nodes[static_cast<size_t>(c.nodes[0])]);
      for (ValueId v : arg_inputs) {
        const auto at = std::find(held.begin(), held.end(), v);
        KORCH_CHECK(at != held.end(), "in-place node {} has argument {} it does not hold",
                    g.nodes[static_cast<size_t>(c.nodes[0])].name, g.value(v).name);
        k.in_place.push_back((*offsets)[static_cast<size_t>(at - held.begin())]);
      }
      return k;
    }
  }
  for (NodeId n : c.nodes) {
    const Node& node = g.nodes[static_cast<size_t>(n)];
    PrimitiveKind kind = primitive_kind(g, node);
    const bool no_emitter = kind != PrimitiveKind::kLinear && kind != PrimitiveKind::kOpaque &&
                            kind != PrimitiveKind::kOperator && !has_loop_emitter(node.op_type);
    if (kind != PrimitiveKind::kOpaque && kind != PrimitiveKind::kOperator && !no_emitter) continue;
    if (c.nodes.size() != 1) {  // unfusable_reason() keeps opaque/operator nodes alone; say so if that changes
      k.reason = no_emitter ? fmt::format("{} (node '{}') has no loop-kernel emitter: it runs alone", node.op_type, node.name)
                            : fmt::format("{} (node '{}') is {}: it runs alone", node.op_type, node.name,
                                          primitive_kind_name(kind));
      return k;
    }
    if (rules.library_rnn && is_rnn_op(node.op_type)) {
      RnnMatchResult rm = match_rnn(g, node);
      if (rm.ok) {  // a library call reading and writing the node's values in place
        auto slot_of = [](const std::vector<ValueId>& vs, ValueId v, int base) {
          auto it = std::find(vs.begin(), vs.end(), v);
          return v == kNoValue || it == vs.end() ? -1 : base + static_cast<int>(it - vs.begin());
        };
        rm.desc["input_slots"] = nlohmann::json::array();
        rm.desc["output_slots"] = nlohmann::json::array();
        for (ValueId v : node.inputs) rm.desc["input_slots"].push_back(slot_of(arg_inputs, v, 0));
        for (ValueId v : node.outputs)
          rm.desc["output_slots"].push_back(slot_of(c.outputs, v, static_cast<int>(arg_inputs.size())));
        k.linear = std::move(rm.desc);
        return k;
      }
    }
    // No generated code for it: the reference interpreter runs it.
    k.reference_graph = reference_graph(g, c);
    return k;
  }

  const int ni = static_cast<int>(arg_inputs.size()), no = static_cast<int>(c.outputs.size());
  std::map<ValueId, int> slot;  // argument slot of each value the kernel's parts exchange
  for (int i = 0; i < ni; ++i) slot.emplace(arg_inputs[static_cast<size_t>(i)], i);
  for (int i = 0; i < no; ++i) slot[c.outputs[static_cast<size_t>(i)]] = ni + i;

  std::vector<NodeId> loop_nodes = c.nodes;
  if (c.linear > 0) {
    LinearMatchResult lm = match_linear(g, c.nodes, c.outputs, rules.linear_library);
    if (!lm.ok && c.nodes.size() == 1 && is_integer_linear(g.nodes[static_cast<size_t>(c.nodes[0])].op_type)) {
      // An integer linear primitive alone that the int8 kernels cannot run (uint8 weights, a zero
      // point per row): the reference interpreter runs it, as it runs opaque operators.
      k.reference_graph = reference_graph(g, c);
      return k;
    }
    if (!lm.ok) {
      k.reason = lm.reason;
      return k;
    }
    const LinearMatch& m = lm.match;
    nlohmann::json desc = m.desc;
    desc["operand_slots"] = nlohmann::json::array();
    for (ValueId v : m.operands) {
      auto it = slot.find(v);
      if (it == slot.end() || it->second >= ni) {
        k.reason = fmt::format("the linear step reads '{}', which is computed inside the kernel", g.value(v).name);
        return k;
      }
      desc["operand_slots"].push_back(it->second);
    }
    if (!slot.count(m.result)) {
      slot[m.result] = ni + no + static_cast<int>(k.scratch_bytes.size());
      k.scratch_bytes.push_back(g.type(m.result).byte_size());
    }
    desc["result_slot"] = slot.at(m.result);
    k.linear = desc;
    std::set<NodeId> in_step(m.absorbed.begin(), m.absorbed.end());
    in_step.insert(m.linear);
    std::erase_if(loop_nodes, [&](NodeId n) { return in_step.count(n) != 0; });
    // Values computed inside the step other than its result are not materialised anywhere.
    std::set<ValueId> step_internal;
    for (NodeId n : in_step)
      for (ValueId v : g.nodes[static_cast<size_t>(n)].outputs)
        if (v != kNoValue && v != m.result) step_internal.insert(v);
    for (ValueId v : outside_reads(g, loop_nodes))
      if (step_internal.count(v)) {
        k.reason = fmt::format("'{}' is needed after the linear step but lives only inside it", g.value(v).name);
        return k;
      }
    for (ValueId v : c.outputs)
      if (step_internal.count(v)) {
        k.reason = fmt::format("output '{}' lives only inside the linear step", g.value(v).name);
        return k;
      }
  }
  if (loop_nodes.empty()) return k;

  std::vector<ValueId> loop_inputs, loop_outputs;
  for (ValueId v : outside_reads(g, loop_nodes))
    if (!is_baked_constant(g, v)) loop_inputs.push_back(v);
  std::set<ValueId> loop_produced;
  for (NodeId n : loop_nodes)
    for (ValueId v : g.nodes[static_cast<size_t>(n)].outputs) loop_produced.insert(v);
  for (ValueId v : c.outputs)
    if (loop_produced.count(v)) loop_outputs.push_back(v);
  LoopKernelBuild lb = build_loop_kernel(g, loop_nodes, loop_inputs, loop_outputs);
  if (!lb.kernel) {
    k.reason = lb.reason.empty() ? "the loop kernel builder declined" : lb.reason;
    return k;
  }
  for (ValueId v : loop_inputs) k.loop_input_slots.push_back(slot.at(v));
  for (ValueId v : loop_outputs) k.loop_output_slots.push_back(slot.at(v));
  k.loop_first_scratch = ni + no + static_cast<int>(k.scratch_bytes.size());
  for (int64_t b : lb.scratch_bytes) k.scratch_bytes.push_back(b);
  k.loop = std::move(lb.kernel);
  return k;
}

bool runs_library_call_alone(const Graph& g, const KernelCandidate& c, const FusionRules& rules) {
  if (c.linear != 1) return false;
  const LinearMatchResult lm = match_linear(g, c.nodes, c.outputs, rules.linear_library);
  if (!lm.ok) return false;
  std::set<NodeId> in_step(lm.match.absorbed.begin(), lm.match.absorbed.end());
  in_step.insert(lm.match.linear);
  if (!std::all_of(c.nodes.begin(), c.nodes.end(), [&](NodeId n) { return in_step.count(n) != 0; })) return false;
  // The whole split (cheap without a loop kernel): the step's operands and outputs must bind.
  const KernelParts parts = split_kernel(g, c, rules, kernel_arg_inputs(g, c));
  return parts.reason.empty() && parts.linear && !parts.loop && parts.reference_graph.empty();
}

KernelParts start_emit(const Graph& g, const KernelCandidate& c, const FusionRules& rules, EmittedKernel& k,
                       runtime::KernelRecipeBase& recipe) {
  k.signature = kernel_signature(g, c);
  k.hash = content_hash(k.signature);
  k.arg_inputs = kernel_arg_inputs(g, c);
  k.outputs = c.outputs;
  for (ValueId v : k.arg_inputs) recipe.inputs.push_back(g.type(v));
  for (ValueId v : k.outputs) recipe.outputs.push_back(g.type(v));
  KernelParts parts = split_kernel(g, c, rules, k.arg_inputs);
  if (!parts.reason.empty()) {
    k.reason = parts.reason;
    return parts;
  }
  recipe.reference_graph = parts.reference_graph;
  recipe.linear = parts.linear;
  recipe.scratch_bytes = parts.scratch_bytes;
  recipe.in_place = parts.in_place;
  return parts;
}

}  // namespace korch
