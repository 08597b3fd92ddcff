// Constant folding, Identity/Dropout removal, dead code elimination and external data.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

struct ModelBuilder {
  onnx::ModelProto m;
  ModelBuilder() {
    m.set_ir_version(8);
    auto* imp = m.add_opset_import();
    imp->set_domain("");
    imp->set_version(17);
    m.mutable_graph()->set_name("t");
  }
  onnx::GraphProto* g() { return m.mutable_graph(); }
  void input(const std::string& name, std::vector<int64_t> dims) {
    auto* in = g()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::TensorProto* weight(const std::string& name, std::vector<int64_t> dims, float start) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) { t->add_dims(d); n *= d; }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(start + static_cast<float>(i));
    return t;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
    auto* n = g()->add_node();
    n->set_op_type(op);
    n->set_name(op + "_" + out[0]);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  void output(const std::string& name) { g()->add_output()->set_name(name); }
  Graph load(const std::string& path = "t.onnx") { return load_onnx_bytes(m.SerializeAsString(), path); }
};

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op_type == op;
  return n;
}

TEST(Frontend, FoldsShapeArithmeticAndRemovesIdentityDropout) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.weight("w", {3, 4}, 0.f);
  b.node("Shape", {"x"}, {"x_shape"});
  b.node("ConstantOfShape", {"x_shape"}, {"ones_like"});
  b.node("MatMul", {"x", "w"}, {"mm"});
  b.node("Identity", {"mm"}, {"mm_id"});
  b.node("Dropout", {"mm_id"}, {"mm_drop"});
  b.node("Identity", {"mm_drop"}, {"y"});
  b.node("MatMul", {"x", "w"}, {"unused"});
  b.output("y");
  b.output("ones_like");
  Graph g = b.load();
  EXPECT_EQ(g.nodes.size(), 1u);  // just the MatMul
  EXPECT_EQ(count_op(g, "Identity") + count_op(g, "Dropout") + count_op(g, "Shape"), 0);
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
  EXPECT_EQ(g.value(g.outputs[0]).producer, 0);
  ASSERT_TRUE(g.value(g.outputs[1]).is_constant());
  EXPECT_EQ(g.type(g.outputs[1]).shape, (Shape{2, 3}));
  EXPECT_NO_THROW(verify_graph(g));

  Tensor x = Tensor::from_vector<float>({1, 0, 0, 0, 1, 0}, {2, 3});
  std::vector<Tensor> out = interpret(g, {x});
  EXPECT_EQ(out[0].to_float_vector(), (std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// A per-channel bias broadcast to an activation's shape stays an Expand node (fission's builder
// makes the same choice); a small broadcast still folds.
TEST(Frontend, GrowingExpandOfConstantsStaysANode) {
  ModelBuilder b;
  b.input("x", {1, 8, 32, 32});
  b.weight("bias", {1, 8, 1, 1}, 1.f);
  auto* shape = b.weight("shape", {4}, 0.f);
  shape->clear_float_data();
  shape->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : {1, 8, 32, 32}) shape->add_int64_data(d);
  auto* small = b.weight("small_shape", {2}, 0.f);
  small->clear_float_data();
  small->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : {4, 8}) small->add_int64_data(d);
  b.weight("row", {1, 8}, 0.f);
  b.node("Expand", {"bias", "shape"}, {"big"});
  b.node("Add", {"x", "big"}, {"y"});
  b.node("Expand", {"row", "small_shape"}, {"tiny"});
  b.output("y");
  b.output("tiny");
  Graph g = b.load();
  EXPECT_EQ(count_op(g, "Expand"), 1);  // the 8192-element one
  EXPECT_TRUE(g.value(g.outputs[1]).is_constant());  // the 32-element one folded
  Tensor x(DType::kFloat32, {1, 8, 32, 32});
  std::vector<Tensor> out = interpret(g, {x});
  EXPECT_EQ(out[0].to_float_vector()[0], 1.f);
  EXPECT_EQ(out[0].to_float_vector()[8191], 8.f);
}

TEST(Frontend, IdentityOfInputToOutputIsKept) {
  ModelBuilder b;
  b.input("x", {2});
  b.node("Identity", {"x"}, {"y"});
  b.output("y");
  Graph g = b.load();
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.value(g.outputs[0]).name, "y");
}

TEST(Frontend, ExternalData) {
  fs::path dir = fs::temp_directory_path() / "korch_ext_data_test";
  fs::create_directories(dir);
  std::vector<float> vals = {1.5f, -2.f, 3.25f, 4.f, 0.f, 9.f};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    std::vector<float> padded = {7.f};  // offset 4 bytes
    padded.insert(padded.end(), vals.begin(), vals.end());
    f.write(reinterpret_cast<const char*>(padded.data()), static_cast<std::streamsize>(padded.size() * 4));
  }
  ModelBuilder b;
  b.input("x", {2, 3});
  auto* w = b.g()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  w->add_dims(2);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "4");
  add_kv("length", "24");
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  Graph g = b.load((dir / "m.onnx").string());
  ValueId wid = g.find_value("w");
  ASSERT_GE(wid, 0);
  EXPECT_EQ(g.value(wid).constant->to_float_vector(), vals);

  // A location outside the model folder is refused.
  w->mutable_external_data(0)->set_value("../etc/passwd");
  EXPECT_THROW(b.load((dir / "m.onnx").string()), Error);
  // A short file is an error naming the tensor, not a crash.
  w->mutable_external_data(0)->set_value("weights.bin");
  w->mutable_external_data(1)->set_value("16");
  try {
    b.load((dir / "m.onnx").string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

TEST(Frontend, UndefinedInputNameIsAnError) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.node("MatMul", {"x", "nope"}, {"y"});
  b.output("y");
  try {
    b.load();
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
}

TEST(Frontend, CycleIsAnError) {
  ModelBuilder b;
  b.input("x", {2, 2});
  b.node("MatMul", {"x", "b"}, {"a"});
  b.node("MatMul", {"a", "x"}, {"b"});
  b.output("b");
  EXPECT_THROW(b.load(), Error);
}

TEST(Frontend, FrozenInputsBecomeConstants) {
  ModelBuilder b;
  b.input("x", {2, 3});
  b.input("w", {3, 4});
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y");
  LoadOptions lo;
  lo.frozen_inputs["w"] = Tensor(DType::kFloat32, {3, 4});
  Graph g = load_onnx_bytes(b.m.SerializeAsString(), "t.onnx", lo);
  EXPECT_EQ(g.inputs.size(), 1u);
  EXPECT_TRUE(g.value(g.find_value("w")).is_constant());
}

}  // namespace
}  // namespace korch
