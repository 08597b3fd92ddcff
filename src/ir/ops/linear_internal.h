// Internal to the linear family (linear.cc, conv.cc, einsum.cc, quant_linear.cc): the f16/bf16 wrapper, the
// int32 kernels the quantized ops run on, and the parts' entry points.
#pragma once

#include "ir/op_registry.h"

namespace korch::linear_detail {

// Runs `f32_eval` with f16/bf16 inputs widened to f32 and rounds f16/bf16 outputs back (linear.cc).
std::vector<Tensor> eval_via_f32(const OpEvalContext& ctx, const EvalFn& f32_eval);

// The int32 kernels of MatMulInteger/QLinearMatMul and ConvInteger/QLinearConv: the operands are
// already int32 with their zero points subtracted; the GEMM accumulates with 32-bit wrap-around
// (ONNX: "accumulation may overflow if and only if in 32 bits"). `op` names the op in errors.
Shape matmul_output_shape(const Shape& a, const Shape& b, const char* op);  // numpy matmul broadcasting
Tensor matmul_int32(const Tensor& a, const Tensor& b, const char* op);
// Conv geometry (all Conv attributes) and the Conv kernel; zero padding (x - x_zero_point pads with 0).
Shape conv_output_shape(const Attributes& attrs, const Shape& x, const Shape& w, const char* op);
Tensor conv_int32(const Attributes& attrs, const Tensor& x, const Tensor& w, const Tensor* bias, const char* op);

void register_conv_ops(OpRegistry& r);    // conv.cc: Conv, ConvTranspose
void register_einsum_ops(OpRegistry& r);  // einsum.cc: Einsum

}  // namespace korch::linear_detail
