#include "rewrite/channels_last.h"

#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

// The pass as the pipeline runs it: to_channels_last, then simplify (which cancels the Transposes
// the pass has brought together).
RewritePassFn channels_last_then_simplify(ChannelsLastReport* rep = nullptr) {
  return [rep](Graph& g) {
    const bool changed = to_channels_last(g, rep);
    if (changed) simplify(g);
    return changed;
  };
}

Attributes conv_attrs(int64_t group = 1) {
  Attributes a;
  a.set("group", group);
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  return a;
}

Attributes pool_2x2() {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{2, 2});
  a.set("strides", std::vector<int64_t>{2, 2});
  return a;
}

int channels_last_convs(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == "Conv" && node.attrs.get_int("channels_last", 0) != 0;
  return n;
}

// Conv -> Add(Expand(bias)) -> Relu -> depthwise Conv -> Mul(scalar): one Transpose at the input,
// one at the output, none between the convolutions.
TEST(RewriteChannelsLast, ConvolutionChainsKeepTwoTransposes) {
  GraphBuilder b;
  ValueId x = b.input({1, 4, 6, 5});
  ValueId y = b.op("Conv", {x, b.random({8, 4, 3, 3}, 3)}, conv_attrs());
  ValueId bias = b.op("Expand", {b.random({1, 8, 1, 1}, 4), b.ints({1, 8, 6, 5})});
  ValueId r = b.op("Relu", {b.op("Add", {y, bias})});
  ValueId z = b.op("Conv", {r, b.random({8, 1, 3, 3}, 5)}, conv_attrs(8));
  b.output(b.op("Mul", {z, b.scalar(0.5f)}));
  ChannelsLastReport rep;
  Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(&rep), true, 1e-5);
  EXPECT_EQ(rep.convolutions, 2);
  EXPECT_EQ(channels_last_convs(out), 2);
  EXPECT_EQ(count_op(out, "Transpose"), 2);
  // The intermediate values are [N, H, W, C].
  for (const Node& n : out.nodes)
    if (n.op_type == "Relu") {
      EXPECT_EQ(out.type(n.outputs[0]).shape, (Shape{1, 6, 5, 8}));
    }
}

// A QDQ int8 chain (what fission makes of onnxruntime's static quantization): ConvInteger ->
// Cast -> Mul(scale) -> Add(bias) -> QuantizeLinear -> ConvInteger. Both integer convolutions go
// channels-last (their zero points stay inputs), bit-exact, with one Transpose at each end.
TEST(RewriteChannelsLast, Int8ConvolutionChains) {
  GraphBuilder b;
  std::mt19937_64 rng(3);
  auto int8_weights = [&](Shape s) { return b.constant(random_tensor({DType::kInt8, std::move(s)}, rng)); };
  ValueId x = b.input({1, 4, 6, 5}, DType::kUInt8);
  ValueId c = b.op("ConvInteger", {x, int8_weights({8, 4, 3, 3}), b.constant(Tensor::scalar<uint8_t>(100))}, conv_attrs());
  Attributes to_f32;
  to_f32.set("to", int64_t{1});
  ValueId y = b.op("Mul", {b.op("Cast", {c}, to_f32), b.scalar(0.003f)});
  ValueId bias = b.op("Expand", {b.random({1, 8, 1, 1}, 4), b.ints({1, 8, 6, 5})});
  ValueId q = b.op("QuantizeLinear", {b.op("Add", {y, bias}), b.scalar(0.02f), b.constant(Tensor::scalar<uint8_t>(0))});
  b.output(b.op("ConvInteger", {q, int8_weights({8, 8, 3, 3})}, conv_attrs()));
  ChannelsLastReport rep;
  Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(&rep), true, 0.0);
  EXPECT_EQ(rep.convolutions, 2);
  EXPECT_EQ(count_op(out, "Transpose"), 2);
  for (const Node& n : out.nodes) {
    if (n.op_type == "ConvInteger") {
      EXPECT_EQ(n.attrs.get_int("channels_last", 0), 1);
    }
  }
}

// Squeeze-and-excitation: a global mean over H, W, two 1x1 convolutions on [N, C, 1, 1], a
// Sigmoid and a Mul (through an Expand) back onto the feature map; and a keepdims=0 mean as the classifier's input.
TEST(RewriteChannelsLast, ReductionsAndBroadcastsFollowTheLayout) {
  GraphBuilder b;
  ValueId x = b.input({2, 6, 5, 5});
  ValueId f = b.op("Conv", {x, b.random({6, 6, 3, 3}, 3)}, conv_attrs());
  Attributes mean;
  mean.set("axes", std::vector<int64_t>{2, 3});
  ValueId m = b.op("ReduceMean", {f}, mean);  // [2,6,1,1]
  Attributes one;
  ValueId s = b.op("Sigmoid", {b.op("Conv", {b.op("Relu", {b.op("Conv", {m, b.random({3, 6, 1, 1}, 4)}, one)}),
                                             b.random({6, 3, 1, 1}, 5)},
                                     one)});
  ValueId g = b.op("Mul", {f, b.op("Expand", {s, b.ints({2, 6, 5, 5})})});  // fission's explicit broadcast
  Attributes flat = mean;
  flat.set("keepdims", int64_t{0});
  b.output(b.op("ReduceMean", {g}, flat));  // [2,6]
  Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(), true, 1e-5);
  EXPECT_EQ(channels_last_convs(out), 3);
  EXPECT_EQ(count_op(out, "Transpose"), 1);  // at the input only: the [2,6] output needs none
}

// Concat along channels becomes a Concat along the last axis, and MaxPool / AveragePool pool
// channels-last (attribute channels_last = 1): no Transpose between the convolutions.
TEST(RewriteChannelsLast, ConcatAndPoolingMove) {
  GraphBuilder b;
  ValueId x = b.input({1, 3, 6, 6});
  ValueId a = b.op("Conv", {x, b.random({4, 3, 3, 3}, 3)}, conv_attrs());
  ValueId c = b.op("Conv", {x, b.random({2, 3, 3, 3}, 4)}, conv_attrs());
  Attributes axis;
  axis.set("axis", int64_t{1});
  ValueId cat = b.op("Concat", {a, c}, axis);  // [1,6,6,6]
  const Attributes pool = pool_2x2();
  ValueId p = b.op("MaxPool", {cat}, pool);
  Attributes avg = pool;
  avg.set("pads", std::vector<int64_t>{1, 0, 0, 1});
  avg.set("ceil_mode", int64_t{1});
  ValueId q = b.op("AveragePool", {b.op("Conv", {p, b.random({5, 6, 3, 3}, 5)}, conv_attrs())}, avg);
  b.output(b.op("Conv", {q, b.random({2, 5, 3, 3}, 6)}, conv_attrs()));
  Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(), true, 1e-5);
  EXPECT_EQ(channels_last_convs(out), 4);
  for (const Node& n : out.nodes) {
    if (n.op_type == "Concat") {
      EXPECT_EQ(n.attrs.get_int("axis"), 3);
    }
    if (n.op_type == "MaxPool" || n.op_type == "AveragePool") {
      EXPECT_EQ(n.attrs.get_int("channels_last", 0), 1);
    }
  }
  EXPECT_EQ(count_op(out, "Transpose"), 2);  // input, output
}

// A MaxPool whose Indices output is read keeps its Transpose: Indices count NCHW positions.
TEST(RewriteChannelsLast, MaxPoolWithIndicesKeepsItsTranspose) {
  GraphBuilder b;
  ValueId x = b.input({1, 3, 6, 6});
  ValueId a = b.op("Conv", {x, b.random({4, 3, 3, 3}, 3)}, conv_attrs());
  const Attributes pool = pool_2x2();
  const std::vector<ValueId> outs = b.ops("MaxPool", {a}, pool, 2);
  b.output(outs[0]);
  b.output(outs[1]);
  Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(), true, 1e-5);
  for (const Node& n : out.nodes)
    if (n.op_type == "MaxPool") {
      EXPECT_EQ(n.attrs.get_int("channels_last", 0), 0);
    }
  EXPECT_EQ(count_op(out, "Transpose"), 2);  // input, before the pool
}

TEST(RewriteChannelsLast, LeavesWhatItCannotConvert) {
  {  // a Conv with a bias input (fission has split biases off before the pass runs)
    GraphBuilder b;
    b.output(b.op("Conv", {b.input({1, 2, 4, 4}), b.random({3, 2, 1, 1}), b.random({3}, 8)}));
    expect_rewrite_equivalent(b.g, channels_last_then_simplify(), false);
  }
  {  // no convolution at all
    GraphBuilder b;
    b.output(b.op("Relu", {b.input({1, 2, 4, 4})}));
    expect_rewrite_equivalent(b.g, channels_last_then_simplify(), false);
  }
  {  // an elementwise operand that is neither channels-last nor cheap to make so stays behind its Transpose
    GraphBuilder b;
    ValueId y = b.op("Conv", {b.input({1, 2, 4, 4}), b.random({3, 2, 1, 1})});
    ValueId other = b.input({1, 3, 4, 4});
    b.output(b.op("Add", {y, other}));
    Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(), true, 1e-5);
    EXPECT_EQ(count_op(out, "Transpose"), 2);
  }
}

// The reference interpreter's channels-last Conv is Transpose(Conv(Transpose(x))).
TEST(RewriteChannelsLast, ChannelsLastConvMatchesTheTransposedConv) {
  for (int64_t rank : {3, 4, 5}) {
    Shape xs = {2, 4}, ws = {6, 2};
    for (int64_t i = 2; i < rank; ++i) {
      xs.push_back(5);
      ws.push_back(3);
    }
    GraphBuilder b;
    Attributes a;
    a.set("group", int64_t{2});
    b.output(b.op("Conv", {b.input(xs), b.random(ws)}, a));
    ChannelsLastReport rep;
    Graph out = expect_rewrite_equivalent(b.g, channels_last_then_simplify(&rep), true, 1e-5);
    EXPECT_EQ(rep.convolutions, 1) << "rank " << rank;
  }
}

}  // namespace
}  // namespace korch
