// Unit tests for the misc family: Constant, Identity, Dropout, Shape, Size, ConstantOfShape, Range,
// EyeLike, Trilu, OneHot, NonZero, and a Shape -> ConstantOfShape/Size -> Range chain evaluated
// node by node the way the frontend folds constants.
#include <gtest/gtest.h>

#include "ir/interpreter.h"
#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using test::error_code;
using test::make_attrs;

Node make_node(const std::string& op, int num_inputs, Attributes attrs = {}, int num_outputs = 1) {
  Node n;
  n.op_type = op;
  n.name = op;
  for (int i = 0; i < num_inputs; ++i) n.inputs.push_back(i);
  for (int i = 0; i < num_outputs; ++i) n.outputs.push_back(100 + i);
  n.attrs = std::move(attrs);
  return n;
}

Tensor eval1(const std::string& op, int opset, std::vector<const Tensor*> in, Attributes a = {}) {
  Node n = make_node(op, static_cast<int>(in.size()), std::move(a));
  return eval_node(n, opset, in).at(0);
}

Tensor i64s(std::vector<int64_t> v) { return test::vec1(v); }

TEST(MiscOps, Constant) {
  Tensor v = eval1("Constant", 13, {}, make_attrs({{"value_floats", std::vector<float>{1, 2.5f}}}));
  EXPECT_EQ(v.dtype(), DType::kFloat32);
  EXPECT_EQ(v.to_float_vector(), (std::vector<float>{1, 2.5f}));
  Tensor s = eval1("Constant", 13, {}, make_attrs({{"value_int", int64_t{7}}}));
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.get_as_int(0), 7);
  Tensor t = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_TRUE(eval1("Constant", 9, {}, make_attrs({{"value", t}})) == t);
  EXPECT_EQ(error_code([] { eval1("Constant", 13, {}, make_attrs({{"value_string", std::string("x")}})); }),
            ErrorCode::kUnsupported);
  EXPECT_EQ(error_code([] { eval1("Constant", 13, {}, make_attrs({{"value_int", int64_t{1}}, {"value_float", 1.f}})); }),
            ErrorCode::kInvalid);
  EXPECT_EQ(error_code([] { eval1("Constant", 13, {}); }), ErrorCode::kInvalid);
}

TEST(MiscOps, IdentityAndDropout) {
  Tensor x = Tensor::from_vector<float>({1, -2, 3}, {3});
  EXPECT_TRUE(eval1("Identity", 13, {&x}) == x);
  // Opset 7: mask has the input's type, all ones.
  Node d7 = make_node("Dropout", 1, make_attrs({{"ratio", 0.3f}}), 2);
  auto o7 = eval_node(d7, 7, {&x});
  EXPECT_TRUE(o7[0] == x);
  EXPECT_EQ(o7[1].dtype(), DType::kFloat32);
  EXPECT_EQ(o7[1].to_float_vector(), (std::vector<float>{1, 1, 1}));
  // Opset 13: bool mask; training_mode false / true with ratio 0 are the identity.
  Tensor ratio = Tensor::scalar<float>(0.5f), zero = Tensor::scalar<float>(0.f);
  Tensor no = Tensor::scalar<bool>(false), yes = Tensor::scalar<bool>(true);
  Node d13 = make_node("Dropout", 3, {}, 2);
  auto o13 = eval_node(d13, 13, {&x, &ratio, &no});
  EXPECT_TRUE(o13[0] == x);
  EXPECT_EQ(o13[1].dtype(), DType::kBool);
  EXPECT_EQ(o13[1].to_int_vector(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_TRUE(eval_node(d13, 13, {&x, &zero, &yes})[0] == x);
  std::string msg;
  EXPECT_EQ(error_code([&] { eval_node(d13, 13, {&x, &ratio, &yes}); }, &msg), ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("training mode"), std::string::npos) << msg;
}

TEST(MiscOps, ShapeAndSize) {
  Tensor x(DType::kFloat32, {2, 3, 4, 5});
  EXPECT_EQ(eval1("Shape", 13, {&x}).to_int_vector(), (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_EQ(eval1("Shape", 15, {&x}, make_attrs({{"start", int64_t{1}}, {"end", int64_t{-1}}})).to_int_vector(),
            (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(eval1("Shape", 15, {&x}, make_attrs({{"start", int64_t{-10}}, {"end", int64_t{10}}})).numel(), 4);
  EXPECT_EQ(eval1("Shape", 15, {&x}, make_attrs({{"start", int64_t{3}}, {"end", int64_t{1}}})).shape(), (Shape{0}));
  // Before opset 15 start/end do not exist.
  EXPECT_EQ(eval1("Shape", 13, {&x}, make_attrs({{"start", int64_t{1}}})).numel(), 4);
  Tensor sz = eval1("Size", 13, {&x});
  EXPECT_EQ(sz.dtype(), DType::kInt64);
  EXPECT_EQ(sz.shape(), Shape{});
  EXPECT_EQ(sz.get_as_int(0), 120);
}

TEST(MiscOps, ConstantOfShape) {
  Tensor shape = i64s({2, 3});
  Tensor z = eval1("ConstantOfShape", 9, {&shape});
  EXPECT_EQ(z.type(), (TensorType{DType::kFloat32, {2, 3}}));
  EXPECT_EQ(z.to_float_vector(), std::vector<float>(6, 0.f));
  Tensor v = Tensor::from_vector<int32_t>({7}, {1});
  Tensor c = eval1("ConstantOfShape", 9, {&shape}, make_attrs({{"value", v}}));
  EXPECT_EQ(c.dtype(), DType::kInt32);
  EXPECT_EQ(c.to_int_vector(), std::vector<int64_t>(6, 7));
  Tensor empty(DType::kInt64, {0});
  EXPECT_EQ(eval1("ConstantOfShape", 9, {&empty}).shape(), Shape{});
  Tensor neg = i64s({2, -1});
  EXPECT_EQ(error_code([&] { eval1("ConstantOfShape", 9, {&neg}); }), ErrorCode::kInvalid);
  // A shape that is not a compile-time constant is rejected by inference.
  Node n = make_node("ConstantOfShape", 1);
  TensorType st = shape.type();
  std::string msg;
  EXPECT_EQ(error_code([&] { infer_node(n, 9, {&st}, {nullptr}); }, &msg), ErrorCode::kUnsupported);
  EXPECT_NE(msg.find("compile-time constant"), std::string::npos) << msg;
}

TEST(MiscOps, Range) {
  Tensor s = Tensor::scalar<int32_t>(10), l = Tensor::scalar<int32_t>(4), d = Tensor::scalar<int32_t>(-3);
  Tensor r = eval1("Range", 11, {&s, &l, &d});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  EXPECT_EQ(r.to_int_vector(), (std::vector<int64_t>{10, 7}));
  Tensor fs = Tensor::scalar<float>(1), fl = Tensor::scalar<float>(2), fd = Tensor::scalar<float>(0.25f);
  EXPECT_EQ(eval1("Range", 11, {&fs, &fl, &fd}).to_float_vector(), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(eval1("Range", 11, {&fl, &fs, &fd}).numel(), 0);
  Tensor z = Tensor::scalar<float>(0);
  EXPECT_EQ(error_code([&] { eval1("Range", 11, {&fs, &fl, &z}); }), ErrorCode::kInvalid);
  Tensor mixed = Tensor::scalar<int64_t>(1);
  EXPECT_EQ(error_code([&] { eval1("Range", 11, {&fs, &mixed, &fd}); }), ErrorCode::kInvalid);
}

TEST(MiscOps, EyeLikeAndTrilu) {
  Tensor x(DType::kInt32, {3, 4});
  Tensor e = eval1("EyeLike", 9, {&x}, make_attrs({{"k", int64_t{1}}, {"dtype", int64_t{1}}}));
  EXPECT_EQ(e.dtype(), DType::kFloat32);
  EXPECT_EQ(e.to_float_vector(), (std::vector<float>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(eval1("EyeLike", 9, {&x}, make_attrs({{"k", int64_t{-2}}})).to_int_vector(),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
  Tensor v(DType::kInt32, {3});
  EXPECT_EQ(error_code([&] { eval1("EyeLike", 9, {&v}); }), ErrorCode::kInvalid);

  Tensor m = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  EXPECT_EQ(eval1("Trilu", 14, {&m}).to_float_vector(), (std::vector<float>{1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12}));
  Tensor k = Tensor::scalar<int64_t>(1);
  EXPECT_EQ(eval1("Trilu", 14, {&m, &k}, make_attrs({{"upper", int64_t{0}}})).to_float_vector(),
            (std::vector<float>{1, 2, 0, 4, 5, 6, 7, 8, 0, 10, 11, 12}));
  Tensor kneg = Tensor::scalar<int64_t>(-5);
  EXPECT_EQ(eval1("Trilu", 14, {&m, &kneg}, make_attrs({{"upper", int64_t{0}}})).to_float_vector(), std::vector<float>(12, 0));
  Tensor r1(DType::kFloat32, {3});
  EXPECT_EQ(error_code([&] { eval1("Trilu", 14, {&r1}); }), ErrorCode::kInvalid);
}

TEST(MiscOps, OneHot) {
  Tensor idx = Tensor::from_vector<int64_t>({0, 2, -1, 5}, {2, 2});
  Tensor depth = Tensor::scalar<float>(3);
  Tensor values = Tensor::from_vector<int32_t>({-1, 9}, {2});
  Tensor y = eval1("OneHot", 11, {&idx, &depth, &values});
  EXPECT_EQ(y.type(), (TensorType{DType::kInt32, {2, 2, 3}}));
  // -1 wraps to 2 (opset 11), 5 is out of range: all off.
  EXPECT_EQ(y.to_int_vector(), (std::vector<int64_t>{9, -1, -1, -1, -1, 9, -1, -1, 9, -1, -1, -1}));
  Tensor y0 = eval1("OneHot", 11, {&idx, &depth, &values}, make_attrs({{"axis", int64_t{0}}}));
  EXPECT_EQ(y0.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(y0.to_int_vector(), (std::vector<int64_t>{9, -1, -1, -1, -1, -1, -1, -1, -1, 9, 9, -1}));
  EXPECT_EQ(error_code([&] { eval1("OneHot", 11, {&idx, &depth, &values}, make_attrs({{"axis", int64_t{4}}})); }),
            ErrorCode::kInvalid);
}

TEST(MiscOps, NonZero) {
  Tensor x = Tensor::from_vector<float>({0, 1, 0, 2, -0.f, 3}, {2, 3});
  Tensor y = eval1("NonZero", 13, {&x});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_int_vector(), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  Node n = make_node("NonZero", 1);
  TensorType xt = x.type();
  EXPECT_EQ(error_code([&] { infer_node(n, 13, {&xt}, {nullptr}); }), ErrorCode::kUnsupported);
}

// Shape(x)[1:] -> ConstantOfShape -> Size -> Range, each node evaluated with eval_node on the
// previous results (what constant folding does), then the same graph through the interpreter.
TEST(MiscOps, ShapeChainThroughEvalNode) {
  Graph g;
  g.opset = 17;
  ValueId x = g.add_input("x", {DType::kFloat32, {2, 3, 4}});
  ValueId s = g.add_value("s", {});
  ValueId c = g.add_value("c", {});
  ValueId n = g.add_value("n", {});
  ValueId r = g.add_value("r", {});
  ValueId zero = g.add_constant("zero", Tensor::scalar<int64_t>(0));
  ValueId step = g.add_constant("step", Tensor::scalar<int64_t>(5));
  auto add = [&](const char* op, std::vector<ValueId> in, ValueId out, Attributes a = {}) {
    Node node;
    node.name = op;
    node.op_type = op;
    node.inputs = std::move(in);
    node.outputs = {out};
    node.attrs = std::move(a);
    g.add_node(std::move(node));
  };
  add("Shape", {x}, s, make_attrs({{"start", int64_t{1}}}));
  add("ConstantOfShape", {s}, c, make_attrs({{"value", Tensor::from_vector<float>({2.5f}, {1})}}));
  add("Size", {c}, n);
  add("Range", {zero, n, step}, r);
  g.outputs = {c, r};

  std::vector<Tensor> env(g.values.size());
  env[static_cast<size_t>(x)] = Tensor(DType::kFloat32, {2, 3, 4});
  for (const Value& v : g.values)
    if (v.is_constant()) env[static_cast<size_t>(&v - g.values.data())] = *v.constant;
  for (const Node& node : g.nodes) {
    std::vector<const Tensor*> in;
    for (ValueId v : node.inputs) in.push_back(&env[static_cast<size_t>(v)]);
    std::vector<Tensor> out = eval_node(node, g.opset, in);
    env[static_cast<size_t>(node.outputs[0])] = out[0];
    g.value(node.outputs[0]).type = out[0].type();
  }
  EXPECT_EQ(env[static_cast<size_t>(s)].to_int_vector(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(env[static_cast<size_t>(c)].to_float_vector(), std::vector<float>(12, 2.5f));
  EXPECT_EQ(env[static_cast<size_t>(n)].get_as_int(0), 12);
  EXPECT_EQ(env[static_cast<size_t>(r)].to_int_vector(), (std::vector<int64_t>{0, 5, 10}));

  std::vector<Tensor> outs = interpret(g, {Tensor(DType::kFloat32, {2, 3, 4})});
  EXPECT_TRUE(outs.at(0) == env[static_cast<size_t>(c)]);
  EXPECT_TRUE(outs.at(1) == env[static_cast<size_t>(r)]);
}

}  // namespace
}  // namespace korch
