// The built-in models load, verify (with shape re-inference), round-trip through the IR text
// form, and give bit-identical results before and after the round trip.
#include <gtest/gtest.h>

#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "frontend/onnx_writer.h"
#include "ir/interpreter.h"
#include "ir/random.h"
#include "ir/text_format.h"

namespace korch {
namespace {

TEST(BuiltinModels, LoadVerifyRoundTripAndRun) {
  for (const std::string& name : builtin_model_names()) {
    SCOPED_TRACE(name);
    Graph g = load_onnx_bytes(builtin_model_bytes(name), name + ".onnx");
    EXPECT_NO_THROW(verify_graph(g, /*registry_check=*/true));
    std::string text = print_graph(g);
    Graph parsed = parse_graph(text);
    EXPECT_NO_THROW(verify_graph(parsed, true));
    EXPECT_EQ(print_graph(parsed), text);

    std::vector<Tensor> inputs = random_inputs(g, 7);
    std::vector<Tensor> a = interpret(g, inputs);
    std::vector<Tensor> b = interpret(parsed, inputs);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].bitwise_equal(b[i]));
    for (float v : a[0].to_float_vector()) ASSERT_TRUE(std::isfinite(v));
  }
}

TEST(BuiltinModels, OnnxWriterRoundTrip) {
  for (const std::string& name : builtin_model_names()) {
    SCOPED_TRACE(name);
    Graph g = load_onnx_bytes(builtin_model_bytes(name), name + ".onnx");
    Graph again = load_onnx_bytes(save_onnx_bytes(g), name + "_saved.onnx");
    EXPECT_EQ(print_graph(again), print_graph(g));
  }
}

TEST(BuiltinModels, ConvnetOutputIsAProbabilityVector) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  std::vector<Tensor> out = interpret(g, random_inputs(g, 0));
  double sum = 0;
  for (float v : out[0].to_float_vector()) {
    EXPECT_GE(v, 0.f);
    sum += v;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(BuiltinModels, VerifierCatchesWrongRecordedShape) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  g.value(g.nodes[0].outputs[0]).type.shape[1] += 1;
  EXPECT_THROW(verify_graph(g, true), Error);
}

}  // namespace
}  // namespace korch
