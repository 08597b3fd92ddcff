#include "pipeline/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "codegen/kernel_signature.h"
#include "ir/text_format.h"
#include "orchestrate/rewrite_choice.h"
#include "pipeline/compile_steps.h"
#include "pipeline/micro_batch.h"
#include "pipeline/pipeline.h"
#include "profile/in_model.h"
#include "profile/kernel_check.h"
#include "rewrite/conv_padding.h"
#include "runtime/artifact.h"
#include "support/cache_folder.h"
#include "support/error.h"
#include "support/host_compiler.h"
#include "support/strings.h"

namespace korch {

namespace compile_steps {

const KernelCandidate& candidate_of(const CompileResult& r, size_t plan_index) {
  return r.orchestration.candidates.candidates.at(static_cast<size_t>(r.orchestration.plan.kernels[plan_index].candidate));
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
  const int64_t samples = r.micro.runs();  // runs of this plan per model run
  contents.micro_batches = samples;
  contents.flush_denormals = o.flush_denormals && backend.name() == "cpu";
  contents.manifest_extra = {{"model", r.meta.model},
                             {"device", backend.name()},
                             {"cost_model", r.cost_model},
                             {"unfused", o.unfused},
                             {"denormals", contents.flush_denormals ? "flush" : "keep"},
                             {"plan_seconds", plan.total_seconds() * static_cast<double>(samples)},
                             {"unfused_seconds", r.orchestration.unfused_seconds * static_cast<double>(samples)},
                             {"kernels", plan.kernels.size()},
                             {"primitives", p.nodes.size()},
                             {"timing", r.meta.timing}};
  if (r.loop.ran) {
    // Every time here is one model run's, as plan_seconds is: a micro-batched artifact's are its
    // batch-k plan's times `samples` times.
    const double runs = static_cast<double>(samples);
    contents.manifest_extra["measured_seconds"] = r.loop.measured * runs;
    contents.manifest_extra["unfused_isolated_seconds"] = r.loop.unfused_isolated * runs;
    nlohmann::json& loop = contents.manifest_extra["closed_loop"];
    loop = {{"rounds", loop_rounds_json(r.loop, runs)},
            {"kept", r.loop.kept},
            {"in_model_records_loaded", r.loop.loaded},
            {"in_model_records_left_slow", r.loop.left_slow},
            {"in_model_share_of_first_plan", r.loop.warm_share},
            {"unfused_measured_s", r.loop.unfused_measured * runs},
            {"plan_beside_unfused_s", r.loop.plan_beside_unfused * runs}};
    if (r.loop.retaken) {
      loop["kept_run_first_s"] = r.loop.first_measured * runs;
      loop["kept_run_agrees"] = r.loop.agrees;
    }
    if (r.loop.kept_pace > 0) loop["kept_run_pace"] = r.loop.kept_pace;
    if (r.loop.kept_at_pace) loop["predicted_from_times_at_pace"] = true;
    if (r.loop.to_whole_runs != 1) loop["kept_run_to_whole_runs"] = r.loop.to_whole_runs;
    if (r.loop.kept_drift != 1) loop["kept_run_drift"] = r.loop.kept_drift;
    if (r.loop.kept_scale != 1) loop["kept_run_scaled_to_beside"] = r.loop.kept_scale;
    if (const auto& c = r.loop.candidate_beside_first)
      loop["fastest_round_beside_first"] = {{"fastest_s", c->first * runs}, {"first_s", c->second * runs}};
  }
  if (r.micro.chosen) {
    contents.manifest_extra["micro_batches"] = samples;
    contents.manifest_extra["micro_batch"] = micro_batch_json(r.micro);
    contents.manifest_extra["micro_batch"]["plan_seconds_per_micro_batch"] = plan.total_seconds();
  }
  const int64_t budget = o.orchestrate.memory_budget;
  if (budget >= 0) contents.manifest_extra["memory_budget"] = budget;
  runtime::MemoryReport mem = runtime::write_artifact(dir, contents);
  // The plan was chosen on plan_peak_bytes; the artifact's arena is the same planner over the
  // emitted kernels' arguments, so they agree unless emission added or dropped an intermediate.
  if (budget >= 0 && mem.arena_bytes > budget)
    fail("internal error: the artifact's arena ({} bytes) is above the memory budget ({} bytes) its plan was chosen "
         "within (the plan's peak: {} bytes)",
         mem.arena_bytes, budget, r.orchestration.selection.peak_bytes);
  write_plan_files(dir, p, r.orchestration, o.orchestrate, r.meta);
  return mem;
}

std::vector<EmittedKernel> emit_plan(const Graph& p, const Backend& backend, const OrchestrateResult& o) {
  std::vector<EmittedKernel> out;
  for (const PlannedKernel& pk : o.plan.kernels) {
    const KernelCandidate& c = o.candidates.candidates.at(static_cast<size_t>(pk.candidate));
    // The schedule its cost was measured with (the default unless measured costs tuned one).
    const size_t ci = static_cast<size_t>(pk.candidate);
    EmittedKernel k = backend.emit(p, c, ci < o.costs.costs.size() ? o.costs.costs[ci].variant : "");
    KORCH_CHECK(k.ok, "planned kernel {} cannot be emitted: {}", pk.candidate, k.reason);
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace compile_steps

using compile_steps::candidate_of;
using compile_steps::close_the_loop;
using compile_steps::emit_plan;
using compile_steps::write_artifact_files;

namespace {

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

// Every primitive must have a kernel of its own, or no plan exists: say which one does not.
void check_every_primitive_emits(const Graph& g, const Backend& backend) {
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    EmittedKernel k = backend.emit(g, make_candidate(g, {static_cast<NodeId>(n)}, false));
    if (!k.ok)
      fail_unsupported("node '{}' ({}) cannot run on the {} backend: {}", g.nodes[n].name, g.nodes[n].op_type,
                       backend.name(), k.reason);
  }
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
    if (k.runs_reference()) continue;  // nothing independent to check it against (backend.h)
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

// Identifies the model for in-model costs: its primitive graph's text (weights elided).
std::string model_key(const Graph& p) {
  PrintOptions po;
  po.max_constant_elements = 0;
  return content_hash(print_graph(p, po));
}

}  // namespace

CostSource default_cost_source(const std::string& target) {
  return target == "cpu" ? CostSource::kMeasured : CostSource::kAnalytic;
}

namespace {

// Steps 1-8 for one graph.
CompileResult compile_graph(const Graph& model, const std::string& artifact_dir, const CompileOptions& o,
                            Backend* backend) {
  auto say = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  CompileResult r;
  r.target = backend->name();
  r.meta.model = o.model_name;
  r.meta.device = backend->name();

  // 1-2. Primitives, each of which the backend can run alone.
  auto t = Clock::now();
  if (o.layout != "auto" && o.layout != "nchw" && o.layout != "channels-last")
    fail("unknown layout '{}' (auto, nchw or channels-last)", o.layout);
  const bool channels_last = o.layout == "channels-last" || (o.layout == "auto" && backend->prefers_channels_last());
  PrimitiveReport lowered;
  r.primitives = lower_to_primitives(model, &lowered, channels_last);
  r.meta.layout = lowered.channels_last.convolutions > 0 ? "channels-last" : "nchw";
  const int padded_convs = backend->symmetric_conv_padding() ? make_conv_padding_symmetric(r.primitives) : 0;
  const Graph& p = r.primitives;
  check_every_primitive_emits(p, *backend);
  r.meta.timing["lower"] = since(t);
  say(fmt::format("{}: {} operators -> {} primitives ({:.2f} s){}", o.model_name, model.nodes.size(), p.nodes.size(),
                  r.meta.timing["lower"],
                  lowered.channels_last.convolutions > 0
                      ? fmt::format(", {} convolutions channels-last", lowered.channels_last.convolutions)
                      : "")
          + (padded_convs > 0 ? fmt::format(", {} convolutions' asymmetric padding as a Pad", padded_convs) : ""));

  // 3. Costs.
  OrchestrateOptions opt = o.orchestrate;
  opt.candidates.rules = backend->fusion_rules();
  if (o.unfused) {
    opt.candidates.max_primitives = 1;
    opt.candidates.offer_minimal_outputs = false;
    opt.allow_recompute = false;
    opt.rewrite_choices = false;  // the baseline runs the graph as written
  }
  std::unique_ptr<MeasuredCost> measured;
  std::unique_ptr<EmittableAnalyticCost> analytic;
  CostProvider* provider;
  std::unique_ptr<InModelCosts> in_model;
  if (o.cost == CostSource::kMeasured) {
    MeasuredCostOptions mo = o.measured;
    if (!mo.log) mo.log = o.log;
    measured = std::make_unique<MeasuredCost>(*backend, mo);
    provider = measured.get();
    if (o.close_loop && !o.unfused) {
      in_model = std::make_unique<InModelCosts>(*measured, mo.db_path, measured->device(), backend->generator_version(),
                                                model_key(p), mo.redo);
      in_model->key_by_step_revision(
          [backend](const Graph& g, const KernelCandidate& c) { return backend->step_revision(g, c); });
      in_model->classify_cold(
          [m = measured.get()](const Graph& g, const KernelCandidate& c) { return m->measures_cold(g, c); });
      in_model->use_pace(&measured->pace());
      provider = in_model.get();
    }
  } else {
    const DeviceSpec spec = o.spec ? *o.spec : backend->analytic_spec();
    analytic = std::make_unique<EmittableAnalyticCost>(*backend, spec);
    provider = analytic.get();
    r.meta.device_spec_json = device_spec_to_json(spec);
  }
  r.cost_model = r.meta.cost_model = provider->name();

  // 4-5. The plan and its kernels.
  // The graph before the rewrite choices: the closed loop decides them again on in-model costs,
  // and its unfused baseline runs this graph.
  std::optional<Graph> unrewritten;
  if (in_model) unrewritten = p;
  bool in_loop = false;
  auto plan = [&] {
    t = Clock::now();
    if (r.orchestration.candidates.candidates.empty() || (in_loop && !r.orchestration.rewrites.offered.empty())) {
      // The rewrites are chosen with the first plan, and again in the closed loop; verification's
      // replacements re-select on the graph they chose.
      RewriteChoiceResult chosen = orchestrate_with_rewrites(in_loop ? *unrewritten : p, *provider, opt);
      r.primitives = std::move(chosen.graph);
      r.orchestration = std::move(chosen.result);
    } else {
      r.orchestration = reorchestrate(p, std::move(r.orchestration), *provider, opt);
    }
    if (measured) r.measured = measured->stats();
    r.kernels = emit_plan(p, *backend, r.orchestration);
    r.meta.timing["orchestrate"] += since(t);
  };
  const bool verify = o.verify && !measured;
  std::vector<Tensor> values;  // reference values for step 7, computed once
  std::set<std::string> gated;  // signature hashes of candidates checked after a failure
  for (int round = 1;; ++round) {
    plan();

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
    r.verify.reference = std::count_if(r.kernels.begin(), r.kernels.end(),
                                       [](const EmittedKernel& k) { return k.runs_reference(); });
    r.verify.kernels = static_cast<int64_t>(r.kernels.size()) - r.verify.reference;
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
  // 8. The closed loop (measured costs): run the plan in the model, replace the costs of the kernels
  // that depart by their in-model times, solve again; keep the fastest plan the loop ran.
  if (in_model) {
    // Later rounds re-solve a program whose costs barely moved: a shorter solver limit keeps a
    // warm compile of a big model inside half a minute.
    opt.time_limit_s = std::min(opt.time_limit_s, 8.0);
    in_loop = true;
    close_the_loop(artifact_dir, p, *unrewritten, *backend, *in_model, *measured, opt, o, r, plan, say);
  }
  return r;
}

}  // namespace

CompileResult compile_model(const Graph& model, const std::string& artifact_dir, const CompileOptions& o) {
  auto say = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  const auto t_start = Clock::now();
  const int64_t cache_limit = cache_cap();  // a malformed $KORCH_CACHE_MAX_SIZE fails before any work
  const std::vector<int64_t> micro_sizes = micro_batch_sizes(o.micro_batch);  // fails on a bad mode first
  BackendOptions bo;
  bo.cpu_threads = o.cpu_threads;
  bo.flush_denormals = o.flush_denormals;
  std::unique_ptr<Backend> owned = o.backend ? nullptr : make_backend(o.target, bo);
  Backend* backend = o.backend ? o.backend : owned.get();
  // "auto" decides by timing the artifacts here (run_side_by_side), so it needs measured costs and a
  // target that runs on this machine: the CPU (a CUDA artifact's timing device may be the emulator).
  const bool timed = o.micro_batch == "auto";
  const bool micro_step =
      !o.unfused && !micro_sizes.empty() && (!timed || (o.cost == CostSource::kMeasured && backend->name() == "cpu"));
  MicroBatchSteps steps;
  steps.compile = [&](const Graph& g, const std::string& dir, int64_t k) {
    CompileOptions mo = o;
    mo.micro_batch = "off";
    if (o.log) mo.log = [&o, k](const std::string& line) { o.log(fmt::format("batch {}: {}", k, line)); };
    return compile_graph(g, dir, mo, backend);
  };
  steps.write = [&](CompileResult& micro, const std::string& dir) {
    micro.meta.cost_extra["micro_batches"] = micro.micro.runs();  // plan.json: its costs are one micro-batch's
    micro.memory = write_artifact_files(dir, micro.primitives, *backend, micro, o);
  };
  // What an earlier compile's trials decided, when the model has a batch to split.
  std::optional<MicroBatchMemory> memory;
  std::optional<MicroBatchReport> earlier;
  if (micro_step && timed && !model.inputs.empty() && !model.type(model.inputs[0]).shape.empty() &&
      model.type(model.inputs[0]).shape[0] > 1 && backend->timing_device()) {
    memory.emplace(o.measured.db_path, backend->timing_device()->id(), backend->generator_version(), model, micro_sizes,
                   plan_options_text(o), o.measured.redo);
    earlier = memory->recall();
  }
  CompileResult r;
  if (!earlier || !earlier->chosen || !compile_earlier_micro_batches(model, artifact_dir, *earlier, r, steps, say)) {
    if (earlier && earlier->chosen) earlier.reset();  // its plan did not compile: the trials run again
    r = compile_graph(model, artifact_dir, o, backend);
    if (micro_step)
      choose_micro_batches(model, artifact_dir, micro_sizes, timed, o.cpu_threads, o.loop_max_spread, r, steps, say,
                           memory ? &*memory : nullptr, earlier ? &*earlier : nullptr);
  }
  // 10. The artifact as a whole against the reference interpreter.
  if (o.model_check) {
    const auto t = Clock::now();
    say(fmt::format("checking the artifact against the reference interpreter (random inputs, seed {})",
                    o.measured.seed));
    r.check = check_artifact(model, artifact_dir, o.measured.seed, o.cpu_threads);
    r.meta.timing["check"] = since(t);
    runtime::update_manifest(artifact_dir, [&](nlohmann::json& m) { m["model_check"] = model_check_json(*r.check); });
    if (!r.check->passed)
      fail("{}: the artifact in {} does not compute the model: {} (the artifact is left there to inspect)",
           o.model_name, artifact_dir, r.check->failure());
  }
  // The compiled-kernel cache stays under its cap (cache_folder.h): least recently used out first.
  if (cache_limit >= 0) {
    const TrimResult trimmed = trim_compiled(korch_cache_root(), cache_limit);
    if (trimmed.files_removed)
      say(fmt::format("kernel cache over its {} cap: removed the {} least recently used files ({})",
                      format_size(cache_limit), trimmed.files_removed, format_size(trimmed.bytes_removed)));
  }
  r.meta.timing["total"] = since(t_start);
  return r;
}

}  // namespace korch