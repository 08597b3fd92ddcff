// In-model costs: what each planned kernel takes when the whole plan runs, and the cost provider
// that lets them replace isolated measurements (the closed loop of pipeline/compile.h).
//
// Why: a kernel measured alone runs on warm caches and on the data of the one candidate that was
// measured for its signature; in the model it meets cold weights and inputs, the layout its
// neighbours leave (the CPU's layout handoff between oneDNN steps skips reorders the isolated
// measurement paid), and its own data: in swin_t the attention MatMul of shifted windows reads
// softmax probabilities of masked positions (e^-100, denormal floats) and takes 2.5 ms, where the
// same signature in an unshifted window takes 18 us (bench/results/cost_drift.md). So in-model
// costs belong to a kernel *instance* (this candidate in this model), not to its signature.
//
//   run_in_model   loads an artifact and runs it end to end at least `min_runs` times (more for a
//                  fast model: at least 1 s of runs, at most 500), after warm-up runs for at
//                  least 0.05 s; then as many runs with one clock read between consecutive kernels
//                  (so the steps of a run add up to it); medians per kernel and of the whole runs.
//                  When those clock reads add under 0.1% to a run, one set of runs gives both.
//                  A spread above max_spread (and above 10 us) is taken again (max_retakes), the
//                  quietest kept
//   InModelCosts   wraps a CostProvider: a candidate with a recorded in-model cost costs that;
//                  every other candidate costs its isolated measurement scaled by how the kernels
//                  of its class (with or without a linear primitive) compared in this model so far
//                  (the median in-model / isolated ratio of the recorded ones), so a kernel not yet
//                  run in the model is neither favoured by warm-cache optimism nor penalised; one
//                  whose linear primitive a recorded kernel of its class ran (the same Conv with
//                  another epilogue) by that kernel's ratio: the primitive meets the same data and
//                  neighbours whichever kernel runs it, where the class's median mixes layers that
//                  spill the caches with layers that do not. Records persist in the tuning
//                  database under (instance hash, device + "+in-model", generator), committed as
//                  each is taken, so an interrupted closed loop loses nothing measured and a warm
//                  compile starts from them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "orchestrate/kernel_cost.h"
#include "profile/pace.h"
#include "profile/tuning_db.h"
#include "runtime/executable.h"

namespace korch {

class TuningDb;

struct InModelRun {
  std::vector<double> step_seconds;  // median per kernel, plan order
  double end_to_end = 0;             // median of whole runs (without the per-kernel clock reads unless shared_runs)
  double spread = 0;                 // (p90 - p10) / median of the whole runs
  double timer_seconds = 0;          // one per-kernel clock read
  bool shared_runs = false;          // the clock reads were under 0.1% of a run: one set of runs gave both
  int retakes = 0;                   // sets of runs taken again for a spread above max_spread
  bool noisy = false;                // spread still above max_spread after them
  // The machine's pace while it ran (profile/pace.h: the slower of the probes before and after; 0
  // unknown) and whether that is a slow phase; set by the caller that probes.
  double pace = 0;
  bool slow = false;
};
InModelRun run_in_model(const std::string& artifact_dir, int min_runs, int cpu_threads, double max_spread = 0.15,
                        int max_retakes = 1);

// Two artifacts of one model timed as `korch bench` times them: whole runs (no per-kernel clock
// reads) in `rounds` alternating rounds after warm-up, each round about `seconds` / rounds of runs
// of both (at least 2 of each), medians and spreads over every timed run of each. Their ratio
// comes from one machine state: this VM's slow phases (minutes long, about 1.35x) move both alike,
// which a time stored by an earlier compile cannot follow.
struct SideBySide {
  double a = 0, b = 0;                // medians, seconds
  double spread_a = 0, spread_b = 0;  // (p90 - p10) / median
  int runs = 0;                       // timed runs of each
};
SideBySide run_side_by_side(const std::string& dir_a, const std::string& dir_b, int cpu_threads, int rounds = 3,
                            double seconds = 1.0);

// How a run compares with the in-model times stored for its kernels: `pairs` (measured, stored) of
// the kernels that have one, of a plan of `kernels`. Both 1 when too few have (under half the plan,
// or under 8 kernels: a first run has nothing to compare with).
struct RunDrift {
  // The median of measured / stored: kernels move against each other by their neighbours and their
  // data, but when the median moves, the machine does (the closed loop's drift test).
  double median = 1;
  // Their measured sum over their stored sum: how much slower the run is in time (what a prediction
  // is scaled by). This VM's slow phases slow memory-bound kernels far more than compute-bound ones:
  // a transformer_encoder run drifted 3.02 by the median and 1.33 in time (its GEMMs kept their
  // speed), and its kernel times over the median predicted 0.98 ms for a plan that runs 2.3 ms.
  double total = 1;
};
RunDrift run_drift(const std::vector<std::pair<double, double>>& pairs, size_t kernels);

// The kept plan is timed twice at the end of a compile: kernel by kernel in the model
// (run_in_model: its predicted latency is the sum of those times) and as whole runs beside the
// unfused plan (run_side_by_side). When the two medians disagree by more than `tolerance` (and by
// more than 10 us), the machine changed state between them (this VM's phases: a neighbour on the
// shared cache slows cache-resident work 1.3-1.6x for minutes; a cold segformer_b0 compile
// measured its plan at 93.9 ms kernel by kernel and 66.2 ms beside the unfused plan seconds
// later), so the kernel-by-kernel run is taken again (`retake`) and the faster of the two kept:
// another process on the cores or the cache only ever slows a run down. A retake whose spread
// stayed wide (noisy) is not kept over a quiet first run; a quiet one replaces a noisy first run,
// unless it ran in a slow phase of the machine and the first did not (InModelRun::slow: a
// segformer_b0 compile's noisy first run at the machine's pace, 68.7 ms, gave way to a quiet
// retake in a slow phase, 112 ms, which `korch bench` at its pace then measured at 74.5 ms).
// When the two still disagree, the faster of all three is the machine's state (`scale`).
struct SettledRun {
  InModelRun run;        // the run whose kernel times the plan keeps
  bool retaken = false;  // the two disagreed and the retake was made
  bool kept_retake = false;
  double first = 0;    // the first run's median (seconds)
  double retake = 0;   // the retake's, when made
  // Why the kept run was kept: the retake's spread stayed wide (noisy) or it ran in a slow phase
  // when the first did not (either way the first is kept even where the retake was faster).
  bool retake_noisy = false, retake_slow = false;
  double retake_spread = 0;
  // Which run was kept and why, for the compile's log ("the first run kept (the second, though
  // faster, stayed noisy: spread 31%)").
  std::string kept_because() const;
  bool agrees = true;  // the kept run is within tolerance of the side-by-side median
  // When the kept run still disagrees and the side-by-side runs were the faster: their median over
  // the kept run's (else 1). The kernel-by-kernel runs both met a slower state of the machine than
  // the plan's whole runs did; its kernel times times this are the plan's in the faster state (an
  // efficientnet_b0 compile on a fresh database: 10.42 and 10.57 ms kernel by kernel, 6.64 ms
  // beside the unfused plan, 6.37 ms in `korch bench` right after).
  double scale = 1;
};
// Of two runs that both stayed noisy, the faster is kept (what disturbs a run only slows it), and
// the kernel times are scaled to the side-by-side runs whenever those were the faster, noisy or not
// (for the same reason: the faster median is nearer the quiet machine).
SettledRun settle_in_model_run(InModelRun first, double beside_seconds, double tolerance,
                               const std::function<InModelRun()>& retake);

// The closed loop's rounds are run seconds to minutes apart, and this VM's phases can make a later
// round's plan look faster by the machine alone (a cold segformer_b0 compile: rounds 1 and 2 ran
// 93.8 and 101.2 ms in a slow phase, round 3 68.0 ms after it). The candidate is the round whose
// run was fastest (a later one only when under `margin` times the candidate before it, as
// kBeyondNoise asks); a candidate other than the first round is kept only when it also runs under
// `margin` times the first round's plan in alternating runs (`beside_first(candidate)`: the
// candidate as a, the first round's plan as b), so the plan the isolated costs chose is replaced
// only by one that beats it in one machine state.
struct KeptRound {
  size_t round = 0;           // the round kept (0-based)
  size_t candidate = 0;       // the round the runs pointed at
  bool timed_beside = false;  // beside_first was called
  SideBySide beside;
};
KeptRound choose_kept_round(const std::vector<double>& end_to_end, double margin,
                            const std::function<SideBySide(size_t candidate)>& beside_first);

// The classes of kernels whose isolated costs depart from their in-model times alike (InModelCosts
// scales a kernel not yet run in the model by its class's median in-model / isolated ratio): loop
// kernels (the threads' fork/join, inputs a neighbour just wrote), kernels with a linear primitive,
// and kernels measured with cold weights (Device::cold_constant_bytes: in the model a weight may
// still sit in the last-level cache, so those run faster there than measured, where the others run
// slower).
enum class CostClass { kLoop = 0, kLinear = 1, kColdConstants = 2 };

class InModelCosts : public CostProvider {
 public:
  // `model_key`: identifies the model (content_hash of its primitive graph's text).
  // redo: ignore the records already stored (they are replaced as the loop takes new ones).
  InModelCosts(CostProvider& inner, const std::string& db_path, std::string device, int generator,
               std::string model_key, bool redo = false);
  ~InModelCosts() override;
  std::string name() const override { return inner_.name() + "+in-model"; }
  void prepare(const Graph& g, const std::vector<KernelCandidate>& candidates) override;
  KernelCost cost(const Graph& g, const KernelCandidate& c) override;

  // The instance hash of `c` of `g` in this model: by its nodes' and outputs' names, which name
  // the same kernel in every rewrite variant of the model (rewrite_choice.h), unlike ids.
  std::string instance(const Graph& g, const KernelCandidate& c) const;
  // Instances also carry the revision of the library step that runs them (Backend::step_revision),
  // as the isolated records do: a bumped step's in-model times are taken anew. Set before prepare().
  void key_by_step_revision(std::function<std::string(const Graph&, const KernelCandidate&)> revision) {
    step_revision_ = std::move(revision);
  }
  // Which kernels were measured with their weights cold (MeasuredCost::measures_cold): their own
  // class. Set before prepare(); none when unset.
  void classify_cold(std::function<bool(const Graph&, const KernelCandidate&)> cold) { cold_ = std::move(cold); }
  CostClass cost_class(const Graph& g, const KernelCandidate& c) const;
  // The machine's pace (profile/pace.h), set before prepare(): records carry the pace of the run
  // they come from (set_run_pace), and prepare() leaves out records taken while the machine ran
  // slow when it runs at its pace now (the closed loop takes them again).
  void use_pace(MachinePace* pace) { pace_ = pace; }
  void set_run_pace(double pace) { run_pace_ = pace; }
  int64_t left_slow() const { return left_slow_; }  // records prepare() left out for their pace
  // Records c's in-model time (and stores it). `note` says where it was taken. Not over a time taken
  // at the machine's pace when this run's pace (set_run_pace) is slow: a slow phase slows some
  // kernels many times and others not at all, and the time at the pace is the one plans are solved
  // on (and a compile at the pace would only take it again). Returns whether it was recorded.
  bool record(const Graph& g, const KernelCandidate& c, double seconds, const std::string& note);
  // c's in-model time when it was taken at the machine's pace (its pace probe known and not slow).
  std::optional<double> at_pace(const Graph& g, const KernelCandidate& c) const;
  bool has(const Graph& g, const KernelCandidate& c) const { return by_instance_.count(instance(g, c)) != 0; }
  // has(), or the database held a record that prepare() left out for its pace.
  bool stored(const Graph& g, const KernelCandidate& c) const {
    const std::string inst = instance(g, c);
    return by_instance_.count(inst) != 0 || left_out_.count(inst) != 0;
  }
  // A whole plan's in-model time ("best": the fastest plan measured), stored per model like the
  // kernels' (none with redo).
  // `note` keeps what the record needs besides the time (the "best" plan's kernel instances).
  std::optional<TuningRecord> whole(const std::string& what) const;
  void record_whole(const std::string& what, double seconds, const std::string& note = "");
  int64_t loaded() const { return loaded_; }  // records found in the database by prepare()
  // The scale applied to isolated costs of candidates without an in-model time (1 until some
  // kernel of the class has run in the model).
  double scale(CostClass cls) const;

 private:
  void note_ratio(const Graph& g, const KernelCandidate& c);
  std::optional<double> at_pace(const std::string& instance) const;  // at_pace() by instance hash
  std::string whole_signature(const std::string& what) const;  // a whole plan's record of this model
  // Stores one record under (signature, device_, generator_), committed at once.
  void put(const std::string& signature, double seconds, const std::string& note);
  CostProvider& inner_;
  std::unique_ptr<TuningDb> db_;
  std::string device_;
  int generator_;
  std::string model_key_;
  std::function<std::string(const Graph&, const KernelCandidate&)> step_revision_;
  std::function<bool(const Graph&, const KernelCandidate&)> cold_;
  std::map<std::string, double> by_instance_;
  std::map<std::string, double> pace_of_;  // by instance: the pace its time in by_instance_ was taken at
  std::set<std::string> left_out_;  // instances whose records prepare() left out for their pace
  // Per class, per recorded instance: in-model / isolated, for the class scales.
  std::map<std::string, double> ratio_[3];
  // Per class, per linear primitive (by name) of a recorded kernel: that kernel's ratio.
  std::map<std::string, double> linear_ratio_[3];
  mutable double scale_[3] = {0, 0, 0};  // 0: to compute
  int64_t loaded_ = 0, left_slow_ = 0;
  bool redo_ = false;
  MachinePace* pace_ = nullptr;
  double run_pace_ = 0;
};

}  // namespace korch
