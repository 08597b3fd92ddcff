// Rewrite alternative "sparse_matmul_as_gathers": a MatMul whose constant operand has at most a
// few nonzeros per output position, as that many Gathers of the other operand, scaled and added.
//
// Why: fission lowers a linear or cubic Resize into one MatMul per axis with the axis's
// interpolation matrix (fission/layout.cc), a dense [n, m] constant of which only 2 (linear) or 4
// (cubic) entries per output position are nonzero. A library GEMM multiplies every zero: in
// segformer_b0's decode head the 64 -> 128 upsampling of 256 channels takes 2.8 ms as
// MatMul([256*128, 64] x [64, 128]), where the taps it needs are 32 times fewer multiply-adds and
// the kernel could run at memory speed. Whether the gathers win depends on K, the layout and what
// fuses around them (a GEMM with K = 4 is cheap), so the rule is a choice the orchestrator prices.
//
//   y = MatMul(x[.., K], W[K, N])   every column j of W has nonzeros at rows r_0(j) < r_1(j) < ..
//   -> y = Mul(Gather(x, r_0, axis -1), E(w_0)) + Mul(Gather(x, r_1, axis -1), E(w_1)) + ..
//      w_t[j] = W[r_t(j), j]; a column with fewer nonzeros repeats its last row with weight 0
//      (as the GEMM, it multiplies that entry by 0); E(w) broadcasts the [N] weights to y's shape
//   y = MatMul(A[N, K], x[.., K, M])   (the left form: the row i of A has the nonzeros)
//   -> Gather along axis -2 of x, weights [N, 1] broadcast the same way
//   Two taps whose weights add up to 1 everywhere (linear interpolation; clamped edges too):
//   -> y = g_1 + (g_0 - g_1) * E(w_0)   (one Expand fewer: 6 primitives instead of 7)
//
// Matched: A or W a float32/float64 constant of rank 2, the other operand not constant and of the
// same dtype (rank >= 1 on the right form's left, >= 2 on the left form's right), at most
// kMaxTaps nonzeros in every column (row), fewer taps than K, and at most 2^16 output positions
// (the loop emitter bakes Gather indices into the kernel). Summed in the operand's type, tap by
// tap: the GEMM sums the same products in another order (relative difference ~1e-7 in f32).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "rewrite/alternatives.h"
#include "support/error.h"

namespace korch {

namespace {

constexpr int64_t kMaxTaps = 4;

struct Taps {
  std::vector<std::vector<int64_t>> rows;    // [tap][output position]: the index gathered
  std::vector<std::vector<double>> weights;  // [tap][output position]
};

// The nonzeros of W[K, N] per column j (transposed: of A[N, K] per row), as taps; nullopt when
// some column has more than kMaxTaps or all of them are zero.
std::optional<Taps> taps_of(const Tensor& w, bool rows_are_outputs) {
  const int64_t k = rows_are_outputs ? w.dim(1) : w.dim(0), n = rows_are_outputs ? w.dim(0) : w.dim(1);
  std::vector<std::vector<std::pair<int64_t, double>>> nz(static_cast<size_t>(n));
  size_t most = 0;
  for (int64_t j = 0; j < n; ++j) {
    auto& col = nz[static_cast<size_t>(j)];
    for (int64_t r = 0; r < k; ++r) {
      const double v = w.get_as_double(rows_are_outputs ? j * k + r : r * n + j);
      if (v == 0) continue;
      if (static_cast<int64_t>(col.size()) == kMaxTaps) return std::nullopt;
      col.push_back({r, v});
    }
    most = std::max(most, col.size());
  }
  if (most == 0) return std::nullopt;
  Taps t;
  t.rows.assign(most, std::vector<int64_t>(static_cast<size_t>(n)));
  t.weights.assign(most, std::vector<double>(static_cast<size_t>(n)));
  for (size_t j = 0; j < static_cast<size_t>(n); ++j)
    for (size_t s = 0; s < most; ++s) {
      const auto& col = nz[j];
      const bool have = s < col.size();
      t.rows[s][j] = have ? col[s].first : (col.empty() ? 0 : col.back().first);
      t.weights[s][j] = have ? col[s].second : 0.0;
    }
  return t;
}

// Two taps whose weights add up to 1 at every output position (a linear interpolation), up to the
// rounding of the constant's type (`eps`: a few ulps): then y = g1 + (g0 - g1) * w0, one
// broadcast weight instead of two (one primitive fewer, so the loop kernel has room for what
// fuses around it: segformer_b0's branch sums). It uses 1 - w0 for w1, a difference of that
// rounding, as the sum of products in another order would make.
bool is_lerp(const Taps& t, double eps) {
  if (t.rows.size() != 2) return false;
  for (size_t j = 0; j < t.weights[0].size(); ++j)
    if (std::abs(t.weights[0][j] + t.weights[1][j] - 1.0) > eps) return false;
  return true;
}

std::optional<AltMatch> match_sparse_matmul(const Graph& g, const UseInfo&, NodeId id) {
  const Node& n = g.nodes[static_cast<size_t>(id)];
  if (!n.domain.empty() || n.op_type != "MatMul" || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  const Tensor* right = constant_of(g, n.inputs[1]);
  const Tensor* left = constant_of(g, n.inputs[0]);
  if ((left != nullptr) == (right != nullptr)) return std::nullopt;  // exactly one constant operand
  const bool right_form = right != nullptr;
  const Tensor& w = right_form ? *right : *left;
  const ValueId x = n.inputs[right_form ? 0 : 1], y = n.outputs[0];
  const TensorType xt = g.type(x), yt = g.type(y);
  if ((xt.dtype != DType::kFloat32 && xt.dtype != DType::kFloat64) || w.dtype() != xt.dtype || w.rank() != 2 ||
      xt.rank() < (right_form ? 1 : 2) || yt.dtype != xt.dtype)
    return std::nullopt;
  const int64_t k = right_form ? w.dim(0) : w.dim(1), outs = right_form ? w.dim(1) : w.dim(0);
  if (outs > (int64_t{1} << 16)) return std::nullopt;
  std::optional<Taps> taps = taps_of(w, !right_form);
  if (!taps || static_cast<int64_t>(taps->rows.size()) >= k) return std::nullopt;
  const int64_t axis = xt.rank() - (right_form ? 1 : 2);
  const bool lerp = is_lerp(*taps, xt.dtype == DType::kFloat32 ? 4.0 * 0x1p-24 : 4.0 * 0x1p-53);
  AltMatch m;
  m.nodes = {id};
  m.description = fmt::format("MatMul({}{}, {} taps of {} in a {}) -> {} Gathers along axis {}, {}",
                              right_form ? type_str(xt) : fmt::format("[{},{}]", outs, k),
                              right_form ? fmt::format(", [{},{}]", k, outs) : ", " + type_str(xt), taps->rows.size(),
                              k, right_form ? "column" : "row", taps->rows.size(), axis,
                              lerp ? "interpolated" : "scaled and added");
  const Shape weight_shape = right_form ? Shape{outs} : Shape{outs, 1};
  m.rewrite = [x, y, axis, weight_shape, yt, lerp, t = std::move(*taps)](Graph& h) {
    Rewriter rw(h);
    auto gather = [&](size_t s) {
      const ValueId idx = rw.add_constant(
          "sparse_matmul/rows", Tensor::from_vector<int64_t>(t.rows[s], {static_cast<int64_t>(t.rows[s].size())}));
      Attributes a;
      a.set("axis", axis);
      return rw.append_node("Gather", {x, idx}, a)[0];
    };
    auto weights = [&](size_t s) {  // tap s's weights broadcast to y's shape
      Tensor wt(yt.dtype, weight_shape);
      dispatch_dtype<float, double>(yt.dtype, "sparse_matmul_as_gathers", [&](auto tag) {
        using T = decltype(tag);
        T* d = wt.data<T>();
        for (size_t j = 0; j < t.weights[s].size(); ++j) d[j] = static_cast<T>(t.weights[s][j]);
      });
      const ValueId w = rw.add_constant("sparse_matmul/weights", std::move(wt));
      return rw.append_node("Expand", {w, rw.int_list(yt.shape)})[0];
    };
    ValueId sum = kNoValue;
    if (lerp) {  // g1 + (g0 - g1) * w0
      const ValueId g0 = gather(0), g1 = gather(1);
      const ValueId d = rw.append_node("Sub", {g0, g1})[0];
      sum = rw.append_node("Add", {g1, rw.append_node("Mul", {d, weights(0)})[0]})[0];
    }
    for (size_t s = 0; !lerp && s < t.rows.size(); ++s) {
      const ValueId term = rw.append_node("Mul", {gather(s), weights(s)})[0];
      sum = sum == kNoValue ? term : rw.append_node("Add", {sum, term})[0];
    }
    KORCH_CHECK(rw.replace(y, sum), "sparse_matmul_as_gathers: cannot replace {}", type_str(yt));
    rw.finish();
  };
  return m;
}

}  // namespace

const std::vector<AlternativeFamily>& sparse_matmul_alternative_families() {
  static const std::vector<AlternativeFamily> f = {{"sparse_matmul_as_gathers", match_sparse_matmul}};
  return f;
}

}  // namespace korch
