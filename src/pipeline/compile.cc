#include "pipeline/compile.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "codegen/kernel_signature.h"
#include "pipeline/pipeline.h"
#include "profile/kernel_check.h"
#include "runtime/artifact.h"
#include "support/error.h"

namespace korch {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Analytic costs, restricted to what the backend can emit (the roofline alone would happily
// select a kernel no generator can write) and to kernels that did not fail verification.
class EmittableAnalyticCost : public CostProvider {
 public:
  EmittableAnalyticCost(const Backend& backend, DeviceSpec spec)
      : backend_(backend), inner_(std::move(spec), backend.fusion_rules()) {}
  std::string name() const override { return inner_.name(); }
  KernelCost cost(const Graph& g, const KernelCandidate& c) override {
    std::string hash = content_hash(kernel_signature(g, c));
    auto it = verdict_.find(hash);
    if (it == verdict_.end()) {
      EmittedKernel k = backend_.emit(g, c);
      it = verdict_.emplace(hash, k.ok ? "" : k.reason).first;
    }
    if (!it->second.empty()) return KernelCost::infeasible(it->second);
    return inner_.cost(g, c);
  }
  void exclude(const std::string& hash, const std::string& why) { verdict_[hash] = why; }

 private:
  const Backend& backend_;
  AnalyticCost inner_;
  std::map<std::string, std::string> verdict_;  // signature hash -> "" or why it cannot be used
};

const KernelCandidate& candidate_of(const CompileResult& r, size_t plan_index) {
  return r.orchestration.candidates.candidates.at(static_cast<size_t>(r.orchestration.plan.kernels[plan_index].candidate));
}

// Every primitive must have a kernel of its own, or no plan exists: say which one does not.
void check_every_primitive_emits(const Graph& g, const Backend& backend) {
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    EmittedKernel k = backend.emit(g, make_candidate(g, {static_cast<NodeId>(n)}, false));
    if (!k.ok)
      fail_unsupported("node '{}' ({}) cannot run on the {} backend: {}", g.nodes[n].name, g.nodes[n].op_type,
                       backend.name(), k.reason);
  }
}

runtime::MemoryReport write_artifact_files(const std::string& dir, const Graph& p, Backend& backend,
                                           const CompileResult& r, const CompileOptions& o) {
  runtime::ArtifactContents contents;
  contents.graph = &p;
  contents.device = backend.name();
  const KernelPlan& plan = r.orchestration.plan;
  std::vector<const EmittedKernel*> kernels;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const EmittedKernel& k = r.kernels[i];
    kernels.push_back(&k);
    runtime::ArtifactKernel ak;
    ak.recipe = k.recipe;
    ak.args = k.arg_inputs;
    ak.args.insert(ak.args.end(), k.outputs.begin(), k.outputs.end());
    std::vector<std::string> ops;
    for (NodeId n : plan.kernels[i].nodes) ops.push_back(p.nodes[static_cast<size_t>(n)].op_type);
    ak.note = fmt::format("{} ({:.1f} us, {})", fmt::join(ops, "+"), plan.kernels[i].seconds * 1e6,
                          plan.kernels[i].cost_note);
    contents.kernels.push_back(std::move(ak));
  }
  contents.write_module = [&](const std::string& d) { return backend.write_module(d, kernels); };
  contents.manifest_extra = {{"model", r.meta.model},
                             {"device", backend.name()},
                             {"cost_model", r.cost_model},
                             {"unfused", o.unfused},
                             {"plan_seconds", plan.total_seconds()},
                             {"unfused_seconds", r.orchestration.unfused_seconds},
                             {"kernels", plan.kernels.size()},
                             {"primitives", p.nodes.size()},
                             {"timing", r.meta.timing}};
  runtime::MemoryReport mem = runtime::write_artifact(dir, contents);
  write_plan_files(dir, p, r.orchestration, o.orchestrate, r.meta);
  return mem;
}

// Step 7: each kernel of the artifact in `dir` on the check device; returns the failures as
// (plan position, what differs).
std::vector<std::pair<size_t, std::string>> verify_kernels(const std::string& dir, const Graph& p,
                                                                Backend& backend, const CompileResult& r,
                                                                const std::vector<Tensor>& values) {
  runtime::Device& dev = *backend.check_device();
  bool needs_module = false;
  for (const EmittedKernel& k : r.kernels) needs_module |= dev.uses_module(k.recipe);
  std::shared_ptr<runtime::KernelModule> module = needs_module ? dev.load_module(dir) : nullptr;
  std::vector<std::pair<size_t, std::string>> failures;
  for (size_t i = 0; i < r.kernels.size(); ++i) {
    const EmittedKernel& k = r.kernels[i];
    std::string bad;
    try {
      std::unique_ptr<runtime::DeviceKernel> kernel = dev.make_kernel(k.recipe, module);
      KernelProbe probe(dev, *kernel, k, p, values);
      bad = probe.check(1e-4);
    } catch (const Error& e) {
      bad = e.what();
    }
    if (!bad.empty())
      failures.emplace_back(i, fmt::format("kernel {} ({}, {}): {}", i, describe_candidate(p, candidate_of(r, i)),
                                           k.entry.empty() ? "no generated code" : k.entry, bad));
  }
  return failures;
}

}  // namespace

CompileResult compile_model(const Graph& model, const std::string& artifact_dir, const CompileOptions& o) {
  auto say = [&](const std::string& s) { if (o.log) o.log(s); };
  const auto t_start = Clock::now();
  BackendOptions bo;
  bo.cpu_threads = o.cpu_threads;
  std::unique_ptr<Backend> owned = o.backend ? nullptr : make_backend(o.target, bo);
  Backend* backend = o.backend ? o.backend : owned.get();
  CompileResult r;
  r.target = backend->name();
  r.meta.model = o.model_name;
  r.meta.device = backend->name();

  // 1-2. Primitives, each of which the backend can run alone.
  auto t = Clock::now();
  r.primitives = lower_to_primitives(model);
  const Graph& p = r.primitives;
  check_every_primitive_emits(p, *backend);
  r.meta.timing["lower"] = since(t);
  say(fmt::format("{}: {} operators -> {} primitives ({:.2f} s)", o.model_name, model.nodes.size(), p.nodes.size(),
                  r.meta.timing["lower"]));

  // 3. Costs.
  OrchestrateOptions opt = o.orchestrate;
  opt.candidates.rules = backend->fusion_rules();
  if (o.unfused) {
    opt.candidates.max_primitives = 1;
    opt.candidates.offer_minimal_outputs = false;
    opt.allow_recompute = false;
  }
  std::unique_ptr<MeasuredCost> measured;
  std::unique_ptr<EmittableAnalyticCost> analytic;
  CostProvider* provider;
  if (o.cost == CostSource::kMeasured) {
    MeasuredCostOptions mo = o.measured;
    if (!mo.log) mo.log = o.log;
    measured = std::make_unique<MeasuredCost>(*backend, mo);
    provider = measured.get();
  } else {
    const DeviceSpec spec = o.spec ? *o.spec : backend->analytic_spec();
    analytic = std::make_unique<EmittableAnalyticCost>(*backend, spec);
    provider = analytic.get();
    r.meta.device_spec_json = device_spec_to_json(spec);
  }
  r.cost_model = r.meta.cost_model = provider->name();

  const bool verify = o.verify && !measured;
  std::vector<Tensor> values;  // reference values for step 7, computed once
  std::set<std::string> gated;  // signature hashes of candidates checked after a failure
  for (int round = 1;; ++round) {
    // 4-5. The plan and its kernels.
    t = Clock::now();
    r.orchestration = orchestrate(p, *provider, opt);
    if (measured) r.measured = measured->stats();
    r.kernels.clear();
    for (const PlannedKernel& pk : r.orchestration.plan.kernels) {
      const KernelCandidate& c = r.orchestration.candidates.candidates.at(static_cast<size_t>(pk.candidate));
      EmittedKernel k = backend->emit(p, c);
      KORCH_CHECK(k.ok, "planned kernel {} cannot be emitted: {}", pk.candidate, k.reason);
      r.kernels.push_back(std::move(k));
    }
    r.meta.timing["orchestrate"] += since(t);

    // 6. The artifact.
    t = Clock::now();
    r.memory = write_artifact_files(artifact_dir, p, *backend, r, o);
    r.meta.timing["artifact"] += since(t);
    r.module = backend->describe_module();
    if (!verify) break;

    // 7. Verification on the check device.
    t = Clock::now();
    if (values.empty()) values = reference_values(p, o.measured.seed);
    auto failures = verify_kernels(artifact_dir, p, *backend, r, values);
    r.meta.timing["verify"] += since(t);
    r.verify.ran = true;
    r.verify.device = backend->check_device()->name();
    r.verify.kernels = static_cast<int64_t>(r.kernels.size());
    r.verify.rounds = round;
    if (failures.empty()) break;
    // A failing kernel says the generator is wrong somewhere in its primitives: gate every
    // candidate that overlaps one (once each), so the next plan cannot pick another variant of
    // the same mistake, and solve again without those that fail.
    std::set<NodeId> region;
    for (const auto& [i, why] : failures) {
      r.verify.failures.push_back(why);
      say("verification failure: " + why);
      const KernelCandidate& c = candidate_of(r, i);
      analytic->exclude(r.kernels[i].hash, "failed the correctness gate on " + r.verify.device + ": " + why);
      region.insert(c.nodes.begin(), c.nodes.end());
    }
    std::vector<const KernelCandidate*> around;
    for (const KernelCandidate& c : r.orchestration.candidates.candidates) {
      const bool overlaps = std::any_of(c.nodes.begin(), c.nodes.end(), [&](NodeId n) { return region.count(n) != 0; });
      if (overlaps && gated.insert(content_hash(kernel_signature(p, c))).second) around.push_back(&c);
    }
    std::vector<std::string> verdict = check_candidates(*backend, *backend->check_device(), p, around, values, 1e-4);
    int64_t bad = 0;
    for (size_t j = 0; j < around.size(); ++j) {
      if (verdict[j].empty()) continue;
      ++bad;
      analytic->exclude(content_hash(kernel_signature(p, *around[j])),
                        "failed the correctness gate on " + r.verify.device + ": " + verdict[j]);
    }
    r.verify.gated += static_cast<int64_t>(around.size());
    r.verify.gate_failures += bad;
    say(fmt::format("{} kernels failed verification; {} overlapping candidates checked, {} of them fail: solving "
                    "again without those",
                    failures.size(), around.size(), bad));
    if (round >= 5)
      fail("kernels of {} keep failing the correctness gate on {} after {} plans; first: {}", o.model_name,
           r.verify.device, round, r.verify.failures.front());
  }
  r.meta.timing["total"] = since(t_start);
  return r;
}

}  // namespace korch
