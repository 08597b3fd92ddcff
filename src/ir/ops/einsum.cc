// Linear-algebra operators, part 3: Einsum.
#include <string>

#include "ir/ops/linear_internal.h"
#include "ir/ops/op_util.h"

namespace korch {
namespace {

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
  if (ops::is_half(ctx.input(0).dtype())) return linear_detail::eval_via_f32(ctx, eval_einsum);
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

}  // namespace

void linear_detail::register_einsum_ops(OpRegistry& r) {
  r.add(OpDef{"Einsum", 12, kMaxOpset, infer_einsum, eval_einsum});
}

}  // namespace korch
