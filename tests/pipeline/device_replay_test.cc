// The executor on a device without host memory that records kernel sequences (what the CUDA
// runtime does with CUDA graphs), checked on the host: a recording device wraps the CUDA emulator,
// keeps its buffers apart from the caller's (every copy counted) and, like a CUDA graph, bakes
// the pointers each kernel was issued with into the record. A replay that ran kernels on stale
// buffers, a copy too many, or a weight uploaded twice shows here without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include <random>

#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/tensor_compare.h"
#include "ir/text_format.h"
#include "pipeline/compile.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/executable.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

struct Log {
  int uploads = 0, downloads = 0, issued = 0, captures = 0, replays = 0;
  int64_t uploaded_bytes = 0;
  bool recording = false;
  std::vector<std::function<void()>>* record = nullptr;
};

// A kernel of the wrapped device: run when issued, or recorded with this issue's pointers.
class RecordingKernel : public runtime::DeviceKernel {
 public:
  RecordingKernel(std::unique_ptr<runtime::DeviceKernel> k, bool reference, size_t ni, size_t no, Log& log)
      : k_(std::move(k)), reference_(reference), ni_(ni), no_(no), log_(log) {}
  bool capturable() const override { return !reference_; }
  void run(const void* const* inputs, void* const* outputs) override {
    if (log_.recording) {
      EXPECT_FALSE(reference_) << "a kernel that needs the host was recorded";
      std::vector<const void*> in(inputs, inputs + ni_);
      std::vector<void*> out(outputs, outputs + no_);
      log_.record->push_back([this, in, out] { k_->run(in.data(), out.data()); });
      return;
    }
    ++log_.issued;
    k_->run(inputs, outputs);
  }

 private:
  std::unique_ptr<runtime::DeviceKernel> k_;
  bool reference_;
  size_t ni_, no_;
  Log& log_;
};

class RecordedSequence : public runtime::Replay {
 public:
  RecordedSequence(std::vector<std::function<void()>> steps, Log& log) : steps_(std::move(steps)), log_(log) {}
  void launch() override {
    ++log_.replays;
    for (auto& s : steps_) s();
  }

 private:
  std::vector<std::function<void()>> steps_;
  Log& log_;
};

class RecordingDevice : public runtime::Device {
 public:
  explicit RecordingDevice(Log& log) : inner_(cuda::make_emulator_device()), log_(log) {}
  std::string name() const override { return "recording"; }
  std::string id() const override { return "recording"; }
  bool host_memory() const override { return false; }
  void* alloc(int64_t bytes) override { return inner_->alloc(bytes); }
  void free(void* p) override { inner_->free(p); }
  void upload(void* dst, const void* src, int64_t bytes) override {
    ++log_.uploads;
    log_.uploaded_bytes += bytes;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void download(void* dst, const void* src, int64_t bytes) override {
    ++log_.downloads;
    std::memcpy(dst, src, static_cast<size_t>(bytes));
  }
  void synchronize() override {}
  bool uses_module(const nlohmann::json& r) const override { return inner_->uses_module(r); }
  std::shared_ptr<runtime::KernelModule> load_module(const std::string& dir) override { return inner_->load_module(dir); }
  std::unique_ptr<runtime::DeviceKernel> make_kernel(const nlohmann::json& r,
                                                     std::shared_ptr<runtime::KernelModule> m) override {
    return std::make_unique<RecordingKernel>(inner_->make_kernel(r, std::move(m)), r.contains("reference_graph"),
                                             r.at("inputs").size(), r.at("outputs").size(), log_);
  }
  std::unique_ptr<runtime::Replay> capture(const std::function<void()>& issue, std::string*) override {
    ++log_.captures;
    std::vector<std::function<void()>> steps;
    log_.record = &steps;
    log_.recording = true;
    issue();
    log_.recording = false;
    return std::make_unique<RecordedSequence>(std::move(steps), log_);
  }

 private:
  std::unique_ptr<runtime::Device> inner_;
  Log& log_;
};

// Two 3x3 convolutions (library calls) with generated kernels between and after them.
Graph small_cnn() {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  auto values = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += fmt::format("{}{:.4f}", i ? ", " : "", u(rng));
    return "[" + s + "]";
  };
  return parse_graph(fmt::format(R"(graph t (opset 17) {{
  input x: f32[1,4,8,8]
  const w1: f32[8,4,3,3] = {}
  const w2: f32[4,8,3,3] = {}
  %a: f32[1,8,8,8] = Conv(x, w1) {{pads=[1,1,1,1]}}
  %b: f32[1,8,8,8] = Sigmoid(a)
  %c: f32[1,8,8,8] = Mul(a, b)
  %d: f32[1,4,8,8] = Conv(c, w2) {{pads=[1,1,1,1]}}
  %y: f32[1,4,8,8] = Tanh(d)
  output y
}})",
                                 values(8 * 4 * 9), values(4 * 8 * 9)));
}

class DeviceReplay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-pipeline-tests", 1);
  }
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("korch_replay_" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<runtime::Executable> load(const Graph& g, Log& log) {
    CompileOptions o;
    o.target = "cuda";
    o.cost = CostSource::kAnalytic;
    o.model_name = "replay";
    compile_model(g, dir_.string(), o);
    runtime::LoadOptions lo;
    lo.open_device = [&log](const std::string& tag, const runtime::DeviceOptions&) {
      EXPECT_EQ(tag, "cuda");
      return std::make_unique<RecordingDevice>(log);
    };
    return runtime::Executable::load(dir_.string(), lo);
  }
  fs::path dir_;
};

TEST_F(DeviceReplay, SecondRunRecordsTheSequenceAndLaterRunsReplayItOnFreshInputs) {
  const Graph g = small_cnn();
  Log log;
  auto exe = load(g, log);
  const int64_t weights = exe->memory().weights_bytes;
  ASSERT_GT(weights, 0);
  EXPECT_EQ(log.uploads, 1) << "the weights, once";
  EXPECT_EQ(log.uploaded_bytes, weights);
  const int kernels = static_cast<int>(exe->kernel_count());
  ASSERT_GT(kernels, 1);

  for (int run = 0; run < 4; ++run) {
    const Log before = log;
    const std::vector<Tensor> inputs = random_inputs(g, 100 + run);  // new values every run
    const std::vector<Tensor> got = exe->run(inputs), want = interpret(g, inputs);
    for (size_t o = 0; o < got.size(); ++o) EXPECT_EQ(rel_l2_diff(got[o], want[o], 1e-4), "") << "run " << run;
    EXPECT_EQ(log.uploads - before.uploads, static_cast<int>(inputs.size())) << "inputs once per run";
    EXPECT_EQ(log.downloads - before.downloads, static_cast<int>(got.size())) << "outputs once per run";
    if (run == 0) {
      EXPECT_EQ(log.issued - before.issued, kernels);  // eager: libraries settle in
      EXPECT_FALSE(exe->replaying());
    } else {
      EXPECT_EQ(log.issued, before.issued) << "run " << run << " issued kernels one by one";
      EXPECT_EQ(log.replays - before.replays, 1);
      EXPECT_TRUE(exe->replaying());
    }
  }
  EXPECT_EQ(log.captures, 1);
  EXPECT_NE(exe->replay_status().find("replayed"), std::string::npos) << exe->replay_status();

  // Per-kernel timing needs the kernels one by one, between clock reads.
  exe->set_step_timing(true);
  const Log before = log;
  exe->run(random_inputs(g, 9));
  EXPECT_EQ(log.issued - before.issued, kernels);
  EXPECT_EQ(log.replays, before.replays);
}

TEST_F(DeviceReplay, AKernelThatNeedsTheHostKeepsTheSequenceEager) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[4,16]
  const k: i64[1] = [3]
  %r: f32[4,16] = Relu(x)
  %v: f32[4,3], %i: i64[4,3] = TopK(r, k) {axis=1}
  %y: f32[4,3] = Neg(v)
  output y, i
})");
  Log log;
  auto exe = load(g, log);
  for (int run = 0; run < 3; ++run) {
    const std::vector<Tensor> inputs = random_inputs(g, run);
    const std::vector<Tensor> got = exe->run(inputs), want = interpret(g, inputs);
    for (size_t o = 0; o < got.size(); ++o) EXPECT_EQ(rel_l2_diff(got[o], want[o], 1e-4), "");
  }
  EXPECT_EQ(log.captures, 0);
  EXPECT_FALSE(exe->replaying());
  EXPECT_NE(exe->replay_status().find("needs the host"), std::string::npos) << exe->replay_status();
}

}  // namespace
}  // namespace korch
