// CudaStage: one stage under one thread mapping (see cuda_loop_emitter_internal.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "codegen/cuda/cuda_loop_emitter_internal.h"
#include "codegen/loop_kernel_deps.h"
#include "support/error.h"

namespace korch::cuda::detail {

int64_t grid_for(int64_t work, int block) {
  const int64_t cap = int64_t{kSmCount} * std::max(1, 2048 / block) * 2;
  return std::clamp<int64_t>((work + block - 1) / block, 1, cap);
}

CudaStage::CudaStage(const LoopKernel& k, const Stage& st, const std::string& symbol) : k_(k), st_(st), symbol_(symbol) {
  KORCH_CHECK(st.loops.size() <= 64, "a stage with {} loops", st.loops.size());
  mark_needed();
}

int64_t CudaStage::kept_iterations() const {
  int64_t n = 1;
  for (const loop::Loop& l : st_.loops)
    if (!l.reduce) n *= l.extent;
  return n;
}

int64_t CudaStage::reduce_length() const {
  int64_t n = 1;
  for (const loop::Loop& l : st_.loops)
    if (l.reduce) n *= l.extent;
  return n;
}

int64_t CudaStage::per_row() const {
  int64_t n = 1;
  for (size_t l = 1; l < st_.loops.size(); ++l) n *= st_.loops[l].extent;
  return n;
}

bool CudaStage::is_arg() const {
  return st_.is_reduction &&
         (st_.reduction.combiner == loop::Combiner::kArgMax || st_.reduction.combiner == loop::Combiner::kArgMin);
}

void CudaStage::mark_needed() {
  needed_e_.assign(st_.exprs.size(), 0);
  for (const loop::Store& s : st_.stores) {
    const std::vector<char> r = reachable(s.value);
    for (size_t e = 0; e < r.size(); ++e) needed_e_[e] |= r[e];
  }
  if (st_.is_reduction) {
    needed_value_ = reachable(st_.reduction.value);
    needed_result_ = reachable(st_.reduction.result);
    for (size_t e = 0; e < needed_e_.size(); ++e) needed_e_[e] |= needed_value_[e] | needed_result_[e];
  }
  needed_i_ = index_needs(needed_e_, true);
  // Which loops each node depends on (a bit per loop); where it is printed follows from the
  // depth each mapping gives the loops.
  loop::StageDeps deps(st_);
  imask_ = std::move(deps.index_loops);
  emask_ = std::move(deps.expr_loops);
  eacc_ = std::move(deps.expr_acc);
  depth_.resize(st_.loops.size());
  for (size_t l = 0; l < depth_.size(); ++l) depth_[l] = static_cast<int>(l);
}

std::vector<char> CudaStage::index_needs(const std::vector<char>& exprs, bool with_stores) const {
  std::vector<char> out(st_.index.size(), 0);
  std::vector<int> is;
  for (size_t e = 0; e < exprs.size(); ++e)
    if (exprs[e] && st_.exprs[e].index >= 0) is.push_back(st_.exprs[e].index);
  if (with_stores)
    for (const loop::Store& s : st_.stores) is.push_back(s.index);
  while (!is.empty()) {
    const int i = is.back();
    is.pop_back();
    if (i < 0 || out[static_cast<size_t>(i)]) continue;
    out[static_cast<size_t>(i)] = 1;
    const IndexNode& n = st_.index[static_cast<size_t>(i)];
    for (const auto& [t, c] : n.terms) is.push_back(t);
    is.push_back(n.a);
    is.push_back(n.b);
  }
  return out;
}

int CudaStage::depth_of(uint64_t mask) const {
  int d = -1;
  for (size_t l = 0; l < depth_.size(); ++l)
    if (mask >> l & 1) d = std::max(d, depth_[l]);
  return d;
}

bool CudaStage::fits_i32() const {
  // Sums are bounded term by term, so no intermediate of `a + c*b + k` overflows either; the
  // flat counters get headroom for the grid-stride step (at most 2^30 threads in flight).
  const double lim = static_cast<double>(std::numeric_limits<int32_t>::max());
  double total = 1;
  for (const loop::Loop& l : st_.loops) total *= static_cast<double>(l.extent);
  if (total > static_cast<double>(int64_t{1} << 30)) return false;
  auto mag = [](const IndexNode& n) { return std::max(std::fabs(static_cast<double>(n.lo)), std::fabs(static_cast<double>(n.hi))); };
  for (size_t i = 0; i < st_.index.size(); ++i) {
    if (!needed_i_[i]) continue;
    const IndexNode& n = st_.index[i];
    if (mag(n) > lim) return false;
    if (n.op == IndexOp::kSum) {
      double bound = std::fabs(static_cast<double>(n.value));
      for (const auto& [t, c] : n.terms) bound += std::fabs(static_cast<double>(c)) * mag(st_.index[static_cast<size_t>(t)]);
      if (bound > lim) return false;
    }
    if (n.op == IndexOp::kConst && std::fabs(static_cast<double>(n.value)) > lim) return false;
  }
  return true;
}

std::string CudaStage::vec4_reason() const {
  if (st_.is_reduction) return "a reduction stage";
  const int L = num_loops();
  if (L == 0) return "a single element";
  const int64_t e = st_.loops.back().extent;
  if (e % 4 != 0) return fmt::format("the innermost loop has {} iterations, not a multiple of 4", e);
  // An access along the innermost loop moves as a float4 when it is f32, unit-stride and its
  // offset at lane 0 is a multiple of 4 elements (16 bytes, given 16-byte aligned buffers).
  auto check = [&](int buffer, int index, const char* what) -> std::string {
    if (!(imask_[static_cast<size_t>(index)] >> (L - 1) & 1)) return "";
    const loop::Buffer& b = k_.buffers[static_cast<size_t>(buffer)];
    if (b.dtype != DType::kFloat32)
      return fmt::format("the {} of b{} is {} (float4 needs f32)", what, buffer, dtype_name(b.dtype));
    if (coef(index, L - 1) != 1) return fmt::format("the {} of b{} is not unit-stride along the innermost loop", what, buffer);
    const IndexNode& n = st_.index[static_cast<size_t>(index)];
    bool aligned = true;
    if (n.op == IndexOp::kSum) {
      aligned = n.value % 4 == 0;
      for (const auto& [t, c] : n.terms)
        if (!(st_.index[static_cast<size_t>(t)].op == IndexOp::kVar && st_.index[static_cast<size_t>(t)].value == L - 1))
          aligned &= c % 4 == 0;
    }
    if (!aligned) return fmt::format("the {} of b{} is not 16-byte aligned (offset not a multiple of 4 elements)", what, buffer);
    return "";
  };
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (!needed_e_[e] || n.op != ExprOp::kLoad) continue;
    if (std::string why = check(n.buffer, n.index, "load"); !why.empty()) return why;
  }
  for (const loop::Store& s : st_.stores) {
    if (!(imask_[static_cast<size_t>(s.index)] >> (L - 1) & 1)) return "a store does not follow the innermost loop";
    if (std::string why = check(s.buffer, s.index, "store"); !why.empty()) return why;
  }
  return "";
}

bool CudaStage::strided_reduce() const {
  const int L = num_loops(), K = st_.num_kept();
  if (!st_.is_reduction || K < 1 || L == K) return false;
  bool contiguous = false, strided = false;
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (!needed_value_[e] || n.op != ExprOp::kLoad) continue;
    const int64_t cr = coef(n.index, L - 1), ck = coef(n.index, K - 1);
    contiguous |= cr == 1;
    strided |= cr != 0 && cr != 1 && ck == 1;
  }
  return strided || (!contiguous && st_.loops.back().extent < 16);
}

ReduceMap CudaStage::auto_reduce(int block) const {
  const int64_t m = kept_iterations(), n = reduce_length();
  // Nothing worth sharing, or reads that coalesce only across outputs (a middle axis, pool
  // windows) with outputs enough to fill the GPU: a thread per output.
  if (n <= 32 || (strided_reduce() && m >= 4096)) return ReduceMap::kThread;
  if (n <= 1024) return m >= kSmCount || n < 256 ? ReduceMap::kWarp : ReduceMap::kBlock;
  if (m >= kSmCount) return ReduceMap::kBlock;
  // Few long rows: a block per row would leave most SMs idle; split each row.
  if (n >= 16384 && two_pass_chunks(block) > 1) return ReduceMap::kTwoPass;
  return ReduceMap::kBlock;
}

int64_t CudaStage::two_pass_chunks(int block) const {
  const int64_t m = kept_iterations(), n = reduce_length();
  // About two blocks per SM in pass 1, each with at least 4 elements per thread.
  const int64_t want = (2 * kSmCount + m - 1) / m;
  const int64_t most = std::max<int64_t>(1, n / (4 * static_cast<int64_t>(block)));
  return std::clamp<int64_t>(std::min(want, most), 1, 1024);
}

std::vector<CudaStage::Access> CudaStage::loads() const {
  std::vector<Access> out;
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (needed_e_[e] && n.op == ExprOp::kLoad)
      out.push_back({n.buffer, loop::canonical_index(st_, n.index), st_.index[static_cast<size_t>(n.index)].level});
  }
  return out;
}

std::vector<CudaStage::Access> CudaStage::stores() const {
  std::vector<Access> out;
  for (const loop::Store& s : st_.stores)
    out.push_back({s.buffer, loop::canonical_index(st_, s.index), st_.index[static_cast<size_t>(s.index)].level});
  return out;
}

void CudaStage::buffers_used(std::set<int>* read, std::set<int>* written, Part part) const {
  const std::vector<char>& in = part == Part::kAll ? needed_e_ : part == Part::kValue ? needed_value_ : needed_result_;
  for (size_t e = 0; e < st_.exprs.size(); ++e)
    if (in[e] && st_.exprs[e].op == ExprOp::kLoad) read->insert(st_.exprs[e].buffer);
  if (part != Part::kValue)
    for (const loop::Store& s : st_.stores) written->insert(s.buffer);
}

void CudaStage::shared_needs(std::set<std::string>* types) const {
  if (!st_.is_reduction) return;
  types->insert(ctype(st_.reduction.acc_dtype));
  if (is_arg()) types->insert("pos");
}

// ---- printing helpers -------------------------------------------------------------------------

void CudaStage::emit_level(CodeWriter& w, int d, const std::vector<char>* only, bool with_stores, bool acc) {
  if (!acc) {
    const std::vector<char> need = index_needs(only ? *only : needed_e_, with_stores);
    for (size_t i = 0; i < st_.index.size(); ++i)
      if (need[i] && is_atom(st_.index[i]) && depth_of(imask_[i]) == d)
        w.line(fmt::format("const {} x{} = {};", it(), i, index_def(static_cast<int>(i))));
  }
  for (size_t e = 0; e < st_.exprs.size(); ++e) {
    const ExprNode& n = st_.exprs[e];
    if (!needed_e_[e] || n.op == ExprOp::kConst || n.op == ExprOp::kAcc) continue;
    if (only && !(*only)[e]) continue;
    if (acc ? !eacc_[e] : (eacc_[e] || depth_of(emask_[e]) != d)) continue;
    w.line(fmt::format("const {} t{} = {};", ctype(n.dtype), e, expr_def(static_cast<int>(e))));
  }
}

std::vector<int> CudaStage::loop_range(int from, int to) const {
  std::vector<int> out;
  for (int l = from; l < to; ++l) out.push_back(l);
  return out;
}

void CudaStage::decompose(CodeWriter& w, const std::string& flat, const std::vector<int>& loops,
                          const std::vector<int64_t>& extents, const std::vector<std::string>& names) {
  int64_t stride = 1;
  for (size_t j = loops.size(); j-- > 0;) {
    const std::string q = stride == 1 ? flat : fmt::format("{} / {}", flat, ilit(stride));
    const std::string v = j == 0 ? q : fmt::format("{} % {}", stride == 1 ? q : "(" + q + ")", ilit(extents[j]));
    // A loop of extent 1 (a one-wide piece of a split loop) may go unread: its index is 0.
    w.line(fmt::format("{}const {} {} = {};", extents[j] == 1 ? "[[maybe_unused]] " : "", it(), names[j], v));
    stride *= extents[j];
  }
}

std::string CudaStage::identity() const {
  const DType t = st_.reduction.acc_dtype;
  switch (st_.reduction.combiner) {
    case loop::Combiner::kSum: return is_float(t) ? float_literal(t, 0) : int_literal(t, 0);
    case loop::Combiner::kProd: return is_float(t) ? float_literal(t, 1) : int_literal(t, 1);
    case loop::Combiner::kMax:
      return is_float(t) ? float_literal(t, -std::numeric_limits<double>::infinity()) : int_bound(t, false);
    default:
      return is_float(t) ? float_literal(t, std::numeric_limits<double>::infinity()) : int_bound(t, true);
  }
}

std::string CudaStage::op_struct() const {
  switch (st_.reduction.combiner) {
    case loop::Combiner::kSum: return "korch_op_sum";
    case loop::Combiner::kProd: return "korch_op_prod";
    case loop::Combiner::kMax: return "korch_op_max";
    default: return "korch_op_min";
  }
}

std::string CudaStage::arg_params() const {
  return fmt::format("{}, {}", st_.reduction.combiner == loop::Combiner::kArgMax ? "true" : "false",
                     st_.reduction.select_last ? "true" : "false");
}

void CudaStage::acc_init(CodeWriter& w) const {
  const std::string t = ctype(st_.reduction.acc_dtype);
  if (is_arg()) {
    // ArgMax/ArgMin: the best value and its position; -1 = nothing seen (korch_arg_better).
    w.line(fmt::format("{0} best = ({0})0;", t));
    w.line("int64_t acc = -1;");
  } else {
    w.line(fmt::format("{} acc = {};", t, identity()));
  }
}

void CudaStage::fold(CodeWriter& w, const std::string& pos) const {
  const std::string v = operand(st_.reduction.value);
  switch (st_.reduction.combiner) {
    case loop::Combiner::kSum: w.line(fmt::format("acc += {};", v)); break;
    case loop::Combiner::kProd: w.line(fmt::format("acc *= {};", v)); break;
    case loop::Combiner::kMax: w.line(fmt::format("acc = {0} > acc ? {0} : acc;", v)); break;
    case loop::Combiner::kMin: w.line(fmt::format("acc = {0} < acc ? {0} : acc;", v)); break;
    default:
      w.open(fmt::format("if (korch_arg_better<{}>({}, (int64_t){}, best, acc))", arg_params(), v, pos));
      w.line(fmt::format("best = {};", v));
      w.line(fmt::format("acc = {};", pos));
      w.close();
  }
}

void CudaStage::combine(CodeWriter& w, const Group& g) const {
  const std::string t = ctype(st_.reduction.acc_dtype);
  if (is_arg()) {
    if (g.block) w.line(fmt::format("korch_block_arg<{}>(best, acc, sm_{}, sm_pos);", arg_params(), t));
    else w.line(fmt::format("korch_warp_arg<{}>(best, acc);", arg_params()));
  } else {
    if (g.block) w.line(fmt::format("acc = korch_block_all<{}>(acc, sm_{});", op_struct(), t));
    else w.line(fmt::format("acc = korch_warp_all<{}>(acc);", op_struct()));
  }
}

void CudaStage::stores(CodeWriter& w) {
  for (const loop::Store& s : st_.stores)
    w.line(fmt::format("b{}[{}] = {};", s.buffer, index_ref(s.index), operand(s.value)));
}

void CudaStage::flat_reduce_loop(CodeWriter& w, const std::string& first, const std::string& end,
                                 const std::string& step, const std::vector<char>* only) {
  const int L = num_loops(), K = st_.num_kept();
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (int l = K; l < L; ++l) {
    ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
    names.push_back(var(l));
  }
  w.open(fmt::format("for ({0} r = {1}; r < {2}; r += {3})", it(), first, end, step));
  decompose(w, "r", loop_range(K, L), ext, names);
  emit_level(w, 1, only, false);
  fold(w, "r");
  w.close();
}

// ---- mappings ---------------------------------------------------------------------------------

void CudaStage::print_pointwise(CodeWriter& w, bool vector) {
  const int L = num_loops();
  for (int l = 0; l < L; ++l) depth_[static_cast<size_t>(l)] = vector && l == L - 1 ? 1 : 0;
  w.open("");
  w.line("// " + st_.comment);
  emit_level(w, -1, nullptr, true);
  const int64_t total = kept_iterations() / (vector ? 4 : 1);
  w.open(fmt::format("for ({0} f = gtid; f < {1}; f += gsize)", it(), ilit(total)));
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (int l = 0; l < L; ++l) {
    ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
    names.push_back(var(l));
  }
  if (!vector) {
    decompose(w, "f", loop_range(0, L), ext, names);
    emit_level(w, 0, nullptr, true);
    stores(w);
  } else {
    // Lane 0's innermost index v; float4 loads and stores at the lane-0 offsets, the arithmetic
    // once per lane on its component.
    const std::string v = fmt::format("v{}", L - 1);
    ext.back() /= 4;
    names.pop_back();  // (not `names.back() = "q"`: GCC 12 warns falsely about that)
    names.emplace_back("q");
    decompose(w, "f", loop_range(0, L), ext, names);
    w.line(fmt::format("const {} {} = q * 4;", it(), v));
    emit_level(w, 0, nullptr, true);
    var_name_[L - 1] = v;
    for (size_t e = 0; e < st_.exprs.size(); ++e) {
      const ExprNode& n = st_.exprs[e];
      if (!needed_e_[e] || n.op != ExprOp::kLoad || !(emask_[e] >> (L - 1) & 1)) continue;
      vec_[static_cast<int>(e)] = fmt::format("w{}", e);
      w.line(fmt::format("const float4 w{} = korch_ld4(b{} + {});", e, n.buffer, index_ref(n.index)));
    }
    for (size_t s = 0; s < st_.stores.size(); ++s) w.line(fmt::format("float4 s{};", s));
    var_name_.erase(L - 1);
    // The lane's own index, when anything but the float4 loads needs it (tables, selects).
    bool lane_index = false;
    const std::vector<char> need = index_needs(needed_e_, false);
    for (size_t i = 0; i < st_.index.size(); ++i) lane_index |= need[i] && is_atom(st_.index[i]) && (imask_[i] >> (L - 1) & 1);
    for (size_t e = 0; e < st_.exprs.size(); ++e)
      lane_index |= needed_e_[e] && st_.exprs[e].index >= 0 && st_.exprs[e].op != ExprOp::kLoad && (emask_[e] >> (L - 1) & 1);
    for (int j = 0; j < 4; ++j) {
      lane_ = j;
      w.open("");
      if (lane_index) w.line(fmt::format("const {} {} = {} + {};", it(), var(L - 1), v, j));
      emit_level(w, 1, nullptr, true);
      for (size_t s = 0; s < st_.stores.size(); ++s)
        w.line(fmt::format("s{}.{} = {};", s, "xyzw"[j], operand(st_.stores[s].value)));
      w.close();
    }
    lane_ = -1;
    var_name_[L - 1] = v;
    for (size_t s = 0; s < st_.stores.size(); ++s)
      w.line(fmt::format("korch_st4(b{} + {}, s{});", st_.stores[s].buffer, index_ref(st_.stores[s].index), s));
    var_name_.erase(L - 1);
    vec_.clear();
  }
  w.close();
  w.close();
}

void CudaStage::print_thread_reduce(CodeWriter& w) {
  const int L = num_loops(), K = st_.num_kept();
  KORCH_CHECK(!is_arg() || L - K <= 1, "ArgMax/ArgMin over {} loops", L - K);
  for (int l = 0; l < L; ++l) depth_[static_cast<size_t>(l)] = l < K ? 0 : l - K + 1;
  w.open("");
  w.line("// " + st_.comment);
  emit_level(w, -1, nullptr, true);
  w.open(fmt::format("for ({0} f = gtid; f < {1}; f += gsize)", it(), ilit(kept_iterations())));
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (int l = 0; l < K; ++l) {
    ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
    names.push_back(var(l));
  }
  decompose(w, "f", loop_range(0, K), ext, names);
  emit_level(w, 0, nullptr, true);
  acc_init(w);
  for (int l = K; l < L; ++l) {
    w.open(fmt::format("for ({0} {1} = 0; {1} < {2}; ++{1})", it(), var(l), ilit(st_.loops[static_cast<size_t>(l)].extent)));
    emit_level(w, l - K + 1, nullptr, true);
  }
  fold(w, L > K ? var(L - 1) : "0");
  for (int l = K; l < L; ++l) w.close();
  emit_level(w, 0, nullptr, true, true);
  stores(w);
  w.close();
  w.close();
}

void CudaStage::print_group_reduce(CodeWriter& w, bool block) {
  const int L = num_loops(), K = st_.num_kept();
  for (int l = 0; l < L; ++l) depth_[static_cast<size_t>(l)] = l < K ? 0 : 1;
  const Group g = block ? Group{true, "tid", "nthreads"} : Group{false, "lane", "32"};
  w.open("");
  w.line("// " + st_.comment);
  emit_level(w, -1, nullptr, true);
  if (block) {
    w.open(fmt::format("for ({0} f = ({0})blockIdx.x; f < {1}; f += ({0})gridDim.x)", it(), ilit(kept_iterations())));
  } else {
    w.line(fmt::format("const {} lane = gtid & 31;", it()));
    w.open(fmt::format("for ({0} f = gtid >> 5; f < {1}; f += gsize >> 5)", it(), ilit(kept_iterations())));
  }
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (int l = 0; l < K; ++l) {
    ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
    names.push_back(var(l));
  }
  decompose(w, "f", loop_range(0, K), ext, names);
  emit_level(w, 0, nullptr, true);
  acc_init(w);
  flat_reduce_loop(w, g.tid, ilit(reduce_length()), g.size, nullptr);
  combine(w, g);
  emit_level(w, 0, nullptr, true, true);
  w.open(fmt::format("if ({} == 0)", g.tid));
  stores(w);
  w.close();
  w.close();
  w.close();
}

void CudaStage::print_two_pass_partials(CodeWriter& w, int64_t chunks, int value_slot, int pos_slot) {
  const int L = num_loops(), K = st_.num_kept();
  for (int l = 0; l < L; ++l) depth_[static_cast<size_t>(l)] = l < K ? 0 : 1;
  const std::string t = ctype(st_.reduction.acc_dtype);
  const int64_t n = reduce_length(), chunk = (n + chunks - 1) / chunks;
  w.open("");
  w.line(fmt::format("// {} (two-pass: partials of {} chunks of {})", st_.comment, chunks, chunk));
  w.line(fmt::format("{0}* __restrict__ pv = ({0}*)a.p[{1}];", t, value_slot));
  if (is_arg()) w.line(fmt::format("int64_t* __restrict__ pp = (int64_t*)a.p[{}];", pos_slot));
  emit_level(w, -1, &needed_value_, false);
  w.open(fmt::format("for ({0} g = ({0})blockIdx.x; g < {1}; g += ({0})gridDim.x)", it(), ilit(kept_iterations() * chunks)));
  if (K > 0) w.line(fmt::format("const {} f = g / {};", it(), ilit(chunks)));
  w.line(fmt::format("const {} c = g % {};", it(), ilit(chunks)));
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (int l = 0; l < K; ++l) {
    ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
    names.push_back(var(l));
  }
  decompose(w, "f", loop_range(0, K), ext, names);
  emit_level(w, 0, &needed_value_, false);
  acc_init(w);
  w.line(fmt::format("const {0} r_end = korch_imin(({0})((c + 1) * {1}), ({0}){2});", it(), ilit(chunk), ilit(n)));
  flat_reduce_loop(w, fmt::format("c * {} + tid", ilit(chunk)), "r_end", "nthreads", &needed_value_);
  combine(w, Group{true, "tid", "nthreads"});
  w.open("if (tid == 0)");
  if (is_arg()) {
    w.line("pv[g] = best;");
    w.line("pp[g] = acc;");
  } else {
    w.line("pv[g] = acc;");
  }
  w.close();
  w.close();
  w.close();
}

void CudaStage::print_two_pass_fold(CodeWriter& w, int64_t chunks, int value_slot, int pos_slot) {
  const int L = num_loops(), K = st_.num_kept();
  for (int l = 0; l < L; ++l) depth_[static_cast<size_t>(l)] = l < K ? 0 : 1;
  const std::string t = ctype(st_.reduction.acc_dtype);
  w.open("");
  w.line(fmt::format("// {} (two-pass: fold of {} partials)", st_.comment, chunks));
  w.line(fmt::format("const {0}* __restrict__ pv = (const {0}*)a.p[{1}];", t, value_slot));
  if (is_arg()) w.line(fmt::format("const int64_t* __restrict__ pp = (const int64_t*)a.p[{}];", pos_slot));
  emit_level(w, -1, &needed_result_, true);
  w.open(fmt::format("for ({0} f = gtid; f < {1}; f += gsize)", it(), ilit(kept_iterations())));
  std::vector<int64_t> ext;
  std::vector<std::string> names;
  for (int l = 0; l < K; ++l) {
    ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
    names.push_back(var(l));
  }
  decompose(w, "f", loop_range(0, K), ext, names);
  emit_level(w, 0, &needed_result_, true);
  acc_init(w);
  w.open(fmt::format("for ({0} c = 0; c < {1}; ++c)", it(), ilit(chunks)));
  const std::string at = fmt::format("f * {} + c", ilit(chunks));
  if (is_arg()) {
    w.open(fmt::format("if (korch_arg_better<{}>(pv[{}], pp[{}], best, acc))", arg_params(), at, at));
    w.line(fmt::format("best = pv[{}];", at));
    w.line(fmt::format("acc = pp[{}];", at));
    w.close();
  } else {
    w.line(fmt::format("acc = {}::f(acc, pv[{}]);", op_struct(), at));
  }
  w.close();
  emit_level(w, 0, &needed_result_, true, true);
  stores(w);
  w.close();
  w.close();
}

void CudaStage::print_row_part(CodeWriter& w, const Group& g) {
  const int L = num_loops();
  for (int l = 0; l < L; ++l) depth_[static_cast<size_t>(l)] = l == 0 ? 0 : 1;
  w.open("");
  w.line("// " + st_.comment);
  emit_level(w, -1, nullptr, true);
  emit_level(w, 0, nullptr, true);
  if (st_.is_reduction) {
    KORCH_CHECK(st_.num_kept() == 1, "row kernel reduction with {} kept loops", st_.num_kept());
    acc_init(w);
    flat_reduce_loop(w, g.tid, ilit(reduce_length()), g.size, nullptr);
    combine(w, g);
    emit_level(w, 0, nullptr, true, true);
    w.open(fmt::format("if ({} == 0)", g.tid));
    stores(w);
    w.close();
  } else {
    std::vector<int64_t> ext;
    std::vector<std::string> names;
    for (int l = 1; l < L; ++l) {
      ext.push_back(st_.loops[static_cast<size_t>(l)].extent);
      names.push_back(var(l));
    }
    w.open(fmt::format("for ({0} j = {1}; j < {2}; j += {3})", it(), g.tid, ilit(per_row()), g.size));
    decompose(w, "j", loop_range(1, L), ext, names);
    emit_level(w, 1, nullptr, true);
    stores(w);
    w.close();
  }
  w.close();
}

}  // namespace korch::cuda::detail
