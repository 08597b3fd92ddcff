#include "codegen/loop_kernel_c.h"

#include <fmt/format.h>

#include <limits>

#include "support/error.h"

namespace korch::loop {

const char* c_type(DType t) {
  switch (t) {
    case DType::kFloat32: return "float";
    case DType::kFloat64: return "double";
    case DType::kInt64: return "int64_t";
    case DType::kInt32: return "int32_t";
    case DType::kInt16: return "int16_t";
    case DType::kInt8: return "int8_t";
    case DType::kUInt8: return "uint8_t";
    case DType::kUInt16: return "uint16_t";
    case DType::kUInt32: return "uint32_t";
    case DType::kUInt64: return "uint64_t";
    case DType::kBool: return "bool";
    default: KORCH_CHECK(false, "no C type for {}", dtype_name(t));
  }
  return "";
}

std::string c_int_literal(DType t, int64_t v) {
  if (t == DType::kBool) return v ? "true" : "false";
  if (v == std::numeric_limits<int64_t>::min()) return fmt::format("(({})INT64_MIN)", c_type(t));
  return fmt::format("(({}){}LL)", c_type(t), v);
}

std::string c_int_bound(DType t, bool highest) {
  switch (t) {
    case DType::kBool: return highest ? "true" : "false";
    case DType::kInt64: return highest ? "INT64_MAX" : "INT64_MIN";
    case DType::kInt32: return highest ? "INT32_MAX" : "INT32_MIN";
    case DType::kInt16: return highest ? "INT16_MAX" : "INT16_MIN";
    case DType::kInt8: return highest ? "INT8_MAX" : "INT8_MIN";
    case DType::kUInt8: return highest ? "UINT8_MAX" : "((uint8_t)0)";
    case DType::kUInt16: return highest ? "UINT16_MAX" : "((uint16_t)0)";
    case DType::kUInt32: return highest ? "UINT32_MAX" : "((uint32_t)0)";
    case DType::kUInt64: return highest ? "UINT64_MAX" : "((uint64_t)0)";
    default: return "0";
  }
}

std::string c_math_fn(Fn f, DType t) {
  const char* base = nullptr;
  switch (f) {
    case Fn::kExp: base = "exp"; break;
    case Fn::kLog: base = "log"; break;
    case Fn::kSqrt: base = "sqrt"; break;
    case Fn::kTanh: base = "tanh"; break;
    case Fn::kErf: base = "erf"; break;
    case Fn::kSin: base = "sin"; break;
    case Fn::kCos: base = "cos"; break;
    case Fn::kTan: base = "tan"; break;
    case Fn::kFloor: base = "floor"; break;
    case Fn::kCeil: base = "ceil"; break;
    case Fn::kRound: base = "nearbyint"; break;  // ties to even, like numpy
    case Fn::kLog1p: base = "log1p"; break;
    case Fn::kExpm1: base = "expm1"; break;
    case Fn::kAtan: base = "atan"; break;
    case Fn::kAsin: base = "asin"; break;
    case Fn::kAcos: base = "acos"; break;
    case Fn::kSinh: base = "sinh"; break;
    case Fn::kCosh: base = "cosh"; break;
    case Fn::kAbs: base = "fabs"; break;
    case Fn::kPow: base = "pow"; break;
    case Fn::kFMod: base = "fmod"; break;
    default: KORCH_CHECK(false, "{} is not a libm function", fn_name(f));
  }
  return t == DType::kFloat32 ? std::string(base) + "f" : std::string(base);
}

std::string c_operator_expr(const Stage& st, const ExprNode& n, const std::function<std::string(size_t)>& a) {
  const std::string T = c_type(n.dtype);
  switch (n.op) {
    case ExprOp::kCast: {
      const DType from = st.exprs[static_cast<size_t>(n.args[0])].dtype;
      if (n.dtype == DType::kBool) return fmt::format("({} != 0)", a(0));
      if (is_float(from) && !is_float(n.dtype) && n.dtype != DType::kInt64)
        return fmt::format("({})(int64_t){}", T, a(0));  // numpy: through int64, then wrap
      return fmt::format("({}){}", T, a(0));
    }
    case ExprOp::kSelect: return fmt::format("{} ? {} : {}", a(0), a(1), a(2));
    case ExprOp::kUnary: {
      const DType t = st.exprs[static_cast<size_t>(n.args[0])].dtype;
      switch (n.fn) {
        case Fn::kNeg: return fmt::format("({})(-{})", T, a(0));
        case Fn::kNot: return fmt::format("!{}", a(0));
        case Fn::kIsNaN: return fmt::format("{0} != {0}", a(0));
        case Fn::kAbs:
          if (is_float(t)) return fmt::format("{}({})", c_math_fn(Fn::kAbs, t), a(0));
          return fmt::format("({0} < 0 ? ({1})(-{0}) : {0})", a(0), T);
        default: return fmt::format("{}({})", c_math_fn(n.fn, t), a(0));
      }
    }
    case ExprOp::kBinary: {
      const DType t = st.exprs[static_cast<size_t>(n.args[0])].dtype;
      switch (n.fn) {
        case Fn::kAdd: return fmt::format("({})({} + {})", T, a(0), a(1));
        case Fn::kSub: return fmt::format("({})({} - {})", T, a(0), a(1));
        case Fn::kMul: return fmt::format("({})({} * {})", T, a(0), a(1));
        case Fn::kDiv:
          if (is_float(t)) return fmt::format("{} / {}", a(0), a(1));
          return fmt::format("{1} == 0 ? ({2})0 : ({2})({0} / {1})", a(0), a(1), T);
        case Fn::kMax: return fmt::format("{0} < {1} ? {1} : {0}", a(0), a(1));  // std::max
        case Fn::kMin: return fmt::format("{1} < {0} ? {1} : {0}", a(0), a(1));  // std::min
        case Fn::kPow: return fmt::format("{}({}, {})", c_math_fn(Fn::kPow, t), a(0), a(1));
        case Fn::kFMod: return fmt::format("{}({}, {})", c_math_fn(Fn::kFMod, t), a(0), a(1));
        case Fn::kLt: return fmt::format("{} < {}", a(0), a(1));
        case Fn::kLe: return fmt::format("{} <= {}", a(0), a(1));
        case Fn::kGt: return fmt::format("{} > {}", a(0), a(1));
        case Fn::kGe: return fmt::format("{} >= {}", a(0), a(1));
        case Fn::kEq: return fmt::format("{} == {}", a(0), a(1));
        case Fn::kAnd: return fmt::format("{} && {}", a(0), a(1));
        case Fn::kOr: return fmt::format("{} || {}", a(0), a(1));
        case Fn::kXor: return fmt::format("{} != {}", a(0), a(1));
        default: break;
      }
      break;
    }
    default: break;
  }
  KORCH_CHECK(false, "expression node kind {} is not an operator", static_cast<int>(n.op));
  return "";
}

}  // namespace korch::loop
