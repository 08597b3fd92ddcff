#include "ir/op_registry.h"

namespace korch {

void register_all_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_linear_ops(r);
  register_pool_ops(r);
  register_reduce_ops(r);
  register_norm_ops(r);
  register_layout_ops(r);
  register_resize_ops(r);
  register_misc_ops(r);
  register_rnn_ops(r);
  register_quantized_rnn_ops(r);
  register_sampling_ops(r);
  register_quant_ops(r);
  register_quant_linear_ops(r);
}

}  // namespace korch
