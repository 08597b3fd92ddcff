// Text of literals, index expressions and expression nodes for the CPU loop emitter.
#include "codegen/cpu/cpu_loop_emitter_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "codegen/loop_kernel_c.h"
#include "support/error.h"

namespace korch::cpu::detail {


std::string float_literal(DType t, double v) {
  const bool f32 = t == DType::kFloat32;
  if (std::isnan(v)) return f32 ? "NAN" : "((double)NAN)";
  if (std::isinf(v)) return v > 0 ? (f32 ? "INFINITY" : "((double)INFINITY)") : (f32 ? "(-INFINITY)" : "(-(double)INFINITY)");
  std::string s = fmt::format("{:a}", v);
  if (f32) s += "f";
  return v < 0 ? "(" + s + ")" : s;
}


std::string literal(const ExprNode& n) {
  return is_float(n.dtype) ? float_literal(n.dtype, n.fvalue) : int_literal(n.dtype, n.ivalue);
}



std::string StagePrinter::index_ref(int id) const {
  const IndexNode& n = st_.index[static_cast<size_t>(id)];
  if (is_atom(n)) return fmt::format("x{}", id);
  return index_def(id);
}

std::string StagePrinter::index_def(int id) const {
  if (auto it = index_alias_.find(id); it != index_alias_.end()) return index_ref(it->second);
  const IndexNode& n = st_.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst: return fmt::format("{}LL", n.value);
    case IndexOp::kVar: return var(static_cast<int>(n.value));
    case IndexOp::kSum: {
      std::string s;
      for (const auto& [t, c] : n.terms) {
        std::string term = c == 1 ? index_ref(t) : fmt::format("{}LL * {}", c, index_ref(t));
        s += s.empty() ? term : " + " + term;
      }
      if (n.value != 0) s += fmt::format(" + {}LL", n.value);
      return "(" + s + ")";
    }
    case IndexOp::kDiv: {
      const IndexNode& a = st_.index[static_cast<size_t>(n.a)];
      if (a.lo >= 0) return fmt::format("{} / {}LL", index_ref(n.a), n.value);
      return fmt::format("korch_floordiv({}, {}LL)", index_ref(n.a), n.value);
    }
    case IndexOp::kMod: {
      const IndexNode& a = st_.index[static_cast<size_t>(n.a)];
      if (a.lo >= 0) return fmt::format("{} % {}LL", index_ref(n.a), n.value);
      return fmt::format("korch_floormod({}, {}LL)", index_ref(n.a), n.value);
    }
    case IndexOp::kMin: return fmt::format("korch_imin({}, {})", index_ref(n.a), index_ref(n.b));
    case IndexOp::kMax: return fmt::format("korch_imax({}, {})", index_ref(n.a), index_ref(n.b));
    case IndexOp::kTable: return fmt::format("(int64_t)T{}[{}]", n.value, index_ref(n.a));
  }
  return "?";
}

std::string StagePrinter::operand(int e) const {
  if (auto it = alias_.find(e); it != alias_.end()) return operand(it->second);
  const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
  if (n.op == ExprOp::kConst) return literal(n);
  if (n.op == ExprOp::kAcc) return "acc";
  return fmt::format("t{}", e);
}

// exp(-|v|): Sigmoid's exp, and a softmax's whose max the kernel computes
// (loop_kernel_elementwise.cc), where korch_exp_negabs(v) (the prelude) replaces libmvec's expf:
// about a fifth less time for a SiLU on this CPU (84 -> 67 us on 200704 floats,
// bench/results/sigmoid_exp.md), a third less for a softmax's exp (silu_and_pools.md); its
// generator-20 form 63 -> 53 us for that SiLU (bench/silu_forms.cc). Returns v's expression, or
// -1 when e is not -|v|.
int StagePrinter::negated_abs_of(int e) const {
  const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
  if (n.op != ExprOp::kUnary || n.fn != Fn::kNeg) return -1;
  const ExprNode& m = st_.exprs[static_cast<size_t>(n.args[0])];
  return m.op == ExprOp::kUnary && m.fn == Fn::kAbs && is_float(m.dtype) ? m.args[0] : -1;
}

std::string StagePrinter::expr_def(int e) const {
  const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
  const std::string T = ctype(n.dtype);
  auto a = [&](size_t i) { return operand(n.args[i]); };
  switch (n.op) {
    case ExprOp::kLoad: return fmt::format("b{}[{}]", n.buffer, index_ref(n.index));
    case ExprOp::kTableLoad: return fmt::format("T{}[{}]", n.buffer, index_ref(n.index));
    case ExprOp::kConst: return literal(n);
    case ExprOp::kAcc: return "acc";
    case ExprOp::kIndexValue: return fmt::format("({}){}", T, index_ref(n.index));
    case ExprOp::kInRange: {
      if (!always_true_.empty() && always_true_[static_cast<size_t>(e)]) return "true";
      const std::string x = index_ref(n.index);
      return fmt::format("({0} >= {1}LL && {0} < {2}LL)", x, n.ivalue, n.ivalue2);
    }
    case ExprOp::kUnary:
      if (n.fn == Fn::kExp && n.dtype == DType::kFloat32) {
        if (const int v = negated_abs_of(n.args[0]); v >= 0) return fmt::format("korch_exp_negabs({})", operand(v));
        return fmt::format("korch_exp({})", a(0));  // (the prelude's: no scalar fallback past |v| of 87)
      }
      return loop::c_operator_expr(st_, n, a);
    case ExprOp::kCast:
    case ExprOp::kSelect:
    case ExprOp::kBinary:
      return loop::c_operator_expr(st_, n, a);
  }
  KORCH_CHECK(false, "cannot print expression {}", e);
  return "";
}

}  // namespace korch::cpu::detail
