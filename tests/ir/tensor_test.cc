#include <gtest/gtest.h>

#include "ir/tensor.h"

namespace korch {

TEST(Tensor, BroadcastShapes) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_THROW(broadcast_shapes({2, 3}, {4}), Error);
}

TEST(Tensor, Float16RoundTrip) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604644775390625e-08f}) EXPECT_EQ(static_cast<float>(Float16(f)), f);
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(1e6f))));
  EXPECT_EQ(static_cast<float>(BFloat16(1.f)), 1.f);
}

TEST(Tensor, FromVectorAndReshape) {
  Tensor t = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.reshaped({3, 2}).data<float>()[5], 6.f);
  EXPECT_EQ(t.to_int_vector(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

}  // namespace korch
