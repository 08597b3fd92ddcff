// Text of literals, index expressions and expression nodes for the CUDA loop emitter. The
// numeric semantics are the CPU printer's (cpu_loop_emitter_expr.cc) to the letter; only the
// spelling differs where CUDA has no <math.h> macros (KORCH_INF_F / KORCH_NAN_F from the prelude)
// and index arithmetic may be 32-bit.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "codegen/cuda/cuda_loop_emitter_internal.h"
#include "support/error.h"

namespace korch::cuda::detail {

const char* ctype(DType t) {
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
    default: KORCH_CHECK(false, "no CUDA type for {}", dtype_name(t));
  }
  return "";
}

std::string float_literal(DType t, double v) {
  const bool f32 = t == DType::kFloat32;
  if (std::isnan(v)) return f32 ? "KORCH_NAN_F" : "KORCH_NAN_D";
  if (std::isinf(v)) return v > 0 ? (f32 ? "KORCH_INF_F" : "KORCH_INF_D") : (f32 ? "(-KORCH_INF_F)" : "(-KORCH_INF_D)");
  std::string s = fmt::format("{:a}", v);  // exact: hexadecimal floating literals are C++17
  if (f32) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}

std::string int_literal(DType t, int64_t v) {
  if (t == DType::kBool) return v ? "true" : "false";
  if (v == std::numeric_limits<int64_t>::min()) return fmt::format("(({})INT64_MIN)", ctype(t));
  return fmt::format("(({}){}LL)", ctype(t), v);
}

std::string literal(const ExprNode& n) {
  return is_float(n.dtype) ? float_literal(n.dtype, n.fvalue) : int_literal(n.dtype, n.ivalue);
}

std::string int_bound(DType t, bool highest) {
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

std::string math_fn(Fn f, DType t) {
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
    default: KORCH_CHECK(false, "{} is not a libm function", loop::fn_name(f));
  }
  return t == DType::kFloat32 ? std::string(base) + "f" : std::string(base);
}

std::string table_name(const std::string& symbol, int table) { return fmt::format("{}_T{}", symbol, table); }

std::string CudaStage::ilit(int64_t v) const {
  const bool small = v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
  if (v == std::numeric_limits<int64_t>::min()) return "INT64_MIN";
  return wide_ || !small ? fmt::format("{}LL", v) : std::to_string(v);
}

std::string CudaStage::var(int l) const {
  auto it = var_name_.find(l);
  return it != var_name_.end() ? it->second : fmt::format("i{}", l);
}

std::string CudaStage::index_ref(int id) const {
  const IndexNode& n = st_.index[static_cast<size_t>(id)];
  if (is_atom(n)) return fmt::format("x{}", id);
  return index_def(id);
}

std::string CudaStage::index_def(int id) const {
  const IndexNode& n = st_.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst: return ilit(n.value);
    case IndexOp::kVar: return var(static_cast<int>(n.value));
    case IndexOp::kSum: {
      std::string s;
      for (const auto& [t, c] : n.terms) {
        std::string term = c == 1 ? index_ref(t) : fmt::format("{} * {}", ilit(c), index_ref(t));
        s += s.empty() ? term : " + " + term;
      }
      if (n.value != 0) s += " + " + ilit(n.value);
      return "(" + s + ")";
    }
    case IndexOp::kDiv: {
      const IndexNode& a = st_.index[static_cast<size_t>(n.a)];
      if (a.lo >= 0) return fmt::format("{} / {}", index_ref(n.a), ilit(n.value));
      return fmt::format("korch_floordiv({}, ({}){})", index_ref(n.a), it(), ilit(n.value));
    }
    case IndexOp::kMod: {
      const IndexNode& a = st_.index[static_cast<size_t>(n.a)];
      if (a.lo >= 0) return fmt::format("{} % {}", index_ref(n.a), ilit(n.value));
      return fmt::format("korch_floormod({}, ({}){})", index_ref(n.a), it(), ilit(n.value));
    }
    case IndexOp::kMin: return fmt::format("korch_imin(({}){}, ({}){})", it(), index_ref(n.a), it(), index_ref(n.b));
    case IndexOp::kMax: return fmt::format("korch_imax(({}){}, ({}){})", it(), index_ref(n.a), it(), index_ref(n.b));
    case IndexOp::kTable:
      return fmt::format("({}){}[{}]", it(), table_name(symbol_, static_cast<int>(n.value)), index_ref(n.a));
  }
  return "?";
}

// The index with every atom inline and loops by number: equal texts are equal indices, also
// across stages (row fusion compares a store of one stage with a load of another).
std::string CudaStage::canonical(int id) const {
  const IndexNode& n = st_.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst: return std::to_string(n.value);
    case IndexOp::kVar: return fmt::format("i{}", n.value);
    case IndexOp::kSum: {
      std::string s = "(";
      for (const auto& [t, c] : n.terms) s += fmt::format("{}*{}+", c, canonical(t));
      return s + std::to_string(n.value) + ")";
    }
    case IndexOp::kDiv: return fmt::format("({}/{})", canonical(n.a), n.value);
    case IndexOp::kMod: return fmt::format("({}%{})", canonical(n.a), n.value);
    case IndexOp::kMin: return fmt::format("min({},{})", canonical(n.a), canonical(n.b));
    case IndexOp::kMax: return fmt::format("max({},{})", canonical(n.a), canonical(n.b));
    case IndexOp::kTable: return fmt::format("T{}[{}]", n.value, canonical(n.a));
  }
  return "?";
}

std::string CudaStage::operand(int e) const {
  const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
  if (n.op == ExprOp::kConst) return literal(n);
  if (n.op == ExprOp::kAcc) return "acc";
  return fmt::format("t{}", e);
}

std::string CudaStage::expr_def(int e) const {
  const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
  const std::string T = ctype(n.dtype);
  auto a = [&](size_t i) { return operand(n.args[i]); };
  switch (n.op) {
    case ExprOp::kLoad:
      if (lane_ >= 0 && vec_.count(e)) return fmt::format("{}.{}", vec_.at(e), "xyzw"[lane_]);
      return fmt::format("b{}[{}]", n.buffer, index_ref(n.index));
    case ExprOp::kTableLoad: return fmt::format("{}[{}]", table_name(symbol_, n.buffer), index_ref(n.index));
    case ExprOp::kConst: return literal(n);
    case ExprOp::kAcc: return "acc";
    case ExprOp::kIndexValue: return fmt::format("({}){}", T, index_ref(n.index));
    case ExprOp::kInRange: {
      const std::string x = index_ref(n.index);
      return fmt::format("({0} >= {1} && {0} < {2})", x, ilit(n.ivalue), ilit(n.ivalue2));
    }
    case ExprOp::kCast: {
      const DType from = st_.exprs[static_cast<size_t>(n.args[0])].dtype;
      if (n.dtype == DType::kBool) return fmt::format("({} != 0)", a(0));
      if (is_float(from) && !is_float(n.dtype) && n.dtype != DType::kInt64)
        return fmt::format("({})(int64_t){}", T, a(0));  // numpy: through int64, then wrap
      return fmt::format("({}){}", T, a(0));
    }
    case ExprOp::kSelect: return fmt::format("{} ? {} : {}", a(0), a(1), a(2));
    case ExprOp::kUnary: {
      const DType t = st_.exprs[static_cast<size_t>(n.args[0])].dtype;
      switch (n.fn) {
        case Fn::kNeg: return fmt::format("({})(-{})", T, a(0));
        case Fn::kNot: return fmt::format("!{}", a(0));
        case Fn::kIsNaN: return fmt::format("{0} != {0}", a(0));
        case Fn::kAbs:
          if (is_float(t)) return fmt::format("{}({})", math_fn(Fn::kAbs, t), a(0));
          return fmt::format("({0} < 0 ? ({1})(-{0}) : {0})", a(0), T);
        default: return fmt::format("{}({})", math_fn(n.fn, t), a(0));
      }
    }
    case ExprOp::kBinary: {
      const DType t = st_.exprs[static_cast<size_t>(n.args[0])].dtype;
      switch (n.fn) {
        case Fn::kAdd: return fmt::format("({})({} + {})", T, a(0), a(1));
        case Fn::kSub: return fmt::format("({})({} - {})", T, a(0), a(1));
        case Fn::kMul: return fmt::format("({})({} * {})", T, a(0), a(1));
        case Fn::kDiv:
          if (is_float(t)) return fmt::format("{} / {}", a(0), a(1));
          return fmt::format("{1} == 0 ? ({2})0 : ({2})({0} / {1})", a(0), a(1), T);
        case Fn::kMax: return fmt::format("{0} < {1} ? {1} : {0}", a(0), a(1));  // std::max
        case Fn::kMin: return fmt::format("{1} < {0} ? {1} : {0}", a(0), a(1));  // std::min
        case Fn::kPow: return fmt::format("{}({}, {})", math_fn(Fn::kPow, t), a(0), a(1));
        case Fn::kFMod: return fmt::format("{}({}, {})", math_fn(Fn::kFMod, t), a(0), a(1));
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
  }
  KORCH_CHECK(false, "cannot print expression {}", e);
  return "";
}

}  // namespace korch::cuda::detail
