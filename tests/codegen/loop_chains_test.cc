// Fused chains as fission produces them (softmax, layernorm, GELU, head reshapes...), kernels
// with several outputs, and the built-in models' every loop candidate.
#include <gtest/gtest.h>

#include <cstdlib>

#include "codegen/loop_kernel.h"
#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "loop_test_util.h"
#include "pipeline/pipeline.h"

namespace korch::testing {
namespace {

using I = std::vector<int64_t>;

ValueId expand_to(GraphBuilder& b, ValueId v, const Shape& s) { return b.node("Expand", {v, b.ints(s)}); }

// Softmax over the last axis as fission writes it.
ValueId softmax(GraphBuilder& b, ValueId x, const Shape& s) {
  ValueId m = b.reduce("ReduceMax", x, {-1});
  ValueId e = b.node("Exp", {b.node("Sub", {x, expand_to(b, m, s)})});
  ValueId sum = b.reduce("ReduceSum", e, {-1});
  return b.node("Div", {e, expand_to(b, sum, s)});
}

std::vector<LoopCase> chain_cases() {
  std::vector<LoopCase> cs;
  {
    GraphBuilder b;
    Shape s{2, 3, 17};
    ValueId x = b.f32("x", s);
    cs.push_back(whole_graph_case("softmax", b.finish({softmax(b, x, s)})));
  }
  {
    GraphBuilder b;
    Shape s{2, 5, 24};
    ValueId x = b.f32("x", s), gamma = b.f32("gamma", {24}), beta = b.f32("beta", {24});
    ValueId mean = b.reduce("ReduceMean", x, {-1});
    ValueId xm = b.node("Sub", {x, expand_to(b, mean, s)});
    ValueId var = b.reduce("ReduceMean", b.node("Mul", {xm, xm}), {-1});
    ValueId sd = b.node("Sqrt", {b.node("Add", {var, b.scalar(1e-5f)})});
    ValueId n = b.node("Div", {xm, expand_to(b, sd, s)});
    ValueId y = b.node("Add", {b.node("Mul", {n, expand_to(b, gamma, s)}), expand_to(b, beta, s)});
    cs.push_back(whole_graph_case("layernorm", b.finish({y})));
  }
  {
    GraphBuilder b;
    Shape s{4, 64};
    ValueId x = b.f32("x", s), bias = b.f32("bias", {64});
    ValueId y = b.node("Add", {x, expand_to(b, bias, s)});
    ValueId er = b.node("Erf", {b.node("Div", {y, b.scalar(1.41421356f)})});
    ValueId gl = b.node("Mul", {b.node("Mul", {y, b.node("Add", {er, b.scalar(1.f)})}), b.scalar(0.5f)});
    cs.push_back(whole_graph_case("bias_gelu", b.finish({gl})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 8, 24});
    ValueId h = b.node("Reshape", {x, b.ints({2, 8, 4, 6})});
    ValueId t = b.node("Transpose", {h}, attrs({{"perm", I{0, 2, 1, 3}}}));
    ValueId r = b.node("Reshape", {t, b.ints({8, 8, 6})});
    cs.push_back(whole_graph_case("heads_split", b.finish({r})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 3, 4, 5});
    ValueId r = b.node("Reshape", {x, b.ints({2, 3, 20})});
    ValueId t = b.node("Transpose", {r}, attrs({{"perm", I{0, 2, 1}}}));
    ValueId y = b.node("Reshape", {t, b.ints({2, 60})});
    ValueId z = b.node("Reshape", {b.node("Relu", {y}), b.ints({2, 20, 3})});
    cs.push_back(whole_graph_case("transpose_reshape_chain", b.finish({z})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 4, 6}), y = b.f32("y", {2, 3, 6});
    ValueId c = b.node("Concat", {x, y}, attrs({{"axis", int64_t{1}}}));
    ValueId s = b.node("Slice", {c, b.ints({2}), b.ints({6}), b.ints({1})});
    cs.push_back(whole_graph_case("concat_slice", b.finish({s})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 3, 8, 8});
    ValueId p = b.node("Pad", {x, b.ints({0, 0, 1, 1, 0, 0, 1, 1}), b.scalar(-1e9f)});
    ValueId m = b.node("MaxPool", {p}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}}));
    cs.push_back(whole_graph_case("pad_maxpool", b.finish({m})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {3, 40});
    ValueId a = b.node("Relu", {x});
    ValueId s = b.node("Sigmoid", {a});
    cs.push_back(whole_graph_case("two_outputs", b.finish({a, s})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {3, 40});
    ValueId m = b.reduce("ReduceMean", x, {1}, 0);
    ValueId e = b.node("Exp", {x});
    cs.push_back(whole_graph_case("outputs_of_two_shapes", b.finish({e, m})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {5, 6}), y = b.f32("y", {5, 6});
    ValueId a = b.node("Add", {x, y});
    ValueId m = b.node("Mul", {a, a});
    cs.push_back(whole_graph_case("output_also_read_inside", b.finish({a, m})));
  }
  {
    GraphBuilder b;
    Shape s{2, 8, 5, 5};
    ValueId x = b.f32("x", s), bias = b.f32("bias", {1, 8, 1, 1});
    ValueId y = b.node("Relu", {b.node("Add", {x, expand_to(b, bias, s)})});
    cs.push_back(whole_graph_case("channel_bias_relu", b.finish({y})));
  }
  {
    GraphBuilder b;
    Shape s{2, 4, 6, 6};
    ValueId x = b.f32("x", s);
    ValueId mean = b.reduce("ReduceMean", x, {2, 3});
    ValueId y = b.node("Sub", {x, expand_to(b, mean, s)});
    ValueId gap = b.node("Flatten", {mean});
    cs.push_back(whole_graph_case("instance_center_and_gap", b.finish({y, gap})));
  }
  {
    GraphBuilder b;
    Shape s{2, 6, 5};
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMean", x, {1});  // a middle axis
    ValueId sm = softmax(b, b.node("Sub", {x, expand_to(b, m, s)}), s);
    cs.push_back(whole_graph_case("middle_axis_mean_then_softmax", b.finish({sm})));
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 8, 4, 4});
    auto parts = b.node_n("Split", {x, b.ints({2, 6})}, attrs({{"axis", int64_t{1}}}), 2);
    ValueId s0 = b.node("Sigmoid", {parts[0]});
    ValueId c = b.node("Concat", {b.node("Mul", {parts[1], b.scalar(2.f)}), s0}, attrs({{"axis", int64_t{1}}}));
    ValueId d = b.node("DepthToSpace", {c}, attrs({{"blocksize", int64_t{2}}}));
    cs.push_back(whole_graph_case("split_concat_d2s", b.finish({d})));
  }
  {
    // The reduction reads x strided (kept-inner schedule over the 64 rows) and the next stage
    // shares its row loop: row fusion must leave the kept-inner stage alone.
    GraphBuilder b;
    Shape s{1, 64, 32};
    ValueId x = b.f32("x", {1, 32, 64}), bias = b.f32("bias", {32});
    ValueId t = b.node("Add", {b.node("Transpose", {x}, attrs({{"perm", I{0, 2, 1}}})), expand_to(b, bias, s)});
    ValueId m = b.reduce("ReduceMean", t, {-1});
    ValueId y = b.node("Sub", {t, expand_to(b, m, s)});
    cs.push_back(whole_graph_case("transposed_mean_center", b.finish({m, y})));
  }
  {
    GraphBuilder b;
    Shape s{12, 197, 197};
    ValueId x = b.f32("x", s);
    cs.push_back(whole_graph_case("softmax_12x197x197", b.finish({softmax(b, x, s)})));
  }
  return cs;
}

TEST(LoopKernel, FusedChainsMatchTheReference) {
  std::vector<LoopCaseResult> results = run_loop_cases(chain_cases());
  for (const LoopCaseResult& r : results) {
    EXPECT_TRUE(r.built) << r.name << ": " << r.reason;
    EXPECT_TRUE(!r.built || r.ok) << r.name << ": " << r.message;
  }
}

TEST(LoopKernel, SoftmaxMaterialisesOnlyTheReductions) {
  GraphBuilder b;
  Shape s{4, 32};
  ValueId x = b.f32("x", s);
  LoopCase c = whole_graph_case("softmax", b.finish({softmax(b, x, s)}));
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, c.c.inputs, c.c.outputs);
  ASSERT_TRUE(kb.kernel) << kb.reason;
  ASSERT_EQ(kb.kernel->stages.size(), 3u) << describe_loop_kernel(*kb.kernel);
  EXPECT_EQ(kb.scratch_bytes, (std::vector<int64_t>{16, 16}));
  // The final stage is a 2-D nest: the row's max and sum are loaded once per row.
  EXPECT_EQ(kb.kernel->stages[2].loops.size(), 2u) << describe_loop_kernel(*kb.kernel);
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
