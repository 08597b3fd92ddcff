// write_artifact -> Executable::load -> run, against the reference interpreter, with hand-written
// CPU kernel functions (the argument convention of runtime/cpu/cpu_kernel.h: inputs, then outputs)
// in a CPU module (runtime/cpu/cpu_module.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ir/interpreter.h"
#include "ir/random.h"
#include "runtime/artifact.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/cpu_module.h"
#include "runtime/executable.h"
#include "support/file_io.h"

namespace korch::runtime {
namespace {

namespace fs = std::filesystem;

const TensorType k23{DType::kFloat32, {2, 3}};
const TensorType k32{DType::kFloat32, {3, 2}};

// x, y: f32[2,3]; w: f32[2,3] weight; half: scalar (baked).
//   a = Add(x, y); r = Relu(a); h = Mul(Mul(r, w), half); t = Transpose(h); u = Relu(t)
// Outputs: t, r, u, y (a graph input) and w (a constant): both last two are copied.
Graph test_graph() {
  Graph g;
  g.name = "toy";
  ValueId x = g.add_input("x", k23), y = g.add_input("y:1", k23);
  ValueId w = g.add_constant("w", Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3}));
  ValueId half = g.add_constant("half", Tensor::scalar<float>(0.5f));
  auto node = [&](const char* op, std::vector<ValueId> in, const char* out, const TensorType& t, Attributes at = {}) {
    ValueId v = g.add_value(out, t);
    g.add_node(Node{out, op, "", std::move(in), {v}, std::move(at)});
    return v;
  };
  ValueId a = node("Add", {x, y}, "a", k23);
  ValueId r = node("Relu", {a}, "r", k23);
  ValueId m = node("Mul", {r, w}, "m", k23);
  ValueId h = node("Mul", {m, half}, "h", k23);
  Attributes perm;
  perm.set("perm", std::vector<int64_t>{1, 0});
  ValueId t = node("Transpose", {h}, "t", k32, perm);
  ValueId u = node("Relu", {t}, "u", k32);
  g.outputs = {t, r, u, y, w};
  return g;
}

nlohmann::json recipe(const char* symbol, std::vector<TensorType> in, std::vector<TensorType> out) {
  cpu::CpuKernelRecipe r;
  r.symbol = symbol;
  r.inputs = std::move(in);
  r.outputs = std::move(out);
  return r.to_json();
}

HostCompilerConfig test_compiler() {
  HostCompilerConfig c;
  c.flags = {"-std=c++17", "-O1", "-fPIC", "-shared", "-w"};
  c.key_extra = "artifact-test";
  return c;
}

// The pipeline would produce these from a plan; here they are written by hand. Kernel 4 (relu
// over f32[3,2]) reuses kernel 1's function: one symbol, in the module once.
ArtifactContents test_contents(const Graph& g) {
  auto v = [&](const char* name) { return g.find_value(name); };
  ArtifactContents c;
  c.graph = &g;
  c.device = "cpu";
  c.kernels.push_back({recipe("k_add", {k23, k23}, {k23}), {v("x"), v("y:1"), v("a")}, "Add"});
  c.kernels.push_back({recipe("k_relu", {k23}, {k23}), {v("a"), v("r")}, "Relu"});
  c.kernels.push_back({recipe("k_mul_half", {k23, k23}, {k23}), {v("r"), v("w"), v("h")}, "Mul, Mul(half baked)"});
  c.kernels.push_back({recipe("k_transpose", {k23}, {k32}), {v("h"), v("t")}, "Transpose"});
  c.kernels.push_back({recipe("k_relu", {k32}, {k32}), {v("t"), v("u")}, "Relu"});
  const std::string source =
      "#include <stdint.h>\n#define ARG(T, i) ((T*)args[i])\n"
      "extern \"C\" void k_add(void* const* args) {\n"
      "  for (int i = 0; i < 6; ++i) ARG(float, 2)[i] = ARG(const float, 0)[i] + ARG(const float, 1)[i];\n}\n"
      "extern \"C\" void k_relu(void* const* args) {\n"
      "  for (int i = 0; i < 6; ++i) { float a = ARG(const float, 0)[i]; ARG(float, 1)[i] = a > 0 ? a : 0; }\n}\n"
      "extern \"C\" void k_mul_half(void* const* args) {\n"
      "  for (int i = 0; i < 6; ++i) ARG(float, 2)[i] = ARG(const float, 0)[i] * ARG(const float, 1)[i] * 0.5f;\n}\n"
      "extern \"C\" void k_transpose(void* const* args) {\n"
      "  for (int i = 0; i < 2; ++i) for (int j = 0; j < 3; ++j)\n"
      "    ARG(float, 1)[j * 2 + i] = ARG(const float, 0)[i * 3 + j];\n}\n";
  c.write_module = [source](const std::string& dir) {
    return nlohmann::json{{"generator_version", 7}, {"compiler", cpu::write_cpu_module(dir, source, true, test_compiler())}};
  };
  c.manifest_extra = {{"plan_summary", "5 kernels"}, {"model", "toy.onnx"}};
  return c;
}

double rel_l2(const Tensor& out, const Tensor& ref) {
  auto o = out.to_float_vector(), r = ref.to_float_vector();
  double num = 0, den = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    num += (o[i] - r[i]) * (o[i] - r[i]);
    den += r[i] * r[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

class ArtifactTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-runtime-tests", 1);
  }
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("korch_artifact_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(getpid()));
    fs::remove_all(dir_);
    g_ = test_graph();
    write_artifact(dir_.string(), test_contents(g_));
  }
  // KORCH_KEEP_ARTIFACTS=1 leaves the folders in $TMPDIR for a look.
  void TearDown() override {
    if (!std::getenv("KORCH_KEEP_ARTIFACTS")) fs::remove_all(dir_);
  }

  void expect_matches_reference(Executable& exe, uint64_t seed) {
    std::vector<Tensor> inputs = random_inputs(g_, seed);
    std::vector<Tensor> got = exe.run(inputs), want = interpret(g_, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].type(), want[i].type()) << exe.output_names()[i];
      EXPECT_LE(rel_l2(got[i], want[i]), 1e-6) << exe.output_names()[i];
    }
  }

  // Message of the korch::Error that loading throws ("" if none).
  std::string load_error() {
    try {
      Executable::load(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  Graph g_;
};

TEST_F(ArtifactTest, RunsLikeTheInterpreter) {
  auto exe = Executable::load(dir_.string());
  EXPECT_FALSE(exe->rebuilt_library());
  EXPECT_EQ(exe->input_names(), (std::vector<std::string>{"x", "y:1"}));
  EXPECT_EQ(exe->output_names(), (std::vector<std::string>{"t", "r", "u", "y:1", "w"}));
  EXPECT_EQ(exe->input_types()[0], k23);
  EXPECT_EQ(exe->output_types()[0], k32);
  EXPECT_EQ(exe->kernel_count(), 5u);
  for (uint64_t seed : {1, 2, 3}) expect_matches_reference(*exe, seed);  // the arena is reused across runs
}

TEST_F(ArtifactTest, FilesAndMemoryReport) {
  for (const char* f : {"manifest.json", "program.json", "weights.bin", "kernels/kernels.cc", "kernels/build.sh",
                        "kernels/libkernels.so"})
    EXPECT_TRUE(fs::exists(dir_ / f)) << f;
  auto manifest = nlohmann::json::parse(read_file_bytes((dir_ / "manifest.json").string()));
  EXPECT_EQ(manifest["format"], "korch-artifact");
  EXPECT_EQ(manifest["version"], 1);
  EXPECT_EQ(manifest["generator_version"], 7);  // the module's fields
  EXPECT_EQ(manifest["device"], "cpu");
  EXPECT_EQ(manifest["model"], "toy.onnx");  // caller's extra fields win
  EXPECT_EQ(manifest["plan_summary"], "5 kernels");
  EXPECT_NE(manifest["compiler"]["command"].get<std::string>().find("kernels.cc"), std::string::npos);
  EXPECT_TRUE(manifest.contains("created"));
  EXPECT_NE(read_file_bytes((dir_ / "kernels/build.sh").string()).find("kernels.cc"), std::string::npos);

  auto exe = Executable::load(dir_.string());
  MemoryReport m = exe->memory();
  // Intermediates a [0,1] and h [2,3] share offset 0; unfused adds m, live with h.
  EXPECT_EQ(m.arena_bytes, 64);
  EXPECT_EQ(manifest["peak_intermediate_bytes"], 64);  // the arena, recorded for every compile
  EXPECT_EQ(m.intermediate_bytes, 128);
  EXPECT_EQ(m.unfused_arena_bytes, 128);
  EXPECT_EQ(m.weights_bytes, 64);  // w only: half is baked
  EXPECT_EQ(fs::file_size(dir_ / "weights.bin"), 64u);
}

TEST_F(ArtifactTest, RebuildsAMissingOrBrokenLibrary) {
  fs::remove(dir_ / "kernels/libkernels.so");
  {
    auto exe = Executable::load(dir_.string());
    EXPECT_TRUE(exe->rebuilt_library());
    expect_matches_reference(*exe, 4);
  }
  { std::ofstream(dir_ / "kernels/libkernels.so", std::ios::trunc) << "not an ELF file"; }
  auto exe = Executable::load(dir_.string());
  EXPECT_TRUE(exe->rebuilt_library());
  expect_matches_reference(*exe, 5);
}

TEST_F(ArtifactTest, MissingCompilerIsAClearError) {
  fs::remove(dir_ / "kernels/libkernels.so");
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", "/nonexistent", 1);
  std::string msg = load_error();
  setenv("PATH", path.c_str(), 1);
  EXPECT_NE(msg.find("libkernels.so is missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not installed"), std::string::npos) << msg;
}

TEST_F(ArtifactTest, CorruptProgramNamesTheFile) {
  std::string text = read_file_bytes((dir_ / "program.json").string());
  { std::ofstream(dir_ / "program.json", std::ios::trunc) << text.substr(0, text.size() / 2); }
  EXPECT_NE(load_error().find("program.json"), std::string::npos);

  auto j = nlohmann::json::parse(text);
  j["buffers"].back()["offset"] = 1 << 20;  // an arena buffer far outside the arena
  { std::ofstream(dir_ / "program.json", std::ios::trunc) << j.dump(); }
  std::string msg = load_error();
  EXPECT_NE(msg.find("program.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("does not fit"), std::string::npos) << msg;

  j = nlohmann::json::parse(text);
  j["kernels"][0]["args"][0] = 99;
  { std::ofstream(dir_ / "program.json", std::ios::trunc) << j.dump(); }
  EXPECT_NE(load_error().find("program.json"), std::string::npos);

  j = nlohmann::json::parse(text);
  j["kernels"][2].erase("args");
  { std::ofstream(dir_ / "program.json", std::ios::trunc) << j.dump(); }
  msg = load_error();
  EXPECT_NE(msg.find("program.json"), std::string::npos) << msg;

  j = nlohmann::json::parse(text);
  j["denormals"] = "zero";
  { std::ofstream(dir_ / "program.json", std::ios::trunc) << j.dump(); }
  msg = load_error();
  EXPECT_NE(msg.find("program.json: \"denormals\" is \"zero\""), std::string::npos) << msg;
}

TEST_F(ArtifactTest, MissingOrShortWeightsNamesTheFile) {
  std::string blob = read_file_bytes((dir_ / "weights.bin").string());
  { std::ofstream(dir_ / "weights.bin", std::ios::trunc) << blob.substr(0, 10); }
  EXPECT_NE(load_error().find("weights.bin"), std::string::npos);
  fs::remove(dir_ / "weights.bin");
  EXPECT_NE(load_error().find("weights.bin"), std::string::npos);
}

// Weights changed after compile (a flipped byte, the same size) or grown are refused at load,
// naming the file, instead of running with wrong values.
TEST_F(ArtifactTest, ChangedOrGrownWeightsAreRefused) {
  const std::string blob = read_file_bytes((dir_ / "weights.bin").string());
  ASSERT_FALSE(blob.empty());
  std::string flipped = blob;
  flipped[blob.size() / 2] = static_cast<char>(flipped[blob.size() / 2] ^ 0x10);
  write_file_bytes((dir_ / "weights.bin").string(), flipped);
  std::string msg = load_error();
  EXPECT_NE(msg.find("weights.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("checksum"), std::string::npos) << msg;
  write_file_bytes((dir_ / "weights.bin").string(), blob + blob);
  msg = load_error();
  EXPECT_NE(msg.find("weights.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not the weights"), std::string::npos) << msg;
  write_file_bytes((dir_ / "weights.bin").string(), blob);
  EXPECT_EQ(load_error(), "");
}

TEST_F(ArtifactTest, NotAnArtifact) {
  fs::remove(dir_ / "manifest.json");
  std::string msg = load_error();
  EXPECT_NE(msg.find("manifest.json is missing"), std::string::npos) << msg;
  fs::remove_all(dir_);
  msg = load_error();
  EXPECT_NE(msg.find("does not exist"), std::string::npos) << msg;
}

TEST_F(ArtifactTest, ADeviceThisMachineCannotRunIsAClearError) {
  auto j = nlohmann::json::parse(read_file_bytes((dir_ / "manifest.json").string()));
  j["device"] = "cuda";
  { std::ofstream(dir_ / "manifest.json", std::ios::trunc) << j.dump(); }
  try {
    Executable::load(dir_.string());
    FAIL() << "a CUDA artifact loaded without the CUDA runtime";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    EXPECT_NE(std::string(e.what()).find("GPU"), std::string::npos) << e.what();  // no GPU here, or no runtime yet
    EXPECT_NE(std::string(e.what()).find("--emulate"), std::string::npos) << e.what();
  }
  j["device"] = "tpu";
  { std::ofstream(dir_ / "manifest.json", std::ios::trunc) << j.dump(); }
  EXPECT_NE(load_error().find("unknown device 'tpu'"), std::string::npos) << load_error();
}

TEST_F(ArtifactTest, WrongInputNamesTheInput) {
  auto exe = Executable::load(dir_.string());
  std::vector<Tensor> inputs = {Tensor(k23), Tensor(k32)};
  try {
    exe->run(inputs);
    FAIL() << "a wrong shape ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'y:1'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(exe->run({Tensor(k23)}), Error);
  EXPECT_THROW(exe->run({Tensor(k23), Tensor(DType::kInt64, {2, 3})}), Error);
}

}  // namespace
}  // namespace korch::runtime
