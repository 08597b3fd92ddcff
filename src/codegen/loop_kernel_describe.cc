// describe_loop_kernel: a compact text dump of a LoopKernel, one line per loop, expression and
// store, for tests and for reading what the builder decided.
#include <fmt/format.h>

#include "codegen/loop_kernel.h"

namespace korch {

namespace {

std::string index_text(const loop::Stage& st, int id) {
  using loop::IndexOp;
  const loop::IndexNode& n = st.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst: return std::to_string(n.value);
    case IndexOp::kVar: return fmt::format("i{}", n.value);
    case IndexOp::kSum: {
      std::string s;
      for (const auto& [t, c] : n.terms) {
        if (!s.empty()) s += " + ";
        s += c == 1 ? index_text(st, t) : fmt::format("{}*{}", c, index_text(st, t));
      }
      if (n.value != 0) s += fmt::format(" + {}", n.value);
      return "(" + s + ")";
    }
    case IndexOp::kDiv: return fmt::format("({} / {})", index_text(st, n.a), n.value);
    case IndexOp::kMod: return fmt::format("({} % {})", index_text(st, n.a), n.value);
    case IndexOp::kMin: return fmt::format("min({}, {})", index_text(st, n.a), index_text(st, n.b));
    case IndexOp::kMax: return fmt::format("max({}, {})", index_text(st, n.a), index_text(st, n.b));
    case IndexOp::kTable: return fmt::format("T{}[{}]", n.value, index_text(st, n.a));
  }
  return "?";
}

}  // namespace

std::string describe_loop_kernel(const LoopKernel& k) {
  using loop::ExprOp;
  std::string s;
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const loop::Buffer& buf = k.buffers[b];
    const char* kind = buf.kind == loop::BufferKind::kInput ? "in" : buf.kind == loop::BufferKind::kOutput ? "out" : "scratch";
    s += fmt::format("buffer b{}: {}{} {}[{}]\n", b, kind, buf.slot, dtype_name(buf.dtype), buf.numel);
  }
  for (size_t i = 0; i < k.stages.size(); ++i) {
    const loop::Stage& st = k.stages[i];
    s += fmt::format("stage {} ({}): {}\n", i, st.is_reduction ? "reduction" : "pointwise", st.comment);
    for (size_t l = 0; l < st.loops.size(); ++l)
      s += fmt::format("  loop i{} < {}{}\n", l, st.loops[l].extent, st.loops[l].reduce ? " (reduce)" : "");
    for (size_t e = 0; e < st.exprs.size(); ++e) {
      const loop::ExprNode& n = st.exprs[e];
      std::string rhs;
      switch (n.op) {
        case ExprOp::kLoad: rhs = fmt::format("b{}[{}]", n.buffer, index_text(st, n.index)); break;
        case ExprOp::kTableLoad: rhs = fmt::format("T{}[{}]", n.buffer, index_text(st, n.index)); break;
        case ExprOp::kConst: rhs = is_float(n.dtype) ? fmt::format("{}", n.fvalue) : std::to_string(n.ivalue); break;
        case ExprOp::kIndexValue: rhs = index_text(st, n.index); break;
        case ExprOp::kInRange: rhs = fmt::format("{} <= {} < {}", n.ivalue, index_text(st, n.index), n.ivalue2); break;
        case ExprOp::kAcc: rhs = "acc"; break;
        case ExprOp::kUnary: rhs = fmt::format("{}(e{})", loop::fn_name(n.fn), n.args[0]); break;
        case ExprOp::kBinary: rhs = fmt::format("{}(e{}, e{})", loop::fn_name(n.fn), n.args[0], n.args[1]); break;
        case ExprOp::kSelect: rhs = fmt::format("e{} ? e{} : e{}", n.args[0], n.args[1], n.args[2]); break;
        case ExprOp::kCast: rhs = fmt::format("cast(e{})", n.args[0]); break;
      }
      s += fmt::format("  e{}: {} = {}\n", e, dtype_name(n.dtype), rhs);
    }
    if (st.is_reduction)
      s += fmt::format("  reduce combiner {} value e{} result e{}\n", static_cast<int>(st.reduction.combiner),
                       st.reduction.value, st.reduction.result);
    for (const loop::Store& store : st.stores)
      s += fmt::format("  store b{}[{}] = e{}\n", store.buffer, index_text(st, store.index), store.value);
  }
  return s;
}

}  // namespace korch
