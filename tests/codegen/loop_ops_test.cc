// Every loop primitive alone (several attribute settings each) and fused chains, each compiled
// and compared with the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "codegen/cpu/cpu_loop_emitter.h"
#include "codegen/kernel_signature.h"
#include "codegen/loop_kernel.h"
#include "ir/primitive.h"
#include "loop_cases.h"
#include "orchestrate/kernel_candidate.h"

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

// One op list: every operator ir/primitive.cc counts as an elementwise primitive has a loop kernel
// (shared by the CPU and CUDA printers), or is listed here with what happens instead. An op added
// to either side alone fails this test.
TEST(LoopKernel, EveryElementwisePrimitiveHasAKernelOrAStatedFallback) {
  const std::map<std::string, std::string> fallback = {
      {"BitShift", "integer bit operations: no loop emitter yet; a model using one is refused naming the node"},
      {"BitwiseAnd", "as BitShift"}, {"BitwiseOr", "as BitShift"}, {"BitwiseXor", "as BitShift"},
      {"BitwiseNot", "as BitShift"}};
  const Shape s = {3, 8};
  for (const std::string& op : elementwise_primitive_ops()) {
    LoopKernelBuild kb;
    try {
      GraphBuilder b;
      auto f = [&](const char* name) { return b.f32(name, s); };
      ValueId y = kNoValue;
      if (op == "And" || op == "Or" || op == "Xor")
        y = b.node(op, {b.input("p", DType::kBool, s), b.input("q", DType::kBool, s)});
      else if (op == "Not") y = b.node(op, {b.input("p", DType::kBool, s)});
      else if (op.rfind("Bitwise", 0) == 0 || op == "BitShift")
        y = op == "BitwiseNot" ? b.node(op, {b.input("p", DType::kInt32, s)})
                               : b.node(op, {b.input("p", DType::kInt32, s), b.input("q", DType::kInt32, s)},
                                        op == "BitShift" ? attrs({{"direction", std::string("LEFT")}}) : Attributes{});
      else if (op == "Where") y = b.node(op, {b.input("c", DType::kBool, s), f("x"), f("y")});
      else if (op == "Cast") y = b.node(op, {f("x")}, attrs({{"to", int64_t{7}}}));
      else if (op == "Clip") y = b.node(op, {f("x"), b.scalar(-0.5f), b.scalar(0.5f)});
      else if (op == "QuantizeLinear") y = b.node(op, {f("x"), b.scalar(0.1f)});
      else if (op == "DequantizeLinear") y = b.node(op, {b.input("q", DType::kInt8, s), b.scalar(0.1f)});
      else if (std::set<std::string>{"Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal",
                                     "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "PRelu", "CastLike"}
                   .count(op))
        y = b.node(op, {f("x"), f("y")});
      else y = b.node(op, {f("x")});
      LoopCase c = whole_graph_case(op, b.finish({y}));
      std::vector<ValueId> args = kernel_arg_inputs(*c.g, c.c);
      kb = build_loop_kernel(*c.g, c.c.nodes, args, c.c.outputs);
    } catch (const Error& e) {  // refused earlier (the graph's own checks): a reason all the same
      kb.kernel.reset();
      kb.reason = e.what();
    }
    if (fallback.count(op)) {
      EXPECT_FALSE(kb.kernel) << op << " has a loop kernel now: take it off the fallback list";
      EXPECT_NE(kb.reason.find(op), std::string::npos) << op << ": " << kb.reason;
    } else {
      EXPECT_TRUE(kb.kernel) << op << " is an elementwise primitive without a loop kernel: " << kb.reason;
    }
  }
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

// The loop kernel of all of g's nodes (null, with a test failure, when it cannot be built).
std::shared_ptr<LoopKernel> whole_kernel(Graph g) {
  LoopCase c = whole_graph_case("c", std::move(g));
  std::vector<ValueId> args = kernel_arg_inputs(*c.g, c.c);
  LoopKernelBuild kb = build_loop_kernel(*c.g, c.c.nodes, args, c.c.outputs);
  EXPECT_TRUE(kb.kernel) << kb.reason;
  return kb.kernel;
}

// The CPU printer's code for kernel k: inputs at argument slots 0.., then the outputs, then scratch.
std::string cpu_code(const LoopKernel& k) {
  std::vector<int> in, out;
  for (int i = 0; i < k.num_inputs; ++i) in.push_back(i);
  for (int i = 0; i < k.num_outputs; ++i) out.push_back(k.num_inputs + i);
  CodeWriter w;
  cpu::emit_cpu_loop_kernel(k, "k", in, out, k.num_inputs + k.num_outputs, w);
  return w.str();
}

// How many times `what` occurs in `code`.
int occurrences(const std::string& code, const std::string& what) {
  int n = 0;
  for (size_t p = code.find(what); p != std::string::npos; p = code.find(what, p + 1)) ++n;
  return n;
}

// cpu_code of whole_kernel(g) ("" when the kernel cannot be built).
std::string whole_kernel_cpu_code(Graph g) {
  std::shared_ptr<LoopKernel> k = whole_kernel(std::move(g));
  return k ? cpu_code(*k) : std::string();
}

// The CPU printer's schedule for pools: a short window read contiguously keeps the output row
// innermost (vector lanes over outputs) when the row steps through the input by 1 or 2; a
// reduction over a short last axis (row step = its length) keeps the window innermost.
TEST(LoopKernel, ShortContiguousWindowsKeepTheOutputRowInnermost) {
  const auto code = whole_kernel_cpu_code;
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
  {  // A channels-last column pool (a separable SPP pool's first pass): its row is a whole image
     // row with its channels, [13 x 512] = 6656 outputs, read contiguously.
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 13, 13, 512});
    ValueId y = b.node("MaxPool", {x}, attrs({{"kernel_shape", I{5, 1}}, {"pads", I{2, 0, 2, 0}},
                                              {"channels_last", int64_t{1}}}));
    EXPECT_NE(code(b.finish({y})).find("accv[6656]"), std::string::npos);
  }
}

// A softmax's exp(x - max(x)) is an exp of a value at most 0, which the CPU prints inline
// (korch_exp_negabs); an exp of x - y for any other y takes the prelude's general korch_exp. The values match the
// reference in EveryOpMatchesTheReference (softmax, softmax_inf_nan, softmax_12x197x197, ...).
TEST(LoopKernel, TheExpOfXMinusItsMaxIsAnExpOfANonPositiveValue) {
  const auto code = whole_kernel_cpu_code;
  Shape s{4, 33};
  {
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMax", x, {-1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, b.node("Expand", {m, b.ints(s)})})});
    const std::string c = code(b.finish({e}));
    EXPECT_NE(c.find("korch_exp_negabs("), std::string::npos) << c;
  }
  {  // The max of another tensor.
    GraphBuilder b;
    ValueId x = b.f32("x", s), y = b.f32("y", s);
    ValueId m = b.reduce("ReduceMax", y, {-1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, b.node("Expand", {m, b.ints(s)})})});
    const std::string c = code(b.finish({e}));
    EXPECT_EQ(c.find("korch_exp_negabs("), std::string::npos) << c;
    EXPECT_NE(c.find("korch_exp("), std::string::npos) << c;
  }
  {  // The max computed by another kernel (an argument here): the kernel is checked, and may run,
     // on arguments that do not hold the fact.
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMax", x, {-1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, b.node("Expand", {m, b.ints(s)})})});
    const Graph g = b.finish({e});
    std::vector<NodeId> nodes;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (g.nodes[i].op_type != "ReduceMax") nodes.push_back(static_cast<NodeId>(i));
    const KernelCandidate c = make_candidate(g, nodes, false);
    LoopKernelBuild kb = build_loop_kernel(g, c.nodes, kernel_arg_inputs(g, c), c.outputs);
    ASSERT_TRUE(kb.kernel) << kb.reason;
    const std::string kc = cpu_code(*kb.kernel);
    EXPECT_EQ(kc.find("korch_exp_negabs("), std::string::npos) << kc;
    EXPECT_NE(kc.find("korch_exp("), std::string::npos) << kc;
  }
  {  // The max subtracted the other way round.
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMax", x, {-1});
    ValueId e = b.node("Exp", {b.node("Sub", {b.node("Expand", {m, b.ints(s)}), x})});
    EXPECT_EQ(code(b.finish({e})).find("korch_exp_negabs("), std::string::npos);
  }
}

// A softmax in one kernel computes each exp once: written ahead into the output by a pointwise
// stage, summed from there, then divided in place, the four stages in one loop over rows. Where
// the output reads the exp at another element than it writes (a transposed softmax), writing
// ahead would overwrite what is still to be read: the kernel recomputes the exp instead. Values:
// chain_cases' softmax, softmax_inf_nan, softmax_then_transpose, softmax_and_scaled_exp.
TEST(LoopKernel, AFusedSoftmaxComputesEachExpOnce) {
  Shape s{64, 64};
  {
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    std::shared_ptr<LoopKernel> k = whole_kernel(b.finish({softmax(b, x, s)}));
    ASSERT_TRUE(k);
    ASSERT_EQ(k->stages.size(), 4u) << describe_loop_kernel(*k);
    EXPECT_FALSE(k->stages[1].is_reduction);
    ASSERT_EQ(k->stages[1].stores.size(), 1u);
    EXPECT_EQ(k->buffers[static_cast<size_t>(k->stages[1].stores[0].buffer)].kind, loop::BufferKind::kOutput);
    const std::string c = cpu_code(*k);
    EXPECT_EQ(occurrences(c, "korch_exp_negabs("), 1) << c;
    EXPECT_NE(c.find("row fusion of 4 stages"), std::string::npos) << c;
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    ValueId t = b.node("Transpose", {softmax(b, x, s)}, attrs({{"perm", I{1, 0}}}));
    std::shared_ptr<LoopKernel> k = whole_kernel(b.finish({t}));
    ASSERT_TRUE(k);
    EXPECT_EQ(k->stages.size(), 3u) << describe_loop_kernel(*k);
    EXPECT_EQ(occurrences(cpu_code(*k), "korch_exp_negabs("), 2);
  }
  {  // The exp of an argument (x - max computed by another kernel): the stage writing it ahead
     // loops over rows as the sum does (not one flat loop), so the three stages fuse.
    GraphBuilder b;
    ValueId d = b.f32("d", s);
    ValueId e = b.node("Exp", {d});
    ValueId sum = b.reduce("ReduceSum", e, {-1});
    std::shared_ptr<LoopKernel> k = whole_kernel(b.finish({b.node("Div", {e, expand_to(b, sum, s)})}));
    ASSERT_TRUE(k);
    ASSERT_EQ(k->stages.size(), 3u) << describe_loop_kernel(*k);
    EXPECT_EQ(k->stages[0].loops.size(), 2u) << describe_loop_kernel(*k);
    const std::string c = cpu_code(*k);
    EXPECT_EQ(occurrences(c, "korch_exp("), 1) << c;
    EXPECT_NE(c.find("row fusion of 3 stages"), std::string::npos) << c;
  }
  {  // A softmax over the outer axis: its rows are not contiguous, no row fusion would keep the
     // exp in cache, so it is computed again instead of making one more trip through memory.
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    ValueId m = b.reduce("ReduceMax", x, {0});
    ValueId e = b.node("Exp", {b.node("Sub", {x, expand_to(b, m, s)})});
    ValueId sum = b.reduce("ReduceSum", e, {0});
    std::shared_ptr<LoopKernel> k = whole_kernel(b.finish({b.node("Div", {e, expand_to(b, sum, s)})}));
    ASSERT_TRUE(k);
    EXPECT_EQ(k->stages.size(), 3u) << describe_loop_kernel(*k);
  }
}

// A channels-last global pool ([1, H*W, C] -> [1, C]) has no kept loop but its row to share out:
// its reduce loop is cut into a fixed number of parts (partial rows, combined in order) so that
// both threads read; a small one, or one with an outer kept loop to share, is not cut. The cut
// pools match the reference in EveryOpMatchesTheReference (*_global_pool_channels_last).
TEST(LoopKernel, AGlobalPoolWithOnlyItsRowKeptIsCutAlongItsReduceLoop) {
  const auto code = whole_kernel_cpu_code;
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 12544, 32});
    const std::string c = code(b.finish({b.reduce("ReduceMean", x, {1})}));
    EXPECT_NE(c.find("accp[8][32]"), std::string::npos) << c;
    EXPECT_NE(c.find("for (int64_t part = 0; part < 8; ++part)"), std::string::npos) << c;
  }
  for (const Shape& s : {Shape{1, 49, 32}, Shape{1, 49, 1152}}) {  // too little to read for the parts to pay
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    EXPECT_EQ(code(b.finish({b.reduce("ReduceMean", x, {1})})).find("accp"), std::string::npos) << s[2];
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 196, 672});
    EXPECT_NE(code(b.finish({b.reduce("ReduceMean", x, {1})})).find("accp[8][672]"), std::string::npos);
  }
  {  // A kept batch loop to share out.
    GraphBuilder b;
    ValueId x = b.f32("x", {4, 12544, 32});
    EXPECT_EQ(code(b.finish({b.reduce("ReduceMean", x, {1})})).find("accp"), std::string::npos);
  }
}

// A transposing copy runs in tiles (64 rows x 16 columns); a contiguous one, or one whose
// inner loop is short, runs as plain rows. The tiled cases match the reference in
// EveryOpMatchesTheReference (Transpose_tiled_*).
TEST(LoopKernel, TransposingCopiesRunInTiles) {
  auto code = [](const Shape& s, const I& perm) {
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    return whole_kernel_cpu_code(b.finish({b.node("Transpose", {x}, attrs({{"perm", perm}}))}));
  };
  // The copy's loops merge to [pixels 16384, channels 256]; rows: the pixels (read contiguously);
  // columns: the channels (stride 16384).
  const std::string nhwc = code({1, 256, 128, 128}, {0, 2, 3, 1});
  EXPECT_NE(nhwc.find("for (int64_t i0 = i0b; i0 < i0b + 64; ++i0)"), std::string::npos) << nhwc;
  EXPECT_NE(nhwc.find("for (int64_t i1 = i1b; i1 < i1b + 16; ++i1)"), std::string::npos) << nhwc;
  EXPECT_NE(nhwc.find("p < 4096;"), std::string::npos) << nhwc;  // 256 x 16 tiles
  // 16384 output rows: a strip of 64 pixels is walked down the 256 channels first (column blocks
  // vary fastest), which writes its 64 output rows whole.
  EXPECT_NE(nhwc.find("const int64_t i1b = (p % 16) * 16;"), std::string::npos) << nhwc;
  // NHWC -> NCHW with 150 channels: the last row block is partial, so is the last column block.
  const std::string nchw = code({1, 50, 50, 150}, {0, 3, 1, 2});
  EXPECT_NE(nchw.find("korch_imin(i0b + 64, 150)"), std::string::npos) << nchw;
  EXPECT_NE(nchw.find("korch_imin(i1b + 16, 2500)"), std::string::npos) << nchw;
  // 150 output rows: a band of 16 pixels (2400 contiguous floats) is read whole first (row blocks
  // vary fastest), writing one line into each of the 150 output rows.
  EXPECT_NE(nchw.find("const int64_t i0b = (p % 3) * 64;"), std::string::npos) << nchw;
  // H <-> W of each channel: a loop outside the tile (the channel) joins the parallel loop.
  EXPECT_NE(code({1, 256, 128, 128}, {0, 1, 3, 2}).find("p < 4096;"), std::string::npos);
  EXPECT_EQ(code({64, 8, 128}, {1, 0, 2}).find("b +="), std::string::npos);  // contiguous rows
  EXPECT_EQ(code({1, 16, 64, 64}, {0, 2, 3, 1}).find("b +="), std::string::npos);  // 16 channels inner
}

// An innermost loop shorter than a vector (an image read channels-last: 3 channels) is unrolled,
// not a simd loop of 3 lanes, and the loop around it vectorized (bench/short_inner_loops.cc); a
// longer one stays the simd loop. Transpose_short_inner_0231 and Sigmoid_of_short_inner_0231
// check the values.
TEST(LoopKernel, ShortInnermostLoopsAreUnrolled) {
  auto code = [](const Shape& s) {
    GraphBuilder b;
    ValueId x = b.f32("x", s);
    return whole_kernel_cpu_code(b.finish({b.node("Transpose", {x}, attrs({{"perm", I{0, 2, 3, 1}}}))}));
  };
  const std::string rgb = code({1, 3, 224, 224});
  EXPECT_NE(rgb.find("#pragma GCC unroll 3\n"), std::string::npos) << rgb;
  EXPECT_EQ(rgb.find("#pragma omp simd"), std::string::npos) << rgb;
  // A batch of images: the batch is the parallel loop, the pixels the simd loop.
  const std::string batch = code({16, 3, 64, 64});
  EXPECT_NE(batch.find("for (int64_t i0 = 0; i0 < 16; ++i0)"), std::string::npos) << batch;
  EXPECT_NE(batch.find("#pragma omp simd\n"), std::string::npos) << batch;
  EXPECT_NE(batch.find("#pragma GCC unroll 3\n"), std::string::npos) << batch;
  EXPECT_EQ(batch.find("p % "), std::string::npos) << batch;  // no flattened parallel loop
  const std::string eight = code({1, 8, 64, 64});
  EXPECT_EQ(eight.find("#pragma GCC unroll"), std::string::npos) << eight;
  EXPECT_NE(eight.find("#pragma omp simd"), std::string::npos) << eight;
}

// Row fusion (stages sharing the loop over rows, the row kept in L1 between them): over two loops
// when the per-row results live one loop deep (windowed attention's softmax: its exp written
// ahead, the stages reading it back keep the writer's [windows, heads x rows] loops although
// they need not read the bias), and over whole rows one stage writes and the next reads back (an
// exponential output, then its sum). The cases
// windowed_softmax_with_bias and exp_output_then_row_sum check the values (FusedChainsMatchTheReference).
TEST(LoopKernel, RowFusionSharesDeeperLoopsAndWholeRows) {
  {
    GraphBuilder b;
    Shape s{64, 3, 49, 49};
    ValueId x = b.f32("x", s), bias = b.f32("bias", {1, 3, 49, 49});
    ValueId sm = softmax(b, b.node("Add", {x, expand_to(b, bias, s)}), s);
    const std::string code = whole_kernel_cpu_code(b.finish({sm}));
    EXPECT_NE(code.find("// row fusion of 4 stages over 2 loops"), std::string::npos) << code;
    EXPECT_NE(code.find("#pragma omp parallel for collapse(2)"), std::string::npos) << code;
  }
  {
    GraphBuilder b;
    Shape s{4096, 256};
    ValueId x = b.f32("x", s), m = b.f32("m", {4096, 1});
    ValueId e = b.node("Exp", {b.node("Sub", {x, expand_to(b, m, s)})});
    const std::string code = whole_kernel_cpu_code(b.finish({e, b.reduce("ReduceSum", e, {-1})}));
    EXPECT_NE(code.find("// row fusion of 2 stages\n"), std::string::npos) << code;
  }
  {  // A transposed read of the exponential is not the row the first stage wrote: no fusion.
    GraphBuilder b;
    Shape s{256, 256};
    ValueId x = b.f32("x", s);
    ValueId e = b.node("Exp", {x});
    ValueId t = b.node("Transpose", {e}, attrs({{"perm", I{1, 0}}}));
    const std::string code = whole_kernel_cpu_code(b.finish({e, b.reduce("ReduceSum", t, {-1})}));
    EXPECT_EQ(code.find("row fusion"), std::string::npos) << code;
  }
}

// A Concat of many inputs along an outer axis: one copy of the inner loop per input, each
// reading its own input only (before, unswitching stopped after four conditions and every later
// element evaluated a chain of selects over all the remaining inputs' loads).
TEST(LoopKernel, ConcatOfManyInputsCopiesEachOnce) {
  GraphBuilder b;
  std::vector<ValueId> parts;
  for (int i = 0; i < 24; ++i) parts.push_back(b.f32(fmt::format("x{}", i), {1, 32, 14, 14}));
  const std::string code = whole_kernel_cpu_code(b.finish({b.node("Concat", parts, attrs({{"axis", int64_t{1}}}))}));
  ASSERT_FALSE(code.empty());
  EXPECT_EQ(occurrences(code, "#pragma omp simd"), 24) << code;
  EXPECT_EQ(code.find(" ? "), std::string::npos) << code;  // no per-element select left
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

// Concat and Pad along the innermost axis: the loop is split where the source changes, so each
// piece copies one branch (no per-element select or clamp) and the interior of a reflect pad reads
// plain addresses; the pieces together match the reference (EveryOpMatchesTheReference runs them).
TEST(LoopKernel, InnermostConcatAndPadSplitTheLoopAtTheirSeams) {
  const auto kernel = whole_kernel;
  auto ops_in = [](const loop::Stage& st, loop::ExprOp op) {  // among the nodes the stores read
    std::vector<char> seen(st.exprs.size(), 0);
    std::vector<int> todo;
    for (const loop::Store& s : st.stores) todo.push_back(s.value);
    int n = 0;
    while (!todo.empty()) {
      const int e = todo.back();
      todo.pop_back();
      if (seen[static_cast<size_t>(e)]) continue;
      seen[static_cast<size_t>(e)] = 1;
      n += st.exprs[static_cast<size_t>(e)].op == op;
      for (int a : st.exprs[static_cast<size_t>(e)].args) todo.push_back(a);
    }
    return n;
  };
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 16, 40}), y = b.f32("y", {2, 16, 24}), z = b.f32("z", {2, 16, 8});
    auto k = kernel(b.finish({b.node("Concat", {b.node("Relu", {x}), y, z}, attrs({{"axis", int64_t{2}}}))}));
    ASSERT_TRUE(k);
    ASSERT_EQ(k->stages.size(), 3u) << describe_loop_kernel(*k);
    const int64_t widths[] = {40, 24, 8};
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(k->stages[i].loops.back().extent, widths[i]);
      EXPECT_EQ(ops_in(k->stages[i], loop::ExprOp::kInRange), 0) << describe_loop_kernel(*k);
      EXPECT_EQ(ops_in(k->stages[i], loop::ExprOp::kLoad), 1) << describe_loop_kernel(*k);
    }
  }
  {
    GraphBuilder b;
    ValueId x = b.f32("x", {1, 4, 30, 30});
    ValueId p = b.node("Pad", {x, b.ints({0, 0, 2, 3, 0, 0, 2, 3})}, attrs({{"mode", std::string("reflect")}}));
    auto k = kernel(b.finish({p}));
    ASSERT_TRUE(k);
    // Left border, interior (the mirror's crossing point may go either side), right border.
    ASSERT_GE(k->stages.size(), 3u) << describe_loop_kernel(*k);
    const loop::Stage& interior = k->stages[1];
    EXPECT_GE(interior.loops.back().extent, 29) << describe_loop_kernel(*k);
    for (const loop::IndexNode& n : interior.index)
      if (n.level == static_cast<int>(interior.loops.size()) - 1) {
        EXPECT_TRUE(n.op == loop::IndexOp::kVar || n.op == loop::IndexOp::kSum) << describe_loop_kernel(*k);
      }
  }
  {  // A dense block's channels-last Concat (24 inputs, more than a reflect pad's few pieces) with
     // the next layer's per-channel scale and shift: one piece per input, no test left in any.
    GraphBuilder b;
    std::vector<ValueId> parts;
    int64_t width = 0;
    for (int i = 0; i < 24; ++i) {
      parts.push_back(b.f32(fmt::format("x{}", i), {1, 7, i == 0 ? 64 : 32}));
      width += i == 0 ? 64 : 32;
    }
    ValueId c = b.node("Concat", parts, attrs({{"axis", int64_t{2}}}));
    auto per_channel = [&](const char* name) { return b.node("Expand", {b.f32(name, {width}), b.ints({1, 7, width})}); };
    ValueId y = b.node("Add", {b.node("Mul", {c, per_channel("scale")}), per_channel("shift")});
    auto k = kernel(b.finish({y}));
    ASSERT_TRUE(k);
    ASSERT_EQ(k->stages.size(), 24u) << describe_loop_kernel(*k);
    for (size_t i = 0; i < 24; ++i) {
      EXPECT_EQ(k->stages[i].loops.back().extent, i == 0 ? 64 : 32);
      EXPECT_EQ(ops_in(k->stages[i], loop::ExprOp::kInRange), 0) << describe_loop_kernel(*k);
    }
  }
  {  // Along an outer axis the emitters already hoist the choice: one stage.
    GraphBuilder b;
    ValueId x = b.f32("x", {2, 16, 40}), y = b.f32("y", {2, 8, 40});
    auto k = kernel(b.finish({b.node("Concat", {x, y}, attrs({{"axis", int64_t{1}}}))}));
    ASSERT_TRUE(k);
    EXPECT_EQ(k->stages.size(), 1u) << describe_loop_kernel(*k);
  }
}

}  // namespace
}  // namespace korch::testing
