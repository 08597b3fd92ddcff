#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <random>

#include "ir/text_format.h"

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

// Two 16-channel maps of one image (1 KiB each) joined on the channel axis, then the join and
// its negation joined again: a Concat of Concats whose outermost holder is the graph output.
Graph joins(const std::string& extra = "", const std::string& output = "o") {
  return parse_graph(R"(graph t (opset 17) {
  input x: f32[1,16,4,4]
  %a: f32[1,16,4,4] = Relu(x)
  %b: f32[1,16,4,4] = Sigmoid(x)
  %y: f32[1,32,4,4] = Concat(a, b) {axis=1}
  %n: f32[1,32,4,4] = Neg(y)
  %o: f32[1,64,4,4] = Concat(y, n) {axis=-3}
)" + extra + "\n  output " + output + "\n}");
}

NodeId node_named(const Graph& g, const std::string& name) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.value(g.nodes[i].outputs[0]).name == name) return static_cast<NodeId>(i);
  return -1;
}

TEST(InPlaceStep, OffsetsOfConcatsLaidOutAsTheirInputs) {
  Graph g = joins();
  auto c = in_place_nodes(g);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c.at(node_named(g, "y")), (std::vector<int64_t>{0, 1024}));
  EXPECT_EQ(c.at(node_named(g, "o")), (std::vector<int64_t>{0, 2048}));
  // One node's entry, as the orchestrator and codegen ask for it.
  EXPECT_EQ(in_place_offsets(g, node_named(g, "y")), c.at(node_named(g, "y")));
  for (size_t i = 0; i < g.nodes.size(); ++i)
    EXPECT_EQ(in_place_offsets(g, static_cast<NodeId>(i)).has_value(), c.count(static_cast<NodeId>(i)) != 0) << i;
}

TEST(InPlaceStep, OnlyWhereEveryInputCanLieInTheOutput) {
  const auto rejected = [](const std::string& text) { return in_place_nodes(parse_graph(text)).empty(); };
  const std::string head = "graph t (opset 17) {\n  input x: f32[2,16]\n  %a: f32[2,16] = Relu(x)\n";
  // Interleaved: the axis before the Concat axis has extent 2.
  EXPECT_TRUE(rejected(head + "  %b: f32[2,16] = Neg(x)\n  %y: f32[2,32] = Concat(a, b) {axis=1}\n  output y\n}"));
  // ... but on the outer axis the inputs follow each other.
  EXPECT_FALSE(rejected(head + "  %b: f32[2,16] = Neg(x)\n  %y: f32[4,16] = Concat(a, b) {axis=0}\n  output y\n}"));
  // A graph input, a constant, a graph output, the same value twice: no buffer to write in place.
  EXPECT_TRUE(rejected(head + "  %y: f32[4,16] = Concat(a, x) {axis=0}\n  output y\n}"));
  EXPECT_TRUE(rejected(head + "  %b: f32[2,16] = Neg(x)\n  %y: f32[4,16] = Concat(a, b) {axis=0}\n  output y, b\n}"));
  EXPECT_TRUE(rejected(head + "  %y: f32[4,16] = Concat(a, a) {axis=0}\n  output y\n}"));
  // Read by two Concats: it can lie in one of them only.
  EXPECT_TRUE(rejected(head + "  %b: f32[2,16] = Neg(x)\n  %y: f32[4,16] = Concat(a, b) {axis=0}\n"
                              "  %z: f32[4,16] = Concat(b, a) {axis=0}\n  output y, z\n}"));
  // The second input would start 8 bytes in: kernels take 64-byte aligned arguments.
  EXPECT_TRUE(rejected("graph t (opset 17) {\n  input x: f32[1,2]\n  %a: f32[1,2] = Relu(x)\n  %b: f32[1,2] = Neg(x)\n"
                       "  %y: f32[1,4] = Concat(a, b) {axis=1}\n  output y\n}"));
  Graph g = parse_graph(head + "  %y: f32[4,16] = Concat(a, a) {axis=0}\n  output y\n}");
  g.nodes.back().inputs[1] = g.add_constant("k", Tensor(TensorType{DType::kFloat32, {2, 16}}));
  EXPECT_TRUE(in_place_nodes(g).empty());
}

TEST(InPlaceStep, ViewsHoldTheirInput) {
  Graph g = parse_graph(R"(graph t (opset 17) {
  input x: f32[2,16]
  const shape: i64[1] = [32]
  %a: f32[2,16] = Relu(x)
  %r: f32[32] = Reshape(a, shape)
  %u: f32[1,32] = Unsqueeze(r) {axes=[0]}
  %v: f32[32] = Reshape(x, shape)
  %u2: f32[32] = Flatten(u) {axis=0}
  %w: f32[32] = Add(u2, v)
  output w
})");
  auto c = in_place_nodes(g);
  EXPECT_EQ(c.size(), 3u);  // r, u and u2; not v, a view of a graph input
  EXPECT_EQ(c.at(g.value(g.find_value("r")).producer), (std::vector<int64_t>{0}));
  EXPECT_FALSE(c.count(g.value(g.find_value("v")).producer));
  ArenaPlan p = plan_arena(g, unfused_steps(g));
  using Piece = std::pair<ValueId, int64_t>;
  EXPECT_EQ(p.piece_of.at(g.find_value("a")), Piece(g.find_value("u2"), 0));  // through r and u
  // A value a Concat and a view could both hold is held by neither.
  g = parse_graph(R"(graph t (opset 17) {
  input x: f32[1,16]
  const shape: i64[1] = [16]
  %a: f32[1,16] = Relu(x)
  %b: f32[1,16] = Neg(x)
  %r: f32[16] = Reshape(a, shape)
  %y: f32[1,32] = Concat(a, b) {axis=1}
  output r, y
})");
  EXPECT_TRUE(in_place_nodes(g).empty());
}

TEST(InPlaceStep, PiecesLiveInTheirOutermostHolder) {
  Graph g = joins("  %s: f32[1,64,4,4] = Abs(o)", "s");  // o read after it is complete
  const ValueId x = g.inputs[0], a = g.find_value("a"), b = g.find_value("b"), y = g.find_value("y"),
                n = g.find_value("n"), o = g.find_value("o");
  ArenaPlan p = plan_arena(g, unfused_steps(g));
  using Piece = std::pair<ValueId, int64_t>;
  EXPECT_EQ(p.piece_of.size(), 4u);
  EXPECT_EQ(p.piece_of.at(a), Piece(o, 0));
  EXPECT_EQ(p.piece_of.at(b), Piece(o, 1024));
  EXPECT_EQ(p.piece_of.at(y), Piece(o, 0));
  EXPECT_EQ(p.piece_of.at(n), Piece(o, 2048));
  // o is the one intermediate now: one 4 KiB buffer holds all five values.
  ASSERT_EQ(p.offset.size(), 1u);
  EXPECT_TRUE(p.offset.count(o));
  EXPECT_EQ(p.arena_bytes, 4096);

  // The holder lives from its first piece's writer: d and e, live between a's writer and the last
  // Concat, cannot share its memory.
  Graph h = joins("  %d: f32[1,16,4,4] = Exp(x)\n  %e: f32[1,16,4,4] = Add(d, x)\n  %s: f32[1,64,4,4] = Abs(o)", "s");
  const auto v = [&](const char* name) { return h.find_value(name); };
  p = plan_arena(h, {{{x}, {v("a")}},
                     {{x}, {v("d")}},
                     {{v("d"), x}, {v("e")}},
                     {{x}, {v("b")}},
                     {{v("a"), v("b")}, {v("y")}},
                     {{v("y")}, {v("n")}},
                     {{v("y"), v("n")}, {v("o")}},
                     {{v("o")}, {v("s")}}});
  EXPECT_EQ(p.piece_of.size(), 4u);
  EXPECT_EQ(p.arena_bytes, 4096 + 2 * 1024);

  // A kernel that computes the Concat with its inputs writes the output itself: no pieces.
  std::vector<StepIo> fused = {{{x}, {y}}, {{y}, {n}}, {{y, n}, {o}}};
  p = plan_arena(g, fused);
  EXPECT_EQ(p.piece_of.size(), 2u);  // y and n in o
  EXPECT_FALSE(p.piece_of.count(a));
}

}  // namespace
}  // namespace korch::runtime
