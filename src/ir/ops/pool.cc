#include "ir/ops/op_util.h"

namespace korch {

void register_pool_ops(OpRegistry& r) {}

}  // namespace korch
