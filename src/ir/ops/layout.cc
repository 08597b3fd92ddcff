#include "ir/ops/op_util.h"

namespace korch {

void register_layout_ops(OpRegistry& r) {}

}  // namespace korch
