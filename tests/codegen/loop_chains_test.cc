// Fused chains as fission produces them (softmax, layernorm, GELU, head reshapes...), kernels
// with several outputs, and the built-in models' every loop candidate.
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen/loop_kernel.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "loop_cases.h"
#include "pipeline/pipeline.h"

namespace korch::testing {
namespace {

TEST(LoopKernel, FusedChainsMatchTheReference) {
  std::vector<LoopCaseResult> results = run_loop_cases(chain_cases());
  for (const LoopCaseResult& r : results) {
    EXPECT_TRUE(r.built) << r.name << ": " << r.reason;
    EXPECT_TRUE(!r.built || r.ok) << r.name << ": " << r.message;
  }
}

// The reductions in scratch buffers and the exp in the output (AFusedSoftmaxComputesEachExpOnce):
// nothing else is materialised.
TEST(LoopKernel, SoftmaxMaterialisesTheReductionsAndItsExp) {
  GraphBuilder b;
  Shape s{4, 32};
  ValueId x = b.f32("x", s);
  LoopCase c = whole_graph_case("softmax", b.finish({softmax(b, x, s)}));
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, c.c.inputs, c.c.outputs);
  ASSERT_TRUE(kb.kernel) << kb.reason;
  ASSERT_EQ(kb.kernel->stages.size(), 4u) << describe_loop_kernel(*kb.kernel);
  EXPECT_EQ(kb.scratch_bytes, (std::vector<int64_t>{16, 16}));
  // The final stage is a 2-D nest: the row's sum is loaded once per row.
  EXPECT_EQ(kb.kernel->stages[3].loops.size(), 2u) << describe_loop_kernel(*kb.kernel);
}

TEST(LoopKernel, ElementwiseChainsAndReshapesIterateOneFlatLoop) {
  GraphBuilder b;
  ValueId x = b.f32("x", {2, 3, 4, 5}), y = b.f32("y", {6, 20});
  ValueId r = b.node("Reshape", {b.node("Relu", {x}), b.ints({6, 20})});
  ValueId z = b.node("Add", {r, y});
  LoopCase c = whole_graph_case("flat", b.finish({z}));
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, c.c.inputs, c.c.outputs);
  ASSERT_TRUE(kb.kernel) << kb.reason;
  ASSERT_EQ(kb.kernel->stages.size(), 1u);
  EXPECT_EQ(kb.kernel->stages[0].loops.size(), 1u) << describe_loop_kernel(*kb.kernel);
}

TEST(LoopKernel, BuiltinModelsEveryLoopCandidate) {
  std::vector<LoopCase> cases;
  for (const std::string& name : builtin_model_names()) {
    auto p = std::make_shared<const Graph>(lower_to_primitives(load_onnx_bytes(builtin_model_bytes(name), name + ".onnx")));
    std::vector<LoopCase> mc = candidate_cases(p, name);
    cases.insert(cases.end(), mc.begin(), mc.end());
  }
  std::vector<LoopCaseResult> results = run_loop_cases(cases);
  int built = 0, passed = 0;
  const std::string summary = summarize(results, &built, &passed);
  std::printf("%s", summary.c_str());
  EXPECT_EQ(built, static_cast<int>(results.size())) << summary;
  EXPECT_EQ(passed, built) << summary;
}

// Opt-in: KORCH_LOOP_SWEEP_MODEL=/path/model.onnx checks every loop candidate of a real model.
TEST(LoopKernel, ModelFromEnvEveryLoopCandidate) {
  const char* path = std::getenv("KORCH_LOOP_SWEEP_MODEL");
  if (!path || !*path) GTEST_SKIP() << "set KORCH_LOOP_SWEEP_MODEL to an .onnx path";
  auto p = std::make_shared<const Graph>(lower_to_primitives(load_onnx(path)));
  std::vector<LoopCaseResult> results = run_loop_cases(candidate_cases(p, path));
  int built = 0, passed = 0;
  const std::string summary = summarize(results, &built, &passed);
  std::printf("%s", summary.c_str());
  EXPECT_EQ(passed, built) << summary;
}

}  // namespace
}  // namespace korch::testing

namespace korch::testing {
namespace {

TEST(LoopKernel, AnOutputIsReadBackInsteadOfRecomputed) {
  GraphBuilder b;
  ValueId x = b.f32("x", {4, 32});
  ValueId e = b.node("Exp", {x});
  ValueId s = b.reduce("ReduceSum", e, {-1});
  LoopCase c = whole_graph_case("exp_sum", b.finish({e, s}));
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, c.c.inputs, c.c.outputs);
  ASSERT_TRUE(kb.kernel) << kb.reason;
  ASSERT_EQ(kb.kernel->stages.size(), 2u) << describe_loop_kernel(*kb.kernel);
  EXPECT_FALSE(kb.kernel->stages[0].is_reduction);
  for (const loop::ExprNode& n : kb.kernel->stages[1].exprs)
    EXPECT_NE(n.op, loop::ExprOp::kUnary) << describe_loop_kernel(*kb.kernel);
  std::vector<LoopCaseResult> r = run_loop_cases({c});
  EXPECT_TRUE(r[0].ok) << r[0].message;
}

}  // namespace
}  // namespace korch::testing
