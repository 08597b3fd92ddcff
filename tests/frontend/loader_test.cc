// Frontend tests: models are built in memory with the ONNX protobuf API, so each case states
// exactly the structure it exercises.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx_loader.h"
#include "ir/op_registry.h"

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

// Exporters write a dynamic dimension as -1 (Paddle) or as a name (torch's dynamic_axes). Both
// are dynamic: --shape INPUT=... fixes them, --shape NAME=N fixes every dimension of that name.
TEST(OnnxLoader, MinusOneAndNamedDimsAreDynamic) {
  auto m = tiny_model();  // x: [2, 'n']
  auto* dims = m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  LoadOptions by_name;
  by_name.input_shapes["n"] = {5};
  Graph g = load_onnx_bytes(m.SerializeAsString(), "tiny.onnx", by_name);
  EXPECT_EQ(g.type(g.inputs[0]).shape, (Shape{2, 5}));

  dims->mutable_dim(1)->set_dim_value(-1);
  try {
    load_onnx_bytes(m.SerializeAsString(), "tiny.onnx");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic dimension (-1) at axis 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--shape x="), std::string::npos) << e.what();
  }
  LoadOptions whole;
  whole.input_shapes["x"] = {2, 7};
  g = load_onnx_bytes(m.SerializeAsString(), "tiny.onnx", whole);
  EXPECT_EQ(g.type(g.inputs[0]).shape, (Shape{2, 7}));
  whole.input_shapes["x"] = {3, 7};  // axis 0 is fixed at 2
  EXPECT_THROW(load_onnx_bytes(m.SerializeAsString(), "tiny.onnx", whole), Error);
}

TEST(OnnxLoader, ShapeNamingNeitherInputNorDimListsBoth) {
  LoadOptions lo;
  lo.input_shapes["batch"] = {2};
  try {
    load_onnx_bytes(tiny_model().SerializeAsString(), "tiny.onnx", lo);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    for (const char* part : {"'batch'", "inputs: x", "named dimensions: n"})
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
  lo.input_shapes.clear();
  lo.input_shapes["n"] = {2, 3};  // a dimension takes one size
  EXPECT_THROW(load_onnx_bytes(tiny_model().SerializeAsString(), "tiny.onnx", lo), Error);
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

// An op is accepted only from the domain it is registered for: a default-domain op named in
// another domain, and a contrib op named in the default domain, are both unsupported (with the
// domain named), while onnxruntime's com.microsoft DynamicQuantizeLSTM is known in its own domain.
TEST(OnnxLoader, OpsAreKnownOnlyInTheirOwnDomain) {
  LoadOptions lo;
  lo.input_shapes["x"] = {2, 3};
  auto m = tiny_model();
  m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft");  // Relu
  try {
    load_onnx_bytes(m.SerializeAsString(), "tiny.onnx", lo);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("domain 'com.microsoft'"), std::string::npos) << e.what();
  }
  EXPECT_NE(OpRegistry::global().find("com.microsoft", "DynamicQuantizeLSTM"), nullptr);
  EXPECT_EQ(OpRegistry::global().find("", "DynamicQuantizeLSTM"), nullptr);
  EXPECT_EQ(OpRegistry::global().find("com.microsoft", "Relu"), nullptr);
  EXPECT_NE(OpRegistry::global().find("ai.onnx", "Relu"), nullptr);
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

// An initializer whose shape claims far more elements than its data holds is an error naming it,
// checked before anything is allocated (it was a std::bad_alloc, found by the fuzz targets' design).
TEST(OnnxLoader, InitializerShapeLargerThanItsDataIsAnError) {
  for (int variant = 0; variant < 3; ++variant) {
    auto m = tiny_model();
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_value(3);
    auto* w = m.mutable_graph()->add_initializer();
    w->set_name("huge");
    w->set_data_type(1);
    w->add_dims(int64_t{1} << 40);
    if (variant == 0) w->set_raw_data(std::string(4, '\0'));
    if (variant == 1) w->add_float_data(1.0f);
    if (variant == 2) w->add_dims(int64_t{1} << 40);  // the element count overflows int64
    try {
      load_onnx_bytes(m.SerializeAsString(), "huge.onnx");
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("huge"), std::string::npos) << e.what();
    }
  }
}

TEST(ShapeText, Parses) {
  EXPECT_EQ(parse_shape_text("1x3x224x224"), (Shape{1, 3, 224, 224}));
  EXPECT_EQ(parse_shape_text("4,5"), (Shape{4, 5}));
  EXPECT_THROW(parse_shape_text("1xax3"), Error);
}

}  // namespace
}  // namespace korch
