// Internal to the elementwise family (elementwise*.cc): what its files share with each other.
#pragma once

#include "ir/ops/op_util.h"

namespace korch::ops::ew {

// Below this many elements a kernel runs on one thread.
constexpr int64_t kParallelMin = int64_t{1} << 15;

// x converted elementwise to `to` with Cast's semantics (elementwise_cast.cc).
Tensor cast_tensor(const Tensor& x, DType to);

void register_binary_ops(OpRegistry& r);  // elementwise_binary.cc
void register_cast_ops(OpRegistry& r);    // elementwise_cast.cc

}  // namespace korch::ops::ew
