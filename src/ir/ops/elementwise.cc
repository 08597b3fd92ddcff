#include "ir/ops/op_util.h"

namespace korch {

void register_elementwise_ops(OpRegistry& r) {}

}  // namespace korch
