// The oneDNN linear step against the reference interpreter: each case builds a tiny primitive
// graph (Conv/MatMul + epilogue), matches the whole graph as one kernel, checks what the step
// absorbs, runs it through CpuKernel (or the step alone when nodes are left for the loop emitter)
// and compares `result` with the interpreter at 1e-4 relative L2.
#include "codegen/linear_match.h"
#include "runtime/cpu/cpu_linear_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "runtime/cpu/cpu_kernel.h"
#include "codegen/cpu/cpu_backend.h"
#include "codegen/kernel_parts.h"
#include "codegen/kernel_signature.h"
#include "ir/interpreter.h"
#include "ir/primitive.h"
#include "ir/tensor_compare.h"
#include "ir/op_registry.h"
#include "ir/random.h"
#include "linear_test_util.h"
#include "orchestrate/kernel_candidate.h"

namespace korch::cpu {
namespace {

using namespace linear_test;

// The project-wide criterion (ir/tensor_compare.h), with the shapes checked first.
double rel_l2(const Tensor& out, const Tensor& ref) {
  EXPECT_EQ(out.shape(), ref.shape());
  return rel_l2_error(out, ref);
}

// The reference value of `v` computed by the subgraph `nodes`, fed from `inputs` by value id.
Tensor reference(const Graph& g, const std::vector<NodeId>& nodes, ValueId v, const std::map<ValueId, Tensor>& inputs) {
  KernelCandidate c = make_candidate(g, nodes, false);
  std::vector<Tensor> in;
  for (ValueId a : kernel_arg_inputs(g, c)) in.push_back(inputs.count(a) ? inputs.at(a) : *g.value(a).constant);
  auto outs = interpret(kernel_subgraph(g, c), in);
  for (size_t i = 0; i < c.outputs.size(); ++i)
    if (c.outputs[i] == v) return outs[i];
  ADD_FAILURE() << "value " << v << " is not an output of the reference subgraph";
  return {};
}

struct Expect {
  size_t absorbed;       // nodes absorbed (post-ops and Expands)
  bool result_is_final;  // result is the last node's output
};

// Matches all of g's nodes as one kernel (outputs = graph outputs), runs the step, compares.
LinearMatch run_case(Builder& b, Expect e, const std::string& format = "auto", const std::string& algorithm = "") {
  Graph& g = b.g;
  if (g.outputs.empty()) g.outputs = {g.nodes.back().outputs[0]};
  std::vector<NodeId> all;
  for (NodeId i = 0; i < static_cast<NodeId>(g.nodes.size()); ++i) all.push_back(i);
  KernelCandidate c = make_candidate(g, all, false);
  LinearMatchResult m = match_linear(g, c.nodes, c.outputs);
  EXPECT_TRUE(m.ok) << m.reason;
  if (!m.ok) return {};
  EXPECT_EQ(m.match.absorbed.size(), e.absorbed) << m.match.desc.dump();
  EXPECT_EQ(m.match.result == g.nodes.back().outputs[0], e.result_is_final);

  const std::vector<ValueId> args = kernel_arg_inputs(g, c);
  nlohmann::json desc = m.match.desc;
  desc["format"] = format;
  if (!algorithm.empty()) desc["conv"]["algorithm"] = algorithm;
  std::vector<int> slots;
  for (ValueId v : m.match.operands) {
    auto it = std::find(args.begin(), args.end(), v);
    EXPECT_NE(it, args.end());
    slots.push_back(static_cast<int>(it - args.begin()));
  }
  desc["operand_slots"] = slots;
  auto out_it = std::find(c.outputs.begin(), c.outputs.end(), m.match.result);
  const bool result_is_output = out_it != c.outputs.end();
  desc["result_slot"] = static_cast<int>(args.size() + (result_is_output ? out_it - c.outputs.begin() : c.outputs.size()));

  std::map<ValueId, Tensor> inputs;
  std::vector<const void*> in_ptrs;
  for (ValueId v : args) {
    inputs[v] = g.value(v).is_constant() ? *g.value(v).constant : random_tensor(g.type(v), b.rng);
    in_ptrs.push_back(inputs[v].raw());
  }
  std::vector<Tensor> outs;
  std::vector<void*> out_ptrs;
  for (ValueId v : c.outputs) outs.emplace_back(g.type(v));
  for (Tensor& t : outs) out_ptrs.push_back(t.raw());
  Tensor result(g.type(m.match.result));
  if (result_is_output) {
    CpuKernelRecipe r;
    r.linear = desc;
    for (ValueId v : args) r.inputs.push_back(g.type(v));
    for (ValueId v : c.outputs) r.outputs.push_back(g.type(v));
    CpuKernel k(r, nullptr);
    for (int rep = 0; rep < 2; ++rep) k.run(in_ptrs.data(), out_ptrs.data());  // twice: cached weights
    result = outs[static_cast<size_t>(out_it - c.outputs.begin())];
  } else {
    // Nodes remain for the loop emitter: check `result` in the step's scratch slot.
    auto step = LinearStep::create(desc);
    std::vector<void*> a;
    for (const void* p : in_ptrs) a.push_back(const_cast<void*>(p));
    for (void* p : out_ptrs) a.push_back(p);
    a.push_back(result.raw());
    step->run(a.data());
  }
  std::vector<NodeId> chain = m.match.absorbed;
  chain.push_back(m.match.linear);
  for (NodeId id : c.nodes) {  // un-absorbed nodes of constants only (a shared Expand) feed it too
    const Node& n = g.nodes[static_cast<size_t>(id)];
    bool consts = std::all_of(n.inputs.begin(), n.inputs.end(), [&](ValueId v) { return g.value(v).is_constant(); });
    if (consts && std::find(chain.begin(), chain.end(), id) == chain.end()) chain.push_back(id);
  }
  std::sort(chain.begin(), chain.end());
  Tensor ref = reference(g, chain, m.match.result, inputs);
  EXPECT_LE(rel_l2(result, ref), 1e-4) << m.match.desc.dump();
  if (result_is_output) {  // the full kernel too, when the step is all of it
    auto full = interpret(kernel_subgraph(g, c), [&] {
      std::vector<Tensor> in;
      for (ValueId v : args) in.push_back(inputs[v]);
      return in;
    }());
    EXPECT_LE(rel_l2(result, full[static_cast<size_t>(out_it - c.outputs.begin())]), 1e-4);
  }
  return m.match;
}

// The implementation oneDNN picks for a matched step (its impl name and memory layouts), built
// from the match's description alone (slots are irrelevant to the choice).
std::string step_implementation(LinearMatch m) {
  m.desc["operand_slots"] = std::vector<int>(m.desc.at("operands").size(), 0);
  m.desc["result_slot"] = 0;
  return LinearStep::create(m.desc)->implementation();
}

TEST(LinearConv, Conv3x3Pad1BiasRelu) {
  for (const char* format : {"plain", "blocked"}) {
    Builder b;
    ValueId y = b.conv(b.input({1, 16, 10, 10}), {32, 16, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
    b.op("Relu", {b.bias(y)});
    run_case(b, {3, true}, format);
  }
}

// The "winograd" schedule (cpu_backend.h): oneDNN's Winograd kernel on a 3x3 stride-1 convolution
// with its epilogue, in NCHW and channels-last, within 1e-4 of the reference; the backend offers
// it beside "direct" for such a kernel only, and says why for any other.
TEST(LinearConv, WinogradScheduleMatchesTheReference) {
  for (bool channels_last : {false, true}) {
    Builder b;
    Attributes a = attrs({{"pads", {1, 1, 1, 1}}});
    if (channels_last) a.set("channels_last", int64_t{1});
    const ValueId x = b.input(channels_last ? Shape{1, 20, 20, 32} : Shape{1, 32, 20, 20});
    const ValueId y = b.conv(x, {32, 32, 3, 3}, a);
    if (!channels_last) b.op("Relu", {b.bias(y)});
    LinearMatch m = run_case(b, {channels_last ? 0u : 3u, true}, "auto", "winograd");
    m.desc["conv"]["algorithm"] = "winograd";  // what run_case ran
    EXPECT_NE(step_implementation(m).find("wino"), std::string::npos) << step_implementation(m);

    CpuBackend backend;
    std::vector<NodeId> all;
    for (NodeId i = 0; i < static_cast<NodeId>(b.g.nodes.size()); ++i) all.push_back(i);
    const KernelCandidate c = make_candidate(b.g, all, false);
    EXPECT_EQ(backend.schedule_variants(b.g, c), (std::vector<std::string>{"direct", "winograd"}));
    const EmittedKernel w = backend.emit(b.g, c, "winograd");
    ASSERT_TRUE(w.ok) << w.reason;
    EXPECT_EQ(w.variant, "winograd");
    EXPECT_EQ(w.recipe.at("linear").at("conv").at("algorithm"), "winograd");
    const EmittedKernel d = backend.emit(b.g, c, "direct");
    ASSERT_TRUE(d.ok) << d.reason;
    EXPECT_FALSE(d.recipe.at("linear").at("conv").contains("algorithm"));
    EXPECT_NE(backend.emit(b.g, c, "tiled").reason.find("not 'tiled'"), std::string::npos);
  }
  // A 1x1 or strided convolution has no Winograd schedule.
  for (int64_t k : {1, 3}) {
    Builder b;
    const ValueId x = b.input({1, 32, 20, 20});
    b.g.outputs = {b.conv(x, {32, 32, k, k}, attrs({{"strides", {k, k}}}))};
    CpuBackend backend;
    const KernelCandidate c = make_candidate(b.g, {0}, false);
    EXPECT_TRUE(backend.schedule_variants(b.g, c).empty());
    EXPECT_NE(backend.emit(b.g, c, "winograd").reason.find("3x3 stride-1"), std::string::npos);
  }
}

TEST(LinearConv, Stride2) {
  Builder b;
  b.conv(b.input({2, 8, 11, 9}), {16, 8, 3, 3}, attrs({{"pads", {1, 0, 1, 2}}, {"strides", {2, 2}}}));
  run_case(b, {0, true});
}

TEST(LinearConv, Pointwise) {
  for (const char* format : {"plain", "blocked"}) {
    Builder b;
    b.bias(b.conv(b.input({1, 24, 14, 14}), {40, 24, 1, 1}));
    run_case(b, {2, true}, format);
  }
}

TEST(LinearConv, DepthwiseReluClip) {
  for (const char* format : {"plain", "blocked"}) {
    Builder b;
    ValueId y = b.conv(b.input({1, 32, 12, 12}), {32, 1, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}, 32));
    b.op("Clip", {b.bias(y), b.scalar(0.f), b.scalar(6.f)});
    run_case(b, {3, true}, format);
  }
}

TEST(LinearConv, Grouped) {
  Builder b;
  b.conv(b.input({1, 16, 9, 9}), {24, 4, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}, 4));
  run_case(b, {0, true});
}

TEST(LinearConv, Dilated) {
  Builder b;
  b.conv(b.input({1, 8, 16, 16}), {8, 8, 3, 3}, attrs({{"pads", {2, 2, 2, 2}}, {"dilations", {2, 2}}}));
  run_case(b, {0, true});
}

TEST(LinearConv, Stem7x7Stride2) {
  for (const char* format : {"plain", "blocked"}) {
    Builder b;
    ValueId y = b.conv(b.input({1, 3, 32, 32}), {16, 3, 7, 7}, attrs({{"pads", {3, 3, 3, 3}}, {"strides", {2, 2}}}));
    b.op("Relu", {b.bias(y)});
    run_case(b, {3, true}, format);
  }
}

TEST(LinearConv, Conv1dAndConv3d) {
  {
    Builder b;
    b.op("LeakyRelu", {b.conv(b.input({2, 4, 20}), {6, 4, 5}, attrs({{"pads", {2, 2}}}))});
    run_case(b, {1, true});
  }
  {
    Builder b;
    b.bias(b.conv(b.input({1, 4, 6, 7, 8}), {8, 4, 3, 3, 3}, attrs({{"pads", {1, 1, 1, 1, 1, 1}}})));
    run_case(b, {2, true});
  }
}

TEST(LinearConv, AutoPadSameUpper) {
  Builder b;
  Attributes a = attrs({{"strides", {2, 2}}});
  a.set("auto_pad", std::string("SAME_UPPER"));
  b.conv(b.input({1, 4, 9, 10}), {8, 4, 4, 4}, a);
  run_case(b, {0, true});
}

TEST(LinearConv, ResidualAddRelu) {
  for (const char* format : {"plain", "blocked"}) {
    Builder b;
    ValueId skip = b.input({1, 16, 8, 8});
    ValueId y = b.bias(b.conv(b.input({1, 16, 8, 8}), {16, 16, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}})));
    b.op("Relu", {b.op("Add", {skip, y})});
    run_case(b, {4, true}, format);
  }
}

TEST(LinearConv, SecondFullShapeOperandStops) {
  // The residual Sub becomes a sum post-op (blocked layouts); a second full-shape operand would
  // push oneDNN to a plain gemm convolution, so the chain stops before the Mul.
  for (const char* format : {"plain", "blocked"}) {
    Builder b;
    ValueId y = b.conv(b.input({1, 16, 7, 7}), {32, 16, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
    y = b.op("Sub", {b.input({1, 32, 7, 7}), y});
    y = b.op("Mul", {y, b.input({1, 32, 7, 7})});
    b.op("Add", {y, b.input({1, 32, 7, 7})});
    run_case(b, {1, false}, format);
  }
}

TEST(LinearConv, PerPixelOperandStops) {
  Builder b;
  ValueId y = b.conv(b.input({1, 8, 6, 6}), {8, 8, 1, 1});
  b.op("Mul", {y, b.op("Expand", {b.input({1, 1, 6, 6}), b.ints({1, 8, 6, 6})})});
  run_case(b, {0, false});
}

TEST(LinearConv, HardSwishAndScalars) {
  Builder b;
  ValueId y = b.conv(b.input({1, 8, 6, 6}), {16, 8, 1, 1});
  y = b.op("HardSwish", {y});
  y = b.op("Mul", {b.scalar(0.5f), y});
  y = b.op("Sub", {b.scalar(2.f), y});
  y = b.op("Div", {y, b.scalar(3.f)});
  b.op("HardSigmoid", {y});
  run_case(b, {5, true});
}

TEST(LinearConv, RepeatedEltwiseAlgorithmStops) {
  // Relu after LeakyRelu would repeat eltwise_relu with another alpha, which oneDNN 2.6's brgemm
  // kernels compute wrongly: the chain ends before it. Consecutive linear ops are composed.
  Builder b;
  ValueId y = b.conv(b.input({1, 8, 6, 6}), {16, 8, 1, 1});
  y = b.op("Mul", {y, b.scalar(3.f)});
  y = b.op("Add", {y, b.scalar(-1.f)});
  y = b.op("LeakyRelu", {y});
  b.op("Relu", {y});
  LinearMatch m = run_case(b, {3, false}, "blocked");
  EXPECT_EQ(m.desc["post_ops"].size(), 2u) << m.desc.dump();
}

TEST(LinearConv, EachEltwiseOp) {
  const char* ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Abs", "Softplus", "Mish", "HardSwish",
                       "HardSigmoid", "Elu", "LeakyRelu", "Neg", "Reciprocal", "Gelu", "Max", "Min", "Pow"};
  for (const char* op : ops)
    for (int mm = 0; mm < 2; ++mm) {
      SCOPED_TRACE(op);
      Builder b;
      b.g.opset = 20;  // Gelu
      ValueId y = mm ? b.op("MatMul", {b.input({20, 16}), b.weight({16, 24})})
                     : b.conv(b.input({1, 8, 5, 5}), {16, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
      const std::string o = op;
      size_t n = 1;
      if (o == "Log" || o == "Sqrt" || o == "Reciprocal" || o == "Pow") {  // keep the domain positive
        y = b.op("Add", {b.op("Abs", {y}), b.scalar(0.5f)});
        n = 3;
      }
      if (o == "Max" || o == "Min") b.op(op, {b.scalar(0.25f), y});
      else if (o == "Pow") b.op(op, {y, b.scalar(1.5f)});
      else b.op(op, {y});
      run_case(b, {n, true});
    }
}

TEST(LinearConv, OperandOrder) {
  // Sub(x, conv) is not binary_sub(conv, x); Div(conv, c) is; Div(c, conv) stops.
  Builder b;
  ValueId x = b.input({1, 8, 5, 5});
  ValueId y = b.conv(b.input({1, 8, 5, 5}), {8, 8, 1, 1});
  y = b.op("Sub", {x, y});
  y = b.op("Div", {y, b.expand_const({1, 8, 1, 1}, {1, 8, 5, 5})});
  b.op("Div", {b.expand_const({1, 8, 1, 1}, {1, 8, 5, 5}), y});
  run_case(b, {3, false});
}

TEST(LinearConv, SiluIsSwish) {
  Builder b;
  ValueId y = b.bias(b.conv(b.input({1, 8, 6, 6}), {16, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}})));
  b.op("Mul", {y, b.op("Sigmoid", {y})});
  run_case(b, {4, true});
}

TEST(LinearConv, SiluWithSigmoidOutputStops) {
  // The Sigmoid value is also a kernel output: the chain stops at the bias Add, cleanly.
  Builder b;
  ValueId y = b.bias(b.conv(b.input({1, 8, 6, 6}), {16, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}})));
  ValueId s = b.op("Sigmoid", {y});
  ValueId m = b.op("Mul", {y, s});
  b.g.outputs = {s, m};
  run_case(b, {2, false});
}

TEST(LinearConv, IntermediateOutputStops) {
  Builder b;
  ValueId y = b.conv(b.input({1, 8, 6, 6}), {16, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
  ValueId r = b.op("Relu", {y});
  b.g.outputs = {y, r};
  LinearMatch m = run_case(b, {0, false});
  EXPECT_EQ(m.result, y);
}

TEST(LinearConv, SharedExpandIsNotAbsorbed) {
  // The Expand also feeds a node the step does not absorb (Mul of the chain value with itself
  // stops the chain), so it stays for the loop emitter; the post-op still reads the small constant.
  Builder b;
  ValueId e = b.expand_const({1, 8, 1, 1}, {1, 8, 4, 4});
  ValueId y = b.op("Add", {b.conv(b.input({1, 8, 4, 4}), {8, 8, 1, 1}), e});
  ValueId z = b.op("Mul", {y, y});
  b.op("Add", {z, e});
  run_case(b, {1, false});
}

TEST(LinearMatMul, TwoDConst) {
  Builder b;
  b.op("Relu", {b.op("MatMul", {b.input({33, 48}), b.weight({48, 20})})});
  run_case(b, {1, true});
}

TEST(LinearConv, MishAsExportedIsOnePostOp) {
  // yolov4's activation: x * tanh(softplus(x)) after a Conv and its bias -> eltwise_mish.
  Builder b;
  ValueId y = b.bias(b.conv(b.input({1, 8, 6, 6}), {16, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}})));
  b.op("Mul", {b.op("Tanh", {b.op("Softplus", {y})}), y});
  LinearMatch m = run_case(b, {5, true});
  EXPECT_EQ(m.desc.at("post_ops").back().value("alg", std::string()), "mish") << m.desc.dump();
  // The Tanh value also a kernel output: the chain stops at the bias.
  Builder b2;
  ValueId y2 = b2.bias(b2.conv(b2.input({1, 8, 6, 6}), {16, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}})));
  ValueId t = b2.op("Tanh", {b2.op("Softplus", {y2})});
  b2.g.outputs = {t, b2.op("Mul", {y2, t})};
  run_case(b2, {2, false});
}

TEST(LinearMatMul, VitMlpBiasThenErfGelu) {
  Builder b;
  ValueId h = b.op("MatMul", {b.input({1, 197, 768}), b.weight({768, 3072})});
  h = b.op("Add", {h, b.expand_const({3072}, {1, 197, 3072})});
  // Erf-GELU as exported: x * 0.5 * (1 + erf(x / sqrt(2))): the bias output has two readers
  // (Div and Mul); they are gelu_erf, then linear(2), then the 0.5: all absorbed, the two linear
  // post-ops merged into one (alpha 1).
  ValueId d = b.op("Div", {h, b.scalar(1.4142135f)});
  ValueId e = b.op("Add", {b.op("Erf", {d}), b.scalar(1.f)});
  b.op("Mul", {b.op("Mul", {h, e}), b.scalar(0.5f)});
  LinearMatch m = run_case(b, {7, true});
  std::vector<std::string> algs;
  for (const auto& op : m.desc.at("post_ops")) algs.push_back(op.value("alg", std::string()));
  EXPECT_EQ(algs, (std::vector<std::string>{"add", "gelu_erf", "linear"})) << m.desc.dump();
  EXPECT_EQ(m.desc.at("post_ops").back().value("alpha", 0.0), 1.0);
}

TEST(LinearMatMul, ErfGeluFormsAndWhereTheyStop) {
  // Mul by 1/sqrt(2) with the constant first, the Add's 1 first, no 0.5 after (folded elsewhere).
  {
    Builder b;
    ValueId h = b.op("MatMul", {b.input({40, 24}), b.weight({24, 32})});
    ValueId e = b.op("Add", {b.scalar(1.f), b.op("Erf", {b.op("Mul", {b.scalar(0.70710678f), h})})});
    b.op("Mul", {e, h});
    run_case(b, {4, true});
  }
  // Not sqrt(2): no gelu_erf, the chain stops at the MatMul.
  {
    Builder b;
    ValueId h = b.op("MatMul", {b.input({40, 24}), b.weight({24, 32})});
    ValueId e = b.op("Add", {b.op("Erf", {b.op("Div", {h, b.scalar(1.5f)})}), b.scalar(1.f)});
    b.op("Mul", {h, e});
    run_case(b, {0, false});
  }
  // The Erf value is also a kernel output: stops too.
  {
    Builder b;
    ValueId h = b.op("MatMul", {b.input({40, 24}), b.weight({24, 32})});
    ValueId er = b.op("Erf", {b.op("Div", {h, b.scalar(1.4142135f)})});
    ValueId m = b.op("Mul", {h, b.op("Add", {er, b.scalar(1.f)})});
    b.g.outputs = {er, m};
    run_case(b, {0, false});
  }
}

TEST(LinearMatMul, AttentionBatched) {
  Builder b;
  ValueId s = b.op("MatMul", {b.input({2, 4, 50, 16}), b.input({2, 4, 16, 50})});
  b.op("Mul", {s, b.scalar(0.25f)});
  run_case(b, {1, true});
  Builder b2;
  b2.op("MatMul", {b2.input({2, 4, 50, 50}), b2.input({2, 4, 50, 16})});
  run_case(b2, {0, true});
}

TEST(LinearMatMul, BroadcastBatch) {
  Builder b;
  b.op("MatMul", {b.input({2, 1, 8, 16}), b.input({3, 16, 4})});
  run_case(b, {0, true});
  Builder b2;
  ValueId y = b2.op("MatMul", {b2.input({3, 5, 7}), b2.weight({1, 7, 6})});
  b2.op("Add", {y, b2.expand_const({1, 5, 1}, {3, 5, 6})});  // a per-row bias: collapsed rows can't express it
  run_case(b2, {0, false});
}

TEST(LinearMatMul, VectorOperands) {
  Builder b;
  b.op("MatMul", {b.input({16}), b.weight({16, 8})});
  run_case(b, {0, true});
  Builder b2;
  b2.op("Tanh", {b2.op("MatMul", {b2.input({4, 8, 16}), b2.input({16})})});
  run_case(b2, {1, true});
}

TEST(LinearMatMul, ResidualAndBiasBatched) {
  Builder b;
  ValueId y = b.op("MatMul", {b.input({2, 6, 10}), b.input({2, 10, 12})});
  y = b.op("Add", {y, b.expand_const({12}, {2, 6, 12})});
  b.op("Sub", {b.input({2, 6, 12}), y});
  run_case(b, {3, true});
  // A per-row operand would make oneDNN use its reference matmul: the chain stops.
  Builder b2;
  ValueId y2 = b2.op("MatMul", {b2.input({2, 6, 10}), b2.input({2, 10, 12})});
  b2.op("Add", {y2, b2.expand_const({2, 6, 1}, {2, 6, 12})});
  run_case(b2, {0, false});
}

TEST(LinearConvTranspose, UnetShapes) {
  {
    // unet_small up3, k2 s2: its windows tile the output, so fission writes it as a MatMul and a
    // patch layout (patch_conv_transpose); it never reaches the library as a deconvolution.
    Builder b;
    b.op("ConvTranspose", {b.input({1, 16, 7, 7}), b.weight({16, 8, 2, 2})}, attrs({{"strides", {2, 2}}}));
    EXPECT_EQ(primitive_kind(b.g, b.g.nodes.back()), PrimitiveKind::kOperator);
  }
  for (const char* format : {"plain", "blocked"}) {
    Builder b;  // the k4 s2 p1 upsampler (GAN and UNet decoders), with its bias and Relu as post-ops
    ValueId y = b.op("ConvTranspose", {b.input({1, 16, 7, 7}), b.weight({16, 8, 4, 4})},
                     attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}}));
    b.op("Relu", {b.bias(y)});
    run_case(b, {3, true}, format);
    Builder b2;  // up2: k3 s2 p1 output_padding 1
    b2.op("ConvTranspose", {b2.input({1, 8, 9, 9}), b2.weight({8, 4, 3, 3})},
          attrs({{"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}, {"output_padding", {1, 1}}}));
    run_case(b2, {0, true}, format);
  }
}

TEST(LinearConvTranspose, GroupedDilatedAndSamePad) {
  Builder b;
  b.op("ConvTranspose", {b.input({2, 8, 5, 6}), b.weight({8, 3, 3, 3})},
       attrs({{"strides", {2, 1}}, {"dilations", {1, 2}}, {"pads", {0, 1, 1, 0}}}, 2));
  run_case(b, {0, true});
  Builder b2;
  Attributes a = attrs({{"strides", {2, 2}}});
  a.set("auto_pad", std::string("SAME_UPPER"));
  b2.op("ConvTranspose", {b2.input({1, 4, 5, 5}), b2.weight({4, 6, 3, 3})}, a);
  run_case(b2, {0, true});
  Builder b3;  // 1-D
  b3.op("ConvTranspose", {b3.input({1, 4, 10}), b3.weight({4, 6, 4})}, attrs({{"strides", {2}}, {"pads", {1, 1}}}));
  run_case(b3, {0, true});
}

Attributes equation(const char* eq) {
  Attributes a;
  a.set("equation", std::string(eq));
  return a;
}

TEST(LinearEinsum, MaxvitAttention) {
  Builder b;  // q k^T: K before N in the second operand (a transposed view)
  ValueId s = b.op("Einsum", {b.input({1, 2, 3, 16, 8}), b.input({1, 2, 3, 16, 8})}, equation("B G H I D, B G H J D -> B G H I J"));
  b.op("Mul", {s, b.scalar(0.3f)});
  run_case(b, {1, true});
  Builder b2;
  b2.op("Einsum", {b2.input({1, 2, 3, 16, 16}), b2.input({1, 2, 3, 16, 8})}, equation("BGHIJ,BGHJD->BGHID"));
  run_case(b2, {0, true});
}

TEST(LinearEinsum, TensorOpsAndTransposedLayouts) {
  Builder b;
  ValueId y = b.op("Einsum", {b.input({2, 5, 6}), b.weight({6, 7})}, equation("bnd,de->bne"));
  b.op("Add", {y, b.expand_const({7}, {2, 5, 7})});
  run_case(b, {2, true});
  Builder b2;
  b2.op("Einsum", {b2.input({2, 5, 7}), b2.input({2, 4, 7})}, equation("bne,bme->bnm"));
  run_case(b2, {0, true});
  Builder b3;  // batch label in the middle of A, contracted label first in B
  b3.op("Einsum", {b3.input({5, 3, 6}), b3.input({6, 3, 4})}, equation("ibk,kbj->bij"));
  run_case(b3, {0, true});
  Builder b4;  // matrix-vector: no N label
  b4.op("Einsum", {b4.input({3, 5, 6}), b4.input({3, 6})}, equation("bik,bk->bi"));
  run_case(b4, {0, true});
}

TEST(LinearEinsum, Reasons) {
  const std::pair<const char*, std::vector<Shape>> cases[] = {
      {"bij,bjk->bki", {{2, 3, 4}, {2, 4, 5}}},   // output not [batch, M, N]
      {"ii,ij->ij", {{3, 3}, {3, 4}}},            // diagonal
      {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 5}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
  };
  for (const auto& [eq, shapes] : cases) {
    Builder b;
    std::vector<ValueId> in;
    for (const Shape& s : shapes) in.push_back(b.input(s));
    b.op("Einsum", in, equation(eq));
    auto m = match_linear(b.g, {0}, {b.g.nodes[0].outputs[0]});
    EXPECT_FALSE(m.ok) << eq;
    EXPECT_NE(m.reason.find("Einsum"), std::string::npos) << m.reason;
  }
}

TEST(LinearMatch, Reasons) {
  {
    Builder b;  // an output padding larger than the end padding: oneDNN has no negative padding
    b.op("ConvTranspose", {b.input({1, 4, 5, 5}), b.weight({4, 2, 3, 3})},
         attrs({{"strides", {2, 2}}, {"output_padding", {1, 1}}}));
    KernelCandidate c = make_candidate(b.g, {0}, false);
    auto m = match_linear(b.g, c.nodes, c.outputs);
    EXPECT_FALSE(m.ok);
    EXPECT_NE(m.reason.find("ConvTranspose"), std::string::npos) << m.reason;
  }
  {
    Builder b;
    b.op("Relu", {b.input({4})});
    auto m = match_linear(b.g, {0}, {b.g.nodes[0].outputs[0]});
    EXPECT_FALSE(m.ok);
    EXPECT_NE(m.reason.find("no linear"), std::string::npos) << m.reason;
  }
  {
    Builder b;  // a prologue: the MatMul reads a value computed inside the kernel
    ValueId a = b.op("Relu", {b.input({4, 8})});
    b.op("MatMul", {a, b.weight({8, 3})});
    KernelCandidate c = make_candidate(b.g, {0, 1}, false);
    auto m = match_linear(b.g, c.nodes, c.outputs);
    EXPECT_FALSE(m.ok);
    EXPECT_NE(m.reason.find("inside the kernel"), std::string::npos) << m.reason;
  }
  {
    Builder b;  // two linear primitives
    ValueId a = b.op("MatMul", {b.input({4, 8}), b.weight({8, 8})});
    b.op("MatMul", {a, b.weight({8, 3})});
    KernelCandidate c = make_candidate(b.g, {0, 1}, false);
    auto m = match_linear(b.g, c.nodes, c.outputs);
    EXPECT_FALSE(m.ok);
    EXPECT_NE(m.reason.find("more than one"), std::string::npos) << m.reason;
  }
  {
    nlohmann::json bad = {{"op", "Conv"}};
    EXPECT_THROW(LinearStep::create(bad), Error);
  }
}

}  // namespace
}  // namespace korch::cpu

namespace korch::cpu {
namespace {

// An int8 QDQ convolution's chain (linear_match.cc: output scales, bias, QuantizeLinear with zero
// point 0 as a uint8 dst) on a channel-reducing 1x1 convolution, which the "auto" layout rule ran
// as NCHW for f32: oneDNN has only ref_int8 there (squeezenet1_0: 1000x slower). Exact and jit.
TEST(LinearConv, Int8PointwiseWithEpilogueIsExactAndJit) {
  using namespace linear_test;
  Builder b;
  ValueId x = b.g.add_input("x", {DType::kUInt8, {1, 96, 9, 9}});
  ValueId w = b.g.add_constant("w", random_tensor({DType::kInt8, {24, 96, 1, 1}}, b.rng));
  ValueId y = b.op("ConvInteger", {x, w, b.g.add_constant("xzp", Tensor::scalar<uint8_t>(120))});
  Attributes to_f32;
  to_f32.set("to", int64_t{1});
  y = b.bias(b.op("Mul", {b.op("Cast", {y}, to_f32), b.scalar(0.0004f)}));
  b.op("QuantizeLinear", {y, b.scalar(0.05f), b.g.add_constant("yzp", Tensor::scalar<uint8_t>(0))});
  LinearMatch m = run_case(b, {5, true}, "auto");
  ASSERT_EQ(m.desc.at("dtypes").at("dst"), "u8");
  const std::string impl = step_implementation(m);
  EXPECT_NE(impl.rfind("ref", 0), 0u) << impl;
}

// Unit spatial axes (size 1 in source, weights and destination, unpadded) are dropped before oneDNN
// sees the problem (squeeze_unit_spatial): a 1-D convolution written in 2-D or 3-D, with its bias
// and Relu as post-ops, a ConvTranspose, and a channels-last one must still match the reference.
TEST(LinearConv, UnitSpatialAxesAreDropped) {
  using namespace linear_test;
  for (const char* format : {"auto", "blocked", "plain"}) {
    SCOPED_TRACE(format);
    Builder b;
    ValueId y = b.op("Conv", {b.input({1, 8, 9, 1}), b.weight({6, 8, 3, 1})}, attrs({{"pads", {1, 0, 1, 0}}}));
    b.op("Relu", {b.bias(y)});
    LinearMatch m = run_case(b, {3, true}, format);
    m.desc["format"] = format;
    // oneDNN sees a 1-D problem: the source's layout tag names three axes ("abc", "acb", "abc8b"...).
    const std::string impl = step_implementation(m);
    const size_t at = impl.find(" src ") + 5;
    const std::string tag = impl.substr(at, impl.find(' ', at) - at);
    EXPECT_EQ(std::min(tag.find_first_of("0123456789"), tag.size()), 3u) << impl;
  }
  Builder b3;  // two unit axes of three
  b3.op("Conv", {b3.input({1, 4, 1, 7, 1}), b3.weight({5, 4, 1, 3, 1})}, attrs({{"strides", {1, 2, 1}}}));
  run_case(b3, {0, true});
  Builder bt;
  bt.op("ConvTranspose", {bt.input({1, 4, 5, 1}), bt.weight({4, 3, 3, 1})}, attrs({{"strides", {2, 1}}, {"pads", {1, 0, 1, 0}}}));
  run_case(bt, {0, true});
}

// The receptive-field sum that fission adds for uint8 weights whose zero point does not fold
// (split_weight_zero_point): a grouped ConvInteger with all-ones int8 weights, one output channel
// per group, strides, asymmetric pads and the input's zero point, on oneDNN's int8 kernels.
TEST(LinearConv, GroupedAllOnesInt8SumIsALibraryStep) {
  using namespace linear_test;
  Builder b;
  ValueId x = b.g.add_input("x", {DType::kUInt8, {1, 4, 7, 6}});
  ValueId ones = b.g.add_constant("ones", Tensor::from_vector<int8_t>(std::vector<int8_t>(2 * 2 * 3 * 3, 1), {2, 2, 3, 3}));
  Attributes a;
  a.set("group", int64_t{2});
  a.set("strides", std::vector<int64_t>{2, 1});
  a.set("pads", std::vector<int64_t>{1, 0, 1, 2});
  b.op("ConvInteger", {x, ones, b.g.add_constant("xzp", Tensor::scalar<uint8_t>(131))}, a);
  LinearMatch m = run_case(b, {0, true}, "auto");
  ASSERT_EQ(m.desc.at("dtypes").at("dst"), "s32");
  const std::string impl = step_implementation(m);
  EXPECT_NE(impl.rfind("ref", 0), 0u) << impl;
}

// A kernel that is one oneDNN call alone (Backend::measured_generator) keeps its tuning record
// across generator bumps; one with loop work after the call, or no call, is keyed by the version.
TEST(LinearConv, OnlyALibraryCallAloneIsKeyedWithoutTheGeneratorVersion) {
  using namespace linear_test;
  Builder b;
  ValueId y = b.conv(b.input({1, 8, 6, 6}), {8, 8, 3, 3}, attrs({{"pads", {1, 1, 1, 1}}}));
  ValueId r = b.op("Relu", {b.bias(y)});
  b.op("Mul", {r, r});  // a post-op reads the chain value once: this stays a loop kernel
  const Graph& g = b.g;
  const NodeId mul = static_cast<NodeId>(g.nodes.size()) - 1;
  std::vector<NodeId> step, all;
  for (NodeId n = 0; n <= mul; ++n) {
    all.push_back(n);
    if (n < mul) step.push_back(n);
  }
  const CpuBackend backend;
  const KernelCandidate call = make_candidate(g, step, false);
  EXPECT_TRUE(runs_library_call_alone(g, call, backend.fusion_rules()));
  EXPECT_EQ(backend.measured_generator(g, call), 0);
  const KernelCandidate with_loop = make_candidate(g, all, false);
  EXPECT_FALSE(runs_library_call_alone(g, with_loop, backend.fusion_rules()));
  EXPECT_EQ(backend.measured_generator(g, with_loop), kCpuGeneratorVersion);
  const KernelCandidate loop_only = make_candidate(g, {mul}, false);
  EXPECT_FALSE(runs_library_call_alone(g, loop_only, backend.fusion_rules()));
  EXPECT_EQ(backend.measured_generator(g, loop_only), kCpuGeneratorVersion);
}

}  // namespace
}  // namespace korch::cpu
