// Index-set splitting of a pointwise stage's innermost loop (loop_kernel_internal.h).
//
// Where a layout op picks between sources or folds an index back (Concat's inputs along the
// innermost axis, Pad's borders, reflect/edge padding), the innermost loop computes every branch
// and clamps every index per element: selects, min/max and mod at the vector level, and loads
// that are gathers instead of contiguous vectors. Those expressions change form only at a few
// positions of the innermost loop variable; on each interval between them the range analysis of
// the index builder folds them away (an in-range test becomes a constant, a select one of its
// arms, a clamp the identity). This file finds those positions.
#include <algorithm>
#include <optional>
#include <set>

#include "codegen/loop_kernel_internal.h"

namespace korch::loop {

namespace {

struct Affine {
  int64_t slope = 0, offset = 0;  // slope * v + offset, v the innermost loop variable
};

struct Walk {
  std::vector<char> expr, index;
};

// Index and expression nodes the stores reach.
Walk reachable(const Stage& st) {
  Walk w{std::vector<char>(st.exprs.size(), 0), std::vector<char>(st.index.size(), 0)};
  std::vector<int> es, is;
  for (const Store& s : st.stores) {
    es.push_back(s.value);
    is.push_back(s.index);
  }
  while (!es.empty()) {
    const int e = es.back();
    es.pop_back();
    if (e < 0 || w.expr[static_cast<size_t>(e)]) continue;
    w.expr[static_cast<size_t>(e)] = 1;
    const ExprNode& n = st.exprs[static_cast<size_t>(e)];
    for (int a : n.args) es.push_back(a);
    if (n.index >= 0) is.push_back(n.index);
  }
  while (!is.empty()) {
    const int i = is.back();
    is.pop_back();
    if (i < 0 || w.index[static_cast<size_t>(i)]) continue;
    w.index[static_cast<size_t>(i)] = 1;
    const IndexNode& n = st.index[static_cast<size_t>(i)];
    for (const auto& [t, c] : n.terms) is.push_back(t);
    is.push_back(n.a);
    is.push_back(n.b);
  }
  return w;
}

// The node as slope * v + offset in the innermost variable alone (no other loop variable).
std::optional<Affine> affine(const Stage& st, int id, int inner) {
  const IndexNode& n = st.index[static_cast<size_t>(id)];
  switch (n.op) {
    case IndexOp::kConst: return Affine{0, n.value};
    case IndexOp::kVar:
      if (n.value == inner) return Affine{1, 0};
      return std::nullopt;
    case IndexOp::kSum: {
      Affine a{0, n.value};
      for (const auto& [t, c] : n.terms) {
        const auto at = affine(st, t, inner);
        if (!at) return std::nullopt;
        a.slope += c * at->slope;
        a.offset += c * at->offset;
      }
      return a;
    }
    default: return std::nullopt;
  }
}

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

int64_t inner_irregularity(const Stage& st) {
  if (st.loops.empty()) return 0;
  const int inner = static_cast<int>(st.loops.size()) - 1;
  const Walk w = reachable(st);
  int64_t count = 0;
  for (size_t i = 0; i < st.index.size(); ++i) {
    const IndexNode& n = st.index[i];
    if (!w.index[i] || n.level != inner) continue;
    count += n.op == IndexOp::kMin || n.op == IndexOp::kMax || n.op == IndexOp::kMod || n.op == IndexOp::kDiv ||
             n.op == IndexOp::kTable;
  }
  for (size_t e = 0; e < st.exprs.size(); ++e) {
    const ExprNode& n = st.exprs[e];
    if (w.expr[e] && n.op == ExprOp::kInRange && st.index[static_cast<size_t>(n.index)].level == inner) ++count;
  }
  return count;
}

std::vector<int64_t> inner_split_points(const Stage& st) {
  std::set<int64_t> points;
  if (st.loops.empty()) return {};
  const int inner = static_cast<int>(st.loops.size()) - 1;
  const int64_t extent = st.loops.back().extent;
  const Walk w = reachable(st);
  // v >= p for an integer v: the first position on the far side of a change at real position x.
  auto at = [&](int64_t num, int64_t den) {  // ceil(num / den), den > 0
    points.insert(-floor_div(-num, den));
  };
  for (size_t e = 0; e < st.exprs.size(); ++e) {
    const ExprNode& n = st.exprs[e];
    if (!w.expr[e] || n.op != ExprOp::kInRange) continue;
    const auto a = affine(st, n.index, inner);
    if (!a || a->slope == 0) continue;
    // lo <= s v + o < hi changes where s v + o crosses lo and hi.
    for (int64_t bound : {n.ivalue, n.ivalue2}) {
      if (a->slope > 0) at(bound - a->offset, a->slope);
      else at(a->offset - bound + 1, -a->slope);
    }
  }
  // min/max and mod/div after the tests: a clamp usually changes form where a test already cuts.
  std::set<int64_t> folds;
  for (size_t i = 0; i < st.index.size(); ++i) {
    const IndexNode& n = st.index[i];
    if (!w.index[i] || n.level != inner) continue;
    if (n.op == IndexOp::kMin || n.op == IndexOp::kMax) {
      const auto x = affine(st, n.a, inner), y = affine(st, n.b, inner);
      if (!x || !y || x->slope == y->slope) continue;
      // x - y = ds v + dc changes sign at v* = -dc / ds. Either side folds it, and so does a
      // closed side: a crossing at an integer may go to either piece, so a cut at v* or v* + 1
      // that is already there serves.
      int64_t ds = x->slope - y->slope, dc = x->offset - y->offset;
      if (ds < 0) {
        ds = -ds;
        dc = -dc;
      }
      if (dc % ds == 0) {
        const int64_t v = -dc / ds;
        if (!points.count(v) && !points.count(v + 1)) folds.insert(v);
      } else {
        folds.insert(-floor_div(dc, ds));  // ceil(-dc / ds)
      }
    } else if (n.op == IndexOp::kMod || n.op == IndexOp::kDiv) {
      const auto x = affine(st, n.a, inner);
      if (!x || x->slope != 1) continue;
      // s v + o crosses a multiple of k: only worth it for a handful of them.
      const int64_t k = n.value, first = -floor_div(-(x->offset), k) * k;
      if ((extent + x->offset - first) / k > 3) continue;
      for (int64_t m = first; m < extent + x->offset; m += k) folds.insert(m - x->offset);
    }
  }
  points.insert(folds.begin(), folds.end());
  std::vector<int64_t> out;
  for (int64_t p : points)
    if (p > 0 && p < extent) out.push_back(p);
  return out;
}

}  // namespace korch::loop
