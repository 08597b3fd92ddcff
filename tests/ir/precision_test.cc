// to_f64 (ir/precision.h): the float64 version of a graph and the interpreter run on it.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ir/interpreter.h"
#include "ir/precision.h"
#include "ir/random.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using test::make_attrs;

// Builds a graph node by node, typing each output with the op's own inference.
struct Builder {
  Graph g;
  ValueId input(const std::string& name, DType t, Shape s) { return g.add_input(name, {t, std::move(s)}); }
  ValueId constant(const std::string& name, Tensor t) { return g.add_constant(name, std::move(t)); }
  std::vector<ValueId> node(const std::string& op, std::vector<ValueId> ins, Attributes attrs = {},
                            size_t n_out = 1) {
    Node n;
    n.name = op + std::to_string(g.nodes.size());
    n.op_type = op;
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    n.outputs.resize(n_out, kNoValue);
    std::vector<TensorType> out = infer_node(g, n);
    for (size_t k = 0; k < n_out; ++k) n.outputs[k] = g.add_value(n.name + "_out" + std::to_string(k), out[k]);
    std::vector<ValueId> outs = n.outputs;
    g.add_node(std::move(n));
    return outs;
  }
  ValueId op(const std::string& op, std::vector<ValueId> ins, Attributes attrs = {}) {
    return node(op, std::move(ins), std::move(attrs))[0];
  }
};

Tensor seeded(DType t, Shape s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return random_tensor({t, std::move(s)}, rng);
}

const Node& node_of(const Graph& g, const std::string& op) {
  for (const Node& n : g.nodes)
    if (n.op_type == op) return n;
  throw std::runtime_error("no " + op + " node");
}

// MatMul, Softmax, LayerNormalization, ReduceMean, Conv, Cast (to f32, to f16 and back),
// ConstantOfShape (default and explicit value) and a Constant with value_float.
Graph mixed_graph() {
  Builder b;
  ValueId x = b.input("x", DType::kFloat32, {1, 2, 5, 5});
  ValueId w = b.constant("w", seeded(DType::kFloat32, {3, 2, 3, 3}, 1));
  ValueId c = b.op("Conv", {x, w});  // [1,3,3,3]
  ValueId r = b.op("Reshape", {c, b.constant("shape", Tensor::from_vector<int64_t>({3, 9}, {2}))});
  ValueId m = b.op("MatMul", {r, b.constant("w2", seeded(DType::kFloat32, {9, 4}, 2))});  // [3,4]
  ValueId s = b.op("Softmax", {m}, make_attrs({{"axis", int64_t{-1}}}));
  std::vector<ValueId> ln = b.node("LayerNormalization",
                                   {s, b.constant("gamma", seeded(DType::kFloat32, {4}, 3)),
                                    b.constant("beta", seeded(DType::kFloat32, {4}, 4))},
                                   make_attrs({{"axis", int64_t{-1}}}), 3);
  ValueId rm = b.op("ReduceMean", {ln[0]}, make_attrs({{"axes", std::vector<int64_t>{1}}}));  // [3,1]
  ValueId dims = b.constant("dims", Tensor::from_vector<int64_t>({3, 1}, {2}));
  ValueId zeros = b.op("ConstantOfShape", {dims});  // float32 zeros by default
  ValueId halves = b.op("ConstantOfShape", {dims}, make_attrs({{"value", Tensor::from_vector<float>({0.5f}, {1})}}));
  ValueId a = b.op("Add", {b.op("Add", {rm, zeros}), halves});
  ValueId h = b.op("Cast", {a}, make_attrs({{"to", int64_t{10}}}));  // float16 stays float16
  ValueId back = b.op("Cast", {h}, make_attrs({{"to", int64_t{1}}}));
  ValueId ints = b.op("Cast", {b.constant("ints", Tensor::from_vector<int64_t>({1, 2, 3}, {3, 1}))},
                      make_attrs({{"to", int64_t{1}}}));
  ValueId k = b.op("Constant", {}, make_attrs({{"value_float", 2.5f}}));
  ValueId y = b.op("Mul", {b.op("Add", {back, ints}), k});
  b.g.outputs = {y, ln[1], h};
  verify_graph(b.g);
  return b.g;
}

TEST(Precision, ToF64WidensEveryFloat32Value) {
  Graph g = mixed_graph();
  F64Graph f = convert_to_f64(g);
  const Graph& d = f.graph;
  EXPECT_TRUE(f.kept_f32.empty());
  verify_graph(d);  // types agree with every op's inference
  ASSERT_EQ(d.values.size(), g.values.size());
  ASSERT_EQ(d.nodes.size(), g.nodes.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& was = g.values[i];
    const Value& now = d.values[i];
    SCOPED_TRACE(was.name);
    EXPECT_EQ(now.name, was.name);
    EXPECT_EQ(now.type.shape, was.type.shape);
    EXPECT_EQ(now.type.dtype, was.type.dtype == DType::kFloat32 ? DType::kFloat64 : was.type.dtype);
    EXPECT_NE(now.type.dtype, DType::kFloat32);
    if (was.is_constant() && was.type.dtype == DType::kFloat32) {
      ASSERT_TRUE(now.is_constant());
      for (int64_t e = 0; e < was.constant->numel(); ++e)
        EXPECT_EQ(now.constant->data<double>()[e], static_cast<double>(was.constant->data<float>()[e]));
    }
  }
  EXPECT_EQ(d.type(d.find_value("x")).dtype, DType::kFloat64);
  EXPECT_EQ(d.type(g.outputs[2]).dtype, DType::kFloat16);
  // Attributes that name float32 or carry float32 tensors.
  std::vector<int64_t> cast_targets;
  for (const Node& n : d.nodes)
    if (n.op_type == "Cast") cast_targets.push_back(n.attrs.get_int("to"));
  EXPECT_EQ(cast_targets, (std::vector<int64_t>{10, 11, 11}));
  EXPECT_EQ(node_of(d, "LayerNormalization").attrs.get_int("stash_type", 1), 11);
  for (const Node& n : d.nodes) {
    if (n.op_type != "ConstantOfShape") continue;
    EXPECT_EQ(n.attrs.get_tensor("value")->dtype(), DType::kFloat64);
  }
  const Node& k = node_of(d, "Constant");
  EXPECT_FALSE(k.attrs.has("value_float"));
  ASSERT_NE(k.attrs.get_tensor("value"), nullptr);
  EXPECT_EQ(k.attrs.get_tensor("value")->get_as_double(0), 2.5);
  // The input graph is untouched.
  EXPECT_EQ(node_of(g, "Constant").attrs.get_float("value_float", 0), 2.5f);
  EXPECT_EQ(g.type(g.find_value("x")).dtype, DType::kFloat32);
}

TEST(Precision, F64RunAgreesWithF32RunOnAWellConditionedGraph) {
  Graph g = mixed_graph();
  std::vector<Tensor> in = {seeded(DType::kFloat32, {1, 2, 5, 5}, 9)};
  std::vector<Tensor> f32 = interpret(g, in);
  std::vector<Tensor> f64 = interpret_f64(g, in);
  ASSERT_EQ(f64.size(), 3u);
  EXPECT_EQ(f64[0].dtype(), DType::kFloat64);
  EXPECT_EQ(f64[1].dtype(), DType::kFloat64);  // LayerNormalization's Mean (stash type)
  EXPECT_EQ(f64[2].dtype(), DType::kFloat16);
  for (size_t i = 0; i < 2; ++i)
    for (int64_t e = 0; e < f32[i].numel(); ++e)
      EXPECT_NEAR(f64[i].get_as_double(e), f32[i].get_as_double(e), 1e-5 * (1 + std::fabs(f32[i].get_as_double(e))));
  // The f16 output rounds to within one f16 ulp of the f32 run's value.
  for (int64_t e = 0; e < f32[2].numel(); ++e)
    EXPECT_NEAR(f64[2].get_as_double(e), f32[2].get_as_double(e), 1e-3 * (1 + std::fabs(f32[2].get_as_double(e))));
}

// Cancellation and an exp/log chain: y = ReduceSum(Log(Exp((x + 1e4) - 1e4) * 0.5 + 1e-3) + x * 1e-7).
// In float32, x + 1e4 keeps ~3 decimals of x; in float64 nearly all of them.
TEST(Precision, F64RunIsCloserToFloat64MathOnAnIllConditionedGraph) {
  Builder b;
  const int64_t n = 4096;
  ValueId x = b.input("x", DType::kFloat32, {n});
  ValueId big = b.constant("big", Tensor::scalar<float>(1e4f));
  ValueId half = b.constant("half", Tensor::scalar<float>(0.5f));
  ValueId tiny = b.constant("tiny", Tensor::scalar<float>(1e-3f));
  ValueId small = b.constant("small", Tensor::scalar<float>(1e-7f));
  ValueId t = b.op("Sub", {b.op("Add", {x, big}), big});
  ValueId l = b.op("Log", {b.op("Add", {b.op("Mul", {b.op("Exp", {t}), half}), tiny})});
  ValueId y = b.op("ReduceSum", {b.op("Add", {l, b.op("Mul", {x, small})})},
                   make_attrs({{"keepdims", int64_t{0}}}));
  ValueId z = b.op("Sub", {b.op("Add", {x, big}), big});  // elementwise output too
  b.g.outputs = {y, z};
  std::vector<Tensor> in = {seeded(DType::kFloat32, {n}, 5)};
  const float* xs = in[0].data<float>();
  // The same formula in double (what numpy float64 computes).
  double want = 0;
  std::vector<double> want_z(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double xv = xs[i], tv = (xv + 1e4) - 1e4;
    want += std::log(std::exp(tv) * 0.5 + static_cast<double>(1e-3f)) + xv * static_cast<double>(1e-7f);
    want_z[static_cast<size_t>(i)] = tv;
  }
  std::vector<Tensor> f32 = interpret(b.g, in), f64 = interpret_f64(b.g, in);
  const double err32 = std::fabs(f32[0].get_as_double(0) - want), err64 = std::fabs(f64[0].get_as_double(0) - want);
  EXPECT_LT(err64, 1e-9 * std::fabs(want)) << "f64 " << f64[0].get_as_double(0) << " want " << want;
  EXPECT_GT(err32, 1e3 * err64) << "f32 " << f32[0].get_as_double(0) << " want " << want;
  double e32 = 0, e64 = 0;
  for (int64_t i = 0; i < n; ++i) {
    e32 = std::max(e32, std::fabs(f32[1].get_as_double(i) - want_z[static_cast<size_t>(i)]));
    e64 = std::max(e64, std::fabs(f64[1].get_as_double(i) - want_z[static_cast<size_t>(i)]));
  }
  EXPECT_GT(e32, 1e-4);  // x rounded to float32's grid at 1e4 (spacing 1/1024)
  EXPECT_LT(e64, 1e-11);
}

// QuantizeLinear/DequantizeLinear are float32-only ops: they stay float32 between Casts.
TEST(Precision, OpsWithoutF64StayF32BetweenCasts) {
  Builder b;
  ValueId x = b.input("x", DType::kFloat32, {2, 3});
  ValueId scale = b.constant("scale", Tensor::scalar<float>(0.125f));
  ValueId zp = b.constant("zp", Tensor::scalar<uint8_t>(10));
  ValueId q = b.op("QuantizeLinear", {x, scale, zp});
  ValueId dq = b.op("DequantizeLinear", {q, scale, zp});
  ValueId y = b.op("Mul", {dq, x});
  b.g.outputs = {y};
  F64Graph f = convert_to_f64(b.g);
  verify_graph(f.graph);
  EXPECT_EQ(f.kept_f32, (std::vector<std::string>{"QuantizeLinear0 (QuantizeLinear)", "DequantizeLinear1 (DequantizeLinear)"}));
  const Graph& d = f.graph;
  const Node& qn = node_of(d, "QuantizeLinear");
  EXPECT_EQ(d.type(qn.inputs[0]).dtype, DType::kFloat32);
  EXPECT_EQ(d.value(d.nodes[0].inputs[0]).name, "x");  // Cast(x) to float32 first
  EXPECT_EQ(d.nodes[0].op_type, "Cast");
  ASSERT_TRUE(d.value(qn.inputs[1]).is_constant());  // the original float32 scale
  EXPECT_EQ(d.value(qn.inputs[1]).constant->dtype(), DType::kFloat32);
  EXPECT_EQ(d.type(d.find_value("scale")).dtype, DType::kFloat64);
  EXPECT_EQ(d.type(y).dtype, DType::kFloat64);
  EXPECT_EQ(d.type(dq).dtype, DType::kFloat64);  // a Cast of the kept node's float32 output
  std::vector<Tensor> in = {seeded(DType::kFloat32, {2, 3}, 3)};
  std::vector<std::string> kept;
  std::vector<Tensor> f32 = interpret(b.g, in), f64 = interpret_f64(b.g, in, &kept);
  EXPECT_EQ(kept, f.kept_f32);
  for (int64_t e = 0; e < 6; ++e)
    EXPECT_NEAR(f64[0].get_as_double(e), f32[0].get_as_double(e), 1e-6 * (1 + std::fabs(f32[0].get_as_double(e))));
}

TEST(Precision, InterpretF64ChecksInputsAgainstTheModelTypes) {
  Graph g = mixed_graph();
  Tensor wrong = seeded(DType::kFloat64, {1, 2, 5, 5}, 1);
  std::string msg = test::error_message([&] { interpret_f64(g, {wrong}); });
  EXPECT_NE(msg.find("input 'x' expects f32[1,2,5,5]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace korch
