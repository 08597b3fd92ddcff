// Index expressions of a loop-kernel stage: construction in normal form with range analysis
// (see loop_kernel_internal.h for the rules and why they matter).
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "codegen/loop_kernel_internal.h"
#include "support/error.h"

namespace korch::loop {

namespace {

int64_t floor_div(int64_t a, int64_t k) {
  int64_t q = a / k;
  if ((a % k != 0) && ((a < 0) != (k < 0))) --q;
  return q;
}
int64_t pos_mod(int64_t a, int64_t k) { return a - floor_div(a, k) * k; }

}  // namespace

int StageBuilder::intern_index(IndexNode n) {
  std::string key = fmt::format("{}|{}|{}|{}", static_cast<int>(n.op), n.value, n.a, n.b);
  for (const auto& [t, c] : n.terms) key += fmt::format("|{}*{}", t, c);
  auto it = index_ids_.find(key);
  if (it != index_ids_.end()) return it->second;
  int id = static_cast<int>(st_.index.size());
  st_.index.push_back(std::move(n));
  index_ids_.emplace(std::move(key), id);
  return id;
}

int StageBuilder::ix_const(int64_t c) {
  IndexNode n;
  n.op = IndexOp::kConst;
  n.value = c;
  n.lo = n.hi = c;
  return intern_index(std::move(n));
}

int StageBuilder::ix_var(int loop) {
  KORCH_CHECK(loop >= 0 && loop < static_cast<int>(st_.loops.size()), "loop variable {} out of range", loop);
  const int64_t extent = st_.loops[static_cast<size_t>(loop)].extent;
  if (extent == 1) return ix_const(0);
  IndexNode n;
  n.op = IndexOp::kVar;
  n.value = loop;
  n.lo = 0;
  n.hi = std::max<int64_t>(extent - 1, 0);
  n.level = loop;
  return intern_index(std::move(n));
}

void StageBuilder::expand(int a, int64_t coef, std::map<int, int64_t>& terms, int64_t& c) const {
  const IndexNode& n = ix(a);
  if (n.op == IndexOp::kConst) {
    c += coef * n.value;
  } else if (n.op == IndexOp::kSum) {
    c += coef * n.value;
    for (const auto& [t, tc] : n.terms) terms[t] += coef * tc;
  } else {
    terms[a] += coef;
  }
}

int StageBuilder::make_sum(std::map<int, int64_t> terms, int64_t c) {
  // Recombination, repeated until nothing changes (c: the mod term's coefficient):
  //   c*k*(x div k)        + c*(x mod k) -> c*x
  //   c*k*((x div k) mod m) + c*(x mod k) -> c*(x mod k*m)
  //   c*m*(x div k*m)      + c*((x div k) mod m) -> c*(x div k)
  // (what a reshape followed by its inverse reduces to).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto it = terms.begin(); it != terms.end() && !changed; ++it) {
      if (it->second == 0) continue;
      const IndexNode& m = ix(it->first);
      if (m.op != IndexOp::kMod) continue;
      const int64_t coef = it->second, k = m.value;
      const int x = m.a;
      const IndexNode& xn = ix(x);
      for (auto jt = terms.begin(); jt != terms.end(); ++jt) {
        if (jt == it || jt->second == 0) continue;
        const IndexNode& d = ix(jt->first);
        int replacement = -1;
        int64_t rcoef = coef;
        if (d.op == IndexOp::kDiv && d.a == x && d.value == k && jt->second == coef * k) {
          replacement = x;
        } else if (d.op == IndexOp::kMod && jt->second == coef * k && ix(d.a).op == IndexOp::kDiv &&
                   ix(d.a).a == x && ix(d.a).value == k) {
          const int64_t mm = d.value;
          it->second = 0;
          jt->second = 0;
          replacement = ix_mod(x, k * mm);
        } else if (xn.op == IndexOp::kDiv && d.op == IndexOp::kDiv && d.a == xn.a && d.value == xn.value * k &&
                   jt->second == coef * k) {
          replacement = x;
        }
        if (replacement < 0) continue;
        it->second = 0;
        jt->second = 0;
        expand(replacement, rcoef, terms, c);
        changed = true;
        break;
      }
    }
  }
  IndexNode n;
  n.op = IndexOp::kSum;
  n.value = c;
  n.lo = n.hi = c;
  for (const auto& [t, coef] : terms) {
    if (coef == 0) continue;
    const IndexNode& a = ix(t);
    n.terms.emplace_back(t, coef);
    n.lo += coef > 0 ? coef * a.lo : coef * a.hi;
    n.hi += coef > 0 ? coef * a.hi : coef * a.lo;
    n.level = std::max(n.level, a.level);
  }
  if (n.terms.empty()) return ix_const(c);
  if (n.terms.size() == 1 && n.terms[0].second == 1 && c == 0) return n.terms[0].first;
  return intern_index(std::move(n));
}

int StageBuilder::ix_add(int a, int b) {
  std::map<int, int64_t> terms;
  int64_t c = 0;
  expand(a, 1, terms, c);
  expand(b, 1, terms, c);
  return make_sum(std::move(terms), c);
}

int StageBuilder::ix_add_const(int a, int64_t k) {
  std::map<int, int64_t> terms;
  int64_t c = k;
  expand(a, 1, terms, c);
  return make_sum(std::move(terms), c);
}

int StageBuilder::ix_mul(int a, int64_t k) {
  std::map<int, int64_t> terms;
  int64_t c = 0;
  expand(a, k, terms, c);
  return make_sum(std::move(terms), c);
}

int StageBuilder::ix_div(int a, int64_t k) {
  KORCH_CHECK(k >= 1, "index division by {}", k);
  if (k == 1) return a;
  const IndexNode& n = ix(a);
  if (n.op == IndexOp::kConst) return ix_const(floor_div(n.value, k));
  if (n.op == IndexOp::kDiv) return ix_div(n.a, n.value * k);
  std::map<int, int64_t> terms, q, r;
  int64_t c = 0;
  expand(a, 1, terms, c);
  for (const auto& [t, coef] : terms) {
    if (coef % k == 0) q[t] = coef / k;
    else r[t] = coef;
  }
  const int64_t cq = floor_div(c, k), cr = c - cq * k;
  const int rem = make_sum(r, cr);
  const IndexNode& rn = ix(rem);
  const int64_t mlo = floor_div(rn.lo, k), mhi = floor_div(rn.hi, k);
  if (mlo == mhi) return make_sum(std::move(q), cq + mlo);
  int big, small;
  if (const int64_t g = gcd_split(r, cr, k, &big, &small); g > 1)  // (g*B + s) div g*m = B div m
    return ix_add(make_sum(std::move(q), cq), ix_div(big, k / g));
  IndexNode d;
  d.op = IndexOp::kDiv;
  d.value = k;
  d.a = rem;
  d.lo = mlo;
  d.hi = mhi;
  d.level = rn.level;
  const int atom = intern_index(std::move(d));
  q[atom] += 1;
  return make_sum(std::move(q), cq);
}

int64_t StageBuilder::gcd_split(const std::map<int, int64_t>& terms, int64_t c, int64_t k, int* big, int* small) {
  // Try g = gcd(k, coefficient) for each term: the terms whose coefficients g divides form g*B,
  // the rest s; when 0 <= s < g, dividing by k = g*m only needs B.
  for (const auto& [t, coef] : terms) {
    const int64_t g = std::gcd(k, coef < 0 ? -coef : coef);
    if (g <= 1 || g == k) continue;
    std::map<int, int64_t> bt, st;
    for (const auto& [t2, c2] : terms) {
      if (c2 % g == 0) bt[t2] = c2 / g;
      else st[t2] = c2;
    }
    const int s = make_sum(std::move(st), pos_mod(c, g));
    if (ix(s).lo < 0 || ix(s).hi >= g) continue;
    *small = s;
    *big = make_sum(std::move(bt), floor_div(c, g));
    return g;
  }
  return 1;
}

int StageBuilder::ix_mod(int a, int64_t k) {
  KORCH_CHECK(k >= 1, "index modulo by {}", k);
  if (k == 1) return ix_const(0);
  const IndexNode& n = ix(a);
  if (n.op == IndexOp::kConst) return ix_const(pos_mod(n.value, k));
  if (n.op == IndexOp::kMod && n.value % k == 0) return ix_mod(n.a, k);
  std::map<int, int64_t> terms, r;
  int64_t c = 0;
  expand(a, 1, terms, c);
  for (const auto& [t, coef] : terms)
    if (pos_mod(coef, k) != 0) r[t] = pos_mod(coef, k);
  const int rem = make_sum(r, pos_mod(c, k));
  const IndexNode& rn = ix(rem);
  const int64_t mlo = floor_div(rn.lo, k), mhi = floor_div(rn.hi, k);
  if (mlo == mhi) return ix_add_const(rem, -mlo * k);
  int big, small;
  if (const int64_t g = gcd_split(r, pos_mod(c, k), k, &big, &small); g > 1)  // (g*B + s) mod g*m = g*(B mod m) + s
    return ix_add(ix_mul(ix_mod(big, k / g), g), small);
  IndexNode m;
  m.op = IndexOp::kMod;
  m.value = k;
  m.a = rem;
  m.lo = 0;
  m.hi = k - 1;
  m.level = rn.level;
  return intern_index(std::move(m));
}

int StageBuilder::ix_min(int a, int b) {
  const IndexNode &x = ix(a), &y = ix(b);
  if (x.hi <= y.lo) return a;
  if (y.hi <= x.lo) return b;
  IndexNode n;
  n.op = IndexOp::kMin;
  n.a = std::min(a, b);
  n.b = std::max(a, b);
  n.lo = std::min(x.lo, y.lo);
  n.hi = std::min(x.hi, y.hi);
  n.level = std::max(x.level, y.level);
  return intern_index(std::move(n));
}

int StageBuilder::ix_max(int a, int b) {
  const IndexNode &x = ix(a), &y = ix(b);
  if (x.lo >= y.hi) return a;
  if (y.lo >= x.hi) return b;
  IndexNode n;
  n.op = IndexOp::kMax;
  n.a = std::min(a, b);
  n.b = std::max(a, b);
  n.lo = std::max(x.lo, y.lo);
  n.hi = std::max(x.hi, y.hi);
  n.level = std::max(x.level, y.level);
  return intern_index(std::move(n));
}

int StageBuilder::ix_table(int table, int a) {
  const Table& t = kc_.k.tables[static_cast<size_t>(table)];
  const IndexNode& x = ix(a);
  // Ranges over-approximate, so the index may look wider than the table; the values it takes are
  // inside (every table index the builder makes is).
  const int64_t lo = std::max<int64_t>(x.lo, 0), hi = std::min<int64_t>(x.hi, static_cast<int64_t>(t.values.size()) - 1);
  KORCH_CHECK(lo <= hi, "table index range [{}, {}] outside a table of {}", x.lo, x.hi, t.values.size());
  if (lo == hi) return ix_const(t.values[static_cast<size_t>(lo)]);
  IndexNode n;
  n.op = IndexOp::kTable;
  n.value = table;
  n.a = a;
  n.lo = *std::min_element(t.values.begin() + lo, t.values.begin() + hi + 1);
  n.hi = *std::max_element(t.values.begin() + lo, t.values.begin() + hi + 1);
  n.level = x.level;
  return intern_index(std::move(n));
}

int StageBuilder::flat_index(const std::vector<int>& idx, const Shape& shape) {
  KORCH_CHECK(idx.size() == shape.size(), "index of rank {} for shape {}", idx.size(), shape_str(shape));
  std::map<int, int64_t> terms;
  int64_t c = 0, stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    expand(idx[d], stride, terms, c);
    stride *= shape[d];
  }
  return make_sum(std::move(terms), c);
}

std::vector<int> StageBuilder::unflatten(int flat, const Shape& shape) {
  std::vector<int> out(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    out[d] = shape[d] == 1 ? ix_const(0) : ix_mod(ix_div(flat, stride), shape[d]);
    stride *= shape[d];
  }
  return out;
}

}  // namespace korch::loop
