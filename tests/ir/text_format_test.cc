#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ir/graph.h"
#include "ir/text_format.h"

namespace korch {
namespace {

// ---- helpers --------------------------------------------------------------------------------

template <typename T, typename B>
Tensor from_bits(const std::vector<B>& bits, Shape shape) {
  static_assert(sizeof(T) == sizeof(B));
  Tensor t(dtype_of<T>::value, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(t.numel()), bits.size());
  if (!bits.empty()) std::memcpy(t.raw(), bits.data(), bits.size() * sizeof(B));
  return t;
}

// Structural equality: value ids may differ (the parser numbers values in declaration order), so
// values are compared through the places that refer to them.
void expect_same_value(const Graph& a, ValueId va, const Graph& b, ValueId vb, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(va == kNoValue, vb == kNoValue);
  if (va == kNoValue) return;
  const Value& x = a.value(va);
  const Value& y = b.value(vb);
  EXPECT_EQ(x.name, y.name);
  EXPECT_EQ(x.type, y.type) << type_str(x.type) << " vs " << type_str(y.type);
  ASSERT_EQ(x.is_constant(), y.is_constant()) << x.name;
  if (x.is_constant()) {
    EXPECT_TRUE(x.constant->bitwise_equal(*y.constant)) << x.name;
  }
  // Same producer position.
  EXPECT_EQ(x.producer, y.producer) << x.name;
}

void expect_graph_eq(const Graph& a, const Graph& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.opset, b.opset);
  ASSERT_EQ(a.inputs.size(), b.inputs.size());
  for (size_t i = 0; i < a.inputs.size(); ++i) expect_same_value(a, a.inputs[i], b, b.inputs[i], "input");
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (size_t i = 0; i < a.outputs.size(); ++i) expect_same_value(a, a.outputs[i], b, b.outputs[i], "output");
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    const Node& x = a.nodes[i];
    const Node& y = b.nodes[i];
    SCOPED_TRACE("node " + std::to_string(i) + " " + x.op_type);
    EXPECT_EQ(x.op_type, y.op_type);
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.domain, y.domain);
    EXPECT_TRUE(x.attrs == y.attrs);
    ASSERT_EQ(x.inputs.size(), y.inputs.size());
    for (size_t k = 0; k < x.inputs.size(); ++k) expect_same_value(a, x.inputs[k], b, y.inputs[k], "node input");
    ASSERT_EQ(x.outputs.size(), y.outputs.size());
    for (size_t k = 0; k < x.outputs.size(); ++k) expect_same_value(a, x.outputs[k], b, y.outputs[k], "node output");
  }
  // Every constant (used or not) survives, by name.
  int ca = 0, cb = 0;
  for (const Value& v : a.values) {
    if (!v.constant) continue;
    ++ca;
    ValueId w = b.find_value(v.name);
    ASSERT_NE(w, -1) << v.name;
    ASSERT_TRUE(b.value(w).is_constant()) << v.name;
    EXPECT_TRUE(v.constant->bitwise_equal(*b.value(w).constant)) << v.name;
  }
  for (const Value& v : b.values) cb += v.is_constant();
  EXPECT_EQ(ca, cb);
}

// A graph that uses every construct of the text form.
Graph make_kitchen_sink() {
  Graph g;
  g.name = "kitchen sink";  // not an identifier: quoted
  g.opset = 13;
  ValueId x = g.add_input("x", {DType::kFloat32, {1, 3, 4, 4}});
  ValueId q = g.add_input("onnx::Mask/0", {DType::kBool, {2}});
  ValueId under = g.add_input("_", {DType::kInt64, {}});  // '_' itself must be quoted

  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  // f32: specials, a NaN payload, the negative canonical NaN, subnormals, extremes.
  ValueId w = g.add_constant(
      "w", Tensor::from_vector<float>({0.1f, -0.2f, 1e-30f, fnan, -finf, finf, -0.0f, 0.0f,
                                       std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                                       -std::numeric_limits<float>::lowest(), 1.0f / 3.0f, 100.0f, 16777216.0f,
                                       1e20f, 3.0f},
                                      {4, 1, 2, 2}));
  g.add_constant("f32_nans", from_bits<float, uint32_t>({0x7fc00001u, 0xffc00000u, 0x7f800001u, 0xffffffffu}, {4}));
  g.add_constant("f64", Tensor::from_vector<double>({0.1, -1e-300, std::numeric_limits<double>::denorm_min(),
                                                     std::numeric_limits<double>::max(), -0.0, 1.0 / 3.0,
                                                     std::numeric_limits<double>::infinity()},
                                                    {7}));
  g.add_constant("f64_nans",
                 from_bits<double, uint64_t>({0x7ff8000000000000ull, 0xfff8000000000000ull, 0x7ff0000000000001ull}, {3}));
  // f16: 1, max, smallest subnormal, 0.1 (rounded), -0, inf, -inf, canonical NaN, a payload NaN, -NaN.
  g.add_constant("f16", from_bits<Float16, uint16_t>(
                            {0x3c00, 0x7bff, 0x0001, 0x2e66, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0x7e01, 0xfe00, 0x7c01, 0x0400},
                            {3, 4}));
  g.add_constant("bf16", from_bits<BFloat16, uint16_t>(
                             {0x3f80, 0x7f7f, 0x0001, 0x3dcd, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0x7fc1, 0xffc0, 0x4049}, {11}));
  g.add_constant("i8", Tensor::from_vector<int8_t>({-128, 127, 0, -1}, {2, 2}));
  g.add_constant("i16", Tensor::from_vector<int16_t>({-32768, 32767}, {2}));
  g.add_constant("i32", Tensor::from_vector<int32_t>({std::numeric_limits<int32_t>::min(), 7}, {2}));
  ValueId shape = g.add_constant("shape", Tensor::from_vector<int64_t>(
                                              {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), -1}, {3}));
  g.add_constant("u8", Tensor::from_vector<uint8_t>({0, 255}, {2}));
  g.add_constant("u16", Tensor::from_vector<uint16_t>({65535}, {1}));
  g.add_constant("u32", Tensor::from_vector<uint32_t>({4294967295u, 1}, {2}));
  g.add_constant("u64", Tensor::from_vector<uint64_t>({std::numeric_limits<uint64_t>::max(), 0}, {2}));
  g.add_constant("bools", Tensor::from_vector<bool>({true, false, true}, {3}));
  g.add_constant("scalar", Tensor::scalar<float>(2.5f));
  g.add_constant("empty", Tensor(DType::kInt32, {0, 3}));
  ValueId quoted = g.add_constant("conv1/bias:0", Tensor::from_vector<float>({1, 2, 3, 4}, {4}));

  // Conv with an omitted middle input... and every attribute kind.
  Node conv;
  conv.op_type = "Conv";
  conv.name = "conv \"0\"\n";
  conv.inputs = {x, w, quoted};
  conv.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.attrs.set("group", int64_t{1});
  conv.attrs.set("neg", int64_t{std::numeric_limits<int64_t>::min()});
  conv.attrs.set("alpha", 0.5f);
  conv.attrs.set("whole", 3.0f);  // must not read back as an int
  conv.attrs.set("negzero", -0.0f);
  conv.attrs.set("tiny", 1e-30f);
  conv.attrs.set("big", 1e30f);
  conv.attrs.set("inf", -std::numeric_limits<float>::infinity());
  conv.attrs.set("auto_pad", std::string("NOTSET"));
  conv.attrs.set("esc", std::string("a\"b\\c\nd\te\x01\x7f\xc3\xa9"));
  conv.attrs.set("empty_s", std::string());
  conv.attrs.set("no_ints", std::vector<int64_t>{});
  conv.attrs.set("no_floats", std::vector<float>{});
  conv.attrs.set("no_strings", std::vector<std::string>{});
  conv.attrs.set("floats", std::vector<float>{1.0f, -2.5f, 0.1f});
  conv.attrs.set("strings", std::vector<std::string>{"a", "", "c,d"});
  conv.attrs.set("t", Tensor::from_vector<float>({1, 2}, {2}));
  conv.attrs.set("t_f16", from_bits<Float16, uint16_t>({0x7e01}, {}));
  conv.attrs.set("t_empty", Tensor(DType::kInt64, {0}));
  conv.attrs.set("weird key", int64_t{5});
  ValueId y = g.add_value("y", {DType::kFloat32, {1, 4, 4, 4}});
  conv.outputs = {y};
  g.add_node(conv);

  // Omitted inputs (middle and trailing) and an omitted middle output; a domain.
  Node split;
  split.op_type = "Split";
  split.domain = "com.example";
  split.inputs = {y, kNoValue, shape, kNoValue};
  split.attrs.set("axis", int64_t{1});
  ValueId a = g.add_value("a", {DType::kFloat32, {1, 2, 4, 4}});
  ValueId c = g.add_value("onnx::Split_7", {DType::kFloat32, {1, 1, 4, 4}});
  split.outputs = {a, kNoValue, c};
  g.add_node(split);

  Node sink;  // no outputs, no inputs, uses the odd-named input indirectly
  sink.op_type = "Print";
  sink.inputs = {q, under};
  g.add_node(sink);

  g.outputs = {a, c, x, a};
  return g;
}

// ---- round trips ----------------------------------------------------------------------------

TEST(TextFormat, RoundTripKitchenSink) {
  Graph g = make_kitchen_sink();
  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  expect_graph_eq(g, back);
  EXPECT_EQ(print_graph(back), text);
  // g declares its values in the parser's order (inputs, constants, node outputs): ids match too.
  ASSERT_EQ(back.values.size(), g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) EXPECT_EQ(back.values[i].name, g.values[i].name) << i;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(back.nodes[i].inputs, g.nodes[i].inputs) << i;
    EXPECT_EQ(back.nodes[i].outputs, g.nodes[i].outputs) << i;
  }
  EXPECT_EQ(back.inputs, g.inputs);
  EXPECT_EQ(back.outputs, g.outputs);
  // Spot checks on the printed form.
  EXPECT_NE(text.find("graph \"kitchen sink\" (opset 13) {"), std::string::npos) << text;
  EXPECT_NE(text.find("input \"onnx::Mask/0\": bool[2]"), std::string::npos) << text;
  EXPECT_NE(text.find("input \"_\": i64[]"), std::string::npos) << text;
  EXPECT_NE(text.find("= Split(y, _, shape, _)"), std::string::npos) << text;
  EXPECT_NE(text.find("%a: f32[1,2,4,4], _, %\"onnx::Split_7\": f32[1,1,4,4]"), std::string::npos) << text;
  EXPECT_NE(text.find("whole=3.0"), std::string::npos) << text;
  EXPECT_NE(text.find("negzero=-0.0"), std::string::npos) << text;
  EXPECT_NE(text.find("no_ints=ints[]"), std::string::npos) << text;
  EXPECT_NE(text.find("nan(0x7fc00001)"), std::string::npos) << text;
  EXPECT_NE(text.find("() = Print("), std::string::npos) << text;
  EXPECT_NE(text.find("domain=\"com.example\""), std::string::npos) << text;
  EXPECT_NE(text.find("const f16: f16[3,4] = [1, 65504, 6e-08, 0.1, -0, inf, -inf, nan, nan(0x7e01), -nan,"),
            std::string::npos)
      << text;
}

TEST(TextFormat, RoundTripEveryDtypeBitExact) {
  // Random bit patterns per dtype (deterministic LCG), including NaN payloads.
  uint64_t state = 12345;
  auto rnd = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state ^ (state >> 29);
  };
  Graph g;
  g.name = "bits";
  const DType all[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, DType::kFloat64, DType::kInt8,
                       DType::kInt16,   DType::kInt32,   DType::kInt64,    DType::kUInt8,   DType::kUInt16,
                       DType::kUInt32,  DType::kUInt64,  DType::kBool};
  for (DType dt : all) {
    Tensor t(dt, {64});
    auto* p = reinterpret_cast<unsigned char*>(t.raw());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(rnd());
    if (dt == DType::kBool)
      for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
    g.add_constant(std::string(dtype_name(dt)) + "_c", t);
  }
  // Every f16 and bf16 bit pattern.
  std::vector<uint16_t> every(65536);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  g.add_constant("all_f16", from_bits<Float16, uint16_t>(every, {65536}));
  g.add_constant("all_bf16", from_bits<BFloat16, uint16_t>(every, {65536}));
  std::string text = print_graph(g);
  Graph back = parse_graph(text);
  expect_graph_eq(g, back);
}

TEST(TextFormat, HandWrittenSnippet) {
  const std::string text = R"(
# A comment before the graph.
graph tiny (opset 17) {
  input x: f32[1,3,8,8]    # trailing comment
  const w: f32[4, 3, 1, 1] = [0.5, -1, 1e-3, 2, 0, 0, 0, 0, 0, 0, 0, 0]
  const shape: i64[2] = [1, -1]
  %y: f32[1,4,8,8] = Conv(x, w, _) {pads=[0,0,0,0], strides=[1, 1], auto_pad="NOTSET",
                                     alpha=0.5, beta=-2.0e0, n=inf, fl=[1, 2.5], e=floats[],
                                     s=["a", "b"], t=<tensor u8[2] = [7, 255]>} name="conv0"
  %a: f32[1,2,8,8], %"b/2": f32[1,2,8,8] = Split(y) {axis=1} domain="ai.onnx" name="split"
  %r: f32[1,256] = Reshape("b/2", shape)
  output a, r
}
)";
  Graph g = parse_graph(text);
  EXPECT_EQ(g.name, "tiny");
  EXPECT_EQ(g.opset, 17);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).name, "x");
  EXPECT_EQ(g.type(g.inputs[0]), (TensorType{DType::kFloat32, {1, 3, 8, 8}}));
  ASSERT_EQ(g.nodes.size(), 3u);

  const Node& conv = g.nodes[0];
  EXPECT_EQ(conv.op_type, "Conv");
  EXPECT_EQ(conv.name, "conv0");
  EXPECT_EQ(conv.domain, "");
  ASSERT_EQ(conv.inputs.size(), 3u);
  EXPECT_EQ(conv.inputs[0], g.inputs[0]);
  EXPECT_EQ(g.value(conv.inputs[1]).name, "w");
  EXPECT_EQ(conv.inputs[2], kNoValue);
  const Tensor& w = *g.value(conv.inputs[1]).constant;
  EXPECT_EQ(w.shape(), (Shape{4, 3, 1, 1}));
  EXPECT_EQ(w.data<float>()[1], -1.0f);
  EXPECT_EQ(w.data<float>()[2], 1e-3f);
  EXPECT_EQ(conv.attrs.get_ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_EQ(conv.attrs.get_string("auto_pad", ""), "NOTSET");
  EXPECT_EQ(std::get<float>(conv.attrs.all().at("alpha")), 0.5f);
  EXPECT_EQ(std::get<float>(conv.attrs.all().at("beta")), -2.0f);
  EXPECT_TRUE(std::isinf(std::get<float>(conv.attrs.all().at("n"))));
  EXPECT_EQ(conv.attrs.get_floats("fl"), (std::vector<float>{1.0f, 2.5f}));
  EXPECT_TRUE(std::holds_alternative<std::vector<float>>(conv.attrs.all().at("e")));
  EXPECT_EQ(conv.attrs.get_strings("s"), (std::vector<std::string>{"a", "b"}));
  const Tensor* t = conv.attrs.get_tensor("t");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype(), DType::kUInt8);
  EXPECT_EQ(t->data<uint8_t>()[1], 255);
  ASSERT_EQ(conv.outputs.size(), 1u);
  EXPECT_EQ(g.value(conv.outputs[0]).producer, 0);

  const Node& split = g.nodes[1];
  EXPECT_EQ(split.domain, "ai.onnx");
  EXPECT_EQ(split.name, "split");
  EXPECT_EQ(split.inputs, (std::vector<ValueId>{conv.outputs[0]}));
  ASSERT_EQ(split.outputs.size(), 2u);
  EXPECT_EQ(g.value(split.outputs[1]).name, "b/2");
  EXPECT_EQ(std::get<int64_t>(split.attrs.all().at("axis")), 1);

  const Node& reshape = g.nodes[2];
  EXPECT_EQ(reshape.inputs[0], split.outputs[1]);
  EXPECT_EQ(g.value(reshape.inputs[1]).name, "shape");
  EXPECT_EQ(g.outputs, (std::vector<ValueId>{split.outputs[0], reshape.outputs[0]}));

  // Printing and re-parsing the hand-written graph is stable.
  std::string printed = print_graph(g);
  EXPECT_EQ(print_graph(parse_graph(printed)), printed);
}

TEST(TextFormat, InputWithInitializerAndDuplicateNames) {
  Graph g;
  ValueId a = g.add_input("a", {DType::kFloat32, {2}});
  g.value(a).constant = std::make_shared<const Tensor>(Tensor::from_vector<float>({1, 2}, {2}));
  ValueId b = g.add_value("a", {DType::kFloat32, {2}});  // duplicate name
  ValueId c = g.add_value("", {DType::kFloat32, {2}});   // empty name
  Node n;
  n.op_type = "Relu";
  n.inputs = {a};
  n.outputs = {b};
  g.add_node(n);
  Node m;
  m.op_type = "Neg";
  m.inputs = {b};
  m.outputs = {c};
  g.add_node(m);
  g.outputs = {c};
  std::string text = print_graph(g);
  EXPECT_NE(text.find("input a: f32[2] = [1, 2]"), std::string::npos) << text;
  Graph back = parse_graph(text);  // disambiguated names parse
  ASSERT_EQ(back.inputs.size(), 1u);
  ASSERT_TRUE(back.value(back.inputs[0]).is_constant());
  EXPECT_EQ(back.nodes[1].inputs[0], back.nodes[0].outputs[0]);
  EXPECT_EQ(print_graph(back), text);
}

TEST(TextFormat, ElidedConstantsPrintButDoNotParse) {
  Graph g;
  g.add_constant("big", Tensor(DType::kFloat32, {100}));
  g.add_constant("small", Tensor(DType::kFloat32, {2}));
  PrintOptions opt;
  opt.max_constant_elements = 10;
  std::string text = print_graph(g, opt);
  EXPECT_NE(text.find("const big: f32[100] = <elided 100 values>"), std::string::npos) << text;
  EXPECT_NE(text.find("const small: f32[2] = [0, 0]"), std::string::npos) << text;
  try {
    parse_graph(text);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("elided"), std::string::npos) << e.what();
  }
}

// ---- malformed input ------------------------------------------------------------------------

// Expects parse_graph(text) to throw korch::Error (kInvalid) whose message contains every `part`.
void expect_parse_error(const std::string& text, std::initializer_list<std::string> parts) {
  try {
    parse_graph(text);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalid);
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(TextFormat, ErrorsHaveLineColumnAndExpectation) {
  expect_parse_error("", {"line 1:1", "expected 'graph'", "end of input"});
  expect_parse_error("graph g {\n  input x: f33[1]\n}", {"line 2:12", "expected a dtype", "'f33'"});
  expect_parse_error("graph g {\n  %y: f32[1] = Relu(x)\n}", {"line 2:21", "undefined value 'x'"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  input x: f32[2]\n}", {"line 3:9", "'x' is already defined", "2:9"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %x: f32[1] = Relu(x)\n}", {"line 3:4", "already defined"});
  expect_parse_error("graph g {\n  %y: f32[1] = Relu(y)\n}", {"undefined value 'y'"});  // self-reference
  expect_parse_error("graph g {\n  input x: f32[1]\n  output z\n}", {"line 3:10", "undefined value 'z'"});
  expect_parse_error("graph g {\n  const c: i8[2] = [1, 300]\n}", {"line 2:24", "out of range", "i8"});
  expect_parse_error("graph g {\n  const c: f32[3] = [1, 2]\n}", {"line 2:26", "expected 3 values", "got 2"});
  expect_parse_error("graph g {\n  const c: f32[1] = [1, 2]\n}", {"too many values"});
  expect_parse_error("graph g {\n  const c: f16[1] = [1e6]\n}", {"out of range for f16"});
  expect_parse_error("graph g {\n  const c: f32[1] = [nan(0x3f800000)]\n}", {"not a NaN"});
  expect_parse_error("graph g {\n  const c: f32[1] = [nan(0x1ff800000)]\n}", {"not a 32-bit pattern"});
  expect_parse_error("graph g {\n  const c: bool[1] = [2]\n}", {"bool value"});
  expect_parse_error("graph g {\n  const c: u64[1] = [-1]\n}", {"u64 value"});
  expect_parse_error("graph g {\n  const c: f32[-1] = []\n}", {"dimensions must be >= 0"});
  expect_parse_error("graph g {\n  const c: f32[4611686018427387904,4] = []\n}", {"too many elements"});
  expect_parse_error("graph g {\n  const c: string[1] = [1]\n}", {"not supported"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %y: f32[1] = Relu(x) {a=[]}\n}", {"line 3:27", "ints[]"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %y: f32[1] = Relu(x) {a=1, a=2}\n}", {"'a' is given twice"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %y: f32[1] = Relu(x) {a=[1, \"s\"]}\n}", {"integer list element"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %y: f32[1] = Relu(x) {a=\"open\n}", {"unterminated string"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %y: f32[1] = Relu(x) name=conv\n}", {"name as a string"});
  expect_parse_error("graph g {\n  input \"a\\q\": f32[1]\n}", {"line 2:11", "unknown escape"});
  expect_parse_error("graph g {\n  input x: f32[1] @\n}", {"line 2:19", "unexpected character '@'"});
  expect_parse_error("graph g {\n  blah\n}", {"line 2:3", "expected a statement"});
  expect_parse_error("graph g {\n}\nextra", {"line 3:1", "end of input after"});
  expect_parse_error("graph g (opset x) {}", {"line 1:16", "opset version"});
  expect_parse_error("graph g {\n  input x: f32[1]\n  %a: f32[1], %a: f32[1] = Split(x)\n}", {"already defined"});
}

TEST(TextFormat, TruncatedTextNeverCrashes) {
  // Every prefix of a valid text either parses (only the full one does) or throws korch::Error.
  std::string text = print_graph(make_kitchen_sink());
  size_t ok = 0;
  for (size_t n = 0; n + 1 < text.size(); n += 3) {  // (text minus its final newline parses)
    try {
      parse_graph(text.substr(0, n));
      ++ok;
    } catch (const Error&) {
    }
  }
  EXPECT_EQ(ok, 0u);
  // Single-byte corruptions throw or parse, but never crash.
  for (size_t i = 0; i < text.size(); i += 7) {
    for (char c : {'"', '[', ']', '-', 'x', '\0', ','}) {
      std::string bad = text;
      bad[i] = c;
      try {
        parse_graph(bad);
      } catch (const Error&) {
      }
    }
  }
}

}  // namespace
}  // namespace korch
