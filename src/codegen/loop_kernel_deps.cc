#include "codegen/loop_kernel_deps.h"

#include <fmt/format.h>

namespace korch::loop {

StageDeps::StageDeps(const Stage& st) {
  index_loops.assign(st.index.size(), 0);
  for (size_t i = 0; i < st.index.size(); ++i) {
    const IndexNode& n = st.index[i];
    uint64_t m = n.op == IndexOp::kVar ? uint64_t{1} << n.value : 0;
    for (const auto& [t, c] : n.terms) m |= index_loops[static_cast<size_t>(t)];
    if (n.a >= 0) m |= index_loops[static_cast<size_t>(n.a)];
    if (n.b >= 0) m |= index_loops[static_cast<size_t>(n.b)];
    index_loops[i] = m;
  }
  expr_loops.assign(st.exprs.size(), 0);
  expr_acc.assign(st.exprs.size(), 0);
  for (size_t e = 0; e < st.exprs.size(); ++e) {
    const ExprNode& n = st.exprs[e];
    uint64_t m = n.index >= 0 ? index_loops[static_cast<size_t>(n.index)] : 0;
    char acc = n.op == ExprOp::kAcc;
    for (int a : n.args) {
      m |= expr_loops[static_cast<size_t>(a)];
      acc |= expr_acc[static_cast<size_t>(a)];
    }
    expr_loops[e] = m;
    expr_acc[e] = acc;
  }
}

std::vector<char> reachable_exprs(const Stage& st, int root) {
  std::vector<char> out(st.exprs.size(), 0);
  std::vector<int> es{root};
  while (!es.empty()) {
    const int e = es.back();
    es.pop_back();
    if (e < 0 || out[static_cast<size_t>(e)]) continue;
    out[static_cast<size_t>(e)] = 1;
    for (int a : st.exprs[static_cast<size_t>(e)].args) es.push_back(a);
  }
  return out;
}

int64_t affine_coef(const Stage& st, const std::vector<uint64_t>& index_loops, int i, int l) {
  const IndexNode& n = st.index[static_cast<size_t>(i)];
  if (!(index_loops[static_cast<size_t>(i)] >> l & 1)) return 0;
  if (n.op == IndexOp::kVar) return 1;
  if (n.op != IndexOp::kSum) return kNonAffine;
  int64_t c = 0;
  for (const auto& [t, k] : n.terms) {
    const int64_t ct = affine_coef(st, index_loops, t, l);
    if (ct == kNonAffine) return kNonAffine;
    c += k * ct;
  }
  return c;
}

bool is_index_atom(const IndexNode& n) {
  return n.op == IndexOp::kDiv || n.op == IndexOp::kMod || n.op == IndexOp::kTable || n.op == IndexOp::kMin ||
         n.op == IndexOp::kMax;
}

bool index_contains(const Stage& st, int root, int i) {
  if (root == i) return true;
  const IndexNode& n = st.index[static_cast<size_t>(root)];
  for (const auto& [t, c] : n.terms)
    if (index_contains(st, t, i)) return true;
  return (n.a >= 0 && index_contains(st, n.a, i)) || (n.b >= 0 && index_contains(st, n.b, i));
}

TransposeTile find_transpose_tile(const Stage& st, const std::vector<uint64_t>& index_loops,
                                  const std::vector<char>& needed) {
  TransposeTile tile;
  const int L = static_cast<int>(st.loops.size());
  if (st.is_reduction || L < 2) return tile;
  const int inner = L - 1;
  // Cache line: 64 bytes; a stride of 16 elements or more (f32) touches a new line per iteration.
  constexpr int64_t kLineElements = 16;
  if (st.loops[static_cast<size_t>(inner)].extent < 2 * tile.cols) return tile;
  for (const Store& s : st.stores)
    if (affine_coef(st, index_loops, s.index, inner) != 1) return tile;
  for (size_t e = 0; e < st.exprs.size(); ++e) {
    const ExprNode& n = st.exprs[e];
    if (!needed[e] || n.op != ExprOp::kLoad) continue;
    const int64_t c = affine_coef(st, index_loops, n.index, inner);
    if (c == kNonAffine || (c < kLineElements && c > -kLineElements)) continue;
    for (int m = inner - 1; m >= 0; --m) {
      if (st.loops[static_cast<size_t>(m)].extent >= tile.cols && affine_coef(st, index_loops, n.index, m) == 1) {
        tile.outer = m;
        tile.inner = inner;
        return tile;
      }
    }
  }
  return tile;
}

std::string canonical_index(const Stage& st, int id) {
  const IndexNode& n = st.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst:
      return std::to_string(n.value);
    case IndexOp::kVar:
      return fmt::format("i{}", n.value);
    case IndexOp::kSum: {
      std::string s = "(";
      for (const auto& [t, c] : n.terms) s += fmt::format("{}*{}+", c, canonical_index(st, t));
      return s + std::to_string(n.value) + ")";
    }
    case IndexOp::kDiv:
      return fmt::format("({}/{})", canonical_index(st, n.a), n.value);
    case IndexOp::kMod:
      return fmt::format("({}%{})", canonical_index(st, n.a), n.value);
    case IndexOp::kMin:
      return fmt::format("min({},{})", canonical_index(st, n.a), canonical_index(st, n.b));
    case IndexOp::kMax:
      return fmt::format("max({},{})", canonical_index(st, n.a), canonical_index(st, n.b));
    case IndexOp::kTable:
      return fmt::format("T{}[{}]", n.value, canonical_index(st, n.a));
  }
  return "?";
}

}  // namespace korch::loop
