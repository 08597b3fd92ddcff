// Control flow (frontend/control_flow.h): If on a compile-time constant condition is inlined,
// Loop with a constant trip count is unrolled, everything else is a clear error. Models are
// built with the ONNX protobuf API; results are checked by running the loaded graph in the
// reference interpreter against values computed by hand.
#include "frontend/control_flow.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"

namespace korch {
namespace {

// Builds one graph (the model's or a subgraph).
struct GraphBuilder {
  onnx::GraphProto* g;

  void input(const std::string& name, int elem, std::vector<int64_t> dims) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    tt->mutable_shape();  // rank 0 when dims is empty
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  void output(const std::string& name) { g->add_output()->set_name(name); }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                        const std::string& name = "") {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + out[0] : name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  void init_float(const std::string& name, std::vector<int64_t> dims, std::vector<float> v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    for (float x : v) t->add_float_data(x);
  }
  void init_int64(const std::string& name, int64_t v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_int64_data(v);
  }
  void init_bool(const std::string& name, bool v) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::BOOL);
    t->add_int32_data(v ? 1 : 0);
  }
  // A Constant node holding one float (shape [1]), int64 or bool (scalars).
  onnx::TensorProto* constant(const std::string& out, int elem) {
    auto* a = node("Constant", {}, {out})->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(elem);
    return a->mutable_t();
  }
  void constant_float(const std::string& out, float v) {
    auto* t = constant(out, onnx::TensorProto::FLOAT);
    t->add_dims(1);
    t->add_float_data(v);
  }
  void constant_int64(const std::string& out, int64_t v) { constant(out, onnx::TensorProto::INT64)->add_int64_data(v); }
  void constant_bool(const std::string& out, bool v) { constant(out, onnx::TensorProto::BOOL)->add_int32_data(v); }
};

// A graph attribute of node n, to be filled in.
GraphBuilder subgraph(onnx::NodeProto* n, const std::string& attr) {
  auto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(attr);
  return {a->mutable_g()};
}

// out = If(cond) { then_op(x) } else { else_op(x) }.
void unary_if(GraphBuilder& g, const std::string& cond, const std::string& out, const std::string& name,
              const std::string& then_op, const std::string& else_op) {
  auto* n = g.node("If", {cond}, {out}, name);
  GraphBuilder t = subgraph(n, "then_branch");
  t.node(then_op, {"x"}, {"then_out"});
  t.output("then_out");
  GraphBuilder e = subgraph(n, "else_branch");
  e.node(else_op, {"x"}, {"else_out"});
  e.output("else_out");
}

struct Model {
  onnx::ModelProto m;
  explicit Model(int opset = 17) {
    m.set_ir_version(8);
    auto* imp = m.add_opset_import();
    imp->set_domain("");
    imp->set_version(opset);
    m.mutable_graph()->set_name("main");
  }
  GraphBuilder main() { return {m.mutable_graph()}; }
  Graph load(const LoadOptions& lo = {}) const { return load_onnx_bytes(m.SerializeAsString(), "cf.onnx", lo); }
  // The error message of a load that must fail.
  std::string load_error(const LoadOptions& lo = {}, ErrorCode code = ErrorCode::kUnsupported) const {
    try {
      load(lo);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "expected the load to fail";
    return "";
  }
};

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

Tensor floats(Shape shape, std::vector<float> v) { return Tensor::from_vector<float>(v, std::move(shape)); }

std::vector<float> values(const Tensor& t) {
  std::vector<float> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(static_cast<float>(t.get_as_double(i)));
  return out;
}

void expect_contains(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}

// y = If(c) { x + 1 (a then-branch initializer) } else { x * 2 (a Constant node) }.
Model if_on_initializer(bool c) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {3});
  g.init_bool("c", c);
  auto* n = g.node("If", {"c"}, {"y"}, "if_0");
  GraphBuilder t = subgraph(n, "then_branch");
  t.init_float("one", {1}, {1});
  t.node("Add", {"x", "one"}, {"t_out"});
  t.output("t_out");
  GraphBuilder e = subgraph(n, "else_branch");
  e.constant_float("two", 2);
  e.node("Mul", {"x", "two"}, {"e_out"});
  e.output("e_out");
  g.output("y");
  return m;
}

TEST(ControlFlow, IfOnConstantInitializerTakesEitherBranch) {
  const Tensor x = floats({3}, {1, 2, 3});
  for (bool c : {true, false}) {
    Graph g = if_on_initializer(c).load();
    EXPECT_EQ(count_op(g, "If"), 0);
    EXPECT_EQ(count_op(g, c ? "Add" : "Mul"), 1);
    EXPECT_EQ(count_op(g, c ? "Mul" : "Add"), 0);
    EXPECT_EQ(g.value(g.outputs[0]).name, "y");
    EXPECT_EQ(values(interpret(g, {x})[0]), c ? (std::vector<float>{2, 3, 4}) : (std::vector<float>{2, 4, 6}));
  }
}

// cond = Equal(sr, Constant 16000): constant once sr is bound; otherwise a clear error.
Model if_on_sample_rate() {
  Model m;
  GraphBuilder g = m.main();
  g.input("sr", onnx::TensorProto::INT64, {});
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.constant_int64("k16000", 16000);
  g.node("Equal", {"sr", "k16000"}, {"is16k"});
  unary_if(g, "is16k", "y", "if_sr", "Neg", "Abs");
  g.output("y");
  return m;
}

TEST(ControlFlow, IfOnBoundInputIsInlined) {
  const Tensor x = floats({2}, {-1, 4});
  for (int64_t sr : {16000, 8000}) {
    LoadOptions lo;
    lo.frozen_inputs["sr"] = Tensor::scalar<int64_t>(sr);
    Graph g = if_on_sample_rate().load(lo);
    EXPECT_EQ(count_op(g, "If"), 0);
    ASSERT_EQ(g.inputs.size(), 1u);
    EXPECT_EQ(values(interpret(g, {x})[0]), sr == 16000 ? (std::vector<float>{1, -4}) : (std::vector<float>{1, 4}));
  }
}

TEST(ControlFlow, IfOnRuntimeConditionNamesNodeInputAndBind) {
  std::string msg = if_on_sample_rate().load_error();
  expect_contains(msg, {"cf.onnx", "node 'if_sr' (If", "its condition 'is16k'", "must be a compile-time constant",
                        "runtime input 'sr'", "--bind sr=FILE.npy"});
}

// The condition may depend on a runtime input through its static shape only: Shape folds.
TEST(ControlFlow, IfOnShapeOfStaticInputFolds) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2, 3});
  g.node("Shape", {"x"}, {"shape"});
  g.init_int64("zero", 0);
  g.node("Gather", {"shape", "zero"}, {"rows"});
  g.init_int64("two", 2);
  g.node("Equal", {"rows", "two"}, {"c"});
  unary_if(g, "c", "y", "if_shape", "Relu", "Neg");
  g.output("y");
  Graph graph = m.load();
  EXPECT_EQ(count_op(graph, "Relu"), 1);
  EXPECT_EQ(count_op(graph, "Neg"), 0);
}

// An If inside a branch, whose condition is a local of the outer branch and whose branch reads
// a value of the main graph and a local of the outer branch.
TEST(ControlFlow, NestedIfIsInlinedWithOuterScopeReferences) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.node("Mul", {"x", "x"}, {"sq"});  // a main-graph value the inner branch reads
  g.init_bool("outer_c", true);
  auto* outer = g.node("If", {"outer_c"}, {"y"}, "outer");
  GraphBuilder t = subgraph(outer, "then_branch");
  t.constant_bool("inner_c", false);
  t.constant_float("hundred", 100);
  auto* inner = t.node("If", {"inner_c"}, {"t_out"}, "inner");
  GraphBuilder it = subgraph(inner, "then_branch");
  it.node("Neg", {"sq"}, {"it_out"});
  it.output("it_out");
  GraphBuilder ie = subgraph(inner, "else_branch");
  ie.node("Add", {"sq", "hundred"}, {"ie_out"});
  ie.output("ie_out");
  t.output("t_out");
  GraphBuilder e = subgraph(outer, "else_branch");
  e.node("Identity", {"x"}, {"e_out"});
  e.output("e_out");
  g.output("y");
  Graph graph = m.load();
  EXPECT_EQ(count_op(graph, "If"), 0);
  EXPECT_EQ(count_op(graph, "Neg"), 0);
  EXPECT_EQ(values(interpret(graph, {floats({2}, {3, -2})})[0]), (std::vector<float>{109, 104}));
}

// Branch locals named like main-graph values ('t', 'y2') and two Ifs with the same branch
// (the same local names twice) must not capture each other's values.
TEST(ControlFlow, BranchLocalNamesDoNotCollide) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.node("Relu", {"x"}, {"t"});
  g.init_bool("c", true);
  for (const char* name : {"if_a", "if_b"}) {
    auto* n = g.node("If", {"c"}, {std::string(name) + "_out"}, name);
    GraphBuilder b = subgraph(n, "then_branch");
    b.constant_float("t", 10);  // shadows the main graph's 't' inside the branch
    b.node("Add", {"x", "t"}, {"y2"});
    b.output("y2");
    GraphBuilder e = subgraph(n, "else_branch");
    e.node("Identity", {"x"}, {"e"});
    e.output("e");
  }
  g.node("Add", {"if_a_out", "if_b_out"}, {"s"});
  g.node("Add", {"s", "t"}, {"y2"});  // main's own 'y2' and 't'
  g.output("y2");
  Graph graph = m.load();
  // (x + 10) + (x + 10) + relu(x)
  EXPECT_EQ(values(interpret(graph, {floats({2}, {1, -3})})[0]), (std::vector<float>{23, 14}));
}

// A branch may output a value of the enclosing graph as it is, with no node of its own.
TEST(ControlFlow, BranchOutputMayBeAnOuterValue) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.node("Neg", {"x"}, {"nx"});
  g.init_bool("c", false);
  auto* n = g.node("If", {"c"}, {"y"}, "pass");
  GraphBuilder t = subgraph(n, "then_branch");
  t.node("Abs", {"x"}, {"a"});
  t.output("a");
  subgraph(n, "else_branch").output("nx");
  g.output("y");
  EXPECT_EQ(values(interpret(m.load(), {floats({2}, {1, -5})})[0]), (std::vector<float>{-1, 5}));
}

// Loop: M = 4 (a Constant), cond absent, acc carried from x; the body reads x from the main graph
// and its iteration number; scan output 2 * acc per iteration.
Model accumulate_loop(int opset, bool with_cond) {
  Model m(opset);
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.constant_int64("M", 4);
  if (with_cond) g.init_bool("go", true);
  auto* n = g.node("Loop", {"M", with_cond ? "go" : "", "x"}, {"acc_final", "scan"}, "loop_0");
  GraphBuilder b = subgraph(n, "body");
  b.input("i", onnx::TensorProto::INT64, {});
  b.input("c_in", onnx::TensorProto::BOOL, {});
  b.input("acc", onnx::TensorProto::FLOAT, {2});
  auto* cast = b.node("Cast", {"i"}, {"fi"});
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  b.node("Mul", {"x", "fi"}, {"step"});
  b.node("Add", {"acc", "step"}, {"acc_out"});
  b.init_float("two", {1}, {2});
  b.node("Mul", {"acc_out", "two"}, {"doubled"});
  if (with_cond)
    b.constant_bool("c_out", true);
  else
    b.node("Identity", {"c_in"}, {"c_out"});
  b.output("c_out");
  b.output("acc_out");
  b.output("doubled");
  g.output("acc_final");
  g.output("scan");
  return m;
}

TEST(ControlFlow, LoopIsUnrolled) {
  // acc after iteration k is x * (1 + 0 + 1 + ... + k): 1, 2, 4, 7 times x.
  const Tensor x = floats({2}, {1, -2});
  for (int opset : {11, 17})
    for (bool with_cond : {false, true}) {
      SCOPED_TRACE(fmt::format("opset {} cond {}", opset, with_cond));
      Graph g = accumulate_loop(opset, with_cond).load();
      EXPECT_EQ(count_op(g, "Loop"), 0);
      EXPECT_EQ(count_op(g, "Add"), 4);
      std::vector<Tensor> out = interpret(g, {x});
      EXPECT_EQ(values(out[0]), (std::vector<float>{7, -14}));
      EXPECT_EQ(out[1].shape(), (Shape{4, 2}));
      EXPECT_EQ(values(out[1]), (std::vector<float>{2, -4, 4, -8, 8, -16, 14, -28}));
    }
}

TEST(ControlFlow, LoopWithFalseConditionRunsNoIteration) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.init_int64("M", 3);
  g.init_bool("stop", false);
  auto* n = g.node("Loop", {"M", "stop", "x"}, {"y"}, "loop_none");
  GraphBuilder b = subgraph(n, "body");
  b.input("i", onnx::TensorProto::INT64, {});
  b.input("c_in", onnx::TensorProto::BOOL, {});
  b.input("v", onnx::TensorProto::FLOAT, {2});
  b.node("Neg", {"v"}, {"v_out"});
  b.output("c_in");
  b.output("v_out");
  g.output("y");
  Graph graph = m.load();
  EXPECT_EQ(count_op(graph, "Neg"), 0);
  EXPECT_EQ(values(interpret(graph, {floats({2}, {5, 6})})[0]), (std::vector<float>{5, 6}));
}

// An If in a Loop body on the iteration number: it folds in each copy.
TEST(ControlFlow, IfInsideLoopBodyFoldsPerIteration) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.init_int64("M", 3);
  auto* n = g.node("Loop", {"M", "", "x"}, {"y", "ys"}, "loop_if");
  GraphBuilder b = subgraph(n, "body");
  b.input("i", onnx::TensorProto::INT64, {});
  b.input("c_in", onnx::TensorProto::BOOL, {});
  b.input("acc", onnx::TensorProto::FLOAT, {2});
  b.init_int64("zero", 0);
  b.node("Equal", {"i", "zero"}, {"first"});
  auto* f = b.node("If", {"first"}, {"acc_out"}, "first_iter");
  GraphBuilder t = subgraph(f, "then_branch");
  t.node("Neg", {"acc"}, {"negated"});  // reads a body input
  t.output("negated");
  GraphBuilder e = subgraph(f, "else_branch");
  e.node("Add", {"acc", "x"}, {"added"});
  e.output("added");
  b.output("c_in");
  b.output("acc_out");
  b.output("acc_out");
  g.output("y");
  g.output("ys");
  Graph graph = m.load();
  EXPECT_EQ(count_op(graph, "If"), 0);
  std::vector<Tensor> out = interpret(graph, {floats({2}, {1, 2})});
  EXPECT_EQ(values(out[0]), (std::vector<float>{1, 2}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{-1, -2, 0, 0, 1, 2}));
}

// A branch inside the body defines its own 'x', shadowing the main graph's 'x', which is also the
// loop's initial value: the body input bound to it must not be captured by the branch's 'x'.
TEST(ControlFlow, ShadowingNamesInLoopBodyAreNotCaptured) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.init_int64("M", 2);
  auto* n = g.node("Loop", {"M", "", "x"}, {"y"}, "loop_shadow");
  GraphBuilder b = subgraph(n, "body");
  b.input("i", onnx::TensorProto::INT64, {});
  b.input("c_in", onnx::TensorProto::BOOL, {});
  b.input("acc", onnx::TensorProto::FLOAT, {2});
  b.constant_bool("always", true);
  auto* f = b.node("If", {"always"}, {"acc_out"}, "add_hundred");
  GraphBuilder t = subgraph(f, "then_branch");
  t.constant_float("x", 100);
  t.node("Add", {"acc", "x"}, {"sum"});
  t.output("sum");
  subgraph(f, "else_branch").output("acc");
  b.output("c_in");
  b.output("acc_out");
  g.output("y");
  EXPECT_EQ(values(interpret(m.load(), {floats({2}, {1, 2})})[0]), (std::vector<float>{201, 202}));
}

Model loop_with_trips(int64_t trips) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.init_int64("M", trips);
  auto* n = g.node("Loop", {"M", "", "x"}, {"y"}, "big_loop");
  GraphBuilder b = subgraph(n, "body");
  b.input("i", onnx::TensorProto::INT64, {});
  b.input("c_in", onnx::TensorProto::BOOL, {});
  b.input("v", onnx::TensorProto::FLOAT, {2});
  b.node("Neg", {"v"}, {"v_out"});
  b.output("c_in");
  b.output("v_out");
  g.output("y");
  return m;
}

TEST(ControlFlow, LoopOverTheUnrollLimitIsAnError) {
  Graph ok = loop_with_trips(kMaxUnrolledNodes).load();  // exactly at the limit
  EXPECT_EQ(values(interpret(ok, {floats({2}, {1, 2})})[0]), (std::vector<float>{1, 2}));
  std::string msg = loop_with_trips(kMaxUnrolledNodes + 1).load_error();
  expect_contains(msg, {"node 'big_loop' (Loop", "10001 iterations", "limit of 10000 unrolled nodes"});
}

TEST(ControlFlow, LoopOnRuntimeTripCountIsAnError) {
  Model m = loop_with_trips(3);
  auto* g = m.m.mutable_graph();
  g->clear_initializer();
  GraphBuilder{g}.input("M", onnx::TensorProto::INT64, {});
  expect_contains(m.load_error(), {"node 'big_loop' (Loop", "its trip count 'M'", "runtime input 'M'", "--bind M="});
  LoadOptions lo;
  lo.frozen_inputs["M"] = Tensor::scalar<int64_t>(3);
  EXPECT_EQ(values(interpret(m.load(lo), {floats({2}, {1, 2})})[0]), (std::vector<float>{-1, -2}));
}

TEST(ControlFlow, LoopWithDataDependentExitIsAnError) {
  Model m = loop_with_trips(3);
  GraphBuilder b{m.m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g()};
  b.g->mutable_output(0)->set_name("keep_going");
  b.init_int64("two", 2);
  b.node("Less", {"i", "two"}, {"keep_going"});
  expect_contains(m.load_error(), {"node 'big_loop' (Loop", "condition output 'keep_going'", "data-dependent exit"});
  // Without a trip count it would run until the condition turns false.
  m.m.mutable_graph()->mutable_node(0)->set_input(0, "");
  expect_contains(m.load_error(), {"node 'big_loop' (Loop", "no trip count"});
}

TEST(ControlFlow, ScanIsUnsupportedNamingTheNode) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  auto* n = g.node("Scan", {"x"}, {"y"}, "scan_0");
  GraphBuilder b = subgraph(n, "body");
  b.input("s", onnx::TensorProto::FLOAT, {});
  b.node("Neg", {"s"}, {"s_out"});
  b.output("s_out");
  g.output("y");
  expect_contains(m.load_error(), {"node 'scan_0'", "unsupported operator 'Scan'", "inlines If"});
}

TEST(ControlFlow, ModelWithoutControlFlowIsUntouched) {
  Model m;
  GraphBuilder g = m.main();
  g.input("x", onnx::TensorProto::FLOAT, {2});
  g.node("Relu", {"x"}, {"y"});
  g.output("y");
  onnx::ModelProto copy = m.m;
  bool called = false;
  inline_control_flow(copy, {}, [&](const onnx::ModelProto&, const LoadOptions&) {
    called = true;
    return Graph{};
  });
  EXPECT_FALSE(called);
  EXPECT_EQ(copy.SerializeAsString(), m.m.SerializeAsString());
}

}  // namespace
}  // namespace korch
