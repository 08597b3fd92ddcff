// The C spelling of a loop kernel's scalar arithmetic, shared by the C++ printer (cpu/) and the
// CUDA printer (cuda/), so both backends compute the same numbers: C types, integer literals and
// bounds, libm names, and the text of every expression node that is an operator over its
// operands (casts through int64 like numpy, integer division by zero giving 0, max/min in
// std::max/std::min operand order, isnan as x != x, ...). Each printer keeps what its target
// spells differently: float literals (NaN/Inf), loads, tables, index arithmetic, accumulators.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "codegen/loop_kernel.h"

namespace korch::loop {

const char* c_type(DType t);                    // "float", "int64_t", "bool", ...
std::string c_int_literal(DType t, int64_t v);  // "((int32_t)5LL)", "true"
std::string c_int_bound(DType t, bool highest); // the lowest / highest value of an integer or bool type
std::string c_math_fn(Fn f, DType t);           // the libm function: expf for f32, exp for f64

// The text of node `n` (kCast, kSelect, kUnary or kBinary) of stage `st`, where operand(i) is
// the text of its i-th argument. KORCH_CHECKs the node kind.
std::string c_operator_expr(const Stage& st, const ExprNode& n, const std::function<std::string(size_t)>& operand);

}  // namespace korch::loop
