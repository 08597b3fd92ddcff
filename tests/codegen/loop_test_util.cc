#include "loop_test_util.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "codegen/cpu/cpu_compiler.h"
#include "runtime/cpu/cpu_kernel.h"
#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel.h"
#include "ir/interpreter.h"
#include "ir/op_registry.h"
#include "ir/random.h"

namespace korch::testing {

ValueId GraphBuilder::constant(Tensor t) { return g_.add_constant(fmt::format("c{}", counter_++), std::move(t)); }

std::vector<ValueId> GraphBuilder::node_n(const std::string& op, std::vector<ValueId> inputs, Attributes a,
                                          int num_outputs, const std::string& domain) {
  Node n;
  n.op_type = op;
  n.domain = domain;
  n.name = fmt::format("{}{}", op, counter_++);
  n.inputs = std::move(inputs);
  n.attrs = std::move(a);
  std::vector<const TensorType*> types;
  std::vector<const Tensor*> consts;
  for (ValueId v : n.inputs) {
    types.push_back(v == kNoValue ? nullptr : &g_.type(v));
    consts.push_back(v == kNoValue ? nullptr : g_.value(v).constant.get());
  }
  n.outputs.assign(static_cast<size_t>(num_outputs), kNoValue);
  std::vector<TensorType> out = infer_node(n, g_.opset, types, consts);
  for (int i = 0; i < num_outputs; ++i) n.outputs[static_cast<size_t>(i)] = g_.add_value(fmt::format("{}_y{}", n.name, i), out[static_cast<size_t>(i)]);
  std::vector<ValueId> result = n.outputs;
  g_.add_node(std::move(n));
  return result;
}

Graph GraphBuilder::finish(std::vector<ValueId> outputs) {
  g_.outputs = std::move(outputs);
  return g_;
}

Attributes attrs(std::initializer_list<std::pair<const char*, AttrValue>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

LoopCase whole_graph_case(std::string name, Graph g) {
  std::vector<NodeId> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) nodes.push_back(static_cast<NodeId>(i));
  auto shared = std::make_shared<const Graph>(std::move(g));
  LoopCase c{std::move(name), shared, make_candidate(*shared, nodes, false)};
  // Full outputs = values read outside or graph outputs; keep the graph's outputs exactly.
  c.c.outputs = shared->outputs;
  return c;
}

std::string compare_to_reference(const Tensor& out, const Tensor& ref) {
  if (out.type() != ref.type()) return fmt::format("type {} vs reference {}", type_str(out.type()), type_str(ref.type()));
  double num = 0, den = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const double a = out.get_as_double(i), b = ref.get_as_double(i);
    if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) {
      if (!(std::isnan(a) && std::isnan(b)) && a != b)
        return fmt::format("element {}: {} vs reference {}", i, a, b);
      continue;
    }
    num += (a - b) * (a - b);
    den += b * b;
  }
  const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  if (rel > 1e-4) return fmt::format("relative L2 error {:.3g}", rel);
  return "";
}

std::vector<LoopCaseResult> run_loop_cases(const std::vector<LoopCase>& cases, size_t batch_size) {
  std::vector<LoopCaseResult> results(cases.size());
  std::vector<LoopKernelBuild> builds(cases.size());
  std::vector<std::vector<ValueId>> args(cases.size());
  std::vector<std::string> sources;
  std::vector<int> source_of(cases.size(), -1);
  CodeWriter w;
  size_t in_batch = 0;
  auto flush = [&] {
    if (in_batch == 0) return;
    sources.push_back(cpu::cpu_prelude() + w.take());
    w = CodeWriter();
    in_batch = 0;
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const LoopCase& lc = cases[i];
    results[i].name = lc.name;
    args[i] = kernel_arg_inputs(*lc.g, lc.c);
    builds[i] = build_loop_kernel(*lc.g, lc.c.nodes, args[i], lc.c.outputs);
    if (!builds[i].kernel) {
      results[i].reason = builds[i].reason;
      continue;
    }
    results[i].built = true;
    const int ni = static_cast<int>(args[i].size()), no = static_cast<int>(lc.c.outputs.size());
    std::vector<int> in_slots, out_slots;
    for (int k = 0; k < ni; ++k) in_slots.push_back(k);
    for (int k = 0; k < no; ++k) out_slots.push_back(ni + k);
    cpu::emit_cpu_loop_kernel(*builds[i].kernel, fmt::format("loop_case_{}", i), in_slots, out_slots, ni + no, w);
    source_of[i] = static_cast<int>(sources.size());
    if (++in_batch >= batch_size) flush();
  }
  flush();
  std::vector<CompiledLibrary> libs = compile_libraries(sources, cpu::default_cpu_compiler());
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!results[i].built) continue;
    const LoopCase& lc = cases[i];
    try {
      cpu::CpuKernelRecipe recipe;
      recipe.symbol = fmt::format("loop_case_{}", i);
      for (ValueId v : args[i]) recipe.inputs.push_back(lc.g->type(v));
      for (ValueId v : lc.c.outputs) recipe.outputs.push_back(lc.g->type(v));
      recipe.scratch_bytes = builds[i].scratch_bytes;
      cpu::CpuKernel kernel(recipe, libs[static_cast<size_t>(source_of[i])].library);
      Graph sub = kernel_subgraph(*lc.g, lc.c);
      std::vector<Tensor> inputs = random_inputs(sub, 1234 + i);
      std::vector<Tensor> ref = interpret(sub, inputs);
      std::vector<Tensor> outs;
      std::vector<const void*> in_ptrs;
      std::vector<void*> out_ptrs;
      for (const Tensor& t : inputs) in_ptrs.push_back(t.raw());
      for (const TensorType& t : recipe.outputs) {
        outs.emplace_back(t);
        out_ptrs.push_back(outs.back().raw());
      }
      kernel.run(in_ptrs.data(), out_ptrs.data());
      std::string msg;
      for (size_t o = 0; o < outs.size() && msg.empty(); ++o) {
        msg = compare_to_reference(outs[o], ref[o]);
        if (!msg.empty()) msg = fmt::format("output {}: {}", o, msg);
      }
      results[i].ok = msg.empty();
      results[i].message = msg;
    } catch (const std::exception& e) {
      results[i].message = e.what();
    }
  }
  return results;
}

std::vector<LoopCase> candidate_cases(std::shared_ptr<const Graph> g, const std::string& prefix) {
  CandidateSet set = enumerate_candidates(*g, CandidateOptions{});
  std::vector<LoopCase> out;
  for (const KernelCandidate& c : set.candidates) {
    if (c.linear > 0) continue;
    out.push_back(LoopCase{fmt::format("{}: {} {}", prefix, describe_candidate(*g, c), c.minimal_outputs ? "(minimal)" : ""), g, c});
  }
  return out;
}

std::string summarize(const std::vector<LoopCaseResult>& results, int* built, int* passed) {
  *built = 0;
  *passed = 0;
  std::string failures;
  std::map<std::string, int> reasons;
  int shown = 0;
  for (const LoopCaseResult& r : results) {
    *built += r.built;
    *passed += r.ok;
    if (!r.built) reasons[r.reason]++;
    else if (!r.ok && shown++ < 10) failures += fmt::format("  FAIL {}: {}\n", r.name, r.message);
  }
  std::string s = fmt::format("{} cases, {} built, {} passed\n", results.size(), *built, *passed);
  for (const auto& [reason, n] : reasons) s += fmt::format("  {} x reason: {}\n", n, reason);
  return s + failures;
}

}  // namespace korch::testing
