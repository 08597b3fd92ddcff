// One backend interface: the compile-time half of a target (the run-time half is
// runtime/device.h). Everything else is shared by every target: candidates and the BLP
// (orchestrate/), the measuring driver (profile/measured_cost.h: signature -> tuning database ->
// lower-bound pruning -> correctness gate -> timing), the artifact format and the memory plan
// (runtime/), the compiler as one function (pipeline/compile.h).
//
// A backend says
//   * what it can fuse: fusion_rules(), data the candidate enumeration reads;
//   * how a candidate becomes a kernel: emit() gives the generated source, the device recipe and
//     the argument binding, or the reason it cannot;
//   * how kernels compile: translation_unit() + compile() for a device, in batches;
//   * where kernels run: timing_device() (measured costs; null when this machine cannot time the
//     target) and check_device() (the correctness gate; the CUDA backend checks on the host
//     emulator when no GPU is present);
//   * what an artifact holds: write_module() writes its kernels/ folder.
//
//   backend   emits                                  runs on (timing / checks)
//   cpu       C++ loop functions + oneDNN steps      cpu / cpu          codegen/cpu/cpu_backend.h
//   cuda      CUDA loop kernels (NVRTC -> PTX) +     none here / cuda-emulator (a GPU with the
//             library calls                          CUDA runtime)      codegen/cuda/cuda_backend.h
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"
#include "orchestrate/analytic_cost.h"
#include "orchestrate/fusion_rules.h"
#include "orchestrate/kernel_candidate.h"
#include "runtime/device.h"

namespace korch {

// One candidate as the backend emits it (device-neutral).
struct EmittedKernel {
  bool ok = false;
  std::string reason;             // when !ok: why the backend cannot emit it (names node and op)
  std::string signature;          // kernel_signature(): canonical text
  std::string hash;               // content_hash(signature)
  std::string source;             // its generated functions ("" when none: a library call or a
                                  // reference op alone)
  std::string entry;              // its (first) generated function, for messages ("" when none)
  std::string variant;            // the schedule variant it was emitted with ("" = the default)
  nlohmann::json recipe;          // how the device runs it (runtime/<device>/<device>_kernel.h)
  std::vector<ValueId> arg_inputs;  // graph values bound to the recipe's inputs
  std::vector<ValueId> outputs;     // graph values bound to the recipe's outputs
  // The kernel is the reference interpreter running its primitives (an opaque op: TopK...):
  // checking it against the reference would compare the interpreter with itself, so it is
  // reported as unchecked rather than as checked.
  bool runs_reference() const { return recipe.contains("reference_graph"); }
};

struct CompiledUnit {
  std::string source_path;  // where the unit's source is kept (for messages and failures)
  bool cached = false;      // no compiler ran
  std::shared_ptr<runtime::KernelModule> module;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu" | "cuda": also the artifact's device tag
  // Bumped when generated code changes what or how fast it computes: part of tuning keys.
  virtual int generator_version() const = 0;
  // What else a measured time of c depends on: the revision of the runtime step (a library call)
  // that runs it, appended to its signature in the tuning key, so a change to one step's code
  // re-measures the kernels that step runs and no other (a generator_version bump re-measures
  // every kernel). "" for a kernel of generated code alone.
  virtual std::string step_revision(const Graph& g, const KernelCandidate& c) const {
    (void)g;
    (void)c;
    return "";
  }
  // The generator version c's isolated measurement is stored under (profile/tuning_db.h's key):
  // generator_version() unless c runs no generated code. A backend whose library steps carry
  // their own revisions (step_revision) returns 0 for a kernel that is one library call alone, so
  // a generator bump re-measures the generated kernels only and keeps the library calls' times.
  virtual int measured_generator(const Graph& g, const KernelCandidate& c) const {
    (void)g;
    (void)c;
    return generator_version();
  }
  virtual const FusionRules& fusion_rules() const = 0;
  // The roofline of the target (--cost analytic; optimistic lower bounds for pruning).
  virtual DeviceSpec analytic_spec() const = 0;

  // Never throws for a candidate it cannot emit: returns ok = false with the reason. `variant`:
  // "" for the default schedule, else one of schedule_variants(g, c) (or a name one returned
  // before for the same signature and generator version); an unknown name is a reason.
  virtual EmittedKernel emit(const Graph& g, const KernelCandidate& c, const std::string& variant = "") const = 0;
  // The schedules worth timing for c, by name, the default first (emit(g, c, name) of each gives
  // different code; emit(g, c, front()) is emit(g, c) with its variant named). Names are stable
  // for a signature and generator version: the tuning database keeps the winner's. Empty on a
  // backend without a schedule space, or when c has nothing to schedule.
  virtual std::vector<std::string> schedule_variants(const Graph& g, const KernelCandidate& c) const {
    (void)g;
    (void)c;
    return {};
  }
  // One compilable unit: the prelude once, then each distinct kernel's source.
  virtual std::string translation_unit(const std::vector<const EmittedKernel*>& kernels) const = 0;
  // Compiles units for `device` (timing_device() or check_device()), one module each. Throws
  // korch::Error (kUnsupported) naming the unit's source when one does not compile. on_unit is
  // called once per unit: cached = true for a cache hit (all of those first), false as each of the
  // others is compiled (for a progress bar whose rate is that of the compiler).
  virtual std::vector<CompiledUnit> compile(const std::vector<std::string>& units, runtime::Device& device,
                                            const std::function<void(bool cached)>& on_unit = {}) = 0;

  // The device measured costs are timed on; null when this machine cannot time the target
  // (timing_unavailable() says why).
  virtual runtime::Device* timing_device() = 0;
  virtual std::string timing_unavailable() const { return ""; }
  // The device generated kernels are checked on against the reference interpreter.
  virtual runtime::Device* check_device() = 0;

  // Writes dir/kernels/ for an artifact running `kernels` (plan order) and returns the manifest
  // fields that describe it ("generator_version", "compiler", ...). Throws korch::Error.
  virtual nlohmann::json write_module(const std::string& dir, const std::vector<const EmittedKernel*>& kernels) = 0;
  // A line for the compile summary: what the artifact's kernels are and how they were checked.
  virtual std::string describe_module() const { return ""; }
  // Whether its convolutions run well on channels-last activations (no fallback kernel, no
  // reorder), so `--layout auto` runs the channels-last layout pass (rewrite/channels_last.h)
  // before orchestrating.
  virtual bool prefers_channels_last() const { return false; }
  // Whether its convolution library pads both sides of an axis alike (cuDNN), so the compiler
  // turns asymmetric convolution padding into an explicit Pad first (rewrite/conv_padding.h).
  virtual bool symmetric_conv_padding() const { return false; }
};

struct BackendOptions {
  int cpu_threads = 2;  // cpu: threads kernels run and are measured with
  // cpu: kernels are measured with denormal floats flushed to zero, as an artifact compiled with
  // CompileOptions::flush_denormals runs them (Device::begin_run).
  bool flush_denormals = true;
};

// "cpu" or "cuda"; throws korch::Error (kUnsupported) for another name.
std::unique_ptr<Backend> make_backend(const std::string& target, const BackendOptions& options = {});

}  // namespace korch
