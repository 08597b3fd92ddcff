#include "ir/ops/op_util.h"

namespace korch {

void register_linear_ops(OpRegistry& r) {}

}  // namespace korch
