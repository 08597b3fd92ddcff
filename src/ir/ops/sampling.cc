#include "ir/ops/op_util.h"

namespace korch {

void register_sampling_ops(OpRegistry& r) {}

}  // namespace korch
