// "matvec_as_reduce" (rewrite/matvec_as_reduce.cc): a 1x1 Conv or a MatMul of one vector by a
// constant matrix offered as a Mul with the matrix and a ReduceSum over its innermost axis.
#include "rewrite_test_util.h"

namespace korch {
namespace {

using namespace korch::testing;

Attributes pointwise_conv(bool channels_last) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{1, 1});
  if (channels_last) a.set("channels_last", int64_t{1});
  return a;
}

// The rewritten graph: no linear primitive left, one Mul and one ReduceSum, the same values.
void expect_reduce_form(const Graph& g) {
  const std::vector<Alternative> alts = of_rule(g, "matvec_as_reduce");
  ASSERT_EQ(alts.size(), 1u);
  const Graph r = apply_checked(g, alts[0]);
  EXPECT_EQ(count_op(r, "Conv") + count_op(r, "MatMul"), 0) << alts[0].description;
  EXPECT_EQ(count_op(r, "Mul"), 1);
  EXPECT_EQ(count_op(r, "ReduceSum"), 1);
}

// A squeeze-and-excitation Conv in both layouts: x [1, 16, 1, 1] (NCHW) and [1, 1, 1, 16] (the
// channels-last Conv of the layout pass), weights [8, 16, 1, 1].
TEST(MatvecAsReduce, PointwiseConvOfChannelMeans) {
  for (bool cl : {false, true}) {
    GraphBuilder b;
    const ValueId x = b.input(cl ? Shape{1, 1, 1, 16} : Shape{1, 16, 1, 1});
    b.output(b.op("Conv", {x, b.random({8, 16, 1, 1})}, pointwise_conv(cl)));
    SCOPED_TRACE(cl ? "channels-last" : "NCHW");
    expect_reduce_form(b.g);
  }
}

// A classifier's MatMul of one row (x [1, 32] and x [32]), its [K, N] weights transposed so the
// sum runs over contiguous elements.
TEST(MatvecAsReduce, MatMulOfOneRow) {
  for (const Shape& xs : {Shape{1, 32}, Shape{32}, Shape{1, 1, 32}}) {
    GraphBuilder b;
    b.output(b.op("MatMul", {b.input(xs), b.random({32, 10})}));
    expect_reduce_form(b.g);
  }
}

TEST(MatvecAsReduce, MatricesAndLargeOrVariableWeightsAreNotOffered) {
  auto offered = [](const GraphBuilder& b) { return !of_rule(b.g, "matvec_as_reduce").empty(); };
  {
    GraphBuilder b;  // two rows: a matrix product
    b.output(b.op("MatMul", {b.input({2, 32}), b.random({32, 10})}));
    EXPECT_FALSE(offered(b));
  }
  {
    GraphBuilder b;  // a Conv over a 2x2 map
    b.output(b.op("Conv", {b.input({1, 16, 2, 2}), b.random({8, 16, 1, 1})}, pointwise_conv(false)));
    EXPECT_FALSE(offered(b));
  }
  {
    GraphBuilder b;  // variable weights
    b.output(b.op("MatMul", {b.input({1, 32}), b.input({32, 10})}));
    EXPECT_FALSE(offered(b));
  }
  {
    GraphBuilder b;  // a 3x3 Conv
    Attributes a;
    a.set("kernel_shape", std::vector<int64_t>{3, 3});
    b.output(b.op("Conv", {b.input({1, 16, 3, 3}), b.random({8, 16, 3, 3})}, a));
    EXPECT_FALSE(offered(b));
  }
  {
    GraphBuilder b;  // more than 2^24 weights (a bound on compile time): a library GEMV's
    b.output(b.op("MatMul", {b.input({1, 4097}), b.random({4097, 4096})}));
    EXPECT_FALSE(offered(b));
  }
}

// A classifier head's product (efficientvit_b0's 1024x1280: its weights streamed cold, a loop
// kernel read them in half the library GEMV's time) is offered.
TEST(MatvecAsReduce, AClassifierHeadIsOffered) {
  GraphBuilder b;
  b.output(b.op("MatMul", {b.input({1, 1024}), b.random({1024, 1280})}));
  EXPECT_FALSE(of_rule(b.g, "matvec_as_reduce").empty());
}

}  // namespace
}  // namespace korch
