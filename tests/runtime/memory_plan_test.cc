#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

namespace korch::runtime {
namespace {

int64_t aligned(int64_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

// The properties every plan must have, checked over every pair of buffers.
void check_plan(const std::vector<BufferLifetime>& bufs, const MemoryPlan& p) {
  ASSERT_EQ(p.offsets.size(), bufs.size());
  int64_t sum = 0, end = 0;
  for (size_t i = 0; i < bufs.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % kArenaAlignment, 0);
    EXPECT_GE(p.offsets[i], 0);
    sum += aligned(bufs[i].bytes);
    end = std::max(end, p.offsets[i] + aligned(bufs[i].bytes));
    for (size_t j = 0; j < i; ++j) {
      bool live_together = bufs[i].first <= bufs[j].last && bufs[j].first <= bufs[i].last;
      bool disjoint = p.offsets[i] + bufs[i].bytes <= p.offsets[j] || p.offsets[j] + bufs[j].bytes <= p.offsets[i];
      if (live_together && bufs[i].bytes > 0 && bufs[j].bytes > 0) {
        EXPECT_TRUE(disjoint) << "buffers " << i << " and " << j << " are live together and overlap";
      }
    }
  }
  EXPECT_EQ(p.arena_bytes, end);
  EXPECT_LE(p.arena_bytes, sum);
  // Lower bound: no plan beats the largest set of buffers live at one step.
  int last_step = 0;
  for (const auto& b : bufs) last_step = std::max(last_step, b.last);
  for (int s = 0; s <= last_step; ++s) {
    int64_t live = 0;
    for (const auto& b : bufs)
      if (b.first <= s && s <= b.last) live += aligned(b.bytes);
    EXPECT_GE(p.arena_bytes, live);
  }
}

TEST(PlanMemory, WorkedExampleFromTheHeader) {
  std::vector<BufferLifetime> bufs = {{256, 0, 1}, {128, 1, 2}, {256, 2, 3}};
  MemoryPlan p = plan_memory(bufs);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 256, 0}));
  EXPECT_EQ(p.arena_bytes, 384);
  check_plan(bufs, p);
}

TEST(PlanMemory, EmptyAndZeroSized) {
  EXPECT_EQ(plan_memory({}).arena_bytes, 0);
  std::vector<BufferLifetime> bufs = {{0, 0, 0}, {10, 0, 1}};
  MemoryPlan p = plan_memory(bufs);
  EXPECT_EQ(p.arena_bytes, 64);
  check_plan(bufs, p);
}

TEST(PlanMemory, AllLiveTogetherNeedTheSum) {
  std::vector<BufferLifetime> bufs = {{100, 0, 5}, {64, 1, 4}, {1, 2, 3}};
  MemoryPlan p = plan_memory(bufs);
  EXPECT_EQ(p.arena_bytes, 128 + 64 + 64);
  check_plan(bufs, p);
}

TEST(PlanMemory, FillsAGapBetweenPlacedBuffers) {
  // Big ones at [0,512) and [512,1024) live at step 0 and 2; the small one lives at step 1 only, with
  // neither, and must reuse offset 0; a fourth live with all three goes above.
  std::vector<BufferLifetime> bufs = {{512, 0, 0}, {512, 2, 2}, {64, 1, 1}, {64, 0, 2}};
  MemoryPlan p = plan_memory(bufs);
  check_plan(bufs, p);
  EXPECT_EQ(p.offsets[2], 0);
  EXPECT_EQ(p.arena_bytes, 512 + 64);
}

TEST(PlanMemory, RandomPlansKeepEveryProperty) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    int n = 1 + static_cast<int>(rng() % 14), steps = 1 + static_cast<int>(rng() % 9);
    std::vector<BufferLifetime> bufs;
    for (int i = 0; i < n; ++i) {
      int a = static_cast<int>(rng() % steps), b = static_cast<int>(rng() % steps);
      bufs.push_back({static_cast<int64_t>(rng() % 700), std::min(a, b), std::max(a, b)});
    }
    MemoryPlan p = plan_memory(bufs);
    check_plan(bufs, p);
    EXPECT_EQ(plan_memory(bufs).offsets, p.offsets) << "not deterministic";
    if (HasFailure()) return;
  }
}

// x -> a = Relu(x) -> b = Neg(a) -> c = Abs(b) -> y = Add(c, a); d = Sigmoid(x) is never read.
Graph chain() {
  Graph g;
  TensorType t{DType::kFloat32, {4, 4}};  // 64 bytes
  ValueId x = g.add_input("x", t);
  auto node = [&](const char* op, std::vector<ValueId> in, const char* out) {
    ValueId v = g.add_value(out, t);
    g.add_node(Node{out, op, "", std::move(in), {v}, {}});
    return v;
  };
  ValueId a = node("Relu", {x}, "a");
  ValueId b = node("Neg", {a}, "b");
  ValueId c = node("Abs", {b}, "c");
  node("Sigmoid", {x}, "d");
  g.outputs.push_back(node("Add", {c, a}, "y"));
  return g;
}

TEST(PlanArena, UnfusedBaselineMaterialisesEveryNodeOutput) {
  Graph g = chain();
  ArenaPlan p = plan_arena(g, unfused_steps(g));
  // a [0,4], b [1,2], c [2,4], d [3,3] (dead: its writer's step only); y is a graph output.
  EXPECT_EQ(p.offset.size(), 4u);
  EXPECT_FALSE(p.offset.count(g.outputs[0]));
  EXPECT_EQ(p.intermediate_bytes, 4 * 64);
  EXPECT_EQ(p.arena_bytes, 3 * 64);  // b and d can share; a, c and one of them cannot
}

TEST(PlanArena, FusedKernelsKeepOnlyTheirBoundaries) {
  Graph g = chain();
  ValueId x = g.inputs[0], a = 1, c = 3, y = g.outputs[0];
  // Kernel 0: Relu -> a; kernel 1: Neg+Abs -> c; kernel 2: Add -> y.
  std::vector<StepIo> steps = {{{x}, {a}}, {{a}, {c}}, {{c, a}, {y}}};
  ArenaPlan p = plan_arena(g, steps);
  EXPECT_EQ(p.offset.size(), 2u);
  EXPECT_EQ(p.arena_bytes, 2 * 64);
  EXPECT_LE(p.arena_bytes, plan_arena(g, unfused_steps(g)).arena_bytes);
}

}  // namespace
}  // namespace korch::runtime
