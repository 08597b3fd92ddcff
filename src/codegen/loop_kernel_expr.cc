// Expression nodes of a loop-kernel stage: hash-consed (common subexpressions are one node) with
// the folding that keeps pads and windows without padding branch-free (a select whose condition
// is known true is its branch).
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "codegen/loop_kernel_internal.h"
#include "support/error.h"

namespace korch::loop {

const char* fn_name(Fn f) {
  switch (f) {
    case Fn::kNeg: return "neg";
    case Fn::kAbs: return "abs";
    case Fn::kNot: return "not";
    case Fn::kExp: return "exp";
    case Fn::kLog: return "log";
    case Fn::kSqrt: return "sqrt";
    case Fn::kTanh: return "tanh";
    case Fn::kErf: return "erf";
    case Fn::kSin: return "sin";
    case Fn::kCos: return "cos";
    case Fn::kTan: return "tan";
    case Fn::kFloor: return "floor";
    case Fn::kCeil: return "ceil";
    case Fn::kRound: return "round";
    case Fn::kLog1p: return "log1p";
    case Fn::kExpm1: return "expm1";
    case Fn::kAtan: return "atan";
    case Fn::kAsin: return "asin";
    case Fn::kAcos: return "acos";
    case Fn::kSinh: return "sinh";
    case Fn::kCosh: return "cosh";
    case Fn::kIsNaN: return "isnan";
    case Fn::kAdd: return "add";
    case Fn::kSub: return "sub";
    case Fn::kMul: return "mul";
    case Fn::kDiv: return "div";
    case Fn::kMax: return "max";
    case Fn::kMin: return "min";
    case Fn::kPow: return "pow";
    case Fn::kFMod: return "fmod";
    case Fn::kLt: return "lt";
    case Fn::kLe: return "le";
    case Fn::kGt: return "gt";
    case Fn::kGe: return "ge";
    case Fn::kEq: return "eq";
    case Fn::kAnd: return "and";
    case Fn::kOr: return "or";
    case Fn::kXor: return "xor";
  }
  return "?";
}

bool fn_is_unary(Fn f) { return static_cast<int>(f) < static_cast<int>(Fn::kAdd); }

int Stage::num_kept() const {
  int n = 0;
  for (const Loop& l : loops) n += l.reduce ? 0 : 1;
  return n;
}

int StageBuilder::intern_expr(ExprNode n) {
  uint64_t fbits;
  std::memcpy(&fbits, &n.fvalue, sizeof fbits);
  std::string key = fmt::format("{}|{}|{}|{}|{}|{}|{}|{}", static_cast<int>(n.op), static_cast<int>(n.fn),
                                static_cast<int>(n.dtype), n.buffer, n.index, fbits, n.ivalue, n.ivalue2);
  for (int a : n.args) key += fmt::format("|{}", a);
  auto it = expr_ids_.find(key);
  if (it != expr_ids_.end()) return it->second;
  int id = static_cast<int>(st_.exprs.size());
  st_.exprs.push_back(std::move(n));
  expr_ids_.emplace(std::move(key), id);
  return id;
}

int StageBuilder::e_load(int buffer, int index) {
  ExprNode n;
  n.op = ExprOp::kLoad;
  n.dtype = kc_.k.buffers[static_cast<size_t>(buffer)].dtype;
  n.buffer = buffer;
  n.index = index;
  kc_.k.buffers[static_cast<size_t>(buffer)].read = true;
  return intern_expr(std::move(n));
}

int StageBuilder::e_table(int table, int index) {
  const Table& t = kc_.k.tables[static_cast<size_t>(table)];
  const IndexNode& x = ix(index);
  if (x.lo == x.hi && x.lo >= 0 && x.lo < static_cast<int64_t>(t.values.size()))
    return e_iconst(t.dtype, t.values[static_cast<size_t>(x.lo)]);
  ExprNode n;
  n.op = ExprOp::kTableLoad;
  n.dtype = t.dtype;
  n.buffer = table;
  n.index = index;
  return intern_expr(std::move(n));
}

int StageBuilder::e_const(DType t, double v) {
  if (!is_float(t)) return e_iconst(t, t == DType::kBool ? (v != 0 ? 1 : 0) : static_cast<int64_t>(v));
  ExprNode n;
  n.op = ExprOp::kConst;
  n.dtype = t;
  n.fvalue = t == DType::kFloat32 ? static_cast<double>(static_cast<float>(v)) : v;
  return intern_expr(std::move(n));
}

int StageBuilder::e_iconst(DType t, int64_t v) {
  if (is_float(t)) return e_const(t, static_cast<double>(v));
  ExprNode n;
  n.op = ExprOp::kConst;
  n.dtype = t;
  n.ivalue = t == DType::kBool ? (v != 0) : v;
  n.fvalue = static_cast<double>(n.ivalue);
  return intern_expr(std::move(n));
}

int StageBuilder::e_index_value(DType t, int index) {
  const IndexNode& x = ix(index);
  if (x.lo == x.hi) return e_iconst(t, x.lo);
  ExprNode n;
  n.op = ExprOp::kIndexValue;
  n.dtype = t;
  n.index = index;
  return intern_expr(std::move(n));
}

int StageBuilder::e_in_range(int index, int64_t lo, int64_t hi) {
  const IndexNode& x = ix(index);
  if (x.lo >= lo && x.hi < hi) return e_iconst(DType::kBool, 1);
  if (x.hi < lo || x.lo >= hi) return e_iconst(DType::kBool, 0);
  ExprNode n;
  n.op = ExprOp::kInRange;
  n.dtype = DType::kBool;
  n.index = index;
  n.ivalue = lo;
  n.ivalue2 = hi;
  return intern_expr(std::move(n));
}

int StageBuilder::e_acc(DType t) {
  ExprNode n;
  n.op = ExprOp::kAcc;
  n.dtype = t;
  return intern_expr(std::move(n));
}

int StageBuilder::e_unary(Fn f, int a) {
  KORCH_CHECK(fn_is_unary(f), "{} is not unary", fn_name(f));
  ExprNode n;
  n.op = ExprOp::kUnary;
  n.fn = f;
  n.dtype = f == Fn::kIsNaN ? DType::kBool : dtype_of(a);
  if (f == Fn::kNot && is_const(a)) return e_iconst(DType::kBool, expr(a).ivalue == 0);
  n.args = {a};
  return intern_expr(std::move(n));
}

int StageBuilder::e_binary(Fn f, int a, int b) {
  KORCH_CHECK(!fn_is_unary(f), "{} is not binary", fn_name(f));
  const bool compare = f == Fn::kLt || f == Fn::kLe || f == Fn::kGt || f == Fn::kGe || f == Fn::kEq;
  const bool logic = f == Fn::kAnd || f == Fn::kOr || f == Fn::kXor;
  if (logic) {
    // Conditions of pads/windows: a known-true operand of And disappears.
    if (f == Fn::kAnd && is_const(a)) return expr(a).ivalue ? b : a;
    if (f == Fn::kAnd && is_const(b)) return expr(b).ivalue ? a : b;
  }
  ExprNode n;
  n.op = ExprOp::kBinary;
  n.fn = f;
  n.dtype = compare || logic ? DType::kBool : dtype_of(a);
  n.args = {a, b};
  return intern_expr(std::move(n));
}

int StageBuilder::e_select(int c, int a, int b) {
  if (is_const(c)) return expr(c).ivalue ? a : b;
  if (a == b) return a;
  ExprNode n;
  n.op = ExprOp::kSelect;
  n.dtype = dtype_of(a);
  n.args = {c, a, b};
  return intern_expr(std::move(n));
}

int StageBuilder::e_cast(DType t, int a) {
  if (dtype_of(a) == t) return a;
  const ExprNode& x = expr(a);
  if (x.op == ExprOp::kConst) {
    if (is_float(x.dtype)) {
      if (t == DType::kBool) return e_iconst(t, x.fvalue != 0);
      if (!is_float(t) && std::isfinite(x.fvalue)) return e_iconst(t, static_cast<int64_t>(x.fvalue));
      if (is_float(t)) return e_const(t, x.fvalue);
    } else if (is_float(t)) {
      return e_const(t, static_cast<double>(x.ivalue));
    }
  }
  ExprNode n;
  n.op = ExprOp::kCast;
  n.dtype = t;
  n.args = {a};
  return intern_expr(std::move(n));
}

}  // namespace korch::loop
