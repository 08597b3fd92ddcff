// The linear step on every linear node of real models: each node with the epilogue a linear
// kernel would typically carry (the single-consumer chain of elementwise/broadcast nodes, plus
// the Expand nodes of constants feeding it) is matched, run and compared with the interpreter.
// Needs model files, so it runs only when KORCH_LINEAR_MODELS names them (comma-separated):
//   KORCH_LINEAR_MODELS=/work/main/.cache/models/resnet18.onnx,... OMP_NUM_THREADS=2
//       build/tests/korch_linear_tests --gtest_filter='LinearModels*'
// It prints, per model, the linear nodes matched, the post-ops absorbed, the oneDNN kernels used
// and the reasons for nodes it could not match.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <sstream>

#include "codegen/linear_match.h"
#include "runtime/cpu/cpu_linear_step.h"
#include "codegen/kernel_signature.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/tensor_compare.h"
#include "ir/primitive.h"
#include "ir/random.h"
#include "orchestrate/kernel_candidate.h"
#include "pipeline/pipeline.h"

namespace korch::cpu {
namespace {

std::vector<std::string> model_paths() {
  std::vector<std::string> out;
  const char* env = std::getenv("KORCH_LINEAR_MODELS");
  if (!env) return out;
  std::stringstream ss(env);
  for (std::string p; std::getline(ss, p, ',');)
    if (!p.empty()) out.push_back(p);
  return out;
}

// {linear} + its single-consumer elementwise/broadcast chain + Expand-of-constant feeders.
std::vector<NodeId> epilogue_kernel(const Graph& g, NodeId lin, const std::vector<std::vector<NodeId>>& consumers) {
  std::vector<NodeId> s = {lin};
  ValueId v = g.nodes[static_cast<size_t>(lin)].outputs[0];
  for (int depth = 0; depth < 6; ++depth) {
    const auto& cs = consumers[static_cast<size_t>(v)];
    if (cs.size() != 1 || cs[0] < 0) break;  // -1: a graph output
    const Node& n = g.nodes[static_cast<size_t>(cs[0])];
    const PrimitiveKind k = primitive_kind(g, n);
    if ((k != PrimitiveKind::kElementwise && k != PrimitiveKind::kBroadcast) || n.outputs.size() != 1) break;
    bool ok = true;
    std::vector<NodeId> feeders;
    for (ValueId in : n.inputs) {
      if (in == kNoValue || in == v || is_free_value(g, in)) continue;
      const NodeId p = g.value(in).producer;
      const Node& pn = g.nodes[static_cast<size_t>(p)];
      if (pn.op_type == "Expand" && is_free_value(g, pn.inputs[0]) && is_free_value(g, pn.inputs[1])) feeders.push_back(p);
      else ok = false;  // another activation: a residual from outside is fine, but keep it simple
    }
    if (!ok) break;
    s.push_back(cs[0]);
    s.insert(s.end(), feeders.begin(), feeders.end());
    v = n.outputs[0];
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
}

// The project-wide criterion (ir/tensor_compare.h), with the shapes checked first.
double rel_l2(const Tensor& out, const Tensor& ref) {
  EXPECT_EQ(out.shape(), ref.shape());
  return rel_l2_error(out, ref);
}

TEST(LinearModels, EveryLinearNode) {
  const auto paths = model_paths();
  if (paths.empty()) GTEST_SKIP() << "set KORCH_LINEAR_MODELS to run";
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    Graph g = lower_to_primitives(load_onnx(path));
    std::vector<std::vector<NodeId>> consumers(g.values.size());
    for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i)
      for (ValueId in : g.nodes[static_cast<size_t>(i)].inputs)
        if (in != kNoValue) consumers[static_cast<size_t>(in)].push_back(i);
    for (ValueId o : g.outputs) consumers[static_cast<size_t>(o)].push_back(-1);
    std::map<std::string, int> reasons, impls;
    int matched = 0, absorbed = 0, checked = 0;
    std::mt19937_64 rng(7);
    for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i) {
      if (primitive_kind(g, g.nodes[static_cast<size_t>(i)]) != PrimitiveKind::kLinear) continue;
      KernelCandidate c = make_candidate(g, epilogue_kernel(g, i, consumers), false);
      LinearMatchResult m = match_linear(g, c.nodes, c.outputs);
      if (!m.ok) {
        ++reasons[m.reason];
        continue;
      }
      ++matched;
      absorbed += static_cast<int>(m.match.absorbed.size());
      // Run the step alone on the chain it absorbed; compare `result` with the interpreter.
      std::vector<NodeId> chain = m.match.absorbed;
      chain.push_back(m.match.linear);
      for (NodeId id : c.nodes) {  // un-absorbed Expands of constants (shared ones) feed it too
        const Node& n = g.nodes[static_cast<size_t>(id)];
        if (std::all_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return is_free_value(g, v); }) &&
            std::find(chain.begin(), chain.end(), id) == chain.end())
          chain.push_back(id);
      }
      std::sort(chain.begin(), chain.end());
      KernelCandidate sub = make_candidate(g, chain, false);
      const std::vector<ValueId> args = kernel_arg_inputs(g, sub);
      nlohmann::json desc = m.match.desc;
      std::vector<int> slots;
      for (ValueId v : m.match.operands)
        slots.push_back(static_cast<int>(std::find(args.begin(), args.end(), v) - args.begin()));
      desc["operand_slots"] = slots;
      desc["result_slot"] = static_cast<int>(args.size());
      std::vector<Tensor> in;
      std::vector<void*> a;
      for (ValueId v : args) {
        in.push_back(g.value(v).is_constant() ? *g.value(v).constant : random_tensor(g.type(v), rng));
        a.push_back(in.back().raw());
      }
      Tensor result(g.type(m.match.result));
      a.push_back(result.raw());
      auto step = LinearStep::create(desc);
      step->run(a.data());
      ++impls[step->implementation().substr(0, step->implementation().find(' '))];
      auto ref = interpret(kernel_subgraph(g, sub), in);
      const size_t at = static_cast<size_t>(std::find(sub.outputs.begin(), sub.outputs.end(), m.match.result) - sub.outputs.begin());
      ASSERT_LT(at, ref.size());
      EXPECT_LE(rel_l2(result, ref[at]), 1e-4) << g.nodes[static_cast<size_t>(i)].name << " " << desc.dump();
      ++checked;
    }
    std::printf("%s: %d linear nodes matched (%d epilogue nodes absorbed), %d checked\n", path.c_str(), matched,
                absorbed, checked);
    for (const auto& [impl, n] : impls) std::printf("    %4d x %s\n", n, impl.c_str());
    for (const auto& [why, n] : reasons) std::printf("    not matched %d x: %s\n", n, why.c_str());
  }
}

}  // namespace
}  // namespace korch::cpu
