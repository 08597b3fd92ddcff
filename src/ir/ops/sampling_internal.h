// Declarations shared by the sampling family's files (sampling.cc registers sampling_misc.cc's ops).
#pragma once

#include "ir/op_registry.h"

namespace korch::detail {
void register_sampling_misc_ops(OpRegistry& r);  // MaxUnpool, CenterCropPad, Col2Im (sampling_misc.cc)
}  // namespace korch::detail
