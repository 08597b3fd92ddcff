// Runs the ONNX backend node tests (onnx 1.22.0: model.onnx + test_data_set_*/{input,output}_N.pb)
// through the frontend and the reference interpreter and compares with the expected outputs.
//
// Each case runs in a forked child with a time limit, so a crash or hang in one case is reported
// as that case's failure instead of killing the run.
//
// Classification of a case:
//   pass          outputs match (floats: |a-e| <= atol + rtol*|e|, ONNX's backend-test default
//                 rtol=1e-3, atol=1e-7; NaN matches NaN; integers and bools exactly)
//   no-op         the model uses an operator Korch does not support (not in scope)
//   out-of-scope  a supported op, but a feature Korch declares unsupported (a dtype, an attribute
//                 value); the reason is Korch's own kUnsupported message, printed grouped by reason,
//                 or the case is listed in the expectations file with a reason
//   fail          anything else: wrong numbers, an invalid-model error, a crash, a timeout
// Exit status is non-zero iff some case fails.
//
// --f64: every case runs in float64 instead (ir/precision.h: float32 values widened, ops without a
// float64 version kept in float32 and counted by op at the end); float32 outputs are compared in
// float64 with the same tolerances. Checks that every op with float32 support also has float64.
//
// Usage: korch_conformance NODE_DIR [--expect FILE] [--filter SUBSTR] [--verbose] [--timeout S] [--fission|--f64]
//        korch_conformance --light LIGHT_DIR
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/tensor_compare.h"
#include "ir/random.h"
#include "ir/op_registry.h"
#include "ir/precision.h"
#include "pipeline/pipeline.h"
#include "support/strings.h"

namespace fs = std::filesystem;
using namespace korch;

namespace {

// --fission: every case is also lowered to primitives (fission + rewrites) before it runs, so the
// official test data checks every operator's fission rule; then operator graph and primitive graph
// are compared on seeded random inputs too (fission_random_check).
bool g_fission = false;
// --f64: cases run through to_f64 (see the header comment).
bool g_f64 = false;
constexpr const char* kKeptTag = "kept in float32: ";

enum class Outcome { kPass = 0, kNoOp = 1, kOutOfScope = 2, kFail = 3, kPassFrozen = 4, kPassRestamped = 5 };

struct Result {
  Outcome outcome;
  std::string detail;
};

std::vector<std::string> sorted_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(p.string());
  }
  return out;
}

std::string compare(const Tensor& got, const Tensor& want, double rtol, double atol) {
  const bool widened = g_f64 && got.dtype() == DType::kFloat64 && want.dtype() == DType::kFloat32;
  if (got.dtype() != want.dtype() && !widened)
    return fmt::format("dtype {} != expected {}", dtype_name(got.dtype()), dtype_name(want.dtype()));
  if (got.shape() != want.shape())
    return fmt::format("shape {} != expected {}", shape_str(got.shape()), shape_str(want.shape()));
  bool exact = !is_float(want.dtype());
  double worst = 0;
  int64_t bad = 0, first_bad = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.get_as_double(i), e = want.get_as_double(i);
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::isinf(e) && a == e) continue;
    double err = std::fabs(a - e);
    bool ok = exact ? a == e : err <= atol + rtol * std::fabs(e);
    if (!ok) {
      if (first_bad < 0) first_bad = i;
      ++bad;
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  if (!bad) return "";
  return fmt::format("{} of {} elements differ (first at {}: got {} want {}; max abs err {:.3g})", bad, want.numel(),
                     first_bad, got.get_as_double(first_bad), want.get_as_double(first_bad), worst);
}

// --fission also checks the operator graph against its primitive graph on seeded random inputs:
// float inputs replaced by U(-1, 1) and by U(-1000, 1000) (large magnitudes probe Softmax & the
// norms for overflow), other inputs (indices, shapes, masks) kept from the test data.
std::string fission_random_check(const Graph& op_graph, const Graph& prim, const fs::path& set) {
  std::vector<Tensor> data;
  for (const std::string& f : sorted_files(set, "input_")) data.push_back(load_onnx_tensor(f));
  if (data.size() != op_graph.inputs.size()) return "";  // inputs frozen into constants
  for (double scale : {1.0, 1000.0}) {
    std::mt19937_64 rng(static_cast<uint64_t>(scale));
    std::vector<Tensor> inputs;
    for (const Tensor& t : data) {
      if (!is_float(t.dtype())) { inputs.push_back(t); continue; }
      Tensor r = random_tensor(t.type(), rng);
      Tensor scaled(r.type());
      dispatch_dtype<float, double, Float16, BFloat16>(r.dtype(), "fission random check", [&](auto tag) {
        using T = decltype(tag);
        for (int64_t i = 0; i < r.numel(); ++i)
          scaled.data<T>()[i] = T(static_cast<float>(static_cast<double>(static_cast<float>(r.data<T>()[i])) * scale));
      });
      inputs.push_back(scaled);
    }
    std::vector<Tensor> want = interpret(op_graph, inputs), got = interpret(prim, inputs);
    for (size_t i = 0; i < want.size(); ++i) {
      // The primitive graph rounds intermediates to the element type where the operator's
      // reference keeps double: allow for that type's precision (f32 1e-5; f16/bf16 a few ulps).
      double tol = want[i].dtype() == DType::kFloat16 ? 4e-3 : want[i].dtype() == DType::kBFloat16 ? 3e-2 : 1e-5;
      std::string d = rel_l2_diff(got[i], want[i], tol);
      if (!d.empty()) return fmt::format("scale {}: output {}: {}", scale, i, d);
    }
  }
  return "";
}

// Some cases pass shape-carrying values (Resize scales, OneHot depth...) as graph inputs. Korch
// compiles for static shapes, so when loading fails for that reason the case is retried with the
// inputs frozen to the test data (reported as its own count).
Result run_case(const fs::path& dir, bool freeze_inputs, int assume_opset) {
  try {
    LoadOptions lo;
    lo.assume_opset = assume_opset;
    if (freeze_inputs) {
      std::vector<std::string> names = onnx_input_names((dir / "model.onnx").string());
      fs::path set0 = dir / "test_data_set_0";
      std::vector<std::string> files = sorted_files(set0, "input_");
      for (size_t i = 0; i < files.size() && i < names.size(); ++i) lo.frozen_inputs[names[i]] = load_onnx_tensor(files[i]);
    }
    Graph g_op = load_onnx((dir / "model.onnx").string(), lo);
    Graph g = g_fission ? lower_to_primitives(g_op) : g_op;
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    if (freeze_inputs && sets.size() > 1) sets.resize(1);  // frozen to set 0's inputs
    if (sets.empty()) return {Outcome::kFail, "no test_data_set"};
    std::string kept;
    if (g_f64) {
      F64Graph f = convert_to_f64(g);
      for (const std::string& k : f.kept_f32) {
        const size_t p = k.rfind(" (");  // "name (OpType)" -> OpType
        kept += (kept.empty() ? kKeptTag : ",") + k.substr(p + 2, k.size() - p - 3);
      }
      g = std::move(f.graph);
    }
    for (const fs::path& set : sets) {
      std::vector<Tensor> inputs;
      if (!freeze_inputs)
        for (const std::string& f : sorted_files(set, "input_"))
          inputs.push_back(g_f64 ? widen_to_f64(load_onnx_tensor(f)) : load_onnx_tensor(f));
      std::vector<std::string> want_files = sorted_files(set, "output_");
      // Optional inputs given as empty names are absent from g.inputs; the files cover the rest.
      if (inputs.size() != g.inputs.size())
        return {Outcome::kFail, fmt::format("{} input files for {} graph inputs", inputs.size(), g.inputs.size())};
      std::vector<Tensor> outs = interpret(g, inputs);
      if (outs.size() != want_files.size())
        return {Outcome::kFail, fmt::format("{} outputs, {} expected", outs.size(), want_files.size())};
      for (size_t i = 0; i < outs.size(); ++i) {
        Tensor want = load_onnx_tensor(want_files[i]);
        std::string diff = compare(outs[i], want, 1e-3, 1e-7);
        if (!diff.empty()) return {Outcome::kFail, fmt::format("{}: output {}: {}", set.filename().string(), i, diff)};
      }
    }
    if (g_fission) {
      std::string diff = fission_random_check(g_op, g, dir / sets[0].filename());
      if (!diff.empty()) return {Outcome::kFail, "fission on random inputs: " + diff};
    }
    return {Outcome::kPass, kept};
  } catch (const Error& e) {
    std::string msg = e.what();
    // Drop the model path so identical reasons group together.
    std::string model_path = (dir / "model.onnx").string() + ": ";
    for (size_t p; (p = msg.find(model_path)) != std::string::npos;) msg.erase(p, model_path.size());
    if (e.code() == ErrorCode::kUnsupported) {
      bool no_op = msg.find("unsupported operator") != std::string::npos ||
                   msg.find("is supported for opsets") != std::string::npos;
      // Keep just Korch's reason (after the last "): " context prefix) so reasons group well.
      size_t p = msg.rfind("): ");
      return {no_op ? Outcome::kNoOp : Outcome::kOutOfScope, p == std::string::npos ? msg : msg.substr(p + 3)};
    }
    return {Outcome::kFail, msg};
  } catch (const std::exception& e) {
    return {Outcome::kFail, std::string("exception: ") + e.what()};
  }
}

// Runs run_case in a child process; maps crashes and timeouts to failures.
Result run_isolated(const fs::path& dir, int timeout_s) {
  int fds[2];
  if (pipe(fds) != 0) return {Outcome::kFail, "pipe() failed"};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_s));
    // Operators whose only tests in onnx 1.22 are stamped opset 23+ are retried as opset 22
    // (Korch's newest); for the ops Korch supports, those versions only add element types.
    int opset = 0;
    Result r = run_case(dir, false, opset);
    if (r.outcome == Outcome::kOutOfScope && r.detail.find("Korch supports default-domain opsets") != std::string::npos &&
        r.detail.find("model uses opset 2") != std::string::npos) {
      opset = kMaxOpset;
      Result re = run_case(dir, false, opset);
      if (re.outcome == Outcome::kPass) r = {Outcome::kPassRestamped, re.detail};
      else if (re.outcome != Outcome::kNoOp) r = re;
    }
    bool restamped = opset != 0;
    if (r.outcome == Outcome::kOutOfScope && r.detail.find("must be a compile-time constant") != std::string::npos) {
      Result frozen = run_case(dir, true, opset);
      if (frozen.outcome == Outcome::kPass)
        r = {restamped ? Outcome::kPassRestamped : Outcome::kPassFrozen, frozen.detail.empty() ? "frozen" : frozen.detail};
      else if (frozen.outcome == Outcome::kFail) r = {Outcome::kFail, "with inputs frozen: " + frozen.detail};
    }
    if (restamped && r.outcome == Outcome::kFail) r.detail = "as opset 22: " + r.detail;
    std::string msg = std::to_string(static_cast<int>(r.outcome)) + "\n" + r.detail;
    ssize_t w = write(fds[1], msg.data(), msg.size());
    (void)w;
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string buf;
  char tmp[4096];
  ssize_t n;
  while ((n = read(fds[0], tmp, sizeof tmp)) > 0) buf.append(tmp, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return {Outcome::kFail, sig == SIGALRM ? fmt::format("timed out after {} s", timeout_s)
                                           : fmt::format("crashed with signal {} ({})", sig, strsignal(sig))};
  }
  size_t nl = buf.find('\n');
  if (nl == std::string::npos) return {Outcome::kFail, "child produced no result"};
  return {static_cast<Outcome>(std::stoi(buf.substr(0, nl))), buf.substr(nl + 1)};
}

// Expectations file: "case_name<whitespace>reason..." per line; '#' comments.
std::map<std::string, std::string> read_expectations(const std::string& path) {
  std::map<std::string, std::string> out;
  if (path.empty()) return out;
  std::ifstream f(path);
  if (!f) {
    fmt::print(stderr, "cannot read expectations file {}\n", path);
    std::exit(2);
  }
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string name, reason;
    ss >> name;
    std::getline(ss, reason);
    size_t b = reason.find_first_not_of(" \t");
    out[name] = b == std::string::npos ? "" : reason.substr(b);
  }
  return out;
}

// The model-zoo topologies in onnx's backend/test/data/light: weights come from ConstantOfShape
// nodes and the expected output was produced from an all-zero input. A smoke test of whole-model
// loading, folding and execution.
int run_light_models(const fs::path& dir) {
  int failed = 0, total = 0;
  if (!fs::is_directory(dir)) {
    fmt::print(stderr, "light model folder {} not found (run scripts/install_deps.sh)\n", dir.string());
    return 2;
  }
  for (const auto& e : fs::directory_iterator(dir)) {
    std::string file = e.path().filename().string();
    if (e.path().extension() != ".onnx") continue;
    ++total;
    std::string stem = e.path().stem().string();
    auto t0 = std::chrono::steady_clock::now();
    std::string verdict;
    try {
      Graph g = load_onnx(e.path().string());
      std::vector<Tensor> inputs;
      for (ValueId v : g.inputs) inputs.emplace_back(g.type(v));
      std::vector<Tensor> outs = interpret(g, inputs);
      Tensor want = load_onnx_tensor((dir / (stem + "_output_0.pb")).string());
      verdict = compare(outs.at(0), want, 1e-3, 1e-7);
    } catch (const std::exception& ex) {
      verdict = ex.what();
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{:<5} {:<28} {:6.2f} s {}\n", verdict.empty() ? "PASS" : "FAIL", stem, secs, verdict);
    failed += !verdict.empty();
  }
  if (total == 0) {
    // Debian's libonnx-testdata fallback (scripts/install_deps.sh) has no light models.
    fmt::print("no light models in {} (fallback test data); nothing to check\n", dir.string());
    return 0;
  }
  fmt::print("{} passed, {} failed\n", total - failed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--light") return run_light_models(argv[2]);
  if (argc < 2) {
    fmt::print(stderr, "usage: {} NODE_DIR [--expect FILE] [--filter SUBSTR] [--verbose] [--timeout S]\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  std::string expect_file, filter;
  bool verbose = false;
  int timeout_s = 120;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--expect" && i + 1 < argc) expect_file = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--timeout" && i + 1 < argc) timeout_s = std::stoi(argv[++i]);
    else if (a == "--verbose") verbose = true;
    else if (a == "--fission") g_fission = true;
    else if (a == "--f64") g_f64 = true;
    else { fmt::print(stderr, "unknown argument {}\n", a); return 2; }
  }
  if (!fs::is_directory(root)) {
    fmt::print(stderr, "conformance data not found at {} (run scripts/install_deps.sh)\n", root.string());
    return 2;
  }
  auto expected = read_expectations(expect_file);
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        (filter.empty() || e.path().filename().string().find(filter) != std::string::npos))
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());

  int counts[6] = {0, 0, 0, 0, 0, 0};
  std::map<std::string, std::vector<std::string>> out_of_scope;  // reason -> cases
  std::vector<std::pair<std::string, std::string>> failures;
  std::vector<std::string> stale;
  std::map<std::string, std::vector<std::string>> kept_f32;  // --f64: op kept in float32 -> passing cases
  auto t0 = std::chrono::steady_clock::now();
  for (const fs::path& c : cases) {
    std::string name = c.filename().string();
    Result r = run_isolated(c, timeout_s);
    auto ex = expected.find(name);
    if (r.outcome == Outcome::kFail && ex != expected.end()) {
      r = {Outcome::kOutOfScope, ex->second + " [listed]"};
    } else if ((r.outcome == Outcome::kPass || r.outcome == Outcome::kPassFrozen || r.outcome == Outcome::kPassRestamped) &&
               ex != expected.end()) {
      stale.push_back(name);
    }
    counts[static_cast<int>(r.outcome)]++;
    if (r.outcome == Outcome::kOutOfScope) out_of_scope[r.detail].push_back(name);
    if (r.outcome == Outcome::kFail) failures.emplace_back(name, r.detail);
    if (r.outcome != Outcome::kFail && r.detail.rfind(kKeptTag, 0) == 0) {
      std::set<std::string> ops;
      for (const std::string& op : split(r.detail.substr(std::strlen(kKeptTag)), ',')) ops.insert(op);
      for (const std::string& op : ops) kept_f32[op].push_back(name);
    }
    if (verbose) {
      static const char* names[] = {"PASS", "NO-OP", "SCOPE", "FAIL", "PASS*", "PASS22"};
      fmt::print("{:<6} {} {}\n", names[static_cast<int>(r.outcome)], name, r.detail);
    }
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  fmt::print("\nOut of scope (supported op, unsupported feature), by reason:\n");
  for (const auto& [reason, names] : out_of_scope) {
    fmt::print("  {:4}  {}\n", names.size(), reason);
    for (const auto& n : names) fmt::print("          {}\n", n);
  }
  if (g_f64) {
    fmt::print("\nRun in float64; ops kept in float32 (no float64 version), by op: cases\n");
    for (const auto& [op, names] : kept_f32) fmt::print("  {:4}  {}\n", names.size(), op);
  }
  if (!stale.empty()) {
    fmt::print("\nListed as out of scope but now passing (remove from {}):\n", expect_file);
    for (const auto& n : stale) fmt::print("  {}\n", n);
  }
  if (!failures.empty()) {
    fmt::print("\nFAILURES:\n");
    for (const auto& [n, d] : failures) fmt::print("  {}: {}\n", n, d);
  }
  int supported = counts[0] + counts[2] + counts[3] + counts[4] + counts[5];
  fmt::print("\nONNX backend node tests in {}{}: {} cases in {:.1f} s\n", root.string(),
             g_fission ? " (lowered to primitives: fission + rewrites)" : g_f64 ? " (in float64: to_f64)" : "",
             cases.size(), secs);
  fmt::print("  cases with only supported ops: {}\n", supported);
  fmt::print("    passed:         {}\n", counts[0]);
  fmt::print("    passed with shape inputs frozen to constants: {}\n", counts[4]);
  fmt::print("    passed when read as opset 22 (onnx ships them at opset 23+ only): {}\n", counts[5]);
  fmt::print("    out of scope:   {}\n", counts[2]);
  fmt::print("    failed:         {}\n", counts[3]);
  fmt::print("  cases using an unsupported op: {}\n", counts[1]);
  return counts[3] == 0 ? 0 : 1;
}
