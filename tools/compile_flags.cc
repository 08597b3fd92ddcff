#include "compile_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>

#include "orchestrate/analytic_cost.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/strings.h"

namespace korch::cli {

void OrchestrateFlags::add_to(CLI::App& app) {
  app.add_option("--max-kernel-size", max_prims, "Most primitives in one candidate kernel")->check(CLI::Range(1, 64));
  app.add_option("--max-linear", max_linear, "Most linear primitives in one candidate kernel")->check(CLI::Range(0, 8));
  app.add_option("--max-fanout", max_fanout, "Most consumers of one primitive inside one candidate kernel")
      ->check(CLI::Range(1, 64));
  app.add_flag("--no-recompute", no_recompute, "Disjoint kernels only (each primitive computed once)");
  app.add_option("--time-limit", time_limit, "Solver time limit in seconds (the best plan and its gap are kept)")
      ->check(CLI::PositiveNumber);
  app.add_option("--gap", gap,
                 "Relative optimality gap at which the solver may stop (0 = proven optimal; measured costs are "
                 "noisier than 0.5%)")
      ->check(CLI::Range(0.0, 1.0))
      ->default_str("0 with analytic costs, 0.005 with measured ones");
  app.add_option("--solver", solver, "BLP solver")->check(CLI::IsMember({"auto", "cbc", "glpk"}));
  app.add_option("--state-limit", state_limit, "Most execution states for the no-recompute search (0 = skip)");
  app.add_option("--dump-blp", dump_blp,
                 "Also write the binary linear program (costs scaled so the dearest kernel is 1000) as LP text; "
                 "regions of 1000 candidates or more also alone, as FILE.region<N>.lp, with the primitives of each "
                 "candidate variable in FILE.region<N>.candidates.txt");
  app.add_flag("--verbose-solver", verbose_solver, "Show the solver's log");
  app.add_flag("--no-rewrite-choices", no_rewrite_choices,
               "Keep the primitive graph's rewrite alternatives out of the program (by default each site is a choice "
               "the solver makes with the kernels)");
  app.add_option("--memory-budget", memory_budget,
                 "The fastest plan whose peak intermediate memory (the artifact's arena) is at most this many bytes, "
                 "or an error naming the peak plans reach")
      ->transform(CLI::AsSizeValue(true))
      ->default_str("none")
      ->check([](const std::string& v) { return v.rfind('-', 0) == 0 ? "a budget is 0 bytes or more" : ""; });
}

OrchestrateOptions OrchestrateFlags::options() const {
  OrchestrateOptions opt;
  opt.candidates.max_primitives = max_prims;
  opt.candidates.max_linear = max_linear;
  opt.candidates.max_fanout = max_fanout;
  opt.candidates.offer_minimal_outputs = !no_recompute;
  opt.allow_recompute = !no_recompute;
  opt.time_limit_s = time_limit;
  opt.rel_gap = std::max(gap, 0.0);
  opt.dp_state_limit = state_limit;
  opt.solver = solver == "cbc" ? SolverChoice::kCbc : solver == "glpk" ? SolverChoice::kGlpk : SolverChoice::kAuto;
  opt.verbose = verbose_solver;
  opt.dump_blp_path = dump_blp;
  opt.memory_budget = memory_budget;
  opt.rewrite_choices = !no_rewrite_choices;
  return opt;
}

void CompileFlags::add_to(CLI::App& app, bool with_orchestrate) {
  app.add_option("--cost", cost,
                 "Cost source: measured (generate, check and time every candidate kernel on the target; results "
                 "kept in the tuning database) or analytic (a roofline over the device spec)")
      ->check(CLI::IsMember({"analytic", "measured"}))
      ->default_str("measured where the target can be timed here, else analytic");
  app.add_option("--tuning-db", tuning_db, "Tuning database")->default_str(kTuningDbDefault);
  app.add_option("--threads", threads, "CPU threads for kernels and measurement")->check(CLI::Range(1, 256));
  app.add_flag("--no-prune", no_prune, "Measure every candidate (no analytic pre-pruning)");
  app.add_flag("--isolated-costs", isolated_costs,
               "Measured costs: keep each kernel's isolated measurement (no closed loop: the plan is not run in the "
               "model to replace the costs that depart)");
  app.add_option("--layout", layout,
                 "Activation layout: channels-last runs convolutions and the work between them on [N, H, W, C] "
                 "tensors (no reorder around oneDNN's NHWC kernels); auto picks it where oneDNN prefers it")
      ->check(CLI::IsMember({"auto", "nchw", "channels-last"}));
  app.add_option("--denormals", denormals,
                 "CPU artifacts: flush runs denormal floats (magnitudes under 1.2e-38) as zero, which Intel cores "
                 "otherwise take a microcode assist for on every operation (swin_t's masked attention ran its MatMuls "
                 "30x slower); keep runs IEEE gradual underflow, as the reference interpreter does")
      ->check(CLI::IsMember({"flush", "keep"}));
  app.add_option("--micro-batch", micro_batch,
                 "A model whose batch holds independent samples can run as several runs of a smaller batch's plan "
                 "(activations stay in cache): auto compiles micro-batches of 4 and 1, times them beside the whole "
                 "batch and keeps the fastest (measured costs on the CPU); on: micro-batches of 1 whenever the "
                 "samples are independent; a number K: micro-batches of K; off: never")
      ->check([](const std::string& v) {
        const bool number =
            !v.empty() && v.size() < 10 && v.find_first_not_of("0123456789") == std::string::npos && std::stoll(v) > 0;
        return v == "auto" || v == "on" || v == "off" || number ? "" : "auto, on, off or a micro-batch size";
      });
  app.add_flag("--redo", redo, "Measured costs: measure again what the tuning database already has for this model");
  app.add_option("--max-spread", max_spread_pct,
                 "Measured costs: the widest spread (p10-p90 over the median, %) a timing may have; a wider one is "
                 "taken again, then a kernel's is kept marked noisy and a run of the plan in the model is not "
                 "stored at all")
      ->check(CLI::PositiveNumber)
      ->default_str("15");
  app.add_option("--pace-wait", pace_wait,
                 "Measured costs: how long (s, in all) measuring may wait for a machine running slower than its "
                 "best (a fixed probe 1.3x slower than the fastest the tuning database has seen, with no other "
                 "process on the cores); what is measured slow anyway is measured again by a later compile at "
                 "the machine's pace. 0: never wait; off: no probe at all (every record's pace unknown). "
                 "$KORCH_PACE_WAIT sets it too")
      ->check([](const std::string& v) {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        return v == "off" || (!v.empty() && end && *end == '\0' && x >= 0)
                   ? ""
                   : "a number of seconds or off (the flag or $KORCH_PACE_WAIT)";
      })
      ->envname("KORCH_PACE_WAIT")  // the tests' setting (tests/CMakeLists.txt), checked as the flag is
      ->default_str("60");
  app.add_flag("--no-verify", no_verify,
               "With analytic costs: do not run the plan's kernels against the reference interpreter");
  if (!with_orchestrate) return;
  app.add_option("--device-spec", spec_file, "Device spec JSON for the analytic model (see bench/results/device_specs.md)")
      ->default_str("the built-in spec of the target");
  app.add_flag("--measure-device", measure_device, "Measure this CPU's bandwidth for the analytic model (~1 s)");
  orchestrate.add_to(app);
}

CompileOptions CompileFlags::options(const std::string& model, const std::function<void(const std::string&)>& say) const {
  CompileOptions o;
  o.target = target;
  o.model_name = model;
  o.cpu_threads = threads;
  o.orchestrate = orchestrate.options();
  o.orchestrate.progress = say;
  o.cost = cost.empty() ? default_cost_source(target) : cost == "analytic" ? CostSource::kAnalytic : CostSource::kMeasured;
  if (orchestrate.gap < 0) o.orchestrate.rel_gap = default_gap(o.cost);
  if (!spec_file.empty()) o.spec = device_spec_from_json(read_file_bytes(spec_file), spec_file);
  else if (measure_device && target == "cpu") o.spec = measure_cpu_spec(threads);
  o.measured.db_path = tuning_db;
  o.measured.prune = !no_prune;
  o.measured.log = say;
  o.verify = !no_verify;
  o.close_loop = !isolated_costs;
  o.layout = layout;
  o.flush_denormals = denormals == "flush";
  o.micro_batch = micro_batch;
  o.measured.redo = redo;
  if (max_spread_pct > 0) o.loop_max_spread = o.measured.measure.max_spread = max_spread_pct / 100;
  o.measured.pace.enabled = pace_wait != "off";
  if (o.measured.pace.enabled) o.measured.pace.max_wait_seconds = std::strtod(pace_wait.c_str(), nullptr);
  o.log = say;
  return o;
}

CompileResult compile_artifact(const std::string& model, const Graph& g, const std::string& dir,
                               const CompileOptions& options, bool quiet) {
  CompileResult r = compile_model(g, dir, options);
  if (quiet) return r;
  const Graph& p = r.primitives;
  const OrchestrateResult& o = r.orchestration;
  const SolveResult& s = o.selection.solve;
  const bool measured = options.cost == CostSource::kMeasured;
  const auto in_place = std::count_if(r.kernels.begin(), r.kernels.end(),
                                      [](const EmittedKernel& k) { return k.recipe.contains("in_place"); });
  fmt::print("compiled {} for {} ({}){}: {} kernels for {} primitives{}\n", model, r.target, r.cost_model,
             options.unfused ? ", unfused baseline" : "", o.plan.kernels.size(), p.nodes.size(),
             in_place ? fmt::format(" ({} of them Concats or views written in place: no work)", in_place) : "");
  fmt::print("  states {}{}, candidates {} ({} cannot be emitted or were skipped), {} independent region{}, "
             "variables {}, rows {}\n",
             o.selection.dp.states, o.selection.dp.completed ? "" : "+ (limit)", o.candidates.candidates.size(),
             o.infeasible, o.selection.regions, o.selection.regions == 1 ? "" : "s", o.selection.variables,
             o.selection.rows);
  if (measured) {
    const MeasuredCostStats& m = r.measured;
    fmt::print("  tuning: {} distinct kernels, {} from the database, {} measured, {} failed the gate, {} unemittable, "
               "{} skipped by the lower bound\n",
               m.signatures, m.db_hits, m.measured, m.failed, m.unemittable, m.pruned);
    if (m.noisy)
      fmt::print("  {} measurements stayed noisy (spread above {:.0f}% after {} re-takes; a busy machine?): kept with "
                 "their spread; --redo measures again\n",
                 m.noisy, options.measured.measure.max_spread * 100, options.measured.measure.max_remeasures);
    for (const std::string& f : m.failures) fmt::print("  gate failure: {}\n", f);
    if (m.unchecked_reference)
      fmt::print("  {} measured kernels are the reference interpreter itself: timed, not checked\n",
                 m.unchecked_reference);
    for (size_t i = 0; i < m.pruned_examples.size() && i < 3; ++i) fmt::print("  e.g. {}\n", m.pruned_examples[i]);
  } else if (r.target != "cpu") {
    fmt::print("  costs: the analytic {} model (no GPU measured them)\n", r.cost_model);
  }
  if (!o.rewrites.offered.empty()) {
    std::map<std::string, int> rules;
    for (const std::string& rule : o.rewrites.chosen_rules()) ++rules[rule];
    std::vector<std::string> counts;
    for (const auto& [rule, count] : rules) counts.push_back(fmt::format("{}x {}", count, rule));
    fmt::print("  rewrites: {} of {} sites chosen{} ({} variant graphs{}; korch explain shows what each saved)\n",
               o.rewrites.chosen.size(), o.rewrites.offered.size(),
               counts.empty() ? "" : fmt::format(" ({})", fmt::join(counts, ", ")), o.rewrites.variant_graphs,
               o.rewrites.exhaustive ? ", every combination" : ", in layers");
  }
  if (r.loop.ran) {
    const LoopReport& l = r.loop;
    fmt::print("  closed loop: {} rounds (departing kernels per round:", l.rounds.size());
    for (const auto& x : l.rounds) fmt::print(" {}", x.departures);
    fmt::print("), kept round {}{}{}{}\n", l.kept, l.isolated_plan ? " (the plan of the isolated costs alone)" : "",
               l.loaded ? fmt::format("; {} in-model costs from the database", l.loaded) : "",
               l.left_slow ? fmt::format(" ({} more left out: taken while the machine ran slow)", l.left_slow) : "");
    int noisy = 0;
    for (const auto& x : l.rounds) noisy += x.noisy;
    if (noisy)
      fmt::print("  {} in-model run(s) stayed noisy (spread above {:.0f}% after a re-take; a busy machine?): "
                 "their times are not stored in the tuning database\n", noisy, 100 * options.loop_max_spread);
    if (l.unfused_noisy)
      fmt::print("  the runs beside the unfused plan were noisy (spread above {:.0f}%; a busy machine?): the gain "
                 "below is rough\n", 100 * options.loop_max_spread);
    if (l.retaken)
      fmt::print(
          "  the kept plan's kernel-by-kernel run ({:.1f} us) departed from its runs beside the unfused plan by "
          "more than {:.0f}% (the machine changed state): taken again, the faster kept{}\n",
          l.first_measured * 1e6, 100 * kKeptAgreement,
          l.agrees            ? ""
          : l.kept_scale != 1 ? fmt::format("; the two still disagree, the kernel-by-kernel runs the slower: the "
                                            "predicted latency is its kernel times scaled to the faster runs (x{:.3f})",
                                            l.kept_scale)
                              : "; the two still disagree, so the predicted latency is rough");
    if (!l.rounds.empty() && l.rounds.back().drifted)
      fmt::print(
          "  the last in-model run drifted {:+.0f}% from the stored in-model times after a re-take (a busy "
          "machine?): its times are not stored in the tuning database{}\n",
          (l.rounds.back().drift - 1) * 100,
          l.kept_drift != 1 ? "; the predicted latency is the plan's in the state they describe" : "");
    for (const auto& x : l.rounds)
      if (x.refreshed)
        fmt::print(
            "  an in-model run ran {:+.0f}% against the stored in-model times after a re-take: a busier machine "
            "took those, and its times replaced them\n",
            (x.drift - 1) * 100);
    if (const auto& c = l.candidate_beside_first)
      fmt::print(
          "  a later round's plan ran fastest; beside round 1's plan (alternating runs) {:.1f} us against {:.1f} "
          "us: {}\n",
          c->first * 1e6, c->second * 1e6,
          l.earlier_plan ? "then an earlier compile's plan was kept"
          : l.kept == 1  ? "round 1's plan kept"
                         : fmt::format("round {}'s plan kept", l.kept));
    // The prediction is the kept run's whole-run median where nothing scaled it (LoopReport::
    // to_whole_runs): then the runs beside the unfused plan are its independent check.
    const double off = l.measured / std::max(l.predicted, 1e-30) - 1;
    fmt::print(
        "  plan: predicted {:.1f} us{}; beside the unfused plan (alternating runs) {:.1f} us ({:+.1f}% of the "
        "prediction) against {:.1f} us ({:.2f}x)\n",
        l.predicted * 1e6,
        std::abs(off) < 5e-4 ? " (its run in the model)"
                             : fmt::format(", measured {:.1f} us in the model ({:+.1f}%)", l.measured * 1e6, 100 * off),
        l.plan_beside_unfused * 1e6, 100 * (l.plan_beside_unfused / std::max(l.predicted, 1e-30) - 1),
        l.unfused_measured * 1e6, l.unfused_measured / std::max(l.plan_beside_unfused, 1e-30));
  } else {
    fmt::print("  plan {:.1f} us vs unfused {:.1f} us ({:.2f}x, {} costs)\n", o.plan.total_seconds() * 1e6,
               o.unfused_seconds * 1e6, o.unfused_seconds / std::max(o.plan.total_seconds(), 1e-30),
               measured ? (options.close_loop ? "measured" : "isolated measured") : "analytic");
  }
  // Trials an earlier compile timed (MicroBatchMemory) say when.
  const std::string recalled = r.micro.recalled > 0 ? fmt::format(" of an earlier compile, {}; --redo times them again",
                                                                  utc_minute(r.micro.recalled))
                                                    : "";
  if (r.micro.chosen)
    fmt::print(
        "  micro-batches: the batch of {} runs as {} runs of this batch-{} plan (the times above are one run's){}\n",
        r.micro.batches, r.micro.runs(), r.micro.size,
        r.micro.micro_s > 0 ? fmt::format(": {:.1f} us against {:.1f} us for the batch-{} plan (alternating runs{})",
                                          r.micro.micro_s * 1e6, r.micro.whole_s * 1e6, r.micro.batches, recalled)
                            : "");
  else if (!r.micro.trials.empty())
    fmt::print("  micro-batches: not used{}: {}\n",
               r.micro.recalled > 0 ? fmt::format(" (the trials{})", recalled) : "", r.micro.why_not);
  // "optimal" only when proven; a solver that stopped at the gap asked says so.
  const std::string status = s.status == SolveStatus::kOptimal && s.gap > 0
                                 ? fmt::format("within the {:.3g}% gap asked", 100 * options.orchestrate.rel_gap)
                                 : solve_status_name(s.status);
  fmt::print("  solver {} {} in {:.2f} s, gap {:.3g}%{}\n", s.solver, status, s.seconds, 100 * s.gap,
             o.selection.cycle_cuts ? fmt::format(", {} cycle cuts", o.selection.cycle_cuts) : "");
  if (r.verify.ran)
    fmt::print("  verified: {} kernels match the reference interpreter on {} (1e-4 relative L2){}\n", r.verify.kernels,
               r.verify.device,
               r.verify.failures.empty()
                   ? ""
                   : fmt::format("; {} failed and were replaced ({} plans; {} overlapping candidates checked, {} failed)",
                                 r.verify.failures.size(), r.verify.rounds, r.verify.gated, r.verify.gate_failures));
  if (r.verify.ran && r.verify.reference > 0)
    fmt::print("  not checked: {} kernels are the reference interpreter itself (opaque ops), so there is nothing "
               "independent to check them against\n",
               r.verify.reference);
  if (const auto& c = r.check)
    fmt::print(
        "  checked: the artifact matches the reference interpreter on seeded random inputs, worst relative L2 "
        "{:.2e} (tolerance {:g}){}\n",
        c->worst, c->tolerance, c->notes());
  if (!r.module.empty()) fmt::print("  kernels: {}\n", r.module);
  fmt::print("  memory: intermediates {:.2f} MB (unfused plan {:.2f} MB), weights {:.2f} MB{}\n",
             r.memory.arena_bytes / 1e6, r.memory.unfused_arena_bytes / 1e6, r.memory.weights_bytes / 1e6,
             options.orchestrate.memory_budget < 0
                 ? ""
                 : fmt::format("; within the budget of {} bytes ({} bytes; {} cheaper plan{} over it excluded)",
                               options.orchestrate.memory_budget, r.memory.arena_bytes,
                               r.orchestration.selection.memory_cuts,
                               r.orchestration.selection.memory_cuts == 1 ? "" : "s"));
  fmt::print("  compile {:.1f} s (orchestrate {:.1f} s, artifact {:.1f} s{}{}{}); wrote {}\n", r.meta.timing["total"],
             r.meta.timing["orchestrate"], r.meta.timing["artifact"],
             r.verify.ran ? fmt::format(", verify {:.1f} s", r.meta.timing["verify"]) : "",
             r.loop.ran ? fmt::format(", closed loop {:.1f} s", r.meta.timing["close_loop"]) : "",
             r.check ? fmt::format(", check {:.1f} s", r.meta.timing["check"]) : "", dir);
  return r;
}

nlohmann::json compile_summary_json(const std::string& model, const CompileResult& r, const std::string& dir,
                                    const CompileOptions& options) {
  using nlohmann::json;
  const OrchestrateResult& o = r.orchestration;
  const Selection& sel = o.selection;
  const SolveResult& s = sel.solve;
  const bool measured = options.cost == CostSource::kMeasured;
  json j = {{"model", model},
            {"target", r.target},
            {"cost_model", r.cost_model},
            {"costs", measured ? (options.close_loop ? "measured" : "isolated measured") : "analytic"},
            {"unfused", options.unfused},
            {"kernels", o.plan.kernels.size()},
            {"primitives", r.primitives.nodes.size()},
            {"candidates",
             {{"count", o.candidates.candidates.size()},
              {"infeasible", o.infeasible},
              {"states", sel.dp.states},
              {"states_completed", sel.dp.completed},
              {"regions", sel.regions},
              {"variables", sel.variables},
              {"rows", sel.rows}}},
            {"plan",
             {{"plan_s", o.plan.total_seconds()},
              {"unfused_s", o.unfused_seconds},
              {"speedup", o.unfused_seconds / std::max(o.plan.total_seconds(), 1e-30)}}},
            {"solver",
             {{"name", s.solver},
              {"source", sel.source},
              {"status", solve_status_name(s.status)},
              {"proven_optimal", s.status == SolveStatus::kOptimal && s.gap == 0},
              {"gap", s.gap},
              {"gap_asked", options.orchestrate.rel_gap},
              {"seconds", s.seconds},
              {"objective_s", sel.objective},
              {"bound_s", s.bound},
              {"cycle_cuts", sel.cycle_cuts}}},
            {"tuning", nullptr},
            {"closed_loop", nullptr},
            {"verify", nullptr},
            {"module", r.module.empty() ? json() : json(r.module)},
            {"memory",
             {{"arena_bytes", r.memory.arena_bytes},
              {"unfused_arena_bytes", r.memory.unfused_arena_bytes},
              {"intermediate_bytes", r.memory.intermediate_bytes},
              {"weights_bytes", r.memory.weights_bytes}}},
            {"timing_s", r.meta.timing},
            {"model_check", r.check ? model_check_json(*r.check) : json()},
            {"artifact_dir", dir}};
  if (measured) {
    const MeasuredCostStats& m = r.measured;
    j["tuning"] = {{"signatures", m.signatures},     {"db_hits", m.db_hits},
                   {"measured", m.measured},         {"failed", m.failed},
                   {"unemittable", m.unemittable},   {"pruned", m.pruned},
                   {"noisy", m.noisy},               {"unchecked_reference", m.unchecked_reference},
                   {"failures", m.failures},         {"pruned_examples", m.pruned_examples}};
    j["tuning"]["seconds"] = {{"signatures", m.seconds_signatures},
                              {"generate", m.seconds_emit},
                              {"reference", m.seconds_reference},
                              {"compile", m.seconds_compile},
                              {"measure", m.seconds_measure}};
  }
  if (!o.rewrites.offered.empty()) {
    j["rewrites"] = {{"offered", o.rewrites.offered.size()}, {"chosen", o.rewrites.chosen_rules()}};
  }
  if (r.loop.ran) {
    const LoopReport& l = r.loop;
    j["closed_loop"] = {{"rounds", loop_rounds_json(l)},
                        {"kept_round", l.kept},
                        {"earlier_plan", l.earlier_plan},
                        {"isolated_plan", l.isolated_plan},
                        {"loaded", l.loaded},
                        {"predicted_s", l.predicted},
                        {"measured_s", l.measured},
                        {"unfused_measured_s", l.unfused_measured},
                        {"plan_beside_unfused_s", l.plan_beside_unfused},
                        {"unfused_noisy", l.unfused_noisy},
                        {"kept_run_retaken", l.retaken},
                        {"kept_run_first_s", l.first_measured},
                        {"kept_run_agrees", l.agrees},
                        {"kept_run_drift", l.kept_drift},
                        {"kept_run_scale", l.kept_scale},
                        {"kept_run_to_whole_runs", l.to_whole_runs},
                        {"kept_run_pace", l.kept_pace},
                        {"fastest_round_beside_first",
                         l.candidate_beside_first ? nlohmann::json{{"fastest_s", l.candidate_beside_first->first},
                                                                   {"first_s", l.candidate_beside_first->second}}
                                                  : nlohmann::json()},
                        {"speedup", l.unfused_measured / std::max(l.plan_beside_unfused, 1e-30)}};
  }
  if (r.micro.batches > 1) j["micro_batch"] = micro_batch_json(r.micro);
  if (r.verify.ran) {
    const VerifyReport& v = r.verify;
    j["verify"] = {{"device", v.device},         {"kernels", v.kernels},     {"reference", v.reference},
                   {"rounds", v.rounds},         {"failures", v.failures},   {"gated", v.gated},
                   {"gate_failures", v.gate_failures}};
  }
  return j;
}

}  // namespace korch::cli
