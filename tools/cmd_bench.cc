// korch bench MODEL | --artifact DIR [--device cpu] [--threads 2] [--runs 30] [--rounds 2]
//                   [--peers onnxruntime,openvino]
//
// Median latency and spread of the Korch artifact, side by side in the same run with the CPU peers
// (onnxruntime with all graph optimisations, OpenVINO with the latency hint and f32 precision;
// same thread count; bench/peer_latency.py in a child process per round) and with Korch's own
// unfused plan (one kernel per primitive), so the gain over the faster peer and the orchestration's
// own gain are both visible. Systems are timed in alternating rounds (these machines are noisy);
// each round warms up first. Before timing, the artifact's outputs are compared with the unfused
// plan's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "compile_flags.h"
#include "ir/random.h"
#include "ir/tensor_io.h"
#include "ir/tensor_compare.h"
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

struct Timing {
  std::vector<double> ms;
  double quantile(double q) const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    if (s.empty()) return 0;
    return s[std::min(s.size() - 1, static_cast<size_t>(q * static_cast<double>(s.size())))];
  }
  double median() const {
    std::vector<double> s = ms;
    std::sort(s.begin(), s.end());
    if (s.empty()) return 0;
    size_t n = s.size();
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  }
};

void time_executable(runtime::Executable& exe, const std::vector<Tensor>& inputs, int warmup, int runs, Timing& t) {
  for (int i = 0; i < warmup; ++i) exe.run(inputs);
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    exe.run(inputs);
    t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

// The folder of the running korch binary ("" when /proc/self/exe cannot be read).
fs::path binary_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The peers' script: next to an installed binary (PREFIX/share/korch, cmake --install), else in
// the source tree the binary was built from.
std::string peer_script() {
  const fs::path bin = binary_dir();
  const fs::path installed = bin / ".." / "share" / "korch" / "peer_latency.py";
  std::error_code ec;
  if (!bin.empty() && fs::exists(installed, ec)) return fs::weakly_canonical(installed, ec).string();
  return (fs::path(KORCH_SOURCE_DIR) / "bench/peer_latency.py").string();
}

std::string python_for_peer() {
  if (const char* p = std::getenv("KORCH_PYTHON"); p && *p) return p;
  fs::path venv = fs::path(KORCH_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "python3";
}

struct Peer {
  std::string name;  // onnxruntime | openvino
  Timing t;
  bool ok = true;
  std::string note;  // its version, or why it did not run
};

// Runs a peer (bench/peer_latency.py) in a child process; adds its per-run samples, or says why not.
// `feeds`: a JSON file naming the .npy each model input takes (the inputs Korch runs).
bool time_peer(Peer& peer, const std::string& model_file, const std::string& feeds, int threads, int warmup, int runs) {
  const std::string script = peer_script();
  std::string cmd = fmt::format("'{}' '{}' '{}' --peer {} --threads {} --warmup {} --runs {} --feeds '{}'", python_for_peer(),
                                script, model_file, peer.name, threads, warmup, runs, feeds);
  std::string out;
  int rc = run_shell(cmd, &out);
  size_t brace = out.rfind('{');
  if (rc != 0 || brace == std::string::npos) {
    // The last line says why (a traceback ends with the exception).
    std::string tail = out;
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
    if (size_t nl = tail.rfind('\n'); nl != std::string::npos) tail = tail.substr(nl + 1);
    peer.note = fmt::format("{} did not run: {}", peer.name, tail.substr(0, 300));
    return peer.ok = false;
  }
  try {
    auto j = nlohmann::json::parse(out.substr(brace));
    // Every timed run, so the peer's median and spread come from the same statistics as ours.
    for (const auto& x : j.at("samples_ms")) peer.t.ms.push_back(x.get<double>());
    peer.note = peer.name + " " + j.value("version", std::string("?"));
    return true;
  } catch (const std::exception& e) {
    peer.note = fmt::format("unreadable {} output: {}", peer.name, e.what());
    return peer.ok = false;
  }
}

}  // namespace

Command add_bench(CLI::App& app) {
  struct Opts {
    std::string model, artifact, device = "cpu", work, json;
    int warmup = 5, runs = 30, rounds = 2, per_kernel = 0;
    std::vector<std::string> peers = {"onnxruntime", "openvino"};
    bool no_unfused = false;
    CompileFlags cpu;
    LoadFlags load;
  };
  auto o = std::make_shared<Opts>();
  app.add_option("model", o->model, "ONNX model file or builtin:NAME (compiled first)");
  app.add_option("--artifact", o->artifact, "An artifact made by korch compile (instead of MODEL)");
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
      ->check(CLI::IsMember({"onnxruntime", "openvino", "none"}))
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
      "Rounds alternate over the systems; each prints the median and p10-p90 of --runs after --warmup.");
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
    auto exe = runtime::Executable::load(fused_dir);
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
        uo.cost = CostSource::kAnalytic;  // one kernel per primitive: nothing to choose, nothing to measure
        uo.verify = false;  // its outputs are compared with the artifact's below
        std::string dir = (work / "korch-unfused").string();
        compile_artifact(model, load_model_arg(model, o->load.options()), dir, uo, true);
        unfused = runtime::Executable::load(dir);
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
    std::vector<Peer> peers;
    for (const std::string& name : o->peers)
      if (name != "none") peers.push_back({name});
    std::string peer_file, peers_note;
    if (!peers.empty() && on_gpu) {
      peers_note = "CPU peers skipped on a GPU artifact: bench/gpu_peers.py times PyTorch eager and torch.compile";
      peers.clear();
    }
    if (!peers.empty()) {
      if (model.empty()) {
        peers_note = "peers skipped: the artifact names no model";
        peers.clear();
      } else {
        peer_file = model_file_for_peer(model, work.string());
      }
    }
    // The peers run the original model on the same inputs (the shapes the artifact was compiled
    // for, not the model's dynamic dimensions as 1) and on the values --bind gave inputs that the
    // artifact folded away (without them a peer says which input it misses).
    const std::string feeds_file = (work / "peer_feeds.json").string();
    if (!peers.empty()) {
      nlohmann::json feeds = nlohmann::json::object();
      for (size_t i = 0; i < inputs.size(); ++i) {
        const std::string f = (work / fmt::format("peer_input_{}.npy", i)).string();
        save_npy(f, inputs[i]);
        feeds[exe->input_names()[i]] = f;
      }
      for (const auto& [name, path] : o->load.bind_files()) feeds[name] = fs::absolute(path).string();
      write_file_bytes(feeds_file, feeds.dump());
    }
    Timing tk, tu;
    for (int r = 0; r < o->rounds; ++r) {
      time_executable(*exe, inputs, o->warmup, o->runs, tk);
      for (Peer& peer : peers)
        if (peer.ok) time_peer(peer, peer_file, feeds_file, o->cpu.threads, o->warmup, o->runs);
      if (unfused) time_executable(*unfused, inputs, o->warmup, o->runs, tu);
    }
    if (on_gpu)
      fmt::print("\nbench {} on {} ({}), {} rounds x {} runs (median, p10-p90 in ms)\n", model.empty() ? fused_dir : model,
                 exe->device().name(), exe->replay_status(), o->rounds, o->runs);
    else
      fmt::print("\nbench {} on cpu, {} threads, {} rounds x {} runs (median, p10-p90 in ms)\n",
                 model.empty() ? fused_dir : model, o->cpu.threads, o->rounds, o->runs);
    auto row = [&](const std::string& name, const Timing& t, const std::string& extra) {
      fmt::print("  {:<16} {:>9.3f}  [{:.3f} - {:.3f}]  {}\n", name, t.median(), t.quantile(0.1), t.quantile(0.9), extra);
    };
    const runtime::ReorderStats reorders = exe->reorders_per_run();
    const std::string layout_note = fmt::format("{} reorders per run ({:.2f} MB), {} layout handoffs", reorders.count,
                                                reorders.bytes / 1e6, exe->layout_handoffs());
    row("korch", tk, layout_note);
    const Peer* faster = nullptr;
    for (const Peer& peer : peers)
      if (peer.ok && (!faster || peer.t.median() < faster->t.median())) faster = &peer;
    for (const Peer& peer : peers) {
      if (!peer.ok) {
        fmt::print("  {:<16} {}\n", peer.name, peer.note);
        continue;
      }
      row(peer.name, peer.t, fmt::format("korch speedup {:.2f}x ({}{})", peer.t.median() / tk.median(), peer.note,
                                         &peer == faster && peers.size() > 1 ? ", the faster peer" : ""));
    }
    if (!peers_note.empty()) fmt::print("  {}\n", peers_note);
    if (unfused)
      row("korch-unfused", tu, fmt::format("fusion gain {:.2f}x; outputs agree within {:.1e}", tu.median() / tk.median(), agreement));
    else if (!unfused_note.empty())
      fmt::print("  {}\n", unfused_note);
    nlohmann::json per_kernel = nlohmann::json::array();
    if (o->per_kernel > 0) {
      // In-model time of each kernel (median over the runs) next to the cost the plan used.
      std::vector<double> predicted;
      auto plan = nlohmann::json::parse(read_file_bytes((fs::path(fused_dir) / "plan.json").string()), nullptr, false);
      if (!plan.is_discarded() && plan.contains("kernels"))
        for (const auto& k : plan.at("kernels")) predicted.push_back(k.value("cost_s", 0.0));
      exe->set_step_timing(true);
      for (int i = 0; i < o->runs; ++i) exe->run(inputs);
      auto steps = exe->step_times();
      exe->set_step_timing(false);
      double total = 0, total_pred = 0;
      std::vector<double> med(steps.size());
      for (size_t i = 0; i < steps.size(); ++i) {
        med[i] = Timing{steps[i].samples}.median();
        total += med[i];
        total_pred += i < predicted.size() ? predicted[i] : 0;
        per_kernel.push_back({{"step", steps[i].step}, {"note", steps[i].note}, {"median_ms", med[i] * 1e3},
                              {"predicted_ms", i < predicted.size() ? predicted[i] * 1e3 : 0.0}});
      }
      std::vector<size_t> order(steps.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return med[a] > med[b]; });
      fmt::print("\n  kernels in the model: sum of per-kernel medians {:.3f} ms, of their predicted costs {:.3f} ms\n",
                 total * 1e3, total_pred * 1e3);
      fmt::print("  top kernels (median ms in the model, share, predicted ms, in-model / predicted):\n");
      for (size_t r = 0; r < order.size() && r < static_cast<size_t>(o->per_kernel); ++r) {
        const size_t i = order[r];
        const double p = i < predicted.size() ? predicted[i] : 0;
        fmt::print("  {:>4} {:>8.3f} {:>5.1f}% {:>8.3f} {:>5.2f}  {}\n", steps[i].step, med[i] * 1e3,
                   100 * med[i] / std::max(total, 1e-30), p * 1e3, p > 0 ? med[i] / p : 0.0, steps[i].note.substr(0, 90));
      }
    }
    if (!o->json.empty()) {
      nlohmann::json j = {{"model", model}, {"threads", o->cpu.threads}, {"rounds", o->rounds}, {"runs", o->runs},
                          {"peer_script", peers.empty() ? "" : peer_script()},
                          {"korch", {{"median_ms", tk.median()}, {"p10_ms", tk.quantile(0.1)}, {"p90_ms", tk.quantile(0.9)},
                                     {"reorders_per_run", reorders.count}, {"reorder_bytes_per_run", reorders.bytes},
                                     {"layout_handoffs", exe->layout_handoffs()}}},
                          {"device", exe->device().name()}, {"device_id", exe->device().id()},
                          {"replay", exe->replay_status()}};
      for (const Peer& peer : peers) {
        if (peer.ok)
          j[peer.name] = {{"median_ms", peer.t.median()}, {"p10_ms", peer.t.quantile(0.1)}, {"p90_ms", peer.t.quantile(0.9)},
                          {"note", peer.note}};
        else
          j[peer.name] = {{"error", peer.note}};
      }
      if (faster) j["faster_peer"] = faster->name;
      if (unfused) j["korch_unfused"] = {{"median_ms", tu.median()}, {"p10_ms", tu.quantile(0.1)}, {"p90_ms", tu.quantile(0.9)}, {"agreement", agreement}};
      if (!per_kernel.empty()) j["kernels"] = per_kernel;
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
