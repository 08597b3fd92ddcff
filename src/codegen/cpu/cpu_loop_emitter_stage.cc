// StagePrinter: loop nests and schedules of one stage (see cpu_loop_emitter_internal.h).
#include "codegen/cpu/cpu_loop_emitter_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "codegen/loop_kernel_deps.h"
#include "support/error.h"

namespace korch::cpu::detail {

StagePrinter::StagePrinter(const LoopKernel& k, const Stage& st, CodeWriter& w) : k_(k), st_(st), w_(w) {
  mark_needed();
}

int64_t StagePrinter::work() const {
  int64_t iters = 1, ops = 1;
  for (const loop::Loop& l : st_.loops) iters *= l.extent;
  for (char c : needed_e_) ops += c;
  return iters * ops;
}

void StagePrinter::print() {
  const int L = static_cast<int>(st_.loops.size());
  const int K = st_.num_kept();
  int64_t kept_iters = 1;
  for (int l = 0; l < K; ++l) kept_iters *= st_.loops[static_cast<size_t>(l)].extent;
  // Parallel loops: a prefix of the kept loops, never the pointwise simd loop unless it is the
  // only loop; fused into one when the outermost alone is too short to feed the threads. Under a
  // short innermost loop (short_inner_), the loop around it is the simd loop and stays out too
  // when the loops outside it have enough iterations to share.
  int max_par = st_.is_reduction ? (kept_inner_ ? K - 1 : K) : (L == 1 ? 1 : L - 1);
  if (short_inner_ && L >= 3) {
    int64_t outside = 1;  // iterations of the loops around the vectorized one
    for (int l = 0; l < L - 2; ++l) outside *= st_.loops[static_cast<size_t>(l)].extent;
    if (outside >= kShortInnerParallelIters) max_par = L - 2;
  }
  int par = 0;
  if (work() >= kParallelWork && kept_iters >= 2 && max_par >= 1) {
    int64_t e = 1;
    while (par < max_par && e < 64) e *= st_.loops[static_cast<size_t>(par++)].extent;
  }
  split_ = par == 0 && work() >= kParallelWork ? reduce_split(K) : 1;
  w_.open("");
  w_.line("// " + st_.comment);
  emit_level(-1);
  if (tile_.active()) tiled_body();
  else open_loops(0, par, L, K);
  w_.close();
}

std::string StagePrinter::loop_header(int l) const {
  const int64_t e = st_.loops[static_cast<size_t>(l)].extent;
  if (tile_.active() && (l == tile_.outer || l == tile_.inner)) {
    const int64_t t = l == tile_.outer ? tile_.rows : tile_.cols;
    const std::string lo = var(l) + "b";  // the tile's first index, a multiple of t
    const std::string hi = e % t == 0 ? fmt::format("{} + {}", lo, t) : fmt::format("korch_imin({} + {}, {})", lo, t, e);
    return fmt::format("for (int64_t {0} = {1}; {0} < {2}; ++{0})", var(l), lo, hi);
  }
  return fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var(l), e);
}

void StagePrinter::unflatten(const std::vector<FlatPart>& parts) {
  std::string rest = "p";
  for (size_t i = 0; i < parts.size(); ++i) {
    const FlatPart& f = parts[i];
    const std::string v = i + 1 == parts.size() ? rest : fmt::format("{} % {}", rest, f.extent);
    w_.line(f.scale == 1 ? fmt::format("const int64_t {} = {};", f.name, v)
                         : fmt::format("const int64_t {} = ({}) * {};", f.name, v, f.scale));
    rest = fmt::format("({} / {})", rest, f.extent);
  }
}

void StagePrinter::tiled_body() {
  const int m = tile_.outer, in = tile_.inner;
  auto extent = [&](int l) { return st_.loops[static_cast<size_t>(l)].extent; };
  const int64_t row_blocks = (extent(m) + tile_.rows - 1) / tile_.rows;
  const int64_t col_blocks = (extent(in) + tile_.cols - 1) / tile_.cols;
  // One parallel loop over every tile: enough of them for the threads even when the rows are few
  // (150 channels are 3 row blocks).
  int64_t total = row_blocks * col_blocks;
  for (int l = 0; l < in; ++l)
    if (l != m) total *= extent(l);
  if (work() >= kParallelWork && total >= 2) w_.line("#pragma omp parallel for schedule(static)");
  w_.open(fmt::format("for (int64_t p = 0; p < {}; ++p)", total));
  // The order of the tiles: the one whose bytes in flight are fewer. Row blocks first reads a band of
  // tile_.cols source rows front to back (the load is contiguous along the rows) while writing one
  // line into each of extent(m) output rows; column blocks first walks a strip of tile_.rows down
  // every one of extent(in) source rows while writing those rows' outputs whole (and, with one row
  // block, the two are the same walk). segformer_b0's logits ([16384 pixels, 150] to NCHW: 150
  // output rows) go 0.68 -> 0.38 ms row blocks first after a producer pass, 1.83-1.96 -> 1.21-1.23
  // ms in the model; its decode-head Concat (16384 output rows of 256 channels) would go 5.35 ->
  // 7.17 ms (bench/transpose_tiles.cc, bench/results/transpose_tiles.md).
  const bool row_blocks_first = row_blocks > 1 && extent(m) * tile_.cols <= extent(in) * tile_.rows;
  const FlatPart row_part{var(m) + "b", row_blocks, tile_.rows};
  std::vector<FlatPart> parts;  // the first varies fastest
  if (row_blocks_first) parts.push_back(row_part);
  parts.push_back({var(in) + "b", col_blocks, tile_.cols});
  for (int l = in - 1; l > m; --l) parts.push_back({var(l), extent(l)});
  if (!row_blocks_first) parts.push_back(row_part);
  for (int l = m - 1; l >= 0; --l) parts.push_back({var(l), extent(l)});
  unflatten(parts);
  for (int l = 0; l < in; ++l)
    if (l != m) emit_level(depth_[static_cast<size_t>(l)]);
  w_.open(loop_header(m));
  emit_level(depth_[static_cast<size_t>(m)]);
  std::map<int, bool> assumed;
  specialized_inner_loop(in, assumed);
  w_.close();
  w_.close();
}

void StagePrinter::print_row(int depth) {
  const int L = static_cast<int>(st_.loops.size());
  w_.open("");
  w_.line("// " + st_.comment);
  for (int l = -1; l + 1 < depth; ++l) emit_level(l);
  after_open(depth - 1, L, st_.num_kept());
  w_.close();
}

int StagePrinter::max_row_depth() const {
  if (tile_.active()) return 0;
  const int L = static_cast<int>(st_.loops.size()), K = st_.num_kept();
  int d = st_.is_reduction ? K : std::min(L, std::max(L - 1, 1));
  if (kept_inner_) d = std::min(d, K - 1);
  return std::max(d, 0);
}

std::vector<StagePrinter::Access> StagePrinter::loads() const {
  std::vector<Access> out;
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (needed_e_[e] && n.op == ExprOp::kLoad)
      out.push_back({n.buffer, loop::canonical_index(st_, n.index), st_.index[static_cast<size_t>(n.index)].level});
  }
  return out;
}

std::vector<StagePrinter::Access> StagePrinter::stores() const {
  std::vector<Access> out;
  for (const loop::Store& s : st_.stores)
    out.push_back({s.buffer, loop::canonical_index(st_, s.index), st_.index[static_cast<size_t>(s.index)].level});
  return out;
}

void StagePrinter::mark_needed() {
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
  loop::StageDeps deps(st_);
  imask_ = std::move(deps.index_loops);
  emask_ = std::move(deps.expr_loops);
  eacc_ = std::move(deps.expr_acc);
  depth_.resize(st_.loops.size());
  for (size_t l = 0; l < depth_.size(); ++l) depth_[l] = static_cast<int>(l);
  choose_kept_inner();
  tile_ = loop::find_transpose_tile(st_, imask_, needed_e_);
  short_inner_ =
      !st_.is_reduction && !tile_.active() && st_.loops.size() >= 2 && st_.loops.back().extent < kShortestSimdLoop;
  if (tile_.active()) {
    // Nesting of the loops that carry a variable: those before the tile rows, those between the
    // rows and the columns, the rows, the columns (the block loops carry none).
    for (int l = tile_.outer + 1; l < tile_.inner; ++l) depth_[static_cast<size_t>(l)] = l - 1;
    depth_[static_cast<size_t>(tile_.outer)] = tile_.inner - 1;
  }
}

void StagePrinter::choose_kept_inner() {
  const int L = static_cast<int>(st_.loops.size()), K = st_.num_kept();
  const loop::Reduction& r = st_.reduction;
  if (!st_.is_reduction || K < 1 || L == K || r.combiner == loop::Combiner::kArgMax ||
      r.combiner == loop::Combiner::kArgMin || r.acc_dtype == DType::kBool)
    return;
  // The row's accumulators live on the thread's stack: up to kKeptRowMax.
  const int64_t row = st_.loops[static_cast<size_t>(K - 1)].extent;
  if (row < 8 || row > kKeptRowMax) return;
  // Short windows, or reads strided along the reduce loop but contiguous along the output row.
  // A short window read contiguously (a pooling window's row) is kept inner too when the output
  // row steps through the input by 1 or 2 elements (stride-1 and stride-2 pools): the row loop
  // then reads whole (or every other) vector lanes, where a 3-element reduction per output
  // leaves the vector unit idle (squeezenet's 3x3/2 max pool: 0.41 -> 0.14 ms).
  bool contiguous = false, strided = false, small_row_step = true;
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (!needed_value_[e] || n.op != ExprOp::kLoad) continue;
    const int64_t cr = coef(n.index, L - 1), ck = coef(n.index, K - 1);
    contiguous |= cr == 1;
    strided |= cr != 0 && cr != 1 && ck == 1;
    if (cr != 0) small_row_step &= ck == 1 || ck == 2;
  }
  const bool short_window = st_.loops[static_cast<size_t>(L - 1)].extent < 16;
  const bool want = strided || (short_window && (!contiguous || small_row_step));
  if (!want) return;
  kept_inner_ = true;
  for (int l = K; l < L; ++l) depth_[static_cast<size_t>(l)] = l - 1;
  depth_[static_cast<size_t>(K - 1)] = L - 1;
}

int StagePrinter::depth_of(uint64_t mask) const {
  int d = -1;
  for (size_t l = 0; l < depth_.size(); ++l)
    if (mask >> l & 1) d = std::max(d, depth_[l]);
  return d;
}

void StagePrinter::emit_level(int lv, bool acc, const std::vector<char>* only, bool with_stores) {
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

bool StagePrinter::atom_used_by(int i, const std::vector<char>& set, bool with_stores) const {
  for (size_t e = 0; e < st_.exprs.size(); ++e)
    if (set[e] && st_.exprs[e].index >= 0 && index_contains(st_.exprs[e].index, i)) return true;
  if (with_stores)
    for (const loop::Store& s : st_.stores)
      if (index_contains(s.index, i)) return true;
  return false;
}

void StagePrinter::open_loops(int from, int par, int L, int K) {
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
    std::vector<FlatPart> parts;
    for (int l = par - 1; l >= 0; --l) parts.push_back({var(l), st_.loops[static_cast<size_t>(l)].extent});
    unflatten(parts);
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
  if (short_inner_ && from == L - 2) w_.line("#pragma omp simd");
  w_.open(loop_header(from));
  after_open(from, L, K);
  w_.close();
}

void StagePrinter::specialized_inner_loop(int l, std::map<int, bool>& assumed) {
  if (assumed.empty()) inner_copies_ = pending_copies_ = 0;
  std::vector<char> live = live_under(assumed);
  int cond_select = -1;
  // A split prints at least two copies, and every branch still waiting above it at least one.
  if (inner_copies_ + pending_copies_ + 2 <= kMaxInnerCopies) {
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
    ++pending_copies_;  // the else branch
    specialized_inner_loop(l, assumed);
    --pending_copies_;
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
  ++inner_copies_;
  // A short loop is unrolled: as a simd loop it ran as vector code of a few lanes per outer
  // iteration (bench/short_inner_loops.cc).
  w_.line(short_inner_ ? fmt::format("#pragma GCC unroll {}", st_.loops[static_cast<size_t>(l)].extent)
                       : std::string("#pragma omp simd"));
  w_.open(loop_header(l));
  emit_level(l, false, &live, true);
  for (const loop::Store& s : st_.stores) store(s);
  w_.close();
  alias_.clear();
}

std::vector<char> StagePrinter::live_under(const std::map<int, bool>& assumed) const {
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

void StagePrinter::after_open(int l, int L, int K) {
  emit_level(l);
  open_loops(l + 1, 0, L, K);
}

void StagePrinter::reduction_body(int L, int K) {
  const loop::Reduction& r = st_.reduction;
  const DType t = r.acc_dtype;
  const bool arg = r.combiner == loop::Combiner::kArgMax || r.combiner == loop::Combiner::kArgMin;
  if (arg) {
    w_.line(fmt::format("{} best = 0;", ctype(t)));
    w_.line("int64_t acc = 0;");
    w_.line("bool first = true;");
  } else {
    w_.line(fmt::format("{} acc = {};", ctype(t), identity(t)));
  }
  reduce_loops(K, L, arg);
  emit_level(0, true);
  for (const loop::Store& s : st_.stores) store(s);
}

std::string StagePrinter::identity(DType t) const {
  switch (st_.reduction.combiner) {
    case loop::Combiner::kSum: return is_float(t) ? float_literal(t, 0) : int_literal(t, 0);
    case loop::Combiner::kProd: return is_float(t) ? float_literal(t, 1) : int_literal(t, 1);
    case loop::Combiner::kMax:
      return is_float(t) ? float_literal(t, -std::numeric_limits<double>::infinity()) : int_bound(t, false);
    default:
      return is_float(t) ? float_literal(t, std::numeric_limits<double>::infinity()) : int_bound(t, true);
  }
}

int StagePrinter::reduce_split(int K) const {
  const int L = static_cast<int>(st_.loops.size());
  if (!kept_inner_ || K != 1 || L <= K) return 1;
  const int64_t row = st_.loops[0].extent, outer = st_.loops[1].extent;
  int64_t reduced = 1;  // elements read
  for (const loop::Loop& l : st_.loops) reduced *= l.extent;
  if (reduced < kReduceSplitElements) return 1;
  // Partial rows on the stack, as many elements as the row alone may have; each part at least 4
  // iterations of the outer reduce loop.
  const int64_t parts = std::min<int64_t>({kReduceParts, outer / 4, kKeptRowMax / row});
  return static_cast<int>(std::max<int64_t>(parts, 1));
}

void StagePrinter::kept_inner_body(int L, int K) {
  const loop::Reduction& r = st_.reduction;
  const DType t = r.acc_dtype;
  const std::string j = var(K - 1);
  const int64_t row = st_.loops[static_cast<size_t>(K - 1)].extent;
  if (split_ > 1) {
    // No kept loop to share out (the row is the only one): the outermost reduce loop is cut into
    // split_ parts, each summed into its own partial row by whichever thread takes it, and the
    // parts are combined in their order, so the result does not depend on the thread count.
    w_.line(fmt::format("{} accp[{}][{}];", ctype(t), split_, row));
    w_.line("#pragma omp parallel for schedule(static)");
    w_.open(fmt::format("for (int64_t part = 0; part < {}; ++part)", split_));
    w_.line(fmt::format("{}* __restrict accv = accp[part];", ctype(t)));
  } else {
    w_.line(fmt::format("{} accv[{}];", ctype(t), row));
  }
  w_.line("#pragma omp simd");
  w_.line(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0}) accv[{0}] = {2};", j, row, identity(t)));
  for (int l = K; l < L; ++l) {
    const int64_t e = st_.loops[static_cast<size_t>(l)].extent;
    if (l == K && split_ > 1)
      w_.open(
          fmt::format("for (int64_t {0} = part * {1} / {2}; {0} < (part + 1) * {1} / {2}; ++{0})", var(l), e, split_));
    else
      w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", var(l), e));
    emit_level(l - 1, false, &needed_value_);
  }
  const RowInterior in = interior_of_row(K);
  const int64_t p = in.from, q = in.to;
  if (q > p) {
    // Ends of the row as they are, the interior with its clamps resolved.
    if (p > 0) kept_inner_accumulate(L, K, 0, p);
    const std::vector<int>& res = in.resolutions;
    always_true_.assign(st_.exprs.size(), 0);
    for (size_t c = 0; c < row_clamps_.size(); ++c) index_alias_[row_clamps_[c]] = res[c];
    for (size_t t = 0; t < row_tests_.size(); ++t) always_true_[static_cast<size_t>(row_tests_[t])] = 1;
    kept_inner_accumulate(L, K, p, q);
    index_alias_.clear();
    always_true_.clear();
    if (q < row) kept_inner_accumulate(L, K, q, row);
  } else {
    kept_inner_accumulate(L, K, 0, row);
  }
  for (int l = K; l < L; ++l) w_.close();
  if (split_ > 1) w_.close();
  w_.line("#pragma omp simd");
  w_.open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", j, row));
  if (split_ > 1) {
    w_.line(fmt::format("{} acc = accp[0][{}];", ctype(t), j));
    for (int p = 1; p < split_; ++p) w_.line(combine("acc", fmt::format("accp[{}][{}]", p, j)));
  } else {
    w_.line(fmt::format("const {} acc = accv[{}];", ctype(t), j));
  }
  emit_level(L - 1, false, &needed_result_, true);
  emit_level(0, true);
  for (const loop::Store& s : st_.stores) store(s);
  w_.close();
}

void StagePrinter::kept_inner_accumulate(int L, int K, int64_t from, int64_t to) {
  const loop::Reduction& r = st_.reduction;
  const std::string j = var(K - 1);
  w_.line("#pragma omp simd");
  w_.open(fmt::format("for (int64_t {0} = {1}; {0} < {2}; ++{0})", j, from, to));
  emit_level(L - 1, false, &needed_value_);
  w_.line(combine(fmt::format("accv[{}]", j), operand(r.value)));
  w_.close();
}

std::string StagePrinter::combine(const std::string& acc, const std::string& v) const {
  switch (st_.reduction.combiner) {
    case loop::Combiner::kSum: return fmt::format("{} += {};", acc, v);
    case loop::Combiner::kProd: return fmt::format("{} *= {};", acc, v);
    case loop::Combiner::kMax: return fmt::format("{0} = {1} > {0} ? {1} : {0};", acc, v);
    default: return fmt::format("{0} = {1} < {0} ? {1} : {0};", acc, v);  // kMin
  }
}

std::pair<int64_t, int64_t> StagePrinter::range_at(int id, int K, int64_t j) const {
  const IndexNode& n = st_.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst: return {n.value, n.value};
    case IndexOp::kVar:
      if (n.value == K - 1) return {j, j};
      return {0, st_.loops[static_cast<size_t>(n.value)].extent - 1};
    case IndexOp::kSum: {
      int64_t lo = n.value, hi = n.value;
      for (const auto& [t, c] : n.terms) {
        const auto [a, b] = range_at(t, K, j);
        lo += c > 0 ? c * a : c * b;
        hi += c > 0 ? c * b : c * a;
      }
      return {lo, hi};
    }
    case IndexOp::kMin: {
      const auto a = range_at(n.a, K, j), b = range_at(n.b, K, j);
      return {std::min(a.first, b.first), std::min(a.second, b.second)};
    }
    case IndexOp::kMax: {
      const auto a = range_at(n.a, K, j), b = range_at(n.b, K, j);
      return {std::max(a.first, b.first), std::max(a.second, b.second)};
    }
    default: return {n.lo, n.hi};  // div, mod, tables: their range over the whole domain
  }
}

std::vector<int> StagePrinter::resolutions_at(int K, int64_t j) const {
  std::vector<int> out;
  for (int c : row_clamps_) {
    const IndexNode& n = st_.index[static_cast<size_t>(c)];
    const auto a = range_at(n.a, K, j), b = range_at(n.b, K, j);
    const bool min = n.op == IndexOp::kMin;
    // min(a, b) is a when a <= b everywhere; max(a, b) is a when a >= b everywhere.
    if (min ? a.second <= b.first : a.first >= b.second) out.push_back(n.a);
    else if (min ? b.second <= a.first : b.first >= a.second) out.push_back(n.b);
    else out.push_back(-1);
  }
  for (int t : row_tests_) {
    const ExprNode& e = st_.exprs[static_cast<size_t>(t)];
    const auto x = range_at(e.index, K, j);
    out.push_back(x.first >= e.ivalue && x.second < e.ivalue2 ? 1 : -1);
  }
  return out;
}

StagePrinter::RowInterior StagePrinter::interior_of_row(int K) {
  const uint64_t bit = uint64_t{1} << (K - 1);
  row_clamps_.clear();
  row_tests_.clear();
  for (size_t i = 0; i < st_.index.size(); ++i) {
    const IndexNode& n = st_.index[i];
    if (needed_i_[i] && (n.op == IndexOp::kMin || n.op == IndexOp::kMax) && (imask_[i] & bit))
      row_clamps_.push_back(static_cast<int>(i));
  }
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (needed_value_[e] && n.op == ExprOp::kInRange && (emask_[e] & bit)) row_tests_.push_back(static_cast<int>(e));
  }
  if (row_clamps_.empty() && row_tests_.empty()) return {};
  const int64_t row = st_.loops[static_cast<size_t>(K - 1)].extent;
  const int64_t mid = row / 2;
  const std::vector<int> want = resolutions_at(K, mid);
  for (int r : want)
    if (r < 0) return {};
  int64_t p = mid, q = mid + 1;
  while (p > 0 && resolutions_at(K, p - 1) == want) --p;
  while (q < row && resolutions_at(K, q) == want) ++q;
  return {p, q, want};  // the whole row when the clamps never bite along it
}

void StagePrinter::reduce_loops(int l, int L, bool arg) {
  const loop::Reduction& r = st_.reduction;
  if (l >= L) {
    const std::string v = operand(r.value);
    switch (r.combiner) {
      case loop::Combiner::kSum:
      case loop::Combiner::kProd:
      case loop::Combiner::kMax:
      case loop::Combiner::kMin: w_.line(combine("acc", v)); break;
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

void StagePrinter::store(const loop::Store& s) {
  w_.line(fmt::format("b{}[{}] = {};", s.buffer, index_ref(s.index), operand(s.value)));
}

}  // namespace korch::cpu::detail
