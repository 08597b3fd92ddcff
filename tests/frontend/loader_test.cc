// Frontend tests: models are built in memory with the ONNX protobuf API, so each case states
// exactly the structure it exercises.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx_loader.h"

namespace korch {
namespace {

onnx::ModelProto tiny_model(int opset = 17) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* imp = m.add_opset_import();
  imp->set_domain("");
  imp->set_version(opset);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  auto* in = g->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(1);
  tt->mutable_shape()->add_dim()->set_dim_value(2);
  tt->mutable_shape()->add_dim()->set_dim_param("n");
  auto* node = g->add_node();
  node->set_op_type("Relu");
  node->set_name("relu0");
  node->add_input("x");
  node->add_output("y");
  g->add_output()->set_name("y");
  return m;
}

TEST(OnnxLoader, SymbolicDimNeedsShapeOption) {
  std::string bytes = tiny_model().SerializeAsString();
  try {
    load_onnx_bytes(bytes, "tiny.onnx");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic dimension 'n'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--shape x="), std::string::npos) << e.what();
  }
}

TEST(OnnxLoader, UnsupportedOpNamesOpNodeAndPath) {
  auto m = tiny_model();
  m.mutable_graph()->mutable_node(0)->set_op_type("FancyOp");
  LoadOptions lo;
  lo.input_shapes["x"] = {2, 3};
  try {
    load_onnx_bytes(m.SerializeAsString(), "models/tiny.onnx", lo);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    for (const char* part : {"models/tiny.onnx", "relu0", "FancyOp", "opset 17"})
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

TEST(OnnxLoader, TruncatedFileIsAnError) {
  auto m = tiny_model();
  std::string bytes = m.SerializeAsString();
  EXPECT_THROW(load_onnx_bytes(bytes.substr(0, bytes.size() / 2), "t.onnx"), Error);
  EXPECT_THROW(load_onnx_bytes("", "t.onnx"), Error);
  EXPECT_THROW(load_onnx_bytes("garbage\xff\xff\xff", "t.onnx"), Error);
}

TEST(OnnxLoader, OpsetOutOfRange) {
  LoadOptions lo;
  lo.input_shapes["x"] = {2, 3};
  EXPECT_THROW(load_onnx_bytes(tiny_model(5).SerializeAsString(), "t.onnx", lo), Error);
  EXPECT_THROW(load_onnx_bytes(tiny_model(30).SerializeAsString(), "t.onnx", lo), Error);
}

TEST(ShapeText, Parses) {
  EXPECT_EQ(parse_shape_text("1x3x224x224"), (Shape{1, 3, 224, 224}));
  EXPECT_EQ(parse_shape_text("4,5"), (Shape{4, 5}));
  EXPECT_THROW(parse_shape_text("1xax3"), Error);
}

}  // namespace
}  // namespace korch
