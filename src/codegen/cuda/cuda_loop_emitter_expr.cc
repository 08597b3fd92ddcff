// Text of literals, index expressions and expression nodes for the CUDA loop emitter. The
// numeric semantics are the CPU printer's (cpu_loop_emitter_expr.cc) to the letter; only the
// spelling differs where CUDA has no <math.h> macros (KORCH_INF_F / KORCH_NAN_F from the prelude)
// and index arithmetic may be 32-bit.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "codegen/cuda/cuda_loop_emitter_internal.h"
#include "codegen/loop_kernel_c.h"
#include "support/error.h"

namespace korch::cuda::detail {


std::string float_literal(DType t, double v) {
  const bool f32 = t == DType::kFloat32;
  if (std::isnan(v)) return f32 ? "KORCH_NAN_F" : "KORCH_NAN_D";
  if (std::isinf(v)) return v > 0 ? (f32 ? "KORCH_INF_F" : "KORCH_INF_D") : (f32 ? "(-KORCH_INF_F)" : "(-KORCH_INF_D)");
  std::string s = fmt::format("{:a}", v);  // exact: hexadecimal floating literals are C++17
  if (f32) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}


std::string literal(const ExprNode& n) {
  return is_float(n.dtype) ? float_literal(n.dtype, n.fvalue) : int_literal(n.dtype, n.ivalue);
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
    case ExprOp::kCast:
    case ExprOp::kSelect:
    case ExprOp::kUnary:
    case ExprOp::kBinary:
      return loop::c_operator_expr(st_, n, a);
  }
  KORCH_CHECK(false, "cannot print expression {}", e);
  return "";
}

}  // namespace korch::cuda::detail
