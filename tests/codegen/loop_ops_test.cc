// Every loop primitive alone (several attribute settings each) and fused chains, each compiled
// and compared with the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>

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

}  // namespace
}  // namespace korch::testing
