// Every loop primitive alone (several attribute settings each) and fused chains, each compiled
// and compared with the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>

#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel.h"
#include "loop_cases.h"

namespace korch::testing {
namespace {

using I = std::vector<int64_t>;

TEST(LoopKernel, EveryOpMatchesTheReference) {
  std::vector<LoopCase> cases = op_cases();
  std::vector<LoopCaseResult> results = run_loop_cases(cases);
  int passed = 0;
  for (const LoopCaseResult& r : results) {
    EXPECT_TRUE(r.built) << r.name << ": " << r.reason;
    EXPECT_TRUE(!r.built || r.ok) << r.name << ": " << r.message;
    passed += r.ok;
  }
  RecordProperty("passed", passed);
}

TEST(LoopKernel, UnsupportedOpGivesAReason) {
  GraphBuilder b;
  ValueId x = b.f32("x", {1, 2, 4, 4});
  ValueId y = b.node("LpPool", {x}, attrs({{"kernel_shape", I{2, 2}}}));
  LoopCase c = whole_graph_case("lp", b.finish({y}));
  std::vector<LoopCaseResult> r = run_loop_cases({c});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].built);
  EXPECT_NE(r[0].reason.find("LpPool (node '"), std::string::npos) << r[0].reason;
}

// The CPU printer's schedule for pools: a short window read contiguously keeps the output row
// innermost (vector lanes over outputs) when the row steps through the input by 1 or 2; a
// reduction over a short last axis (row step = its length) keeps the window innermost.
TEST(LoopKernel, ShortContiguousWindowsKeepTheOutputRowInnermost) {
  auto code = [](Graph g) {
    LoopCase c = whole_graph_case("c", std::move(g));
    std::vector<ValueId> args = kernel_arg_inputs(*c.g, c.c);
    LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, args, c.c.outputs);
    EXPECT_TRUE(kb.kernel) << kb.reason;
    if (!kb.kernel) return std::string();
    CodeWriter w;
    cpu::emit_cpu_loop_kernel(*kb.kernel, "k", {0}, {1}, 2, w);
    return w.str();
  };
  for (int64_t stride : {1, 2}) {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 4, 33, 33});
    ValueId y = b.node("MaxPool", {x}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{stride, stride}}}));
    EXPECT_NE(code(b.finish({y})).find("accv["), std::string::npos) << "stride " << stride;
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 4, 33, 33});
    ValueId y = b.node("MaxPool", {x}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{3, 3}}}));
    EXPECT_EQ(code(b.finish({y})).find("accv["), std::string::npos);
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {64, 10});
    EXPECT_EQ(code(b.finish({b.reduce("ReduceMax", x, {1})})).find("accv["), std::string::npos);
  }
}

// A padded pool's row: its ends keep the clamps, its interior reads plain addresses.
TEST(LoopKernel, PaddedWindowRowsPeelTheirInterior) {
  GraphBuilder b;
  ValueId x = b.f32("x", {1, 4, 33, 33});
  ValueId y = b.node("MaxPool", {x}, attrs({{"kernel_shape", I{3, 3}}, {"strides", I{2, 2}}, {"pads", I{1, 1, 1, 1}}}));
  LoopCase c = whole_graph_case("c", b.finish({y}));
  std::vector<ValueId> args = kernel_arg_inputs(*c.g, c.c);
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, args, c.c.outputs);
  ASSERT_TRUE(kb.kernel) << kb.reason;
  CodeWriter w;
  cpu::emit_cpu_loop_kernel(*kb.kernel, "k", {0}, {1}, 2, w);
  const std::string code = w.str();
  // 17 outputs per row: output 0 reads the left pad, output 16 the right one.
  const size_t interior = code.find("= 1; i2 < 16; ++i2)");
  ASSERT_NE(interior, std::string::npos) << code;
  const size_t end = code.find("= 16; i2 < 17; ++i2)");
  ASSERT_NE(end, std::string::npos) << code;
  EXPECT_EQ(code.substr(interior, end - interior).find("korch_im"), std::string::npos) << code;
  EXPECT_NE(code.find("= 0; i2 < 1; ++i2)"), std::string::npos) << code;
}

}  // namespace
}  // namespace korch::testing
