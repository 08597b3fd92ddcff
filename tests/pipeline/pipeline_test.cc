// lower_to_primitives (fission + never-losing rewrites) on the built-in models: only primitives
// remain, the function is unchanged, and the Conv+BatchNorm of tiny_convnet folds into the Conv.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/builtin_models.h"
#include "frontend/onnx_loader.h"
#include "ir/interpreter.h"
#include "ir/primitive.h"
#include "ir/random.h"
#include "pipeline/pipeline.h"

namespace korch {
namespace {

double rel_l2(const Tensor& got, const Tensor& want) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.get_as_double(i), e = want.get_as_double(i);
    num += (a - e) * (a - e);
    den += e * e;
  }
  return std::sqrt(num / den);
}

TEST(Pipeline, BuiltinModelsLowerToPrimitivesWithTheSameFunction) {
  for (const std::string& name : builtin_model_names()) {
    SCOPED_TRACE(name);
    Graph g = load_onnx_bytes(builtin_model_bytes(name), name + ".onnx");
    PrimitiveReport rep;
    Graph p = lower_to_primitives(g, &rep);
    EXPECT_NO_THROW(verify_graph(p, true));
    EXPECT_TRUE(rep.fission.kept_opaque.empty());
    for (const Node& n : p.nodes) {
      PrimitiveKind k = primitive_kind(p, n);
      EXPECT_TRUE(k != PrimitiveKind::kOperator && k != PrimitiveKind::kOpaque) << n.op_type;
    }
    for (uint64_t seed : {0, 1}) {
      std::vector<Tensor> inputs = random_inputs(g, seed);
      std::vector<Tensor> want = interpret(g, inputs), got = interpret(p, inputs);
      ASSERT_EQ(want.size(), got.size());
      for (size_t i = 0; i < want.size(); ++i) EXPECT_LE(rel_l2(got[i], want[i]), 1e-5);
    }
  }
}

TEST(Pipeline, ConvBatchNormFoldsIntoTheConv) {
  Graph g = load_onnx_bytes(builtin_model_bytes("tiny_convnet"), "tiny_convnet.onnx");
  Graph p = lower_to_primitives(g);
  // Fission turns each BatchNorm into Mul(scale) + Add(shift) after the Conv's bias Add; the
  // rewrites fold the scale into the weights and merge the two Adds. tiny_convnet has no other Mul.
  int convs = 0, muls = 0;
  for (const Node& n : p.nodes) {
    convs += n.op_type == "Conv";
    muls += n.op_type == "Mul";
  }
  EXPECT_EQ(convs, 3);
  EXPECT_EQ(muls, 0);
}

}  // namespace
}  // namespace korch
