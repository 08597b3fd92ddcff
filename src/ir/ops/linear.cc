// Linear-algebra operators: MatMul, Gemm, Einsum, Conv, ConvTranspose, plus the shared blocked
// GEMM kernel they all run on.
//
// The GEMM is the interpreter's hot spot (convolutions are im2col + GEMM): a BLIS-style
// blocked kernel in plain C++. A is packed into MR-row panels, B into NR-column panels, and an
// MR x NR micro-kernel keeps its accumulators in a local array the compiler maps to vector
// registers. OpenMP parallelises over (batch, row block, column block) tiles. Floating-point
// types accumulate in their own type (fp32 in/out); integer types take a plain loop.
#include <algorithm>
#include <cstring>

#include "ir/ops/op_util.h"

namespace korch {
namespace linear_detail {

// C[b] (+)= A[b] * B[b] for b < batch; row-major with leading dimensions. Batch b's operands start
// at a_offsets[b] (or b * a_stride when a_offsets is null), likewise for B and C.
template <typename T>
struct GemmArgs {
  int64_t M = 0, N = 0, K = 0;
  const T* A = nullptr;
  const T* B = nullptr;
  T* C = nullptr;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;  // C += A*B instead of C = A*B
  bool serial = false;      // run on the calling thread (caller parallelises)
  int64_t batch = 1;
  const int64_t* a_offsets = nullptr;
  const int64_t* b_offsets = nullptr;
  int64_t a_stride = 0, b_stride = 0, c_stride = 0;
  int64_t a_off(int64_t b) const { return a_offsets ? a_offsets[b] : b * a_stride; }
  int64_t b_off(int64_t b) const { return b_offsets ? b_offsets[b] : b * b_stride; }
  int64_t c_off(int64_t b) const { return b * c_stride; }
};

namespace {

template <typename T> struct Tile;
template <> struct Tile<float> { static constexpr int MR = 8, NR = 32, KC = 256, MC = 128, NC = 512; };
template <> struct Tile<double> { static constexpr int MR = 8, NR = 16, KC = 256, MC = 96, NC = 256; };

// C[mr x nr] (+)= Ap (kc x MR, k-major) * Bp (kc x NR, k-major).
template <typename T, int MR, int NR>
inline void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, T* __restrict c, int64_t ldc,
                         int mr, int nr, bool overwrite) {
  T acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = T(0);
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; ++k) {
    const T* a = ap + k * MR;
    const T* b = bp + k * NR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T av = a[i];
#pragma GCC unroll 32
      for (int j = 0; j < NR; ++j) acc[i][j] += av * b[j];
    }
  }
  if (mr == MR && nr == NR) {
    for (int i = 0; i < MR; ++i) {
      T* ci = c + i * ldc;
      if (overwrite)
        for (int j = 0; j < NR; ++j) ci[j] = acc[i][j];
      else
        for (int j = 0; j < NR; ++j) ci[j] += acc[i][j];
    }
  } else {
    for (int i = 0; i < mr; ++i) {
      T* ci = c + i * ldc;
      if (overwrite)
        for (int j = 0; j < nr; ++j) ci[j] = acc[i][j];
      else
        for (int j = 0; j < nr; ++j) ci[j] += acc[i][j];
    }
  }
}

// Packs A[m x k] (row-major, lda) into ceil(m/MR) panels of k x MR, zero-padding rows.
template <typename T, int MR>
void pack_a(int64_t m, int64_t k, const T* a, int64_t lda, T* out) {
  for (int64_t i0 = 0; i0 < m; i0 += MR) {
    int64_t mr = std::min<int64_t>(MR, m - i0);
    for (int64_t p = 0; p < k; ++p) {
      T* o = out + p * MR;
      int64_t i = 0;
      for (; i < mr; ++i) o[i] = a[(i0 + i) * lda + p];
      for (; i < MR; ++i) o[i] = T(0);
    }
    out += k * MR;
  }
}

// Packs B[k x n] (row-major, ldb) into ceil(n/NR) panels of k x NR, zero-padding columns.
template <typename T, int NR>
void pack_b(int64_t k, int64_t n, const T* b, int64_t ldb, T* out) {
  for (int64_t j0 = 0; j0 < n; j0 += NR) {
    int64_t nr = std::min<int64_t>(NR, n - j0);
    if (nr == NR) {
      for (int64_t p = 0; p < k; ++p) std::memcpy(out + p * NR, b + p * ldb + j0, sizeof(T) * NR);
    } else {
      for (int64_t p = 0; p < k; ++p) {
        T* o = out + p * NR;
        int64_t j = 0;
        for (; j < nr; ++j) o[j] = b[p * ldb + j0 + j];
        for (; j < NR; ++j) o[j] = T(0);
      }
    }
    out += k * NR;
  }
}

template <typename T>
void gemm_float(const GemmArgs<T>& g) {
  using TL = Tile<T>;
  constexpr int MR = TL::MR, NR = TL::NR;
  const int64_t M = g.M, N = g.N, K = g.K;
  if (M <= 0 || N <= 0 || g.batch <= 0) return;
  if (K <= 0) {
    if (!g.accumulate)
      for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) g.C[g.c_off(b) + i * g.ldc + j] = T(0);
    return;
  }
  const int64_t mt = (M + TL::MC - 1) / TL::MC, nt = (N + TL::NC - 1) / TL::NC;
  const int64_t tasks = g.batch * mt * nt;
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) *
                       static_cast<double>(g.batch);
#pragma omp parallel if (!g.serial && tasks > 1 && flops > 2e5)
  {
    std::vector<T> abuf(static_cast<size_t>(TL::MC) * TL::KC), bbuf(static_cast<size_t>(TL::NC) * TL::KC);
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / (mt * nt), rem = t % (mt * nt);
      const int64_t i0 = (rem / nt) * TL::MC, j0 = (rem % nt) * TL::NC;
      const int64_t mc = std::min<int64_t>(TL::MC, M - i0), nc = std::min<int64_t>(TL::NC, N - j0);
      const T* A = g.A + g.a_off(b);
      const T* B = g.B + g.b_off(b);
      T* C = g.C + g.c_off(b);
      for (int64_t p0 = 0; p0 < K; p0 += TL::KC) {
        const int64_t kc = std::min<int64_t>(TL::KC, K - p0);
        pack_a<T, MR>(mc, kc, A + i0 * g.lda + p0, g.lda, abuf.data());
        pack_b<T, NR>(kc, nc, B + p0 * g.ldb + j0, g.ldb, bbuf.data());
        const bool overwrite = p0 == 0 && !g.accumulate;
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
          const T* bp = bbuf.data() + (jr / NR) * kc * NR;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
            micro_kernel<T, MR, NR>(kc, abuf.data() + (ir / MR) * kc * MR, bp, C + (i0 + ir) * g.ldc + j0 + jr, g.ldc,
                                    mr, nr, overwrite);
          }
        }
      }
    }
  }
}

template <typename T>
void gemm_plain(const GemmArgs<T>& g) {
  using Acc = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
#pragma omp parallel for if (!g.serial && g.batch * g.M * g.N * g.K > 100000)
  for (int64_t t = 0; t < g.batch * g.M; ++t) {
    const int64_t b = t / g.M, i = t % g.M;
    const T* A = g.A + g.a_off(b) + i * g.lda;
    const T* B = g.B + g.b_off(b);
    T* C = g.C + g.c_off(b) + i * g.ldc;
    for (int64_t j = 0; j < g.N; ++j) {
      // Unsigned wrap-around arithmetic: well defined, equals two's complement results.
      uint64_t s = g.accumulate ? static_cast<uint64_t>(static_cast<Acc>(C[j])) : 0;
      for (int64_t p = 0; p < g.K; ++p)
        s += static_cast<uint64_t>(static_cast<Acc>(A[p])) * static_cast<uint64_t>(static_cast<Acc>(B[p * g.ldb + j]));
      C[j] = static_cast<T>(s);
    }
  }
}

}  // namespace

template <typename T>
void gemm(const GemmArgs<T>& g) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
    gemm_float<T>(g);
  else
    gemm_plain<T>(g);
}

bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }

Tensor to_f32_tensor(const Tensor& t) {
  Tensor out(DType::kFloat32, t.shape());
  float* o = out.data<float>();
  const int64_t n = t.numel();
  if (t.dtype() == DType::kFloat16) {
    const Float16* s = t.data<Float16>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
  } else {
    const BFloat16* s = t.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) o[i] = static_cast<float>(s[i]);
  }
  return out;
}

Tensor from_f32_tensor(const Tensor& t, DType dt) {
  Tensor out(dt, t.shape());
  const float* s = t.data<float>();
  const int64_t n = t.numel();
  if (dt == DType::kFloat16) {
    Float16* o = out.data<Float16>();
    for (int64_t i = 0; i < n; ++i) o[i] = Float16(s[i]);
  } else {
    BFloat16* o = out.data<BFloat16>();
    for (int64_t i = 0; i < n; ++i) o[i] = BFloat16(s[i]);
  }
  return out;
}

std::vector<Tensor> eval_via_f32(const OpEvalContext& ctx, const EvalFn& f32_eval) {
  std::vector<Tensor> conv;
  conv.reserve(ctx.inputs.size());
  std::vector<const Tensor*> ins;
  for (const Tensor* t : ctx.inputs) {
    if (t && is_half(t->dtype())) {
      conv.push_back(to_f32_tensor(*t));
      ins.push_back(&conv.back());
    } else {
      ins.push_back(t);
    }
  }
  std::vector<TensorType> types = ctx.output_types;
  for (TensorType& t : types)
    if (is_half(t.dtype)) t.dtype = DType::kFloat32;
  OpEvalContext c2{ctx.node, ctx.opset, ins, types};
  std::vector<Tensor> outs = f32_eval(c2);
  for (size_t i = 0; i < outs.size() && i < ctx.output_types.size(); ++i)
    if (is_half(ctx.output_types[i].dtype) && outs[i].defined()) outs[i] = from_f32_tensor(outs[i], ctx.output_types[i].dtype);
  return outs;
}

}  // namespace linear_detail

namespace {

using linear_detail::GemmArgs;

// ---------------------------------------------------------------------------------------------
// MatMul

struct MatMulShape {
  Shape batch, out;
  int64_t M = 0, K = 0, N = 0;
  Shape a_batch, b_batch;
};

MatMulShape matmul_shape(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) fail("MatMul operands must have rank >= 1, got {} and {}", shape_str(a), shape_str(b));
  MatMulShape s;
  Shape a2 = a, b2 = b;
  if (a2.size() == 1) a2.insert(a2.begin(), 1);
  if (b2.size() == 1) b2.push_back(1);
  s.M = a2[a2.size() - 2];
  s.K = a2.back();
  s.N = b2.back();
  if (b2[b2.size() - 2] != s.K)
    fail("MatMul inner dimensions differ: {} x {} ({} vs {})", shape_str(a), shape_str(b), s.K, b2[b2.size() - 2]);
  s.a_batch.assign(a2.begin(), a2.end() - 2);
  s.b_batch.assign(b2.begin(), b2.end() - 2);
  s.batch = broadcast_shapes(s.a_batch, s.b_batch);
  s.out = s.batch;
  if (a.size() != 1) s.out.push_back(s.M);
  if (b.size() != 1) s.out.push_back(s.N);
  return s;
}

std::vector<TensorType> infer_matmul(const OpInferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.dtype != b.dtype) fail("MatMul operands have different types {} and {}", dtype_name(a.dtype), dtype_name(b.dtype));
  return ops::one(a.dtype, matmul_shape(a.shape, b.shape).out);
}

// Batched matmul over broadcast batch dims of row-major operands.
template <typename T>
void run_matmul(const T* a, const T* b, T* c, const MatMulShape& s) {
  const int64_t nb = shape_numel(s.batch);
  GemmArgs<T> g;
  g.M = s.M;
  g.N = s.N;
  g.K = s.K;
  g.lda = s.K;
  g.ldb = s.N;
  g.ldc = s.N;
  g.A = a;
  g.B = b;
  g.C = c;
  if (shape_numel(s.b_batch) == 1 && shape_numel(s.a_batch) == nb) {
    // B shared by every batch: one tall GEMM.
    g.M = s.M * nb;
    linear_detail::gemm(g);
    return;
  }
  std::vector<int64_t> ao(static_cast<size_t>(nb)), bo(static_cast<size_t>(nb));
  auto as = ops::broadcast_strides(s.a_batch, s.batch), bs = ops::broadcast_strides(s.b_batch, s.batch);
  ops::for_each_broadcast(s.batch, {as, bs}, [&](int64_t i, const std::vector<int64_t>& off) {
    ao[static_cast<size_t>(i)] = off[0] * s.M * s.K;
    bo[static_cast<size_t>(i)] = off[1] * s.K * s.N;
  });
  g.batch = nb;
  g.a_offsets = ao.data();
  g.b_offsets = bo.data();
  g.c_stride = s.M * s.N;
  linear_detail::gemm(g);
}

std::vector<Tensor> eval_matmul(const OpEvalContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (linear_detail::is_half(a.dtype())) return linear_detail::eval_via_f32(ctx, eval_matmul);
  MatMulShape s = matmul_shape(a.shape(), b.shape());
  Tensor out(ctx.output_type(0));
  dispatch_dtype<KORCH_NUMERIC_TYPES>(a.dtype(), "MatMul", [&](auto tag) {
    using T = decltype(tag);
    run_matmul<T>(a.data<T>(), b.data<T>(), out.data<T>(), s);
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// Gemm: Y = alpha * A' * B' + beta * C

std::vector<TensorType> infer_gemm(const OpInferContext& ctx) {
  const TensorType& a = ctx.input(0);
  const TensorType& b = ctx.input(1);
  if (a.rank() != 2 || b.rank() != 2) fail("Gemm inputs A and B must be 2-D, got {} and {}", shape_str(a.shape), shape_str(b.shape));
  if (a.dtype != b.dtype) fail("Gemm inputs have different types {} and {}", dtype_name(a.dtype), dtype_name(b.dtype));
  const bool ta = ctx.attrs().get_int("transA", 0) != 0, tb = ctx.attrs().get_int("transB", 0) != 0;
  const int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1];
  const int64_t Kb = tb ? b.shape[1] : b.shape[0], N = tb ? b.shape[0] : b.shape[1];
  if (K != Kb) fail("Gemm inner dimensions differ: A' is {}x{}, B' is {}x{}", M, K, Kb, N);
  if (ctx.has_input(2)) {
    const TensorType& c = ctx.input(2);
    if (c.dtype != a.dtype) fail("Gemm input C has type {}, expected {}", dtype_name(c.dtype), dtype_name(a.dtype));
    if (c.rank() > 2) fail("Gemm input C must have rank <= 2, got {}", shape_str(c.shape));
    Shape y{M, N};
    for (size_t i = 0; i < c.shape.size(); ++i) {
      int64_t d = c.shape[c.shape.size() - 1 - i];
      if (d != 1 && d != y[1 - i]) fail("Gemm input C {} cannot be broadcast to [{},{}]", shape_str(c.shape), M, N);
    }
  } else if (ctx.opset < 11) {
    fail("Gemm input C is required before opset 11");
  }
  return ops::one(a.dtype, {M, N});
}

template <typename T>
void transpose2d(const T* in, int64_t rows, int64_t cols, T* out) {
  for (int64_t i0 = 0; i0 < rows; i0 += 32)
    for (int64_t j0 = 0; j0 < cols; j0 += 32)
      for (int64_t i = i0; i < std::min(rows, i0 + 32); ++i)
        for (int64_t j = j0; j < std::min(cols, j0 + 32); ++j) out[j * rows + i] = in[i * cols + j];
}

std::vector<Tensor> eval_gemm(const OpEvalContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (linear_detail::is_half(a.dtype())) return linear_detail::eval_via_f32(ctx, eval_gemm);
  const bool ta = ctx.attrs().get_int("transA", 0) != 0, tb = ctx.attrs().get_int("transB", 0) != 0;
  const double alpha = ctx.attrs().get_float("alpha", 1.0f), beta = ctx.attrs().get_float("beta", 1.0f);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  Tensor out(ctx.output_type(0));
  const int64_t M = out.dim(0), N = out.dim(1);
  const int64_t K = ta ? a.dim(0) : a.dim(1);
  dispatch_dtype<float, double, int32_t, int64_t, uint32_t, uint64_t>(a.dtype(), "Gemm", [&](auto tag) {
    using T = decltype(tag);
    const T* A = a.data<T>();
    const T* B = b.data<T>();
    std::vector<T> at, bt;
    if (ta) {
      at.resize(static_cast<size_t>(M * K));
      transpose2d(A, K, M, at.data());
      A = at.data();
    }
    if (tb) {
      bt.resize(static_cast<size_t>(K * N));
      transpose2d(B, N, K, bt.data());
      B = bt.data();
    }
    T* Y = out.data<T>();
    GemmArgs<T> g;
    g.M = M;
    g.N = N;
    g.K = K;
    g.A = A;
    g.lda = K;
    g.B = B;
    g.ldb = N;
    g.C = Y;
    g.ldc = N;
    linear_detail::gemm(g);
    const bool has_c = c && beta != 0.0;
    if (alpha == 1.0 && !has_c) return;
    const T* C = c ? c->data<T>() : nullptr;
    int64_t cs0 = 0, cs1 = 0;  // C strides over (M, N) after broadcasting
    if (c) {
      const Shape& cs = c->shape();
      if (cs.size() == 2) {
        cs0 = cs[0] == 1 ? 0 : cs[1];
        cs1 = cs[1] == 1 ? 0 : 1;
      } else if (cs.size() == 1) {
        cs1 = cs[0] == 1 ? 0 : 1;
      }
    }
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double v = alpha * static_cast<double>(Y[i * N + j]);
        if (has_c) v += beta * static_cast<double>(C[i * cs0 + j * cs1]);
        Y[i * N + j] = static_cast<T>(v);
      }
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// Einsum: a general index loop. Labels are letters; "..." expands to broadcast dimensions.

struct EinsumPlan {
  std::vector<int64_t> out_sizes, red_sizes;                // loop extents
  std::vector<std::vector<int64_t>> out_strides, red_strides;  // [operand][loop dim]
  Shape out_shape;
};

EinsumPlan plan_einsum(const std::string& equation, const std::vector<Shape>& shapes) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  std::string lhs = eq, rhs;
  const bool explicit_out = eq.find("->") != std::string::npos;
  if (explicit_out) {
    lhs = eq.substr(0, eq.find("->"));
    rhs = eq.substr(eq.find("->") + 2);
  }
  std::vector<std::string> terms;
  {
    size_t start = 0;
    for (;;) {
      size_t p = lhs.find(',', start);
      terms.push_back(lhs.substr(start, p == std::string::npos ? std::string::npos : p - start));
      if (p == std::string::npos) break;
      start = p + 1;
    }
  }
  if (terms.size() != shapes.size())
    fail("Einsum equation '{}' has {} operands but the node has {} inputs", equation, terms.size(), shapes.size());

  constexpr int kLetters = 52;
  static constexpr const char* kLabelChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  auto letter_id = [&](char ch) -> int {
    if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;  // ASCII order: upper case first
    if (ch >= 'A' && ch <= 'Z') return ch - 'A';
    fail("Einsum equation '{}' has invalid character '{}'", equation, ch);
  };
  // Parses a term into label ids (-1 marks the ellipsis position).
  auto parse_term = [&](const std::string& t) {
    std::vector<int> labels;
    bool ell = false;
    for (size_t i = 0; i < t.size(); ++i) {
      if (t[i] == '.') {
        if (ell || t.compare(i, 3, "...") != 0) fail("Einsum equation '{}' has a malformed ellipsis", equation);
        ell = true;
        labels.push_back(-1);
        i += 2;
      } else {
        labels.push_back(letter_id(t[i]));
      }
    }
    return labels;
  };

  // Ellipsis rank and per-operand dim labels (ellipsis dims get ids kLetters + j, right-aligned).
  std::vector<std::vector<int>> op_labels(shapes.size());
  int64_t ell_rank = 0;
  std::vector<std::vector<int>> parsed;
  for (size_t k = 0; k < shapes.size(); ++k) {
    parsed.push_back(parse_term(terms[k]));
    const auto& ls = parsed.back();
    const bool has_ell = std::find(ls.begin(), ls.end(), -1) != ls.end();
    const int64_t nlet = static_cast<int64_t>(ls.size()) - (has_ell ? 1 : 0);
    const int64_t rank = static_cast<int64_t>(shapes[k].size());
    if (has_ell ? rank < nlet : rank != nlet)
      fail("Einsum operand {} has shape {} but its subscripts '{}' name {} dimensions", k, shape_str(shapes[k]), terms[k],
           nlet);
    if (has_ell) ell_rank = std::max(ell_rank, rank - nlet);
  }
  for (size_t k = 0; k < shapes.size(); ++k) {
    const auto& ls = parsed[k];
    const int64_t rank = static_cast<int64_t>(shapes[k].size());
    for (int l : ls) {
      if (l >= 0) {
        op_labels[k].push_back(l);
      } else {
        const int64_t er = rank - (static_cast<int64_t>(ls.size()) - 1);
        for (int64_t j = 0; j < er; ++j) op_labels[k].push_back(kLetters + static_cast<int>(ell_rank - er + j));
      }
    }
  }
  const int nlabels = kLetters + static_cast<int>(ell_rank);
  std::vector<int64_t> size(static_cast<size_t>(nlabels), -1);
  std::vector<int> count(static_cast<size_t>(nlabels), 0);
  for (size_t k = 0; k < shapes.size(); ++k)
    for (size_t d = 0; d < op_labels[k].size(); ++d) {
      const int l = op_labels[k][d];
      const int64_t n = shapes[k][d];
      auto& s = size[static_cast<size_t>(l)];
      ++count[static_cast<size_t>(l)];
      if (l >= kLetters) {  // ellipsis dims broadcast
        if (s == -1 || s == 1) s = n;
        else if (n != 1 && n != s) fail("Einsum ellipsis dimensions {} and {} do not broadcast", s, n);
      } else {
        if (s == -1) s = n;
        else if (s != n) fail("Einsum label '{}' has inconsistent sizes {} and {}", kLabelChars[l], s, n);
      }
    }

  std::vector<int> out_labels;
  if (explicit_out) {
    std::vector<int> ls = parse_term(rhs);
    for (int l : ls) {
      if (l == -1) {
        for (int j = 0; j < ell_rank; ++j) out_labels.push_back(kLetters + j);
        continue;
      }
      if (size[static_cast<size_t>(l)] == -1) fail("Einsum output label in '{}' does not appear in any input", equation);
      if (std::find(out_labels.begin(), out_labels.end(), l) != out_labels.end())
        fail("Einsum output subscripts '{}' repeat a label", rhs);
      out_labels.push_back(l);
    }
  } else {
    for (int j = 0; j < ell_rank; ++j) out_labels.push_back(kLetters + j);
    for (int l = 0; l < kLetters; ++l)
      if (count[static_cast<size_t>(l)] == 1) out_labels.push_back(l);
  }
  std::vector<int> red_labels;
  for (int l = 0; l < nlabels; ++l)
    if (size[static_cast<size_t>(l)] != -1 && std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end())
      red_labels.push_back(l);

  EinsumPlan p;
  for (int l : out_labels) p.out_sizes.push_back(size[static_cast<size_t>(l)]);
  for (int l : red_labels) p.red_sizes.push_back(size[static_cast<size_t>(l)]);
  p.out_shape = p.out_sizes;
  for (size_t k = 0; k < shapes.size(); ++k) {
    std::vector<int64_t> st(static_cast<size_t>(nlabels), 0);
    std::vector<int64_t> rs = shape_strides(shapes[k]);
    for (size_t d = 0; d < op_labels[k].size(); ++d)
      if (shapes[k][d] != 1) st[static_cast<size_t>(op_labels[k][d])] += rs[d];
    std::vector<int64_t> os, rds;
    for (int l : out_labels) os.push_back(st[static_cast<size_t>(l)]);
    for (int l : red_labels) rds.push_back(st[static_cast<size_t>(l)]);
    p.out_strides.push_back(os);
    p.red_strides.push_back(rds);
  }
  return p;
}

std::vector<TensorType> infer_einsum(const OpInferContext& ctx) {
  if (ctx.num_inputs() < 1) fail("Einsum needs at least one input");
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input(i);
    if (t.dtype != ctx.input(0).dtype) fail("Einsum inputs have different types {} and {}", dtype_name(ctx.input(0).dtype), dtype_name(t.dtype));
    shapes.push_back(t.shape);
  }
  if (!ctx.attrs().has("equation")) fail("Einsum requires the 'equation' attribute");
  return ops::one(ctx.input(0).dtype, plan_einsum(ctx.attrs().get_string("equation", ""), shapes).out_shape);
}

template <typename T>
void run_einsum(const EinsumPlan& p, const std::vector<const T*>& in, T* out) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  const size_t nin = in.size();
  const int64_t nout = shape_numel(p.out_sizes);
  const int64_t nred = shape_numel(p.red_sizes);
  const size_t ro = p.out_sizes.size(), rr = p.red_sizes.size();
  // The innermost reduction loop runs over the last reduced label; an odometer walks the others.
  const int64_t inner = rr ? p.red_sizes[rr - 1] : 1;
  const int64_t outer_red = inner ? nred / inner : 0;
  std::vector<int64_t> inner_stride(nin, 0);
  for (size_t k = 0; k < nin; ++k) inner_stride[k] = rr ? p.red_strides[k][rr - 1] : 0;
#pragma omp parallel if (nout * nred > 200000)
  {
    std::vector<int64_t> idx(rr, 0), off(nin, 0);
#pragma omp for
    for (int64_t o = 0; o < nout; ++o) {
      for (size_t k = 0; k < nin; ++k) off[k] = 0;
      int64_t rem = o;
      for (size_t d = ro; d-- > 0;) {
        const int64_t i = rem % p.out_sizes[d];
        rem /= p.out_sizes[d];
        for (size_t k = 0; k < nin; ++k) off[k] += i * p.out_strides[k][d];
      }
      for (size_t d = 0; d < rr; ++d) idx[d] = 0;
      Acc acc = 0;
      for (int64_t r = 0; r < outer_red; ++r) {
        if (nin == 2) {
          const T* a = in[0] + off[0];
          const T* b = in[1] + off[1];
          const int64_t sa = inner_stride[0], sb = inner_stride[1];
          for (int64_t q = 0; q < inner; ++q) acc += static_cast<Acc>(a[q * sa]) * static_cast<Acc>(b[q * sb]);
        } else {
          for (int64_t q = 0; q < inner; ++q) {
            Acc v = 1;
            for (size_t k = 0; k < nin; ++k) v *= static_cast<Acc>(in[k][off[k] + q * inner_stride[k]]);
            acc += v;
          }
        }
        for (size_t d = rr >= 1 ? rr - 1 : 0; d-- > 0;) {
          if (++idx[d] < p.red_sizes[d]) {
            for (size_t k = 0; k < nin; ++k) off[k] += p.red_strides[k][d];
            break;
          }
          for (size_t k = 0; k < nin; ++k) off[k] -= p.red_strides[k][d] * (p.red_sizes[d] - 1);
          idx[d] = 0;
        }
      }
      out[o] = static_cast<T>(acc);
    }
  }
}

std::vector<Tensor> eval_einsum(const OpEvalContext& ctx) {
  if (linear_detail::is_half(ctx.input(0).dtype())) return linear_detail::eval_via_f32(ctx, eval_einsum);
  std::vector<Shape> shapes;
  for (int i = 0; i < ctx.num_inputs(); ++i) shapes.push_back(ctx.input(i).shape());
  EinsumPlan p = plan_einsum(ctx.attrs().get_string("equation", ""), shapes);
  Tensor out(ctx.output_type(0));
  dispatch_dtype<KORCH_NUMERIC_TYPES>(out.dtype(), "Einsum", [&](auto tag) {
    using T = decltype(tag);
    std::vector<const T*> in;
    for (int i = 0; i < ctx.num_inputs(); ++i) in.push_back(ctx.input(i).data<T>());
    run_einsum<T>(p, in, out.data<T>());
  });
  return {out};
}

// ---------------------------------------------------------------------------------------------
// Conv / ConvTranspose. Spatial dims (1..3) are padded at the front to 3 (extent 1, kernel 1), so
// one kernel covers 1-D, 2-D and 3-D.

struct ConvGeom {
  int64_t nsp = 0;                          // number of real spatial dims
  int64_t N = 0, C = 0, M = 0, group = 1;   // batch, input channels, output channels, groups
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t k_size() const { return k[0] * k[1] * k[2]; }
};

// Python-style floor division (the ONNX reference splits negative paddings this way).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::vector<int64_t> spatial_attr(const Attributes& attrs, const char* name, size_t n, int64_t def, int64_t min_value) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(n, def));
  if (v.size() != n) fail("attribute '{}' has {} values, expected {}", name, v.size(), n);
  for (int64_t x : v)
    if (x < min_value) fail("attribute '{}' has invalid value {} (must be >= {})", name, x, min_value);
  return v;
}

std::string auto_pad_attr(const Attributes& attrs) {
  std::string ap = attrs.get_string("auto_pad", "NOTSET");
  if (ap.empty()) ap = "NOTSET";
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    fail("attribute 'auto_pad' has invalid value '{}'", ap);
  return ap;
}

// Common validation of X, W and the shared attributes; fills everything but out/pads.
ConvGeom conv_common(const Attributes& attrs, const Shape& x, const Shape& w, bool transpose, const char* op) {
  if (x.size() < 3) fail("{} input X must have rank >= 3 (N, C, spatial...), got {}", op, shape_str(x));
  if (w.size() != x.size()) fail("{} weight W {} must have the same rank as X {}", op, shape_str(w), shape_str(x));
  ConvGeom g;
  g.nsp = static_cast<int64_t>(x.size()) - 2;
  if (g.nsp > 3) fail_unsupported("{} with {} spatial dimensions is not supported (at most 3)", op, g.nsp);
  const size_t n = static_cast<size_t>(g.nsp);
  g.group = attrs.get_int("group", 1);
  if (g.group < 1) fail("attribute 'group' must be >= 1, got {}", g.group);
  g.N = x[0];
  g.C = x[1];
  if (g.C % g.group != 0) fail("{} input channels {} are not divisible by group {}", op, g.C, g.group);
  if (!transpose) {
    if (w[1] * g.group != g.C)
      fail("{} weight W {} expects {} input channels per group, X {} has {} channels in {} groups", op, shape_str(w), w[1],
           shape_str(x), g.C, g.group);
    if (w[0] % g.group != 0) fail("{} output channels {} are not divisible by group {}", op, w[0], g.group);
    g.M = w[0];
  } else {
    if (w[0] != g.C) fail("{} weight W {} expects {} input channels, X {} has {}", op, shape_str(w), w[0], shape_str(x), g.C);
    g.M = w[1] * g.group;
  }
  std::vector<int64_t> ks(w.begin() + 2, w.end());
  if (attrs.has("kernel_shape") && attrs.get_ints("kernel_shape") != ks)
    fail("{} attribute kernel_shape {} does not match weight shape {}", op, shape_str(attrs.get_ints("kernel_shape")),
         shape_str(w));
  auto st = spatial_attr(attrs, "strides", n, 1, 1);
  auto dl = spatial_attr(attrs, "dilations", n, 1, 1);
  const size_t o = 3 - n;
  for (size_t i = 0; i < n; ++i) {
    g.in[o + i] = x[2 + i];
    g.k[o + i] = ks[i];
    g.s[o + i] = st[i];
    g.d[o + i] = dl[i];
  }
  return g;
}

std::vector<int64_t> pads_attr(const Attributes& attrs, size_t n, bool allow_negative) {
  std::vector<int64_t> p = attrs.get_ints("pads", std::vector<int64_t>(2 * n, 0));
  if (p.size() != 2 * n) fail("attribute 'pads' has {} values, expected {}", p.size(), 2 * n);
  if (!allow_negative)
    for (int64_t v : p)
      if (v < 0) fail("attribute 'pads' has negative value {}", v);
  return p;
}

ConvGeom conv_geometry(const Attributes& attrs, const Shape& x, const Shape& w) {
  ConvGeom g = conv_common(attrs, x, w, false, "Conv");
  const size_t n = static_cast<size_t>(g.nsp), o = 3 - n;
  const std::string ap = auto_pad_attr(attrs);
  std::vector<int64_t> pads = pads_attr(attrs, n, false);
  for (size_t j = o; j < 3; ++j) {
    const size_t i = j - o;
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;  // effective (dilated) kernel extent
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      g.out[j] = (g.in[j] + g.s[j] - 1) / g.s[j];
      const int64_t total = std::max<int64_t>(0, (g.out[j] - 1) * g.s[j] + ek - g.in[j]);
      g.pb[j] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      g.pe[j] = total - g.pb[j];
    } else {
      if (ap == "NOTSET") {
        g.pb[j] = pads[i];
        g.pe[j] = pads[n + i];
      }
      const int64_t span = g.in[j] + g.pb[j] + g.pe[j] - ek;
      if (span < 0)
        fail("Conv kernel extent {} exceeds the padded input extent {} in spatial dim {}", ek, g.in[j] + g.pb[j] + g.pe[j], i);
      g.out[j] = span / g.s[j] + 1;
    }
  }
  return g;
}

void check_conv_types(const OpInferContext& ctx, const char* op) {
  const TensorType& x = ctx.input(0);
  const TensorType& w = ctx.input(1);
  if (w.dtype != x.dtype) fail("{} weight type {} differs from input type {}", op, dtype_name(w.dtype), dtype_name(x.dtype));
  if (!is_float(x.dtype)) fail_unsupported("{}: element type {} is not supported", op, dtype_name(x.dtype));
}

void check_bias(const OpInferContext& ctx, int64_t M, const char* op) {
  if (!ctx.has_input(2)) return;
  const TensorType& b = ctx.input(2);
  if (b.dtype != ctx.input(0).dtype) fail("{} bias type {} differs from input type {}", op, dtype_name(b.dtype), dtype_name(ctx.input(0).dtype));
  if (b.shape != Shape{M}) fail("{} bias B must have shape [{}], got {}", op, M, shape_str(b.shape));
}

Shape conv_out_shape(const ConvGeom& g) {
  Shape s{g.N, g.M};
  for (int64_t j = 3 - g.nsp; j < 3; ++j) s.push_back(g.out[j]);
  return s;
}

std::vector<TensorType> infer_conv(const OpInferContext& ctx) {
  check_conv_types(ctx, "Conv");
  ConvGeom g = conv_geometry(ctx.attrs(), ctx.input(0).shape, ctx.input(1).shape);
  check_bias(ctx, g.M, "Conv");
  return ops::one(ctx.input(0).dtype, conv_out_shape(g));
}

// Fills col rows (c, kd, kh, kw) x columns (output rows r0..r0+nr of extent out[2]) from one group's
// input channels x (Cg x in-volume).
template <typename T>
void im2col(const ConvGeom& g, const T* x, int64_t Cg, int64_t r0, int64_t nr, T* col) {  // serial
  const int64_t Kk = g.k_size(), rows = Cg * Kk, OW = g.out[2], ncols = nr * OW;
  const int64_t IW = g.in[2], IH = g.in[1], ID = g.in[0], OH = g.out[1];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t c = r / Kk, kk = r % Kk;
    const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
    T* dst = col + r * ncols;
    const int64_t woff = kw * g.d[2] - g.pb[2];
    // Valid output columns: 0 <= ow*s + woff < IW.
    int64_t lo = woff >= 0 ? 0 : (-woff + g.s[2] - 1) / g.s[2];
    int64_t hi = IW - 1 - woff < 0 ? 0 : (IW - 1 - woff) / g.s[2] + 1;  // exclusive
    lo = std::min(lo, OW);
    hi = std::min(std::max(hi, lo), OW);
    for (int64_t q = 0; q < nr; ++q) {
      T* drow = dst + q * OW;
      const int64_t orow = r0 + q, od = orow / OH, oh = orow % OH;
      const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0], ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
      if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
        for (int64_t w = 0; w < OW; ++w) drow[w] = T(0);
        continue;
      }
      const T* src = x + ((c * ID + id) * IH + ih) * IW + woff;
      for (int64_t w = 0; w < lo; ++w) drow[w] = T(0);
      if (g.s[2] == 1) {
        for (int64_t w = lo; w < hi; ++w) drow[w] = src[w];
      } else {
        const int64_t sw = g.s[2];
        for (int64_t w = lo; w < hi; ++w) drow[w] = src[w * sw];
      }
      for (int64_t w = hi; w < OW; ++w) drow[w] = T(0);
    }
  }
}

// Direct convolution for one input channel per group (depthwise): a GEMM would have K = kernel size.
template <typename T>
void conv_depthwise(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t Mg = g.M / g.group, Kk = g.k_size(), OHW = g.out_size(), IHW = g.in_size();
#pragma omp parallel for schedule(static)
  for (int64_t nm = 0; nm < g.N * g.M; ++nm) {
    const int64_t n = nm / g.M, m = nm % g.M, c = m / Mg;
    const T* xc = x + (n * g.C + c) * IHW;
    const T* wm = w + m * Kk;
    T* ym = y + nm * OHW;
    const T b0 = bias ? bias[m] : T(0);
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        T* yrow = ym + (od * g.out[1] + oh) * g.out[2];
        for (int64_t ow = 0; ow < g.out[2]; ++ow) yrow[ow] = T(0);
        for (int64_t kd = 0; kd < g.k[0]; ++kd) {
          const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
          if (id < 0 || id >= g.in[0]) continue;
          for (int64_t kh = 0; kh < g.k[1]; ++kh) {
            const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (ih < 0 || ih >= g.in[1]) continue;
            const T* xrow = xc + (id * g.in[1] + ih) * g.in[2];
            for (int64_t kw = 0; kw < g.k[2]; ++kw) {
              const T wv = wm[(kd * g.k[1] + kh) * g.k[2] + kw];
              const int64_t woff = kw * g.d[2] - g.pb[2];
              int64_t lo = woff >= 0 ? 0 : (-woff + g.s[2] - 1) / g.s[2];
              int64_t hi = g.in[2] - 1 - woff < 0 ? 0 : (g.in[2] - 1 - woff) / g.s[2] + 1;
              lo = std::min(lo, g.out[2]);
              hi = std::min(std::max(hi, lo), g.out[2]);
              for (int64_t ow = lo; ow < hi; ++ow) yrow[ow] += wv * xrow[ow * g.s[2] + woff];
            }
          }
        }
        for (int64_t ow = 0; ow < g.out[2]; ++ow) yrow[ow] += b0;
      }
  }
}

// One parallel region per Conv: tasks are (image, group, block of output rows); each task runs
// im2col into a thread-local, cache-sized buffer and a serial GEMM into its slice of the output.
template <typename T>
void run_conv(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t Cg = g.C / g.group, Mg = g.M / g.group, Kk = g.k_size(), Krows = Cg * Kk;
  const int64_t OHW = g.out_size(), IHW = g.in_size();
  if (OHW == 0 || g.N == 0 || g.M == 0) return;
  if (Cg == 1 && g.group > 1) {
    conv_depthwise(g, x, w, bias, y);
    return;
  }
  bool pointwise = Kk == 1;
  for (int j = 0; j < 3; ++j) pointwise = pointwise && g.s[j] == 1 && g.pb[j] == 0 && g.pe[j] == 0;
  const int64_t OW = g.out[2], R = g.out[0] * g.out[1];
  // Column block: whole output rows, about 2 MiB of fp32 im2col per block.
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, std::min<int64_t>(R, (int64_t{1} << 19) / std::max<int64_t>(1, Krows * OW)));
  const int64_t chunks = (R + rows_per_chunk - 1) / rows_per_chunk;
  const int64_t tasks = g.N * g.group * chunks;
  const double flops = 2.0 * static_cast<double>(g.N * g.M) * static_cast<double>(OHW) * static_cast<double>(Krows);
#pragma omp parallel if (tasks > 1 && flops > 1e6)
  {
    std::vector<T> col(pointwise ? 0 : static_cast<size_t>(Krows * rows_per_chunk * OW));
#pragma omp for schedule(dynamic)
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t ng = t / chunks, r0 = (t % chunks) * rows_per_chunk;
      const int64_t n = ng / g.group, gi = ng % g.group;
      const int64_t nr = std::min(rows_per_chunk, R - r0), c0 = r0 * OW, nc = nr * OW;
      T* yg = y + (n * g.M + gi * Mg) * OHW + c0;
      const T* xg = x + (n * g.C + gi * Cg) * IHW;
      if (bias)
        for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * OHW, yg + m * OHW + nc, bias[gi * Mg + m]);
      GemmArgs<T> ga;
      ga.M = Mg;
      ga.N = nc;
      ga.K = Krows;
      ga.A = w + gi * Mg * Krows;
      ga.lda = Krows;
      ga.C = yg;
      ga.ldc = OHW;
      ga.accumulate = bias != nullptr;
      ga.serial = true;
      if (pointwise) {
        ga.B = xg + c0;
        ga.ldb = IHW;
      } else {
        im2col(g, xg, Cg, r0, nr, col.data());
        ga.B = col.data();
        ga.ldb = nc;
      }
      linear_detail::gemm(ga);
    }
  }
}

std::vector<Tensor> eval_conv(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (linear_detail::is_half(x.dtype())) return linear_detail::eval_via_f32(ctx, eval_conv);
  const Tensor& w = ctx.input(1);
  ConvGeom g = conv_geometry(ctx.attrs(), x.shape(), w.shape());
  Tensor out(ctx.output_type(0));
  dispatch_dtype<KORCH_FLOAT_TYPES>(x.dtype(), "Conv", [&](auto tag) {
    using T = decltype(tag);
    run_conv<T>(g, x.data<T>(), w.data<T>(), ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr, out.data<T>());
  });
  return {out};
}

ConvGeom conv_transpose_geometry(const Attributes& attrs, const Shape& x, const Shape& w) {
  ConvGeom g = conv_common(attrs, x, w, true, "ConvTranspose");
  const size_t n = static_cast<size_t>(g.nsp), o = 3 - n;
  const std::string ap = auto_pad_attr(attrs);
  std::vector<int64_t> opad = attrs.get_ints("output_padding", std::vector<int64_t>(n, 0));
  if (opad.size() == 2 * n) opad.resize(n);  // some exporters write begin/end pairs
  if (opad.size() != n) fail("attribute 'output_padding' has {} values, expected {}", opad.size(), n);
  std::vector<int64_t> oshape;
  if (attrs.has("output_shape")) {
    oshape = attrs.get_ints("output_shape");
    if (oshape.size() == n + 2) oshape.erase(oshape.begin(), oshape.begin() + 2);
    if (oshape.size() != n) fail("attribute 'output_shape' has {} values, expected {}", oshape.size(), n);
  }
  const bool explicit_pads = attrs.has("pads") && ap == "NOTSET";
  std::vector<int64_t> pads = pads_attr(attrs, n, false);
  for (size_t j = o; j < 3; ++j) {
    const size_t i = j - o;
    if (opad[i] < 0 || (opad[i] >= g.s[j] && opad[i] >= g.d[j]))
      fail("attribute 'output_padding' value {} must be smaller than the stride or dilation", opad[i]);
    const int64_t ek = (g.k[j] - 1) * g.d[j] + 1;
    const int64_t natural = g.s[j] * (g.in[j] - 1) + opad[i] + ek;
    if (ap == "VALID") {
      g.out[j] = oshape.empty() ? natural : oshape[i];
    } else if (explicit_pads || (ap == "NOTSET" && oshape.empty())) {
      g.pb[j] = pads[i];
      g.pe[j] = pads[n + i];
      g.out[j] = oshape.empty() ? natural - g.pb[j] - g.pe[j] : oshape[i];
    } else {
      g.out[j] = oshape.empty() ? g.in[j] * g.s[j] : oshape[i];
      const int64_t total = natural - g.out[j];
      if (ap == "SAME_UPPER") {
        g.pb[j] = floor_div(total, 2);
        g.pe[j] = total - g.pb[j];
      } else {
        g.pe[j] = floor_div(total, 2);
        g.pb[j] = total - g.pe[j];
      }
    }
    if (g.out[j] <= 0) fail("ConvTranspose output extent {} in spatial dim {} is not positive", g.out[j], i);
  }
  return g;
}

std::vector<TensorType> infer_conv_transpose(const OpInferContext& ctx) {
  check_conv_types(ctx, "ConvTranspose");
  ConvGeom g = conv_transpose_geometry(ctx.attrs(), ctx.input(0).shape, ctx.input(1).shape);
  check_bias(ctx, g.M, "ConvTranspose");
  return ops::one(ctx.input(0).dtype, conv_out_shape(g));
}

template <typename T>
void run_conv_transpose(const ConvGeom& g, const T* x, const T* w, const T* bias, T* y) {
  const int64_t Cg = g.C / g.group, Mg = g.M / g.group, Kk = g.k_size();
  const int64_t OHW = g.out_size(), IHW = g.in_size(), rows = Mg * Kk;
  // Per group: col (Mg*Kk x IHW) = W_g^T (Mg*Kk x Cg) * X_g (Cg x IHW), then scatter-add (col2im).
  std::vector<T> wt(static_cast<size_t>(rows * Cg)), col(static_cast<size_t>(rows * IHW));
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t gi = 0; gi < g.group; ++gi) {
      const T* wg = w + gi * Cg * rows;
      for (int64_t c = 0; c < Cg; ++c)
        for (int64_t r = 0; r < rows; ++r) wt[static_cast<size_t>(r * Cg + c)] = wg[c * rows + r];
      GemmArgs<T> ga;
      ga.M = rows;
      ga.N = IHW;
      ga.K = Cg;
      ga.A = wt.data();
      ga.lda = Cg;
      ga.B = x + (n * g.C + gi * Cg) * IHW;
      ga.ldb = IHW;
      ga.C = col.data();
      ga.ldc = IHW;
      linear_detail::gemm(ga);
#pragma omp parallel for schedule(static)
      for (int64_t m = 0; m < Mg; ++m) {
        T* ym = y + (n * g.M + gi * Mg + m) * OHW;
        std::fill(ym, ym + OHW, bias ? bias[gi * Mg + m] : T(0));
        for (int64_t kk = 0; kk < Kk; ++kk) {
          const int64_t kd = kk / (g.k[1] * g.k[2]), kh = (kk / g.k[2]) % g.k[1], kw = kk % g.k[2];
          const T* src = col.data() + (m * Kk + kk) * IHW;
          for (int64_t id = 0; id < g.in[0]; ++id) {
            const int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
            if (od < 0 || od >= g.out[0]) continue;
            for (int64_t ih = 0; ih < g.in[1]; ++ih) {
              const int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
              if (oh < 0 || oh >= g.out[1]) continue;
              const T* srow = src + (id * g.in[1] + ih) * g.in[2];
              T* yrow = ym + (od * g.out[1] + oh) * g.out[2];
              for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                const int64_t ow = iw * g.s[2] - g.pb[2] + kw * g.d[2];
                if (ow >= 0 && ow < g.out[2]) yrow[ow] += srow[iw];
              }
            }
          }
        }
      }
    }
}

std::vector<Tensor> eval_conv_transpose(const OpEvalContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (linear_detail::is_half(x.dtype())) return linear_detail::eval_via_f32(ctx, eval_conv_transpose);
  const Tensor& w = ctx.input(1);
  ConvGeom g = conv_transpose_geometry(ctx.attrs(), x.shape(), w.shape());
  Tensor out(ctx.output_type(0));
  dispatch_dtype<KORCH_FLOAT_TYPES>(x.dtype(), "ConvTranspose", [&](auto tag) {
    using T = decltype(tag);
    run_conv_transpose<T>(g, x.data<T>(), w.data<T>(), ctx.has_input(2) ? ctx.input(2).data<T>() : nullptr,
                          out.data<T>());
  });
  return {out};
}

}  // namespace

void register_linear_ops(OpRegistry& r) {
  r.add(OpDef{"MatMul", 1, kMaxOpset, infer_matmul, eval_matmul});
  r.add(OpDef{"Gemm", 1, kMaxOpset, infer_gemm, eval_gemm});
  r.add(OpDef{"Einsum", 12, kMaxOpset, infer_einsum, eval_einsum});
  r.add(OpDef{"Conv", 1, kMaxOpset, infer_conv, eval_conv});
  r.add(OpDef{"ConvTranspose", 1, kMaxOpset, infer_conv_transpose, eval_conv_transpose});
}

}  // namespace korch
