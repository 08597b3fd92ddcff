#include "ir/ops/op_util.h"

namespace korch {

void register_misc_ops(OpRegistry& r) {}

}  // namespace korch
