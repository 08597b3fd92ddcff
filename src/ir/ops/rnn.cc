#include "ir/ops/op_util.h"

namespace korch {

void register_rnn_ops(OpRegistry& r) {}

}  // namespace korch
