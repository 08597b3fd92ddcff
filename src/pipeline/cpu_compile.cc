#include "pipeline/cpu_compile.h"

#include <map>

#include <fmt/format.h>

#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/kernel_signature.h"
#include "runtime/artifact.h"
#include "support/error.h"

namespace korch {

namespace {

// Analytic costs, restricted to what the CPU backend can emit (the roofline alone would happily
// select a kernel no generator can write).
class EmittableAnalyticCost : public CostProvider {
 public:
  explicit EmittableAnalyticCost(DeviceSpec spec) : inner_(std::move(spec)) {}
  std::string name() const override { return inner_.name(); }
  KernelCost cost(const Graph& g, const KernelCandidate& c) override {
    std::string hash = content_hash(kernel_signature(g, c));
    auto it = emittable_.find(hash);
    if (it == emittable_.end()) {
      cpu::EmittedKernel k = cpu::emit_cpu_kernel(g, c);
      it = emittable_.emplace(hash, k.ok ? "" : k.reason).first;
    }
    if (!it->second.empty()) return KernelCost::infeasible(it->second);
    return inner_.cost(g, c);
  }

 private:
  AnalyticCost inner_;
  std::map<std::string, std::string> emittable_;  // signature hash -> "" or the reason
};

// Every primitive must have a kernel of its own, or no plan exists: say which one does not.
void check_every_primitive_emits(const Graph& g) {
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    KernelCandidate c = make_candidate(g, {static_cast<NodeId>(n)}, false);
    cpu::EmittedKernel k = cpu::emit_cpu_kernel(g, c);
    if (!k.ok)
      fail_unsupported("node '{}' ({}) cannot run on the CPU backend: {}", g.nodes[n].name, g.nodes[n].op_type,
                       k.reason);
  }
}

}  // namespace

CpuCompileResult compile_for_cpu(const Graph& p, const CpuCompileOptions& options) {
  check_every_primitive_emits(p);
  CpuCompileResult r;
  OrchestrateOptions opt = options.orchestrate;
  if (options.unfused) {
    opt.candidates.max_primitives = 1;
    opt.candidates.offer_minimal_outputs = false;
    opt.allow_recompute = false;
  }
  if (options.cost == CostSource::kMeasured) {
    MeasuredCpuCost provider(options.measured);
    r.orchestration = orchestrate(p, provider, opt);
    r.measured = provider.stats();
    r.cost_model = provider.name();
  } else {
    EmittableAnalyticCost provider(options.spec);
    r.orchestration = orchestrate(p, provider, opt);
    r.cost_model = provider.name();
  }
  for (const PlannedKernel& pk : r.orchestration.plan.kernels) {
    const KernelCandidate& c = r.orchestration.candidates.candidates.at(static_cast<size_t>(pk.candidate));
    cpu::EmittedKernel k = cpu::emit_cpu_kernel(p, c);
    KORCH_CHECK(k.ok, "planned kernel {} cannot be emitted: {}", pk.candidate, k.reason);
    r.kernels.push_back(std::move(k));
  }
  return r;
}

runtime::MemoryReport write_cpu_artifact(const std::string& dir, const Graph& p, const CpuCompileResult& r,
                        const CpuCompileOptions& options, const PlanMetadata& meta) {
  runtime::ArtifactContents contents;
  contents.graph = &p;
  contents.prelude = cpu::cpu_prelude();
  const KernelPlan& plan = r.orchestration.plan;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const cpu::EmittedKernel& k = r.kernels[i];
    runtime::ArtifactKernel ak;
    ak.recipe = k.recipe;
    ak.args = k.arg_inputs;
    ak.args.insert(ak.args.end(), k.outputs.begin(), k.outputs.end());
    ak.function_source = k.function_source;
    std::vector<std::string> ops;
    for (NodeId n : plan.kernels[i].nodes) ops.push_back(p.nodes[static_cast<size_t>(n)].op_type);
    ak.note = fmt::format("{} ({:.1f} us, {})", fmt::join(ops, "+"), plan.kernels[i].seconds * 1e6,
                          plan.kernels[i].cost_note);
    contents.kernels.push_back(std::move(ak));
  }
  contents.manifest_extra = {{"model", meta.model},
                             {"device", meta.device},
                             {"cost_model", r.cost_model},
                             {"unfused", options.unfused},
                             {"plan_seconds", plan.total_seconds()},
                             {"unfused_seconds", r.orchestration.unfused_seconds},
                             {"kernels", plan.kernels.size()},
                             {"primitives", p.nodes.size()},
                             {"timing", meta.timing}};
  runtime::MemoryReport mem = runtime::write_artifact(dir, contents);
  write_plan_files(dir, p, r.orchestration, options.orchestrate, meta);
  return mem;
}

}  // namespace korch
