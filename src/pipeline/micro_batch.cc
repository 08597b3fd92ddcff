#include "pipeline/micro_batch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>

#include "frontend/shape_inference.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/text_format.h"
#include "profile/in_model.h"
#include "profile/pace.h"
#include "profile/tuning_db.h"
#include "runtime/artifact.h"
#include "support/clock.h"
#include "support/error.h"
#include "support/hash.h"
#include "support/strings.h"

namespace korch {

namespace {

// Micro-batch `i` (samples i*k .. i*k+k-1) of a tensor whose leading dimension holds the samples.
Tensor chunk(const Tensor& t, int64_t i, int64_t k) {
  Shape s = t.shape();
  const size_t bytes = t.nbytes() / static_cast<size_t>(s[0]) * static_cast<size_t>(k);
  s[0] = k;
  Tensor out(t.dtype(), s);
  std::memcpy(out.raw(), t.raw() + static_cast<size_t>(i) * bytes, bytes);
  return out;
}

// Rewrites the micro-batch record in the manifest of the artifact in `dir` (its other files stay as
// written), keeping the per-micro-batch plan time a micro-batched artifact's record carries.
void write_micro_batch_record(const std::string& dir, const MicroBatchReport& m) {
  runtime::update_manifest(dir, [&](nlohmann::json& manifest) {
    nlohmann::json record = micro_batch_json(m);
    if (manifest.contains("micro_batch") && manifest["micro_batch"].contains("plan_seconds_per_micro_batch"))
      record["plan_seconds_per_micro_batch"] = manifest["micro_batch"]["plan_seconds_per_micro_batch"];
    manifest["micro_batch"] = std::move(record);
  });
}

}  // namespace

BatchSplit split_batch(const Graph& model, int64_t k, uint64_t seed, std::vector<Tensor>* whole_outputs) {
  BatchSplit r;
  r.size = k;
  if (model.inputs.empty()) {
    r.why_not = "the model has no inputs";
    return r;
  }
  const auto leading = [&](ValueId v) -> int64_t {
    const Shape& s = model.type(v).shape;
    return s.empty() ? -1 : s[0];
  };
  const int64_t n = leading(model.inputs[0]);
  for (ValueId v : model.inputs)
    if (leading(v) != n || n <= 1) {
      r.why_not = n <= 1 ? fmt::format("input '{}' has no batch above 1", model.value(v).name)
                         : "the inputs do not share a leading (batch) dimension";
      return r;
    }
  for (ValueId v : model.outputs)
    if (leading(v) != n) {
      r.why_not = fmt::format("output '{}' ({}) does not lead with the batch of {}", model.value(v).name,
                              type_str(model.type(v)), n);
      return r;
    }
  r.batches = n;
  if (k < 1 || k >= n || n % k != 0) {
    r.why_not = fmt::format("micro-batches of {} do not divide the batch of {}", k, n);
    return r;
  }

  // The same graph at batch k: inputs re-typed, every computed value's type inferred again.
  Graph g = model;
  g.name = fmt::format("{} at batch {}", model.name, k);
  for (ValueId v : g.inputs) g.value(v).type.shape[0] = k;
  for (Node& node : g.nodes) {
    for (ValueId v : node.outputs)
      if (v != kNoValue) g.value(v).type = {};
    if (node.op_type != "Reshape" || node.inputs.size() < 2) continue;
    const Value& target = g.value(node.inputs[1]);
    if (!target.is_constant() || target.constant->dtype() != DType::kInt64 || target.constant->numel() == 0 ||
        model.type(node.inputs[0]).shape.empty() || model.type(node.inputs[0]).shape[0] % n != 0 ||
        target.constant->data<int64_t>()[0] <= 0 || target.constant->data<int64_t>()[0] % n != 0)
      continue;
    // [N, ...] -> [k, ...]; [N*H, ...] (heads folded into the batch) -> [k*H, ...], and back. A
    // leading multiple of N that is not the batch gives another function, which the check below
    // refuses.
    Tensor micro = target.constant->clone();  // copies share their data
    micro.data<int64_t>()[0] = target.constant->data<int64_t>()[0] / n * k;
    node.inputs[1] = g.add_constant(fmt::format("{}/batch{}", target.name, k), std::move(micro));
  }
  try {
    infer_shapes_and_fold(g, g.name);
  } catch (const Error& e) {
    r.why_not = fmt::format("its shapes do not follow the batch ({})", e.what());
    return r;
  }
  g.remove_dead_code();  // the Reshape targets replaced above
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    Shape want = model.type(model.outputs[o]).shape;
    want[0] = k;
    if (g.type(g.outputs[o]).shape != want) {
      r.why_not = fmt::format("output '{}' is {} at batch {}, not {}", model.value(model.outputs[o]).name,
                              type_str(g.type(g.outputs[o])), k, shape_str(want));
      return r;
    }
  }

  // The same function: the whole batch against micro-batches alone, on the reference interpreter.
  const std::vector<Tensor> inputs = random_inputs(model, seed);
  std::vector<Tensor> own;
  std::vector<Tensor>& whole = whole_outputs ? *whole_outputs : own;
  if (whole.empty()) {
    try {
      whole = interpret(model, inputs);
    } catch (const Error& e) {
      r.why_not = fmt::format("the reference interpreter cannot run it ({})", e.what());
      return r;
    }
  }
  // A few micro-batches (the first, the last, two between) alone: mixing shows in every sample it
  // touches.
  const int64_t m = n / k;
  for (int64_t i : std::set<int64_t>{0, m / 3, 2 * m / 3, m - 1}) {
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(chunk(t, i, k));
    std::vector<Tensor> out;
    try {
      out = interpret(g, in);
    } catch (const Error& e) {
      r.why_not = fmt::format("its batch-{} graph does not run ({})", k, e.what());
      return r;
    }
    for (size_t o = 0; o < out.size(); ++o) {
      const std::string diff = rel_l2_diff(out[o], chunk(whole[o], i, k), 1e-5);
      if (!diff.empty()) {
        r.why_not = fmt::format(
            "its samples are not independent: output '{}' of samples {}-{} differs when "
            "computed apart from the rest ({})",
            model.value(model.outputs[o]).name, i * k, i * k + k - 1, diff);
        return r;
      }
    }
  }
  r.micro = std::move(g);
  return r;
}

std::vector<int64_t> micro_batch_sizes(const std::string& mode) {
  if (mode == "auto") return {4, 1};
  if (mode == "on") return {1};
  if (mode == "off") return {};
  int64_t k = 0;
  if (!mode.empty() && mode.find_first_not_of("0123456789") == std::string::npos && mode.size() < 10)
    k = std::stoll(mode);
  if (k < 1) fail("unknown micro-batch mode '{}' (auto, on, off or a micro-batch size)", mode);
  return {k};
}

nlohmann::json micro_batch_json(const MicroBatchReport& m) {
  nlohmann::json trials = nlohmann::json::array();
  for (const auto& t : m.trials)
    trials.push_back({{"size", t.size},
                      {"seconds", t.seconds},
                      {"against_seconds", t.against},
                      {"against_size", t.against_size},
                      {"noisy", t.noisy},
                      {"kept", t.kept}});
  nlohmann::json j = {{"batches", m.batches}, {"size", m.size},       {"chosen", m.chosen}, {"whole_s", m.whole_s},
                      {"micro_s", m.micro_s}, {"why_not", m.why_not}, {"trials", trials}};
  if (m.recalled > 0) j["recalled_from_unix_time"] = m.recalled;
  return j;
}

namespace {

// micro_batch_json's inverse (MicroBatchMemory's records); throws on a malformed document.
MicroBatchReport micro_batch_from_json(const nlohmann::json& j) {
  MicroBatchReport m;
  m.batches = j.at("batches").get<int64_t>();
  m.size = j.at("size").get<int64_t>();
  m.chosen = j.at("chosen").get<bool>();
  m.whole_s = j.at("whole_s").get<double>();
  m.micro_s = j.at("micro_s").get<double>();
  m.why_not = j.at("why_not").get<std::string>();
  for (const auto& t : j.at("trials"))
    m.trials.push_back({t.at("size").get<int64_t>(), t.at("seconds").get<double>(),
                        t.at("against_seconds").get<double>(), t.at("against_size").get<int64_t>(),
                        t.at("noisy").get<bool>(), t.at("kept").get<bool>()});
  if (m.batches < 2 || m.size < 1 || m.batches % m.size != 0)
    fail("micro-batch record: batch {} in micro-batches of {}", m.batches, m.size);
  return m;
}

}  // namespace

MicroBatchMemory::MicroBatchMemory(const std::string& db_path, const std::string& device, int generator,
                                   const Graph& model, const std::vector<int64_t>& sizes, const std::string& options,
                                   bool redo)
    : db_path_(db_path.empty() ? TuningDb::default_path() : db_path),
      device_(device + "+micro-batch"),
      generator_(generator),
      redo_(redo) {
  PrintOptions po;
  po.max_constant_elements = 0;
  signature_ = content_hash(fmt::format("micro-batch trials of sizes {} with {}\n{}", fmt::join(sizes, ","), options,
                                        print_graph(model, po)));
}

std::string plan_options_text(const CompileOptions& o) {
  const CandidateOptions& c = o.orchestrate.candidates;
  return fmt::format(
      "layout {}, denormals flushed {}, kernel size {}, linear {}, fanout {}, recompute {}, memory budget {}, "
      "rewrites {}, closed loop {}",
      o.layout, o.flush_denormals, c.max_primitives, c.max_linear, c.max_fanout, o.orchestrate.allow_recompute,
      o.orchestrate.memory_budget, o.orchestrate.rewrite_choices, o.close_loop);
}

bool MicroBatchMemory::decided(const MicroBatchReport& m) {
  const auto& ts = m.trials;
  const bool timed = std::all_of(ts.begin(), ts.end(), [](const auto& t) { return t.seconds > 0 && t.against > 0; });
  const bool quiet = std::none_of(ts.begin(), ts.end(), [](const auto& t) { return t.noisy; });
  // The chosen micro-batches won their own trial in quiet runs: a later trial that stayed noisy
  // leaves that choice standing (a warm yolox_nano compile at batch 16 timed all three plans again,
  // 32-42 s, because its batch-1 trial was noisy each time while batch 4 beat the whole batch).
  const bool won_quietly =
      m.chosen && std::any_of(ts.begin(), ts.end(), [&](const auto& t) { return t.kept && t.size == m.size; });
  return !ts.empty() && timed && (quiet || won_quietly);
}

std::optional<MicroBatchReport> MicroBatchMemory::recall() const {
  if (redo_) return std::nullopt;
  const std::optional<TuningRecord> rec =
      TuningDb::open(db_path_)->get(make_tuning_key(signature_, device_, generator_));
  if (!rec || rec->status != TuningStatus::kOk) return std::nullopt;
  MicroBatchReport m;
  try {
    m = micro_batch_from_json(nlohmann::json::parse(rec->note));
  } catch (const std::exception&) {
    return std::nullopt;  // a record this version cannot read: the trials are timed again (and it is replaced)
  }
  if (!decided(m)) return std::nullopt;
  m.recalled = std::max<int64_t>(rec->created, 1);
  return m;
}

std::string MicroBatchMemory::remember(const MicroBatchReport& m, double pace) const {
  if (m.trials.empty()) return "nothing was timed";
  if (!decided(m)) return "a trial's runs stayed noisy";
  if (pace > PaceOptions{}.slow)
    return fmt::format("the machine ran {:.2f}x slower than its best during the compiles", pace);
  TuningRecord r;
  r.key = make_tuning_key(signature_, device_, generator_);
  r.signature = signature_;
  r.device = device_;
  r.generator = generator_;
  r.seconds = m.chosen ? m.micro_s : m.whole_s;
  r.reps = static_cast<int64_t>(m.trials.size());
  MicroBatchReport kept = m;
  kept.recalled = 0;
  r.note = micro_batch_json(kept).dump();
  r.pace = pace;
  TuningDb::open(db_path_)->put(r);
  return "";
}

namespace {

// One trial against the plan it was timed beside, and its verdict: the progress line and the
// record of trials that lost both say it this way.
std::string describe_trial(int64_t batches, const MicroBatchReport::Trial& t) {
  const bool faster = t.seconds < kBeyondNoise * t.against;
  const char* verdict = t.kept    ? "kept"
                        : t.noisy ? (faster ? "faster, but in runs too noisy to trust" : "not faster (noisy runs)")
                        : t.seconds >= t.against ? "slower"
                                                 : "not faster beyond the noise (3%)";
  const std::string against =
      t.against_size > 0 ? fmt::format("{} runs of the batch-{} plan", batches / t.against_size, t.against_size)
                         : fmt::format("the batch-{} plan", batches);
  return fmt::format("{} runs of the batch-{} plan {:.1f} us against {} {:.1f} us: {}", batches / t.size, t.size,
                     t.seconds * 1e6, against, t.against * 1e6, verdict);
}

}  // namespace

std::string micro_batch_why_not(const MicroBatchReport& m) {
  std::string why;
  for (const auto& t : m.trials) why += (why.empty() ? "" : "; ") + describe_trial(m.batches, t);
  return why;
}

void choose_micro_batches(const Graph& model, const std::string& dir, const std::vector<int64_t>& sizes, bool timed,
                          int cpu_threads, double max_spread, CompileResult& r, const MicroBatchSteps& steps,
                          const std::function<void(const std::string&)>& say, const MicroBatchMemory* memory,
                          const MicroBatchReport* earlier) {
  namespace fs = std::filesystem;
  const auto t0 = std::chrono::steady_clock::now();
  if (earlier && !earlier->chosen) {
    r.micro = *earlier;
    say(fmt::format("micro-batches: not used, as an earlier compile's trials decided ({}; --redo times them again): {}",
                    utc_minute(earlier->recalled), earlier->why_not));
    write_micro_batch_record(dir, r.micro);
    r.meta.timing["micro_batch"] = since(t0);
    return;
  }
  double slowest_pace = r.loop.kept_pace;  // of the compiles whose plans the trials time
  MicroBatchReport m;
  // Folders beside `dir`, removed however this ends; the kept one's entries move into `dir`.
  struct Folders {
    std::vector<std::string> dirs;
    ~Folders() {
      std::error_code ec;
      for (const std::string& d : dirs) fs::remove_all(d, ec);
    }
  } folders;
  std::optional<CompileResult> best;  // the micro-batched artifact kept so far
  std::string best_dir = dir;
  std::vector<Tensor> whole;  // the reference run of the whole batch, shared by every size's check
  for (int64_t k : sizes) {
    BatchSplit split = split_batch(model, k, 0, &whole);
    m.batches = split.batches;
    if (!split.micro) {
      if (m.why_not.empty()) m.why_not = split.why_not;
      continue;
    }
    say(fmt::format("micro-batches: the {} samples are independent: compiling the model at batch {}", m.batches, k));
    std::string base = dir;  // "out/" -> "out.micro4-PID", beside it, not inside
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    const std::string kdir = fmt::format("{}.micro{}-{}", base, k, getpid());
    folders.dirs.push_back(kdir);
    // A micro-batch that cannot be compiled or run (a kernel that fails its gate only at batch k)
    // costs the model nothing: the batch-N artifact stands. Only I/O errors end the compile.
    std::optional<CompileResult> micro;
    MicroBatchReport::Trial trial{k, 0, 0, best ? best->micro.size : 0, false, !timed};
    try {
      micro = steps.compile(*split.micro, kdir, k);
      slowest_pace = std::max(slowest_pace, micro->loop.kept_pace);
      micro->micro = m;
      micro->micro.size = k;
      micro->micro.chosen = true;  // written as N / k runs, so it takes the model's inputs
      steps.write(*micro, kdir);
      if (timed) {
        // A wide spread (a busy or shifting machine) is taken again once, as the closed loop does.
        SideBySide side = run_side_by_side(best_dir, kdir, cpu_threads);
        if (std::max(side.spread_a, side.spread_b) > max_spread) {
          say(fmt::format("micro-batches: the runs beside the batch-{} plan spread {:.0f}%: taking them again", k,
                          100 * std::max(side.spread_a, side.spread_b)));
          side = run_side_by_side(best_dir, kdir, cpu_threads);
          trial.noisy = std::max(side.spread_a, side.spread_b) > max_spread;
        }
        trial.seconds = side.b;
        trial.against = side.a;
        // No switch on a measurement that stayed noisy.
        trial.kept = !trial.noisy && side.b < kBeyondNoise * side.a;
        if (!best) m.whole_s = side.a;
        say("micro-batches, in alternating runs: " + describe_trial(m.batches, trial));
      }
    } catch (const Error& e) {
      if (e.code() == ErrorCode::kIo) throw;
      say(fmt::format("micro-batches: the batch-{} plan failed, so it is not used: {}", k, e.what()));
      if (m.why_not.empty()) m.why_not = fmt::format("the batch-{} plan failed: {}", k, e.what());
      continue;
    }
    m.trials.push_back(trial);
    if (trial.kept) {
      best = std::move(*micro);
      best_dir = kdir;
      m.micro_s = trial.seconds;
    }
    if (!timed && best) break;  // untimed: the first that splits
  }
  if (best) {
    m.size = best->micro.size;
    m.chosen = true;
  } else if (!m.trials.empty()) {
    m.why_not = micro_batch_why_not(m);
  }
  if (memory && timed && !m.trials.empty()) {
    const std::string not_kept = memory->remember(m, slowest_pace);
    say(not_kept.empty() ? "micro-batches: the decision is kept in the tuning database: a later compile compiles only "
                           "the chosen plan (--redo times the trials again)"
                         : "micro-batches: the decision is not kept for later compiles: " + not_kept);
  }
  if (!best) {
    if (m.batches > 1 && m.trials.empty()) say("micro-batches: not used: " + m.why_not);  // else the summary says
    r.micro = m;
    if (!m.trials.empty()) write_micro_batch_record(dir, m);  // the trials that lost, in the batch-N artifact
  } else {
    best->micro = m;
    best->micro.why_not.clear();
    if (timed) write_micro_batch_record(best_dir, best->micro);  // with the trials' times
    for (const auto& entry : fs::directory_iterator(best_dir)) {
      const fs::path to = fs::path(dir) / entry.path().filename();
      fs::remove_all(to);
      fs::rename(entry.path(), to);
    }
    for (const auto& [phase, seconds] : r.meta.timing) best->meta.timing[phase] += seconds;  // every graph's phases
    r = std::move(*best);
  }
  r.meta.timing["micro_batch"] = since(t0);
}

bool compile_earlier_micro_batches(const Graph& model, const std::string& dir, const MicroBatchReport& earlier,
                                   CompileResult& r, const MicroBatchSteps& steps,
                                   const std::function<void(const std::string&)>& say) {
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t k = earlier.size;
  BatchSplit split = split_batch(model, k);
  if (!split.micro) return false;
  say(fmt::format(
      "micro-batches: an earlier compile's trials ({}) chose {} runs of the batch-{} plan ({:.1f} us "
      "against {:.1f} us for the batch-{} plan): compiling that plan alone (--redo times the trials again)",
      utc_minute(earlier.recalled), earlier.runs(), k, earlier.micro_s * 1e6, earlier.whole_s * 1e6, earlier.batches));
  try {
    CompileResult micro = steps.compile(*split.micro, dir, k);
    micro.micro = earlier;
    steps.write(micro, dir);  // its manifest's micro-batch record: the earlier trials, with their times
    r = std::move(micro);
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kIo) throw;
    say(fmt::format("micro-batches: the batch-{} plan failed, so the trials run again: {}", k, e.what()));
    return false;
  }
  r.meta.timing["micro_batch"] = since(t0);
  return true;
}

}  // namespace korch
