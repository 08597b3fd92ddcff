// The whole-model check (pipeline/model_check.h): the float32 rule, the float64 rule for an
// ill-conditioned model, vacuous outputs, and an artifact whose weights were tampered with.
#include "pipeline/model_check.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/text_format.h"
#include "pipeline/compile.h"
#include "support/file_io.h"
#include "temp_dir.h"

namespace korch {
namespace {

Tensor scaled(const Tensor& t, float by) {
  Tensor out = t.clone();
  for (int64_t i = 0; i < out.numel(); ++i) out.data<float>()[i] *= by;
  return out;
}

TEST(ModelCheck, WithinTheToleranceOfTheReferencePasses) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[64]
  %y: f32[64] = Tanh(x)
  output y
})");
  const std::vector<Tensor> in = random_inputs(g, 0);
  const Tensor want = interpret(g, in)[0];
  ModelCheck c = check_model_outputs(g, in, {scaled(want, 1 + 5e-5f)});
  EXPECT_TRUE(c.passed) << c.failure();
  EXPECT_FALSE(c.ran_f64);
  EXPECT_NEAR(c.worst, 5e-5, 1e-6);
  EXPECT_EQ(c.failure(), "");
  c = check_model_outputs(g, in, {scaled(want, 1 + 1e-3f)});  // 1e-3 off: the float64 run agrees with the reference
  EXPECT_FALSE(c.passed);
  EXPECT_TRUE(c.ran_f64);
  EXPECT_NE(c.failure().find("output 'y' differs from the reference interpreter by 0.001"), std::string::npos)
      << c.failure();
}

// (x + 3e7) - 3e7 in float32 keeps x only to float32's spacing at 3e7 (2): the float32 reference is
// far from exact, and an output as close to the float64 run passes, though far from the reference.
TEST(ModelCheck, AnIllConditionedModelIsJudgedAgainstItsFloat64Run) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[256]
  const big: f32[] = [30000000.0]
  %a: f32[256] = Add(x, big)
  %y: f32[256] = Sub(a, big)
  output y
})");
  const std::vector<Tensor> in = random_inputs(g, 1);
  const Tensor exact = in[0];  // what float64 computes, exactly representable in float32
  ModelCheck c = check_model_outputs(g, in, {exact});
  EXPECT_GT(c.outputs[0].error, 1e-1);  // far from the float32 reference
  EXPECT_TRUE(c.passed) << c.failure();
  EXPECT_TRUE(c.ran_f64);
  EXPECT_LT(c.outputs[0].to_f64, 1e-7);
  EXPECT_GT(c.outputs[0].reference_to_f64, 1e-1);
  c = check_model_outputs(g, in, {scaled(exact, 3.0f)});  // farther from float64 than the reference is
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.failure().find("from its float64 run"), std::string::npos) << c.failure();
}

TEST(ModelCheck, AnOutputOfOneValueMakesItVacuous) {
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[8]
  const z: f32[] = [0.0]
  %y: f32[8] = Mul(x, z)
  %w: f32[8] = Relu(x)
  output y
  output w
})");
  const std::vector<Tensor> in = random_inputs(g, 2);
  const std::vector<Tensor> want = interpret(g, in);
  const ModelCheck c = check_model_outputs(g, in, want);
  EXPECT_TRUE(c.passed);
  EXPECT_EQ(c.vacuous, std::vector<std::string>{"y"});
}

// compile_model's step 10 records the check in the manifest; an artifact checked against a model
// it does not compute (other weights) fails, naming the output.
TEST(ModelCheck, ACompiledArtifactAndAModelItDoesNotCompute) {
  if (!std::getenv("KORCH_CACHE_DIR")) setenv("KORCH_CACHE_DIR", "/tmp/korch-cache-pipeline-tests", 1);
  testing::TempDir dir{"korch-model-check"};
  const Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[2,8]
  const w: f32[8,4] = [0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2, 0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8, 0.9, 1.0, -1.1, 1.2, 0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, -0.8]
  %m: f32[2,4] = MatMul(x, w)
  %y: f32[2,4] = Sigmoid(m)
  output y
})");
  CompileOptions o;
  o.cost = CostSource::kAnalytic;
  o.model_check = true;
  const std::string out = dir.path().string();
  const CompileResult r = compile_model(g, out, o);
  ASSERT_TRUE(r.check);
  EXPECT_TRUE(r.check->passed) << r.check->failure();
  const auto manifest = nlohmann::json::parse(read_file_bytes((dir.path() / "manifest.json").string()));
  EXPECT_TRUE(manifest.at("model_check").at("passed").get<bool>());
  EXPECT_LT(manifest.at("model_check").at("worst_rel_l2_error").get<double>(), 1e-4);
  Graph other = g;  // w's first element negated
  for (Value& v : other.values)
    if (v.is_constant() && v.name == "w") {
      Tensor w = v.constant->clone();
      w.data<float>()[0] = -w.data<float>()[0];
      v.constant = std::make_shared<const Tensor>(std::move(w));
    }
  const ModelCheck c = check_artifact(other, out, 0, 2);
  EXPECT_FALSE(c.passed);
  EXPECT_NE(c.failure().find("output 'y'"), std::string::npos) << c.failure();
}

}  // namespace
}  // namespace korch
