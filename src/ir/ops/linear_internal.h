// Internal to the linear family (linear.cc, conv.cc, einsum.cc): the f16/bf16 wrapper and the parts' entry points.
#pragma once

#include "ir/op_registry.h"

namespace korch::linear_detail {

// Runs `f32_eval` with f16/bf16 inputs widened to f32 and rounds f16/bf16 outputs back (linear.cc).
std::vector<Tensor> eval_via_f32(const OpEvalContext& ctx, const EvalFn& f32_eval);

void register_conv_ops(OpRegistry& r);    // conv.cc: Conv, ConvTranspose
void register_einsum_ops(OpRegistry& r);  // einsum.cc: Einsum

}  // namespace korch::linear_detail
