// korch bench MODEL | --artifact DIR [--emulate] [--device cpu] [--threads 2] [--runs 30] [--rounds 2]
//                   [--peers onnxruntime,openvino,torch-eager,torch-compile] [--torch-model NAME]
//
// Median latency and spread of the Korch artifact, side by side in the same run with the CPU peers
// (onnxruntime with all graph optimisations, OpenVINO with the latency hint and f32 precision;
// same thread count; bench/peer_latency.py in a child process per round), with PyTorch eager and
// torch.compile running the same model (--torch-model: a model of scripts/export_models.py, built
// with the weights it exports; bench/gpu_peers.py --serve in one child process for all rounds, so
// torch.compile compiles once; fp32, TF32 off; on the GPU for a GPU artifact, else on the CPU) and
// with Korch's own unfused plan (one kernel per primitive), so the gain over the faster peer and
// the orchestration's own gain are both visible. Every system is timed host to host (inputs in
// host memory, outputs back in host memory). Systems are timed in alternating rounds (these
// machines are noisy); each round warms up first. Each speedup is given twice: the ratio of the
// medians over all runs, and paired by round (the median of the per-round ratios of medians,
// profile/measure.h: steady across the VM's slow phases, which hit both systems of a round).
// Before timing, the artifact's outputs are compared with the unfused plan's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>

#include "commands.h"
#include "compile_flags.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/tensor_io.h"
#include "profile/bench_peers.h"
#include "profile/measure.h"
#include "profile/pace.h"
#include "profile/tuning_db.h"
#include "runtime/cpu/cpu_device.h"
#include "runtime/executable.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/process.h"

#ifndef KORCH_SOURCE_DIR
#define KORCH_SOURCE_DIR "."
#endif

namespace korch::cli {

namespace fs = std::filesystem;

namespace {

// Korch's slowest round over its fastest beyond which the bench says the machine changed speed.
constexpr double kUnsteadyRounds = 1.10;

// bench/gpu_peers.py of the source tree this korch was built from.
std::string torch_peer_script() { return (fs::path(KORCH_SOURCE_DIR) / "bench/gpu_peers.py").string(); }

// Whether each step of the artifact in `dir` runs generated code ("generated"), a library call
// ("library": cuBLASLt, cuDNN, oneDNN) or the reference interpreter ("reference"); program.json's
// recipes say (runtime/kernel_recipe.h). Empty when program.json cannot be read.
std::vector<std::string> step_kinds(const std::string& dir) {
  std::vector<std::string> kinds;
  auto program = nlohmann::json::parse(read_file_bytes((fs::path(dir) / "program.json").string()), nullptr, false);
  if (program.is_discarded() || !program.contains("kernels")) return kinds;
  for (const auto& k : program.at("kernels")) {
    const nlohmann::json recipe = k.value("recipe", nlohmann::json::object());
    kinds.push_back(recipe.contains("linear") ? "library" : recipe.contains("reference_graph") ? "reference" : "generated");
  }
  return kinds;
}

}  // namespace

Command add_bench(CLI::App& app) {
  struct Opts {
    std::string model, artifact, device = "cpu", work, json, torch_model, torch_script = torch_peer_script();
    int warmup = 5, runs = 30, rounds = 2, per_kernel = 0, torch_batch = 0;
    std::vector<std::string> peers = {"onnxruntime", "openvino"};
    bool no_unfused = false, emulate = false;
    CompileFlags cpu;
    LoadFlags load;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file or builtin:NAME (compiled first)");
  CLI::Option* artifact_opt = app.add_option("--artifact", o->artifact, "An artifact made by korch compile (instead of MODEL)");
  app.add_flag("--emulate", o->emulate,
               "--artifact of a CUDA artifact: run it on the CPU's CUDA emulator (rehearsals only: its times say "
               "nothing about a GPU; PyTorch peers then run on the CPU)")
      ->needs(artifact_opt);
  app.add_option("--device", o->device, "Device")->check(CLI::IsMember({"cpu"}));
  app.add_option("--warmup", o->warmup, "Untimed runs per round")->check(CLI::Range(0, 1000));
  app.add_option("--runs", o->runs, "Timed runs per round")->check(CLI::Range(1, 100000));
  app.add_option("--rounds", o->rounds, "Alternating rounds over the systems")->check(CLI::Range(1, 100));
  app.add_option("--work", o->work, "Folder for the compiled artifacts")->default_str("a temporary folder, removed");
  app.add_option("--json", o->json, "Also write the results as JSON to this file");
  CLI::Option* peers_opt = app.add_option("--peers", o->peers,
                                          "Peers timed in the same rounds (none: only Korch); one named here that "
                                          "cannot run fails the bench (by default it is only reported)")
      ->delimiter(',')
      ->check(CLI::IsMember({"onnxruntime", "openvino", "torch-eager", "torch-compile", "none"}))
      ->default_str("onnxruntime,openvino on a CPU artifact, torch-eager,torch-compile added with --torch-model; "
                    "on a GPU artifact torch-eager,torch-compile with --torch-model, else none");
  app.add_option("--torch-model", o->torch_model,
                 "The torch-eager/torch-compile peers run this model of scripts/export_models.py (the one the "
                 "artifact was compiled from: same weights and inputs)");
  app.add_option("--torch-batch", o->torch_batch, "Its batch size")
      ->check(CLI::Range(1, 1 << 20))
      ->default_str("the artifact's first input's first dimension");
  app.add_option("--torch-script", o->torch_script, "bench/gpu_peers.py, which runs the PyTorch peers")
      ->capture_default_str();
  app.add_option("--per-kernel", o->per_kernel, "Also print the N kernels of the artifact that take the most time");
  app.add_flag("--no-unfused", o->no_unfused, "Skip Korch's unfused plan");
  o->cpu.add_to(app);
  o->load.add_to(app);
  app.footer(
      "Examples:\n"
      "  korch bench --artifact model.korch             the artifact, its unfused plan, onnxruntime and OpenVINO\n"
      "  korch bench model.onnx --rounds 3 --json r.json  compile first (into --work), then time\n"
      "  korch bench --artifact model.korch --peers none --per-kernel 10   Korch alone, its 10 dearest kernels\n"
      "  korch bench --artifact candy.korch --torch-model candy   PyTorch eager and torch.compile beside it\n"
      "Rounds alternate over the systems; each prints the median and p10-p90 of --runs after --warmup.\n"
      "Every system is timed host to host: inputs in host memory, outputs back in host memory.\n"
      "The peers' Python: $KORCH_PYTHON, else the checkout's .venv, else python3.");
  return [o, peers_opt]() {
    if (o->model.empty() == o->artifact.empty()) fail("give either MODEL or --artifact DIR");
    warn_if_oversubscribed(o->cpu.threads);
    cpu::set_cpu_threads(o->cpu.threads);
    fs::path work = o->work.empty() ? fs::temp_directory_path() / fmt::format("korch-bench-{}", getpid()) : fs::path(o->work);
    fs::create_directories(work);
    // A temporary work folder goes away however bench ends (an error thrown midway included).
    struct RemoveWhenDone {
      fs::path path;
      ~RemoveWhenDone() {
        std::error_code ec;
        if (!path.empty()) fs::remove_all(path, ec);
      }
    } cleanup{o->work.empty() ? work : fs::path()};
    auto say = [](const std::string& s) { fmt::print("  {}\n", s); std::fflush(stdout); };
    std::string model = o->model;
    std::string fused_dir = o->artifact;
    if (fused_dir.empty()) {
      fused_dir = (work / "korch").string();
      fmt::print("compiling {} ...\n", model);
      compile_artifact(model, load_model_arg(model, o->load.options()), fused_dir, o->cpu.options(model, say), false);
    } else {
      auto manifest = nlohmann::json::parse(read_file_bytes((fs::path(fused_dir) / "manifest.json").string()), nullptr, false);
      if (manifest.is_discarded()) fail("{}/manifest.json is not JSON", fused_dir);
      model = manifest.value("model", std::string());
    }
    runtime::LoadOptions lo;
    lo.emulate = o->emulate;
    auto exe = runtime::Executable::load(fused_dir, lo);
    const bool on_gpu = exe->device().name() != "cpu";
    std::unique_ptr<runtime::Executable> unfused;
    std::string unfused_note;
    if (!o->no_unfused) {
      if (model.empty() || (model.rfind("builtin:", 0) != 0 && !fs::exists(model))) {
        unfused_note = "unfused plan skipped: the artifact's model '" + model + "' is not at hand";
      } else {
        CompileOptions uo = o->cpu.options(model, [](const std::string&) {});
        uo.unfused = true;
        if (on_gpu) uo.target = "cuda";
        // One kernel per primitive, each in the variant (schedule, layout format) the artifact's
        // own cost source picks: measured where the artifact was compiled with measured costs
        // (isolated times from the tuning database, as compile's unfused baseline has them), so the
        // fusion gain is the orchestration's alone (with analytic costs candy's unfused plan ran
        // without its Winograd convolutions: 130 ms, against 67 ms measured by compile).
        const std::string cost_model = exe->manifest().value("cost_model", std::string());
        uo.cost = !on_gpu && cost_model.rfind("measured", 0) == 0 ? CostSource::kMeasured : CostSource::kAnalytic;
        uo.close_loop = false;
        uo.verify = false;  // its outputs are compared with the artifact's below
        std::string dir = (work / "korch-unfused").string();
        compile_artifact(model, load_model_arg(model, o->load.options()), dir, uo, true);
        unfused = runtime::Executable::load(dir, lo);
      }
    }
    std::mt19937_64 rng(0);
    std::vector<Tensor> inputs;
    for (const TensorType& t : exe->input_types()) inputs.push_back(random_tensor(t, rng));
    double agreement = -1;
    if (unfused) {
      auto a = exe->run(inputs), b = unfused->run(inputs);
      agreement = 0;
      for (size_t i = 0; i < a.size(); ++i) agreement = std::max(agreement, rel_l2_error(a[i], b[i]));
    }
    // Without --peers: the CPU peers on a CPU artifact, PyTorch's where --torch-model names a model.
    const bool peers_given = peers_opt->count() > 0;
    std::vector<std::string> names = o->peers;
    if (!peers_given && on_gpu) names.clear();
    if (!peers_given && !o->torch_model.empty()) names.insert(names.end(), {"torch-eager", "torch-compile"});
    std::vector<Peer> peers;
    for (const std::string& name : names)
      if (name != "none" && std::none_of(peers.begin(), peers.end(), [&](const Peer& p) { return p.name == name; }))
        peers.push_back({name});
    auto any_peer = [&peers](bool torch) {
      return std::any_of(peers.begin(), peers.end(), [&](const Peer& p) { return p.torch() == torch; });
    };
    auto drop_cpu_peers = [&peers] {
      const size_t before = peers.size();
      std::erase_if(peers, [](const Peer& p) { return !p.torch(); });
      return peers.size() < before;
    };
    std::string peer_file, peers_note;
    if (on_gpu && drop_cpu_peers()) peers_note = "CPU peers skipped on a GPU artifact";
    if (on_gpu && !peers_given && o->torch_model.empty())
      peers_note = "no peers on a GPU artifact without --torch-model NAME (the scripts/export_models.py model it was "
                   "compiled from), which times PyTorch eager and torch.compile beside it";
    if (any_peer(false)) {
      if (model.empty()) {
        drop_cpu_peers();
        peers_note = "CPU peers skipped: the artifact names no model";
      } else {
        peer_file = model_file_for_peer(model, work.string());
      }
    }
    // The peers run the original model on the same inputs (the shapes the artifact was compiled
    // for, not the model's dynamic dimensions as 1) and on the values --bind gave inputs that the
    // artifact folded away (without them a peer says which input it misses).
    const std::string feeds_file = (work / "peer_feeds.json").string();
    if (any_peer(false)) {
      nlohmann::json feeds = nlohmann::json::object();
      for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string f = (work / fmt::format("peer_input_{}.npy", i)).string();
        save_npy(f, inputs[i]);
        feeds[exe->input_names()[i]] = f;
      }
      for (const auto& [name, path] : o->load.bind_files()) feeds[name] = fs::absolute(path).string();
      write_file_bytes(feeds_file, feeds.dump());
    }
    // The PyTorch peers: one process for every round, started (model built, torch.compile run once)
    // before the first.
    TorchPeers torch;
    nlohmann::json torch_json;
    if (any_peer(true)) {
      bool ok = false;
      std::string why;
      if (o->torch_model.empty()) {
        why = "no --torch-model NAME (the scripts/export_models.py model the artifact was compiled from)";
      } else {
        const std::vector<TensorType>& types = exe->input_types();
        const int64_t batch = o->torch_batch > 0 ? o->torch_batch
                              : !types.empty() && types[0].rank() > 0 ? types[0].shape[0]
                                                                      : 1;
        // The GPU for a GPU artifact; the CPU (with bench's threads) for a CPU or emulated one.
        const bool cuda = exe->device().name() == "cuda";
        std::vector<std::string> argv = {python_for_peer(KORCH_SOURCE_DIR),
                                         o->torch_script,
                                         "--serve",
                                         o->torch_model,
                                         "--batch",
                                         std::to_string(batch),
                                         "--device",
                                         cuda ? "cuda" : "cpu"};
        if (!cuda) argv.insert(argv.end(), {"--threads", std::to_string(o->cpu.threads)});
        if (std::none_of(peers.begin(), peers.end(), [](const Peer& p) { return p.name == "torch-compile"; }))
          argv.push_back("--no-compile");
        const std::string log = (work / "torch_peers.stderr.txt").string();
        fmt::print("starting the PyTorch peers: {} at batch {} on {} ({}) ...\n", o->torch_model, batch,
                   cuda ? "cuda" : "cpu", o->torch_script);
        std::fflush(stdout);
        ok = torch.start(argv, log) && torch.check_inputs(types);
        why = torch.error();
        torch_json = torch.ready();
        torch_json["script"] = o->torch_script;
        torch_json["python"] = python_for_peer(KORCH_SOURCE_DIR);
        if (!ok) torch_json["error"] = why;
      }
      for (Peer& peer : peers)
        if (peer.torch() && !ok) {
          peer.ok = false;
          peer.note = peer.name + " did not run: " + why;
        }
    }
    BenchTiming tk, tu;
    // The machine's pace before each round (profile/pace.h): its probe over the fastest the tuning
    // database has seen for this device; empty when the device has no probe or no database opens.
    std::vector<double> pace_by_round;
    std::unique_ptr<TuningDb> pace_db;
    try {
      pace_db = TuningDb::open(o->cpu.tuning_db.empty() ? TuningDb::default_path() : o->cpu.tuning_db);
    } catch (const Error&) {
    }
    std::optional<MachinePace> pace;
    PaceOptions pace_options;
    pace_options.enabled = true;
    if (pace_db) pace.emplace(exe->device(), *pace_db, exe->device().id(), pace_options);
    // A probe between consecutive systems' runs: each system's pace around its runs is the slower of
    // the probes on either side (BenchTiming::pace_around).
    double last_probe = 0;
    const auto probe_after = [&](BenchTiming& t) {
      if (!pace) return;
      const double p = pace->probe();
      t.pace_around.push_back(last_probe > 0 && p > 0 ? std::max(last_probe, p) : 0.0);
      last_probe = p;
    };
    for (int r = 0; r < o->rounds; ++r) {
      if (pace) {
        last_probe = pace->probe();
        if (last_probe > 0) pace_by_round.push_back(last_probe);
      }
      size_t from = tk.ms.size();
      time_executable(*exe, inputs, o->warmup, o->runs, tk);
      tk.end_round(from);
      probe_after(tk);
      for (Peer& peer : peers) {
        if (!peer.ok) continue;
        from = peer.t.ms.size();
        if (peer.torch()) torch.time(peer, o->warmup, o->runs);
        else
          time_peer(peer, KORCH_SOURCE_DIR, peer_file, feeds_file, o->cpu.threads, o->warmup, o->runs);
        peer.t.end_round(from);
        probe_after(peer.t);
      }
      if (unfused) {
        from = tu.ms.size();
        time_executable(*unfused, inputs, o->warmup, o->runs, tu);
        tu.end_round(from);
        probe_after(tu);
      }
    }
    // Each system's rounds against Korch's (median_of_round_ratios); 0 when they do not pair up (a
    // peer that stopped answering part-way).
    const auto paired = [&](const BenchTiming& t) {
      return t.round_ms.size() == tk.round_ms.size() && !tk.round_ms.empty()
                 ? median_of_round_ratios(t.round_ms, tk.round_ms)
                 : 0.0;
    };
    for (Peer& peer : peers)
      if (peer.torch() && peer.ok) peer.note = torch.note(peer.name);
    if (on_gpu)
      fmt::print("\nbench {} on {} ({}), {} rounds x {} runs (median, p10-p90 in ms)\n", model.empty() ? fused_dir : model,
                 exe->device().name(), exe->replay_status(), o->rounds, o->runs);
    else
      fmt::print("\nbench {} on cpu, {} threads, {} rounds x {} runs (median, p10-p90 in ms)\n",
                 model.empty() ? fused_dir : model, o->cpu.threads, o->rounds, o->runs);
    const std::string host_to_host = "every row is timed host to host: inputs in host memory, outputs back in host memory";
    if (on_gpu || !torch_json.empty()) fmt::print("  ({})\n", host_to_host);
    auto row = [&](const std::string& name, const BenchTiming& t, const std::string& extra) {
      fmt::print("  {:<16} {:>9.3f}  [{:.3f} - {:.3f}]  {}\n", name, t.median(), t.quantile(0.1), t.quantile(0.9), extra);
    };
    const runtime::ReorderStats reorders = exe->reorders_per_run();
    // A micro-batched artifact runs its batch-1 plan once per sample (pipeline/micro_batch.h); the
    // unfused baseline runs the whole batch, so the gain over it is fusion's and micro-batching's.
    const int64_t micro = exe->micro_batches();
    const int64_t micro_size = micro > 1 ? exe->input_types().at(0).shape.at(0) / micro : 0;
    const std::string layout_note = fmt::format(
        "{} reorders per run ({:.2f} MB), {} layout handoffs{}", reorders.count, reorders.bytes / 1e6,
        exe->layout_handoffs(), micro > 1 ? fmt::format("; {} runs of its batch-{} plan", micro, micro_size) : "");
    row("korch", tk, layout_note);
    const Peer* faster = nullptr;
    const auto peers_ran = std::count_if(peers.begin(), peers.end(), [](const Peer& p) { return p.ok; });
    for (const Peer& peer : peers)
      if (peer.ok && (!faster || peer.t.median() < faster->t.median())) faster = &peer;
    for (const Peer& peer : peers) {
      if (!peer.ok) {
        fmt::print("  {:<16} {}\n", peer.name, peer.note);
        continue;
      }
      row(peer.name, peer.t,
          fmt::format("korch speedup {:.2f}x, paired by round {:.2f}x ({}{})", peer.t.median() / tk.median(),
                      paired(peer.t), peer.note, &peer == faster && peers_ran > 1 ? ", the faster peer" : ""));
    }
    if (!peers_note.empty()) fmt::print("  {}\n", peers_note);
    if (unfused)
      row("korch-unfused", tu,
          fmt::format("{} gain {:.2f}x, paired by round {:.2f}x; outputs agree within {:.1e}",
                      micro > 1 ? "fusion and micro-batch" : "fusion", tu.median() / tk.median(), paired(tu),
                      agreement));
    else if (!unfused_note.empty())
      fmt::print("  {}\n", unfused_note);
    // Korch's own rounds apart by more than kUnsteadyRounds: the machine changed speed during the
    // bench (another process, this VM's slow phases), which the medians over all runs mix in.
    const double round_range = tk.round_ms.size() > 1 ? *std::max_element(tk.round_ms.begin(), tk.round_ms.end()) /
                                                            *std::min_element(tk.round_ms.begin(), tk.round_ms.end())
                                                      : 1.0;
    if (round_range > kUnsteadyRounds)
      fmt::print(
          "  note: Korch's round medians range {:.2f}x ({:.3f} to {:.3f} ms): the machine changed speed during "
          "the bench; the speedups paired by round are the steadier figures\n",
          round_range, *std::min_element(tk.round_ms.begin(), tk.round_ms.end()),
          *std::max_element(tk.round_ms.begin(), tk.round_ms.end()));
    if (!pace_by_round.empty()) {
      std::vector<std::string> paces;
      for (double p : pace_by_round) paces.push_back(fmt::format("{:.2f}", p));
      const auto slow =
          std::count_if(pace_by_round.begin(), pace_by_round.end(), [&](double p) { return pace->is_slow(p); });
      fmt::print("  machine pace before each round (its probe over the fastest seen): {}{}\n", fmt::join(paces, " "),
                 slow ? fmt::format("; {} of {} rounds began slow", slow, pace_by_round.size()) : "");
      // Paired over the rounds where both systems' runs met the machine at its pace (probes on either
      // side of each system's runs): the comparison a slow state landing on one of them cannot tilt.
      std::vector<std::string> at_pace;
      for (const Peer& peer : peers) {
        if (!peer.ok || peer.t.round_ms.size() != tk.round_ms.size() ||
            peer.t.pace_around.size() != tk.round_ms.size() || tk.pace_around.size() != tk.round_ms.size())
          continue;
        std::vector<double> a, b;
        for (size_t i = 0; i < tk.round_ms.size(); ++i) {
          const double pk = tk.pace_around[i], pp = peer.t.pace_around[i];
          if (pk > 0 && pp > 0 && !pace->is_slow(pk) && !pace->is_slow(pp)) {
            a.push_back(peer.t.round_ms[i]);
            b.push_back(tk.round_ms[i]);
          }
        }
        at_pace.push_back(a.empty() ? fmt::format("{} - (no round)", peer.name)
                                    : fmt::format("{} {:.2f}x ({} of {} rounds)", peer.name,
                                                  median_of_round_ratios(a, b), a.size(), tk.round_ms.size()));
      }
      if (!at_pace.empty())
        fmt::print("  paired by round where both systems' runs met the machine at its pace: {}\n",
                   fmt::join(at_pace, ", "));
    }
    nlohmann::json per_kernel = nlohmann::json::array();
    double clock_read_s = 0;  // what one clock read between kernels adds to each kernel's time
    if (o->per_kernel > 0) {
      // In-model time of each kernel (median over the runs) next to the cost the plan used.
      std::vector<double> predicted;
      auto plan = nlohmann::json::parse(read_file_bytes((fs::path(fused_dir) / "plan.json").string()), nullptr, false);
      if (!plan.is_discarded() && plan.contains("kernels"))
        for (const auto& k : plan.at("kernels")) predicted.push_back(k.value("cost_s", 0.0));
      const std::vector<std::string> kinds = step_kinds(fused_dir);
      clock_read_s = exe->step_timer_seconds();
      exe->set_step_timing(true);
      for (int i = 0; i < o->runs; ++i) exe->run(inputs);
      auto steps = exe->step_times();
      exe->set_step_timing(false);
      double total = 0, total_pred = 0;
      std::vector<double> med(steps.size());
      // Achieved bandwidth: the bytes a kernel's buffers hold (read and written once each) over its time.
      auto gb_s = [&](size_t i) { return med[i] > 0 ? static_cast<double>(steps[i].bytes) / med[i] / 1e9 : 0.0; };
      for (size_t i = 0; i < steps.size(); ++i) {
        med[i] = BenchTiming{steps[i].samples}.median();
        total += med[i];
        total_pred += i < predicted.size() ? predicted[i] : 0;
        per_kernel.push_back({{"step", steps[i].step}, {"note", steps[i].note}, {"median_ms", med[i] * 1e3},
                              {"predicted_ms", i < predicted.size() ? predicted[i] * 1e3 : 0.0},
                              {"bytes", steps[i].bytes}, {"gb_s", gb_s(i)},
                              {"kind", i < kinds.size() ? kinds[i] : std::string("?")}});
      }
      std::vector<size_t> order(steps.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return med[a] > med[b]; });
      fmt::print(
          "\n  kernels in the model{}: sum of per-kernel medians {:.3f} ms, of their predicted costs {:.3f} ms; "
          "each kernel's time includes one clock read ({:.2f} us)\n",
          micro > 1 ? fmt::format(" (one run of the batch-{} plan)", micro_size) : "", total * 1e3, total_pred * 1e3,
          clock_read_s * 1e6);
      fmt::print("  top kernels (median ms in the model, share, predicted ms, in-model / predicted, MB its buffers "
                 "hold, GB/s over them):\n");
      for (size_t r = 0; r < order.size() && r < static_cast<size_t>(o->per_kernel); ++r) {
        const size_t i = order[r];
        const double p = i < predicted.size() ? predicted[i] : 0;
        fmt::print("  {:>4} {:>8.3f} {:>5.1f}% {:>8.3f} {:>5.2f} {:>8.2f} {:>7.1f}  {}{}\n", steps[i].step, med[i] * 1e3,
                   100 * med[i] / std::max(total, 1e-30), p * 1e3, p > 0 ? med[i] / p : 0.0, steps[i].bytes / 1e6, gb_s(i),
                   i < kinds.size() && kinds[i] != "generated" ? "[" + kinds[i] + "] " : "", steps[i].note.substr(0, 90));
      }
    }
    if (!o->json.empty()) {
      nlohmann::json j = {{"model", model},
                          {"threads", o->cpu.threads},
                          {"rounds", o->rounds},
                          {"runs", o->runs},
                          {"peer_script", peer_file.empty() ? "" : peer_script(KORCH_SOURCE_DIR)},
                          {"korch",
                           {{"median_ms", tk.median()},
                            {"p10_ms", tk.quantile(0.1)},
                            {"p90_ms", tk.quantile(0.9)},
                            {"round_medians_ms", tk.round_ms},
                            {"round_range", round_range},
                            {"pace_by_round", pace_by_round},
                            {"pace_around_runs", tk.pace_around},
                            {"reorders_per_run", reorders.count},
                            {"reorder_bytes_per_run", reorders.bytes},
                            {"layout_handoffs", exe->layout_handoffs()}}},
                          {"device", exe->device().name()},
                          {"device_id", exe->device().id()},
                          {"replay", exe->replay_status()},
                          {"timing", host_to_host}};
      if (!torch_json.empty()) j["torch_peers"] = torch_json;
      for (const Peer& peer : peers) {
        if (peer.ok)
          j[peer.name] = {{"median_ms", peer.t.median()},          {"p10_ms", peer.t.quantile(0.1)},
                          {"p90_ms", peer.t.quantile(0.9)},        {"round_medians_ms", peer.t.round_ms},
                          {"speedup_paired", paired(peer.t)},      {"note", peer.note},
                          {"pace_around_runs", peer.t.pace_around}};
        else
          j[peer.name] = {{"error", peer.note}};
      }
      if (faster) j["faster_peer"] = faster->name;
      if (unfused)
        j["korch_unfused"] = {{"median_ms", tu.median()},
                              {"p10_ms", tu.quantile(0.1)},
                              {"p90_ms", tu.quantile(0.9)},
                              {"round_medians_ms", tu.round_ms},
                              {"pace_around_runs", tu.pace_around},
                              {"gain_paired", paired(tu)},
                              {"agreement", agreement},
                              {"cost_model", unfused->manifest().value("cost_model", std::string())}};
      if (!per_kernel.empty()) {
        j["kernels"] = per_kernel;
        j["kernel_clock_read_ms"] = clock_read_s * 1e3;
      }
      std::ofstream f(o->json);
      f << j.dump(2) << "\n";
      if (!f) fail_io("cannot write {}", o->json);
    }
    // Peers named on the command line were asked for: not getting them is a failure, said last.
    if (peers_opt->count() > 0) {
      std::fflush(stdout);
      if (!peers_note.empty()) fail("--peers: {}", peers_note);
      for (const Peer& peer : peers)
        if (!peer.ok) fail("--peers {}", peer.note);
    }
    return 0;
  };
}

}  // namespace korch::cli
