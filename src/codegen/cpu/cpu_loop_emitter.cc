// The C++ printer of a LoopKernel.
//
// Each stage is one block: `#pragma omp parallel for` over its outer kept loops when it has
// enough work, plain loops inside, and the innermost loop under `#pragma omp simd` (with a
// `reduction(...)` clause when it is a reduce loop). Every expression node becomes one SSA
// temporary `const float t12 = ...;` placed at the outermost loop level it depends on, so a
// per-channel operand is loaded once per row and a value not depending on the reduce loops is
// computed once per output; div/mod/table index atoms are hoisted the same way.
#include "codegen/cpu/cpu_loop_emitter.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <map>

#include "support/error.h"

namespace korch::cpu {

namespace {

using loop::ExprNode;
using loop::ExprOp;
using loop::Fn;
using loop::IndexNode;
using loop::IndexOp;
using loop::Stage;

// Element-ops above which a stage runs on all threads (a parallel region costs a few us).
constexpr int64_t kParallelWork = 1 << 15;

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
    default: KORCH_CHECK(false, "no C type for {}", dtype_name(t));
  }
  return "";
}

std::string float_literal(DType t, double v) {
  const bool f32 = t == DType::kFloat32;
  if (std::isnan(v)) return f32 ? "NAN" : "((double)NAN)";
  if (std::isinf(v)) return v > 0 ? (f32 ? "INFINITY" : "((double)INFINITY)") : (f32 ? "(-INFINITY)" : "(-(double)INFINITY)");
  std::string s = fmt::format("{:a}", v);
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

// The lowest / highest value of an integer or bool type as a literal.
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
    case Fn::kRound: base = "nearbyint"; break;
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

class StagePrinter {
 public:
  StagePrinter(const LoopKernel& k, const Stage& st, CodeWriter& w) : k_(k), st_(st), w_(w) {
    acc_level_ = static_cast<int>(st_.loops.size());
    mark_needed();
  }

  // Element-ops of the stage: iterations times expression nodes.
  int64_t work() const {
    int64_t iters = 1, ops = 1;
    for (const loop::Loop& l : st_.loops) iters *= l.extent;
    for (char c : needed_e_) ops += c;
    return iters * ops;
  }

  void print() {
    const int L = static_cast<int>(st_.loops.size());
    const int K = st_.num_kept();
    int64_t kept_iters = 1;
    for (int l = 0; l < K; ++l) kept_iters *= st_.loops[static_cast<size_t>(l)].extent;
    // Parallel loops: a prefix of the kept loops, never the pointwise simd loop unless it is the
    // only loop; fused into one when the outermost alone is too short to feed the threads.
    const int max_par = st_.is_reduction ? (kept_inner_ ? K - 1 : K) : (L == 1 ? 1 : L - 1);
    int par = 0;
    if (work() >= kParallelWork && kept_iters >= 2 && max_par >= 1) {
      int64_t e = 1;
      while (par < max_par && e < 64) e *= st_.loops[static_cast<size_t>(par++)].extent;
    }
    w_.open("");
    w_.line("// " + st_.comment);
    emit_level(-1);
    open_loops(0, par, L, K);
    w_.close();
  }

  // The stage's body for one iteration of its first loop, which the caller has opened as `i0`
  // (row fusion: several stages share that loop).
  void print_row() {
    const int L = static_cast<int>(st_.loops.size());
    w_.open("");
    w_.line("// " + st_.comment);
    emit_level(-1);
    after_open(0, L, st_.num_kept());
    w_.close();
  }

  struct Access {
    int buffer;
    std::string index;
    int level;
  };
  std::vector<Access> loads() const {
    std::vector<Access> out;
    for (size_t e = 0; e < st_.exprs.size(); ++e) {
      const ExprNode& n = st_.exprs[e];
      if (needed_e_[e] && n.op == ExprOp::kLoad)
        out.push_back({n.buffer, index_def(n.index), st_.index[static_cast<size_t>(n.index)].level});
    }
    return out;
  }
  std::vector<Access> stores() const {
    std::vector<Access> out;
    for (const loop::Store& s : st_.stores)
      out.push_back({s.buffer, index_def(s.index), st_.index[static_cast<size_t>(s.index)].level});
    return out;
  }
  const Stage& stage() const { return st_; }

 private:
  // Expressions reachable from `root`.
  std::vector<char> reachable(int root) const {
    std::vector<char> out(st_.exprs.size(), 0);
    std::vector<int> es{root};
    while (!es.empty()) {
      const int e = es.back();
      es.pop_back();
      if (e < 0 || out[static_cast<size_t>(e)]) continue;
      out[static_cast<size_t>(e)] = 1;
      for (int a : st_.exprs[static_cast<size_t>(e)].args) es.push_back(a);
    }
    return out;
  }

  void mark_needed() {
    if (st_.is_reduction) {
      needed_value_ = reachable(st_.reduction.value);
      needed_result_ = reachable(st_.reduction.result);
    }
    needed_e_.assign(st_.exprs.size(), 0);
    needed_i_.assign(st_.index.size(), 0);
    std::vector<int> es, is;
    for (const loop::Store& s : st_.stores) {
      es.push_back(s.value);
      is.push_back(s.index);
    }
    if (st_.is_reduction) {
      es.push_back(st_.reduction.value);
      es.push_back(st_.reduction.result);
    }
    while (!es.empty()) {
      int e = es.back();
      es.pop_back();
      if (e < 0 || needed_e_[static_cast<size_t>(e)]) continue;
      needed_e_[static_cast<size_t>(e)] = 1;
      const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
      for (int a : n.args) es.push_back(a);
      if (n.index >= 0) is.push_back(n.index);
    }
    while (!is.empty()) {
      int i = is.back();
      is.pop_back();
      if (i < 0 || needed_i_[static_cast<size_t>(i)]) continue;
      needed_i_[static_cast<size_t>(i)] = 1;
      const IndexNode& n = st_.index[static_cast<size_t>(i)];
      for (const auto& [t, c] : n.terms) is.push_back(t);
      is.push_back(n.a);
      is.push_back(n.b);
    }
    // Which loops each node depends on (a bit per loop); where it is emitted follows from the
    // loop order (depth_), which the kept-inner reduction schedule changes.
    imask_.assign(st_.index.size(), 0);
    for (size_t i = 0; i < st_.index.size(); ++i) {
      const IndexNode& n = st_.index[i];
      uint64_t m = n.op == IndexOp::kVar ? uint64_t{1} << n.value : 0;
      for (const auto& [t, c] : n.terms) m |= imask_[static_cast<size_t>(t)];
      if (n.a >= 0) m |= imask_[static_cast<size_t>(n.a)];
      if (n.b >= 0) m |= imask_[static_cast<size_t>(n.b)];
      imask_[i] = m;
    }
    emask_.assign(st_.exprs.size(), 0);
    eacc_.assign(st_.exprs.size(), 0);
    for (size_t e = 0; e < st_.exprs.size(); ++e) {
      const ExprNode& n = st_.exprs[e];
      uint64_t m = n.index >= 0 ? imask_[static_cast<size_t>(n.index)] : 0;
      char acc = n.op == ExprOp::kAcc;
      for (int a : n.args) {
        m |= emask_[static_cast<size_t>(a)];
        acc |= eacc_[static_cast<size_t>(a)];
      }
      emask_[e] = m;
      eacc_[e] = acc;
    }
    depth_.resize(st_.loops.size());
    for (size_t l = 0; l < depth_.size(); ++l) depth_[l] = static_cast<int>(l);
    choose_kept_inner();
  }

  // Reductions over a short or strided reduce loop (pool windows, a middle axis) run with the
  // innermost kept loop inside the reduce loops, accumulating a row of outputs in a local array:
  //   for kh, kw: simd for ow: accv[ow] = max(accv[ow], x[...])
  // so the vector loop runs along the output row instead of along a 3-wide window.
  void choose_kept_inner() {
    const int L = static_cast<int>(st_.loops.size()), K = st_.num_kept();
    const loop::Reduction& r = st_.reduction;
    if (!st_.is_reduction || K < 1 || L == K || r.combiner == loop::Combiner::kArgMax ||
        r.combiner == loop::Combiner::kArgMin || r.acc_dtype == DType::kBool)
      return;
    const int64_t row = st_.loops[static_cast<size_t>(K - 1)].extent;
    if (row < 8 || row > 4096) return;
    // Short windows (unless contiguous: a short row is read in one go either way), or reads
    // strided along the reduce loop but contiguous along the output row.
    bool contiguous = false, strided = false;
    for (size_t e = 0; e < st_.exprs.size(); ++e) {
      const ExprNode& n = st_.exprs[e];
      if (!needed_value_[e] || n.op != ExprOp::kLoad) continue;
      const int64_t cr = coef(n.index, L - 1), ck = coef(n.index, K - 1);
      contiguous |= cr == 1;
      strided |= cr != 0 && cr != 1 && ck == 1;
    }
    const bool want = strided || (!contiguous && st_.loops[static_cast<size_t>(L - 1)].extent < 16);
    if (!want) return;
    kept_inner_ = true;
    for (int l = K; l < L; ++l) depth_[static_cast<size_t>(l)] = l - 1;
    depth_[static_cast<size_t>(K - 1)] = L - 1;
  }

  // Coefficient of loop `l` in index node `i` when it is affine in it; kNonAffine otherwise.
  static constexpr int64_t kNonAffine = std::numeric_limits<int64_t>::min();
  int64_t coef(int i, int l) const {
    const IndexNode& n = st_.index[static_cast<size_t>(i)];
    if (!(imask_[static_cast<size_t>(i)] >> l & 1)) return 0;
    if (n.op == IndexOp::kVar) return 1;
    if (n.op != IndexOp::kSum) return kNonAffine;
    int64_t c = 0;
    for (const auto& [t, k] : n.terms) {
      const int64_t ct = coef(t, l);
      if (ct == kNonAffine) return kNonAffine;
      c += k * ct;
    }
    return c;
  }

  int depth_of(uint64_t mask) const {
    int d = -1;
    for (size_t l = 0; l < depth_.size(); ++l)
      if (mask >> l & 1) d = std::max(d, depth_[l]);
    return d;
  }

  static bool is_atom(const IndexNode& n) {
    return n.op == IndexOp::kDiv || n.op == IndexOp::kMod || n.op == IndexOp::kTable || n.op == IndexOp::kMin ||
           n.op == IndexOp::kMax;
  }

  // Index atoms and expressions emitted at depth `lv` (acc: those of the accumulator), in id
  // (= dependency) order; `only`, when given, restricts the expressions to a subset.
  void emit_level(int lv, bool acc = false, const std::vector<char>* only = nullptr, bool with_stores = false) {
    if (!acc) {
      for (size_t i = 0; i < st_.index.size(); ++i) {
        const IndexNode& n = st_.index[i];
        if (needed_i_[i] && is_atom(n) && depth_of(imask_[i]) == lv &&
            (!only || atom_used_by(static_cast<int>(i), *only, with_stores)))
          w_.line(fmt::format("const int64_t x{} = {};", i, index_def(static_cast<int>(i))));
      }
    }
    for (size_t e = 0; e < st_.exprs.size(); ++e) {
      const ExprNode& n = st_.exprs[e];
      if (!needed_e_[e] || n.op == ExprOp::kConst || n.op == ExprOp::kAcc) continue;
      if (only && !(*only)[e]) continue;
      if (alias_.count(static_cast<int>(e))) continue;
      if (acc ? !eacc_[e] : (eacc_[e] || depth_of(emask_[e]) != lv)) continue;
      w_.line(fmt::format("const {} t{} = {};", ctype(n.dtype), e, expr_def(static_cast<int>(e))));
    }
  }

  // Whether index atom `i` is used (directly or inside another index) by an expression in `set`.
  bool atom_used_by(int i, const std::vector<char>& set, bool with_stores) const {
    for (size_t e = 0; e < st_.exprs.size(); ++e)
      if (set[e] && st_.exprs[e].index >= 0 && index_contains(st_.exprs[e].index, i)) return true;
    if (with_stores)
      for (const loop::Store& s : st_.stores)
        if (index_contains(s.index, i)) return true;
    return false;
  }
  bool index_contains(int root, int i) const {
    if (root == i) return true;
    const IndexNode& n = st_.index[static_cast<size_t>(root)];
    for (const auto& [t, c] : n.terms)
      if (index_contains(t, i)) return true;
    return (n.a >= 0 && index_contains(n.a, i)) || (n.b >= 0 && index_contains(n.b, i));
  }

  std::string var(int l) const { return fmt::format("i{}", l); }

  void open_loops(int from, int par, int L, int K) {
    if (from == 0 && par >= 1) {
      if (par == 1) {
        const bool only = L == 1 && !st_.is_reduction;
        w_.line(only ? "#pragma omp parallel for simd schedule(static)" : "#pragma omp parallel for schedule(static)");
        w_.open(fmt::format("for (int64_t i0 = 0; i0 < {}; ++i0)", st_.loops[0].extent));
        after_open(0, L, K);
        w_.close();
        return;
      }
      int64_t total = 1;
      for (int l = 0; l < par; ++l) total *= st_.loops[static_cast<size_t>(l)].extent;
      w_.line("#pragma omp parallel for schedule(static)");
      w_.open(fmt::format("for (int64_t p = 0; p < {}; ++p)", total));
      std::string rest = "p";
      for (int l = par - 1; l >= 0; --l) {
        const int64_t e = st_.loops[static_cast<size_t>(l)].extent;
        if (l == 0) w_.line(fmt::format("const int64_t i0 = {};", rest));
        else w_.line(fmt::format("const int64_t {} = {} % {};", var(l), rest, e));
        rest = fmt::format("({} / {})", rest, e);
      }
      for (int l = 0; l < par - 1; ++l) emit_level(l);
      after_open(par - 1, L, K);
      w_.close();
      return;
    }
    if (kept_inner_ && from == K - 1) {
      kept_inner_body(L, K);
      return;
    }
    if (from == K && st_.is_reduction) {
      reduction_body(L, K);
      return;
    }
    if (from >= L) {
      for (const loop::Store& s : st_.stores) store(s);
      return;
    }
    if (from == L - 1 && !st_.is_reduction) {
      std::map<int, bool> assumed;
      specialized_inner_loop(from, assumed);
      return;
    }
    w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var(from), st_.loops[static_cast<size_t>(from)].extent));
    after_open(from, L, K);
    w_.close();
  }

  // Loop unswitching for selects whose condition does not change along the innermost loop (a
  // Concat along an outer axis, a Pad's border rows): one copy of the loop per outcome, each
  // computing only its branch, instead of computing every branch for every element.
  //   if (t7) { simd loop reading input 0 } else if (t3) { ... input 1 } else { ... input 2 }
  void specialized_inner_loop(int l, std::map<int, bool>& assumed) {
    std::vector<char> live = live_under(assumed);
    int cond_select = -1;
    if (assumed.size() < 4) {
      for (size_t e = st_.exprs.size(); e-- > 0;) {
        const ExprNode& n = st_.exprs[e];
        if (!live[e] || n.op != ExprOp::kSelect || depth_of(emask_[e]) != l) continue;
        const int c = n.args[0];
        if (!assumed.count(c) && depth_of(emask_[static_cast<size_t>(c)]) < l && !eacc_[static_cast<size_t>(c)]) {
          cond_select = static_cast<int>(e);
          break;
        }
      }
    }
    if (cond_select >= 0) {
      const int c = st_.exprs[static_cast<size_t>(cond_select)].args[0];
      w_.open(fmt::format("if ({})", operand(c)));
      assumed[c] = true;
      specialized_inner_loop(l, assumed);
      w_.close();
      w_.open("else");
      assumed[c] = false;
      specialized_inner_loop(l, assumed);
      w_.close();
      assumed.erase(c);
      return;
    }
    alias_.clear();
    for (size_t e = 0; e < st_.exprs.size(); ++e) {
      const ExprNode& n = st_.exprs[e];
      if (n.op != ExprOp::kSelect) continue;
      auto it = assumed.find(n.args[0]);
      if (it != assumed.end()) alias_[static_cast<int>(e)] = n.args[it->second ? 1 : 2];
    }
    w_.line("#pragma omp simd");
    w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var(l), st_.loops[static_cast<size_t>(l)].extent));
    emit_level(l, false, &live, true);
    for (const loop::Store& s : st_.stores) store(s);
    w_.close();
    alias_.clear();
  }

  // Expressions the stores reach when the selects on `assumed` conditions take that branch.
  std::vector<char> live_under(const std::map<int, bool>& assumed) const {
    std::vector<char> out(st_.exprs.size(), 0);
    std::vector<int> es;
    for (const loop::Store& s : st_.stores) es.push_back(s.value);
    while (!es.empty()) {
      const int e = es.back();
      es.pop_back();
      if (e < 0 || out[static_cast<size_t>(e)]) continue;
      out[static_cast<size_t>(e)] = 1;
      const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
      auto it = n.op == ExprOp::kSelect ? assumed.find(n.args[0]) : assumed.end();
      if (it != assumed.end()) {
        es.push_back(n.args[it->second ? 1 : 2]);
        continue;
      }
      for (int a : n.args) es.push_back(a);
    }
    return out;
  }

  // Inside loop `l` (just opened): its level's temporaries, then the loops inside it.
  void after_open(int l, int L, int K) {
    emit_level(l);
    open_loops(l + 1, 0, L, K);
  }

  void reduction_body(int L, int K) {
    const loop::Reduction& r = st_.reduction;
    const DType t = r.acc_dtype;
    const bool arg = r.combiner == loop::Combiner::kArgMax || r.combiner == loop::Combiner::kArgMin;
    if (arg) {
      w_.line(fmt::format("{} best = 0;", ctype(t)));
      w_.line("int64_t acc = 0;");
      w_.line("bool first = true;");
    } else {
      std::string init;
      switch (r.combiner) {
        case loop::Combiner::kSum: init = is_float(t) ? float_literal(t, 0) : int_literal(t, 0); break;
        case loop::Combiner::kProd: init = is_float(t) ? float_literal(t, 1) : int_literal(t, 1); break;
        case loop::Combiner::kMax:
          init = is_float(t) ? float_literal(t, -std::numeric_limits<double>::infinity()) : int_bound(t, false);
          break;
        default:
          init = is_float(t) ? float_literal(t, std::numeric_limits<double>::infinity()) : int_bound(t, true);
          break;
      }
      w_.line(fmt::format("{} acc = {};", ctype(t), init));
    }
    reduce_loops(K, L, arg);
    emit_level(0, true);
    for (const loop::Store& s : st_.stores) store(s);
  }

  std::string identity(DType t) const {
    switch (st_.reduction.combiner) {
      case loop::Combiner::kSum: return is_float(t) ? float_literal(t, 0) : int_literal(t, 0);
      case loop::Combiner::kProd: return is_float(t) ? float_literal(t, 1) : int_literal(t, 1);
      case loop::Combiner::kMax:
        return is_float(t) ? float_literal(t, -std::numeric_limits<double>::infinity()) : int_bound(t, false);
      default:
        return is_float(t) ? float_literal(t, std::numeric_limits<double>::infinity()) : int_bound(t, true);
    }
  }

  void kept_inner_body(int L, int K) {
    const loop::Reduction& r = st_.reduction;
    const DType t = r.acc_dtype;
    const std::string j = var(K - 1);
    const int64_t row = st_.loops[static_cast<size_t>(K - 1)].extent;
    w_.line(fmt::format("{} accv[{}];", ctype(t), row));
    w_.line("#pragma omp simd");
    w_.line(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0}) accv[{0}] = {2};", j, row, identity(t)));
    for (int l = K; l < L; ++l) {
      w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var(l), st_.loops[static_cast<size_t>(l)].extent));
      emit_level(l - 1, false, &needed_value_);
    }
    w_.line("#pragma omp simd");
    w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", j, row));
    emit_level(L - 1, false, &needed_value_);
    const std::string v = operand(r.value), a = fmt::format("accv[{}]", j);
    switch (r.combiner) {
      case loop::Combiner::kSum: w_.line(fmt::format("{} += {};", a, v)); break;
      case loop::Combiner::kProd: w_.line(fmt::format("{} *= {};", a, v)); break;
      case loop::Combiner::kMax: w_.line(fmt::format("{0} = {1} > {0} ? {1} : {0};", a, v)); break;
      default: w_.line(fmt::format("{0} = {1} < {0} ? {1} : {0};", a, v)); break;
    }
    w_.close();
    for (int l = K; l < L; ++l) w_.close();
    w_.line("#pragma omp simd");
    w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", j, row));
    w_.line(fmt::format("const {} acc = accv[{}];", ctype(t), j));
    emit_level(L - 1, false, &needed_result_, true);
    emit_level(0, true);
    for (const loop::Store& s : st_.stores) store(s);
    w_.close();
  }

  void reduce_loops(int l, int L, bool arg) {
    const loop::Reduction& r = st_.reduction;
    if (l >= L) {
      const std::string v = operand(r.value);
      switch (r.combiner) {
        case loop::Combiner::kSum: w_.line(fmt::format("acc += {};", v)); break;
        case loop::Combiner::kProd: w_.line(fmt::format("acc *= {};", v)); break;
        case loop::Combiner::kMax: w_.line(fmt::format("acc = {0} > acc ? {0} : acc;", v)); break;
        case loop::Combiner::kMin: w_.line(fmt::format("acc = {0} < acc ? {0} : acc;", v)); break;
        case loop::Combiner::kArgMax:
        case loop::Combiner::kArgMin: {
          const char* cmp = r.combiner == loop::Combiner::kArgMax ? (r.select_last ? ">=" : ">")
                                                                  : (r.select_last ? "<=" : "<");
          const std::string pos = L > st_.num_kept() ? var(L - 1) : "0";
          w_.open(fmt::format("if (first || {} {} best)", v, cmp));
          w_.line(fmt::format("best = {};", v));
          w_.line(fmt::format("acc = {};", pos));
          w_.line("first = false;");
          w_.close();
          break;
        }
      }
      return;
    }
    if (l == L - 1 && !arg && r.acc_dtype != DType::kBool) {
      const char* op = r.combiner == loop::Combiner::kSum ? "+" : r.combiner == loop::Combiner::kProd ? "*"
                     : r.combiner == loop::Combiner::kMax ? "max" : "min";
      w_.line(fmt::format("#pragma omp simd reduction({}:acc)", op));
    }
    w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var(l), st_.loops[static_cast<size_t>(l)].extent));
    emit_level(l);
    reduce_loops(l + 1, L, arg);
    w_.close();
  }

  void store(const loop::Store& s) {
    w_.line(fmt::format("b{}[{}] = {};", s.buffer, index_ref(s.index), operand(s.value)));
  }

  // An index node as an operand: atoms by their temporary, the rest inline.
  std::string index_ref(int id) const {
    const IndexNode& n = st_.index[static_cast<size_t>(id)];
    if (is_atom(n)) return fmt::format("x{}", id);
    return index_def(id);
  }

  std::string index_def(int id) const {
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

  std::string operand(int e) const {
    if (auto it = alias_.find(e); it != alias_.end()) return operand(it->second);
    const ExprNode& n = st_.exprs[static_cast<size_t>(e)];
    if (n.op == ExprOp::kConst) return literal(n);
    if (n.op == ExprOp::kAcc) return "acc";
    return fmt::format("t{}", e);
  }

  std::string expr_def(int e) const {
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
        const std::string x = index_ref(n.index);
        return fmt::format("({0} >= {1}LL && {0} < {2}LL)", x, n.ivalue, n.ivalue2);
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

  const LoopKernel& k_;
  const Stage& st_;
  CodeWriter& w_;
  int acc_level_ = 0;
  bool kept_inner_ = false;
  std::map<int, int> alias_;  // select -> the branch it takes (inside an unswitched loop)
  std::vector<char> needed_e_, needed_i_, needed_value_, needed_result_, eacc_;
  std::vector<uint64_t> imask_, emask_;
  std::vector<int> depth_;  // loop -> nesting depth in the emitted code
};

// Row fusion: stages [i, j) run inside one loop over their common first loop when each stage
// reads what an earlier one of them wrote only at the element that earlier stage writes in the
// same iteration (a reduction's per-row result read back per row: softmax, layernorm). The row
// then stays in L1 between the stages instead of being streamed through memory once per stage.
bool row_fusable(const std::vector<StagePrinter>& p, size_t i, size_t j) {
  const Stage& first = p[i].stage();
  const Stage& next = p[j].stage();
  if (first.loops.empty() || next.loops.empty() || first.loops[0].reduce || next.loops[0].reduce) return false;
  const int64_t rows = first.loops[0].extent;
  if (next.loops[0].extent != rows || rows < 16) return false;
  // A row must be small enough to stay in cache; otherwise nothing is gained.
  int64_t per_row = 1;
  for (size_t l = 1; l < next.loops.size(); ++l) per_row *= next.loops[l].extent;
  if (per_row > (1 << 14)) return false;
  for (const auto& ld : p[j].loads()) {
    for (size_t s = i; s < j; ++s) {
      for (const auto& st : p[s].stores()) {
        if (st.buffer != ld.buffer) continue;
        if (st.level > 0 || ld.level > 0 || st.index != ld.index) return false;
      }
    }
  }
  return true;
}

void print_row_fused(std::vector<StagePrinter>& p, size_t i, size_t j, CodeWriter& w) {
  int64_t work = 0;
  for (size_t s = i; s < j; ++s) work += p[s].work();
  w.open("");
  w.line(fmt::format("// row fusion of {} stages", j - i));
  if (work >= kParallelWork) w.line("#pragma omp parallel for schedule(static)");
  w.open(fmt::format("for (int64_t i0 = 0; i0 < {}; ++i0)", p[i].stage().loops[0].extent));
  for (size_t s = i; s < j; ++s) p[s].print_row();
  w.close();
  w.close();
}

}  // namespace

std::string cpu_prelude() {
  std::string s = R"(#include <math.h>
#include <stdint.h>
// Vector variants from glibc's libmvec (linked with -lmvec): without -ffast-math, math.h does not
// announce them, so loops calling these functions would stay scalar.
)";
  for (const char* f : {"exp", "log", "sin", "cos", "tan", "tanh", "erf", "log1p", "expm1", "atan", "asin", "acos",
                        "sinh", "cosh"}) {
    s += fmt::format("#pragma omp declare simd notinbranch\nextern \"C\" float {}f(float) noexcept;\n", f);
    s += fmt::format("#pragma omp declare simd notinbranch\nextern \"C\" double {}(double) noexcept;\n", f);
  }
  s += "#pragma omp declare simd notinbranch\nextern \"C\" float powf(float, float) noexcept;\n";
  s += "#pragma omp declare simd notinbranch\nextern \"C\" double pow(double, double) noexcept;\n";
  s += R"(static inline int64_t korch_imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t korch_imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t korch_floordiv(int64_t a, int64_t k) { int64_t q = a / k; return (a % k != 0 && a < 0) ? q - 1 : q; }
static inline int64_t korch_floormod(int64_t a, int64_t k) { int64_t r = a % k; return r < 0 ? r + k : r; }
)";
  return s;
}

void emit_cpu_loop_kernel(const LoopKernel& k, const std::string& symbol, const std::vector<int>& input_slots,
                          const std::vector<int>& output_slots, int first_scratch_slot, CodeWriter& w) {
  KORCH_CHECK(static_cast<int>(input_slots.size()) == k.num_inputs && static_cast<int>(output_slots.size()) == k.num_outputs,
              "kernel {}: {} input / {} output slots for {} inputs and {} outputs", symbol, input_slots.size(),
              output_slots.size(), k.num_inputs, k.num_outputs);
  w.open(fmt::format("extern \"C\" void {}(void* const* args)", symbol));
  for (size_t b = 0; b < k.buffers.size(); ++b) {
    const loop::Buffer& buf = k.buffers[b];
    if (!buf.read && !buf.written) continue;
    int slot = buf.kind == loop::BufferKind::kInput    ? input_slots[static_cast<size_t>(buf.slot)]
               : buf.kind == loop::BufferKind::kOutput ? output_slots[static_cast<size_t>(buf.slot)]
                                                      : first_scratch_slot + buf.slot;
    const bool in = buf.kind == loop::BufferKind::kInput;
    w.line(fmt::format("{0}{1}* __restrict b{2} = ({0}{1}*)args[{3}];", in ? "const " : "", ctype(buf.dtype), b, slot));
  }
  for (size_t t = 0; t < k.tables.size(); ++t) {
    const loop::Table& tb = k.tables[t];
    std::string vals;
    for (size_t i = 0; i < tb.values.size(); ++i) {
      if (i) vals += i % 32 == 0 ? ",\n    " : ",";
      vals += std::to_string(tb.values[i]);
    }
    w.line(fmt::format("static const {} T{}[{}] = {{{}}};", ctype(tb.dtype), t, tb.values.size(), vals));
  }
  std::vector<StagePrinter> printers;
  for (const Stage& st : k.stages) printers.emplace_back(k, st, w);
  for (size_t i = 0; i < printers.size();) {
    size_t j = i + 1;
    while (j < printers.size() && row_fusable(printers, i, j)) ++j;
    if (j - i == 1) {
      printers[i].print();
    } else {
      print_row_fused(printers, i, j, w);
    }
    i = j;
  }
  w.close();
}

}  // namespace korch::cpu
