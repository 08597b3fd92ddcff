// The steps compile.cc and closed_loop.cc share; compile.h is the pipeline's interface.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "pipeline/compile.h"
#include "profile/in_model.h"
#include "support/clock.h"

namespace korch::compile_steps {

// The candidate of the plan's kernel at `plan_index`.
const KernelCandidate& candidate_of(const CompileResult& r, size_t plan_index);

// Step 6: the artifact of r (its plan over primitive graph p) written to `dir`, plan.json beside it.
runtime::MemoryReport write_artifact_files(const std::string& dir, const Graph& p, Backend& backend,
                                           const CompileResult& r, const CompileOptions& o);

// Step 5: each planned kernel emitted with the schedule its cost was measured with.
std::vector<EmittedKernel> emit_plan(const Graph& p, const Backend& backend, const OrchestrateResult& o);

// The scratch artifacts the closed loop times and removes (korch-<unfused|roundN>-<pid>-<hash>) in
// `folder` whose compile is gone (killed before it could remove them): removed; returns how many.
// write_scratch_artifact sweeps the temp folder this way before writing its own.
int remove_orphaned_scratch(const std::filesystem::path& folder);

// Step 8 (compile.h). r holds the first plan, written to `dir`. Each round runs the artifact in the
// model (run_in_model), records the in-model time of every kernel of the plan, and, when some
// kernel departed from its cost by more than 10%, solves again (rewrite sites included: `plan`
// chooses them again over `lowered`, the graph before them, so p may change between rounds); the
// loop stops when none departs, when the plan repeats, when a run stays noisy after its re-takes
// (nothing of it is stored), or after `loop_rounds` rounds. The plan kept is the one that ran
// fastest end to end (a later round's only when 3% faster, and faster again beside round 1's), or
// an earlier compile's best plan (the database keeps each model's best) when it is another plan,
// was more than 3% faster and runs faster again, so the loop never makes the plan slower by more
// than run-to-run noise. Its predicted latency is the sum of its kernels' in-model times (over the
// run's drift in time, or scaled to its whole runs, when the machine was slower while they ran).
// The unfused baseline is timed beside the kept plan in alternating runs.
void close_the_loop(const std::string& dir, const Graph& p, const Graph& lowered, Backend& backend,
                    InModelCosts& in_model, MeasuredCost& isolated, const OrchestrateOptions& opt,
                    const CompileOptions& o, CompileResult& r, const std::function<void()>& plan,
                    const std::function<void(const std::string&)>& say);

}  // namespace korch::compile_steps
