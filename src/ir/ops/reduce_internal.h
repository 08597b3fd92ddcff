// Internal to the reduce family (reduce*.cc): the second part's registration, called by register_reduce_ops.
#pragma once

#include "ir/op_registry.h"

namespace korch::ops {

void register_softmax_family_ops(OpRegistry& r);  // reduce_softmax.cc

}  // namespace korch::ops
