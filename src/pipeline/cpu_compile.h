// The CPU compiler, primitive graph -> measured optimal plan -> generated kernels -> artifact.
//
//   compile_for_cpu:  enumerate candidates -> cost them (measured on this machine by default:
//                     profile/measured_cost.h; or the analytic roofline restricted to kernels the
//                     CPU backend can emit) -> BLP -> plan -> emit each planned kernel
//   write_cpu_artifact: the artifact folder (runtime/artifact.h) plus plan.json / primitives.txt
// `unfused` compiles the baseline instead: one kernel per primitive, no search; `korch bench`
// runs it next to the optimised plan so the orchestration's own gain is visible.
#pragma once

#include <string>
#include <vector>

#include "codegen/cpu/cpu_backend.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/orchestrate.h"
#include "orchestrate/plan_json.h"
#include "profile/measured_cost.h"
#include "runtime/memory_plan.h"

namespace korch {

enum class CostSource { kMeasured, kAnalytic };

struct CpuCompileOptions {
  OrchestrateOptions orchestrate;
  CostSource cost = CostSource::kMeasured;
  DeviceSpec spec = cpu_spec();   // analytic costs
  MeasuredCostOptions measured;   // measured costs
  bool unfused = false;
};

struct CpuCompileResult {
  OrchestrateResult orchestration;
  std::vector<cpu::EmittedKernel> kernels;  // one per planned kernel, plan order
  MeasuredCostStats measured;               // when costs were measured
  std::string cost_model;                   // provider name
};

// Throws korch::Error naming the node and op when a primitive has no CPU kernel at all.
CpuCompileResult compile_for_cpu(const Graph& primitives, const CpuCompileOptions& options);

// Writes the artifact folder: the runnable program (runtime/artifact.h), plan.json and
// primitives.txt. `meta` goes into plan.json and the manifest. Returns the artifact's memory report.
runtime::MemoryReport write_cpu_artifact(const std::string& dir, const Graph& primitives, const CpuCompileResult& r,
                        const CpuCompileOptions& options, const PlanMetadata& meta);

}  // namespace korch
