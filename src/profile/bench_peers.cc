#include "profile/bench_peers.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

#include "runtime/executable.h"
#include "support/error.h"
#include "support/file_io.h"
#include "support/process.h"

namespace korch {

namespace fs = std::filesystem;

void BenchTiming::end_round(size_t from) {
  if (from < ms.size())
    round_ms.push_back(
        BenchTiming{std::vector<double>(ms.begin() + static_cast<std::ptrdiff_t>(from), ms.end()), {}}.median());
}

double BenchTiming::quantile(double q) const {
  std::vector<double> s = ms;
  std::sort(s.begin(), s.end());
  if (s.empty()) return 0;
  return s[std::min(s.size() - 1, static_cast<size_t>(q * static_cast<double>(s.size())))];
}

double BenchTiming::median() const {
  std::vector<double> s = ms;
  std::sort(s.begin(), s.end());
  if (s.empty()) return 0;
  size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

void time_executable(runtime::Executable& exe, const std::vector<Tensor>& inputs, int warmup, int runs,
                     BenchTiming& t) {
  for (int i = 0; i < warmup; ++i) exe.run(inputs);
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    exe.run(inputs);
    t.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
}

namespace {

// The folder of the running korch binary ("" when /proc/self/exe cannot be read).
fs::path binary_dir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

}  // namespace

// The peers' script: next to an installed binary (PREFIX/share/korch, cmake --install), else in
// the source tree the binary was built from.
std::string peer_script(const std::string& source_dir) {
  const fs::path bin = binary_dir();
  const fs::path installed = bin / ".." / "share" / "korch" / "peer_latency.py";
  std::error_code ec;
  if (!bin.empty() && fs::exists(installed, ec)) return fs::weakly_canonical(installed, ec).string();
  return (fs::path(source_dir) / "bench/peer_latency.py").string();
}

std::string python_for_peer(const std::string& source_dir) {
  if (const char* p = std::getenv("KORCH_PYTHON"); p && *p) return p;
  fs::path venv = fs::path(source_dir) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "python3";
}

namespace {

// The last non-empty line of `text` (a traceback ends with the exception), at most 300 characters.
std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (size_t nl = text.rfind('\n'); nl != std::string::npos) text = text.substr(nl + 1);
  return text.substr(0, 300);
}

}  // namespace

// Runs a peer (bench/peer_latency.py) in a child process; adds its per-run samples, or says why not.
// `feeds`: a JSON file naming the .npy each model input takes (the inputs Korch runs).
bool time_peer(Peer& peer, const std::string& source_dir, const std::string& model_file, const std::string& feeds,
               int threads, int warmup, int runs) {
  const std::string script = peer_script(source_dir);
  std::string cmd =
      fmt::format("'{}' '{}' '{}' --peer {} --threads {} --warmup {} --runs {} --feeds '{}'",
                  python_for_peer(source_dir), script, model_file, peer.name, threads, warmup, runs, feeds);
  std::string out;
  int rc = run_shell(cmd, &out);
  size_t brace = out.rfind('{');
  if (rc != 0 || brace == std::string::npos) {
    peer.note = fmt::format("{} did not run: {}", peer.name, last_line(out));
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

TorchPeers::TorchPeers() = default;

TorchPeers::~TorchPeers() {
  if (!child_) return;
  std::string why;
  child_->write_line("quit", &why);
  child_->end(5);
}

bool TorchPeers::start(const std::vector<std::string>& argv, const std::string& log_file) {
  log_file_ = log_file;
  try {
    child_ = std::make_unique<ChildProcess>(argv, log_file);
  } catch (const Error& e) {
    error_ = e.what();
    return false;
  }
  auto line = answer(kReadySeconds, "after its start");
  if (!line) return false;
  if (!line->value("ready", false)) return fail(line->value("error", std::string("not ready: ") + line->dump()));
  ready_ = *line;
  return true;
}

bool TorchPeers::time(Peer& peer, int warmup, int runs) {
  const std::string which = peer.name == "torch-eager" ? "eager" : "compile";
  std::optional<nlohmann::json> a;
  std::string why;
  if (error_.empty() && !child_->write_line(fmt::format("time {} {} {}", which, warmup, runs), &why))
    fail(fmt::format("the PyTorch peer process took no command: {}{}", why, stderr_tail()));
  if (error_.empty()) a = answer(kAnswerSeconds, "to 'time " + which + "'");
  if (!a) {
    peer.note = peer.name + " did not run: " + error_;
    return peer.ok = false;
  }
  if (a->contains("error")) {
    peer.note = peer.name + " did not run: " + a->at("error").get<std::string>();
    return peer.ok = false;
  }
  for (const auto& x : a->at("samples_ms")) peer.t.ms.push_back(x.get<double>());
  return true;
}

bool TorchPeers::check_inputs(const std::vector<TensorType>& types) {
  static const std::map<std::string, std::string> korch_names = {
      {"float32", "f32"}, {"float64", "f64"}, {"float16", "f16"}, {"bfloat16", "bf16"}, {"int64", "i64"},
      {"int32", "i32"},   {"int16", "i16"},   {"int8", "i8"},     {"uint8", "u8"},      {"bool", "bool"}};
  std::vector<std::string> theirs, ours;
  for (const auto& in : ready_.value("inputs", nlohmann::json::array())) {
    const std::string dt = in.value("dtype", std::string("?"));
    auto it = korch_names.find(dt);
    theirs.push_back(fmt::format("{}[{}]", it == korch_names.end() ? dt : it->second,
                                 fmt::join(in.value("shape", std::vector<int64_t>{}), ",")));
  }
  for (const TensorType& t : types) ours.push_back(type_str(t));
  if (theirs == ours) return true;
  return fail(
      fmt::format("the PyTorch model {} at batch {} takes {} but the artifact takes {}: --torch-model "
                  "names the model the artifact was compiled from, --torch-batch its batch",
                  ready_.value("model", std::string("?")), ready_.value("batch", 0), fmt::join(theirs, ", "),
                  fmt::join(ours, ", ")));
}

std::string TorchPeers::note(const std::string& peer) const {
  std::string n = fmt::format("torch {} on {}, tf32 {}", ready_.value("torch", std::string("?")),
                              ready_.value("device", std::string("?")), ready_.value("tf32", true) ? "ON" : "off");
  if (peer == "torch-compile" && ready_.contains("compile_s") && ready_["compile_s"].is_number()) {
    n += fmt::format(", compiled in {:.1f} s", ready_["compile_s"].get<double>());
    if (ready_.value("compiled_matches_eager", nlohmann::json()).is_boolean())
      n += ready_["compiled_matches_eager"].get<bool>() ? ", matches eager" : ", DIFFERS from eager";
  }
  return n;
}

bool TorchPeers::fail(const std::string& why) {
  error_ = why;
  if (child_) child_->end(1);  // a child that timed out or misbehaved is not asked again
  return false;
}

std::string TorchPeers::stderr_tail() const {
  std::string text;
  try {
    text = read_file_bytes(log_file_);
  } catch (const Error&) {
  }
  std::string tail = last_line(text);
  return tail.empty() ? "" : fmt::format(" (its stderr ends: {})", tail);
}

std::optional<nlohmann::json> TorchPeers::answer(double timeout_s, const std::string& what) {
  std::string why;
  while (auto line = child_->read_line(timeout_s, &why)) {
    auto j = nlohmann::json::parse(*line, nullptr, false);
    if (!j.is_discarded() && j.is_object()) return j;
  }
  fail(fmt::format("no answer from the PyTorch peer process (pid {}) {}: {}{}", child_->pid(), what, why,
                   stderr_tail()));
  return std::nullopt;
}

}  // namespace korch
