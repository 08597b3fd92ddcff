// The peers `korch bench` times beside a Korch artifact, and the statistics it keeps for each
// system: onnxruntime and OpenVINO (bench/peer_latency.py in a child process per round), PyTorch
// eager and torch.compile (bench/gpu_peers.py --serve in one child process for every round, so
// torch.compile compiles once), and Korch's own runs of an executable.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace korch {

namespace runtime {
class Executable;
}
class ChildProcess;

// One system's timed runs, ms, in the order taken, and the median of each round.
struct BenchTiming {
  std::vector<double> ms;
  std::vector<double> round_ms;  // the median of each round's runs
  // The machine's pace around each round's runs (`korch bench`): the slower of its pace probe just
  // before them and just after (profile/pace.h; 0 unknown). This VM's slow state comes and goes
  // within seconds, so it lands on one system's runs of a round and not the next one's.
  std::vector<double> pace_around;
  // Closes a round whose runs were appended to `ms` from index `from` on.
  void end_round(size_t from);
  double quantile(double q) const;
  double median() const;
};

// `warmup` untimed runs of `exe` on `inputs`, then `runs` timed ones (host to host) appended to `t`.
void time_executable(runtime::Executable& exe, const std::vector<Tensor>& inputs, int warmup, int runs, BenchTiming& t);

// bench/peer_latency.py: beside an installed binary (PREFIX/share/korch, cmake --install), else in
// `source_dir`, the source tree the binary was built from.
std::string peer_script(const std::string& source_dir);
// The peers' Python: $KORCH_PYTHON, else `source_dir`'s .venv, else python3.
std::string python_for_peer(const std::string& source_dir);

struct Peer {
  std::string name;  // onnxruntime | openvino | torch-eager | torch-compile
  BenchTiming t;
  bool ok = true;
  std::string note;  // its version, or why it did not run
  bool torch() const { return name.rfind("torch-", 0) == 0; }
};

// Runs a CPU peer (bench/peer_latency.py) in a child process; adds its per-run samples, or says why
// not (peer.note, peer.ok). `feeds`: a JSON file naming the .npy each model input takes (the inputs
// Korch runs).
bool time_peer(Peer& peer, const std::string& source_dir, const std::string& model_file, const std::string& feeds,
               int threads, int warmup, int runs);

// PyTorch eager and torch.compile on one model of scripts/export_models.py: bench/gpu_peers.py
// --serve in one child process for the whole bench, asked for each round's samples with one line
// per peer.
class TorchPeers {
 public:
  // Time for building the model and compiling it (torch.compile on a big model: minutes), and for
  // the answer to one round's runs.
  static constexpr double kReadySeconds = 1800, kAnswerSeconds = 600;

  TorchPeers();
  ~TorchPeers();
  // Starts the child and waits for it to be ready; false (and error()) when it cannot serve.
  bool start(const std::vector<std::string>& argv, const std::string& log_file);
  // One peer's samples for this round ("eager" or "compile"); false (and peer.note) when none.
  bool time(Peer& peer, int warmup, int runs);
  // False (and error()) when the model the child built takes other inputs than `types`: a
  // --torch-model or --torch-batch that does not match the artifact.
  bool check_inputs(const std::vector<TensorType>& types);
  // What the ready line said (torch version, device, precision flags, compile_s, checks).
  const nlohmann::json& ready() const { return ready_; }
  const std::string& error() const { return error_; }
  // The peer's version note, for its row.
  std::string note(const std::string& peer) const;

 private:
  bool fail(const std::string& why);
  std::string stderr_tail() const;
  // The next JSON line (lines that are not JSON are skipped); nothing, and error_ set, when none.
  std::optional<nlohmann::json> answer(double timeout_s, const std::string& what);

  std::unique_ptr<ChildProcess> child_;
  std::string log_file_, error_;
  nlohmann::json ready_;
};

}  // namespace korch
