// The C++ printer of a LoopKernel: the kernel function, its buffers and tables, the stages in
// order (cpu_loop_emitter_internal.h prints one), with row fusion across stages.
#include "codegen/cpu/cpu_loop_emitter.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/cpu/cpu_loop_emitter_internal.h"
#include "runtime/cpu/cpu_device_id.h"
#include "support/error.h"

namespace korch::cpu {

using detail::StagePrinter;
using detail::kParallelWork;
using detail::ctype;
using loop::Stage;

namespace {

// Row fusion: stages [i, j] run inside one loop nest over their first `depth` loops (equal
// extents, kept loops in every stage) when each stage reads what an earlier one of them wrote only
// at elements that earlier stage writes in the same iteration of those loops:
//   * a per-row value: stored and loaded at the same index of the shared loops alone (a
//     reduction's result read back per row: softmax, layernorm);
//   * a whole row: stored and loaded at the same index over loops of the same extents (an
//     exponential written as an output, then summed by the next stage).
// The row then stays in L1 between the stages instead of being streamed through memory once per
// stage. Shared loops beyond the first serve nests whose per-row results live one loop deeper
// (windowed attention's softmax: [windows, heads x rows, columns], its maxima per (window, row)).
// Whether stage j can join stages [i, j) in a row nest `depth` loops deep.
bool shares_rows(const std::vector<StagePrinter>& p, size_t i, size_t j, int depth) {
  const Stage& first = p[i].stage();
  const Stage& next = p[j].stage();
  if (depth > p[i].max_row_depth() || depth > p[j].max_row_depth()) return false;
  // The loops of stage `a` and of `next` from `from` through `to` have the same extents.
  auto same_loops = [&](const Stage& a, int from, int to) {
    for (int l = from; l <= to; ++l)
      if (static_cast<size_t>(l) >= a.loops.size() || static_cast<size_t>(l) >= next.loops.size() ||
          a.loops[static_cast<size_t>(l)].extent != next.loops[static_cast<size_t>(l)].extent)
        return false;
    return true;
  };
  if (!same_loops(first, 0, depth - 1)) return false;
  int64_t rows = 1, per_row = 1;
  for (int l = 0; l < depth; ++l) rows *= first.loops[static_cast<size_t>(l)].extent;
  // A row must be small enough to stay in cache; otherwise nothing is gained.
  for (size_t l = static_cast<size_t>(depth); l < next.loops.size(); ++l) per_row *= next.loops[l].extent;
  if (rows < 16 || per_row > (1 << 14)) return false;
  for (const auto& ld : p[j].loads()) {
    for (size_t s = i; s < j; ++s) {
      for (const auto& st : p[s].stores()) {
        if (st.buffer != ld.buffer) continue;
        if (st.key != ld.key) return false;
        const bool per_row_value = st.level < depth && ld.level < depth;
        if (!per_row_value && !same_loops(p[s].stage(), depth, ld.level)) return false;
      }
    }
  }
  return true;
}

void print_row_fused(std::vector<StagePrinter>& p, size_t i, size_t j, int depth, CodeWriter& w) {
  int64_t work = 0;
  for (size_t s = i; s < j; ++s) work += p[s].work();
  w.open("");
  w.line(depth == 1 ? fmt::format("// row fusion of {} stages", j - i)
                    : fmt::format("// row fusion of {} stages over {} loops", j - i, depth));
  if (work >= kParallelWork)
    w.line(depth == 1 ? std::string("#pragma omp parallel for schedule(static)")
                      : fmt::format("#pragma omp parallel for collapse({}) schedule(static)", depth));
  const Stage& first = p[i].stage();
  // collapse() wants the loops perfectly nested: the outer headers carry no braces.
  for (int l = 0; l + 1 < depth; ++l)
    w.line(fmt::format("for (int64_t i{0} = 0; i{0} < {1}; ++i{0})", l, first.loops[static_cast<size_t>(l)].extent));
  w.open(fmt::format("for (int64_t i{0} = 0; i{0} < {1}; ++i{0})", depth - 1,
                     first.loops[static_cast<size_t>(depth - 1)].extent));
  for (size_t s = i; s < j; ++s) p[s].print_row(depth);
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
// exp(-|v|) (NaN stays NaN), inlined so that a loop vectorizes it without a call: a = |v| (a >
// 104 taken as 104: 0 or the least denormal), a = m ln2 + s with m = round(a / ln2) and |s| <=
// ln2/2 (ln2 in one part: s is off by at most 150 * 1.9e-9 at m = 150), exp(-s) by a degree-5
// polynomial (a minimax fit of exp's relative error on [-ln2/2, ln2/2], 9.5e-8 with these float
// coefficients; odd ones negated for -s), 2^(32-m) added to the exponent bits and the 2^32 taken
// off by one product, so results under 2^-126 round once into the denormals as libm's do. 32 - m
// is rounded by adding 1.5 * 2^23 + 32 to -a / ln2, which leaves it in the low mantissa bits of t,
// so t's bits shifted by 23 are its exponent field: no conversion to an integer, and a NaN (which
// the clamp lets through) gives 0 there and stays NaN. Relative error under 4e-7 on normal results
// (a SiLU against float64 over [-87, 87], bench/silu_forms.cc); 14 vector operations where the
// generator-19 form of exp(x <= 0) took 18 after -|v| (abs, negate, two-part ln2, degree 6).
// Its only callers: Sigmoid's exp, and a softmax's exp(x - max(x)) written as exp(-|x - max(x)|)
// (loop_kernel_elementwise.cc).
static inline float korch_exp_negabs(float v) {
  const float a0 = fabsf(v);
  const float a = a0 > 104.f ? 104.f : a0;
  const float t = __builtin_fmaf(a, -1.44269504088896341f, 12582944.f);
  const float minus_m = t - 12582944.f;
  const float s = __builtin_fmaf(minus_m, 0.693147182464599609375f, a);
  float p = -0x1.0fa834p-7f;
  p = __builtin_fmaf(p, s, 0x1.573a54p-5f);
  p = __builtin_fmaf(p, s, -0x1.555a6ap-3f);
  p = __builtin_fmaf(p, s, 0x1.fffdc5p-2f);
  p = __builtin_fmaf(p, s, -0x1.fffff6p-1f);
  p = __builtin_fmaf(p, s, 1.f);
  return __builtin_bit_cast(float, __builtin_bit_cast(uint32_t, p) + (__builtin_bit_cast(uint32_t, t) << 23)) * 0x1p-32f;
}
// exp(v) for every other float exp: libmvec's vector expf computes lanes whose result under- or
// overflows (|v| past about 87) one at a time in a scalar fallback, so a softmax of masked scores
// (x - max = -100: swin_t's shifted windows, 12% of them) took 9x as long as one without (1252
// against 141 us on 460992 floats, one thread, FTZ or not; bench/exp_underflow.cc). Here
// v is clamped to [-104, 89] (a NaN passes), v = m ln2 + s as above (m = round(v / ln2) in the low
// bits of t), exp(s) by the same polynomial with its odd coefficients positive, and 2^m applied as
// two normal factors 2^(m - m/2) and 2^(m/2), so a result past FLT_MAX is inf and one under 2^-126
// rounds once into the denormals. Relative error under 4e-7 on normal results (3.91e-7 over every
// float there); +inf gives inf, -inf 0, NaN NaN. No branch: a loop vectorises it whole.
static inline float korch_exp(float v) {
  const float x = v < -104.f ? -104.f : (v > 89.f ? 89.f : v);
  const float t = __builtin_fmaf(x, 1.44269504088896341f, 12582912.f);
  const float m = t - 12582912.f;
  const float s = __builtin_fmaf(m, -0.693147182464599609375f, x);
  float p = 0x1.0fa834p-7f;
  p = __builtin_fmaf(p, s, 0x1.573a54p-5f);
  p = __builtin_fmaf(p, s, 0x1.555a6ap-3f);
  p = __builtin_fmaf(p, s, 0x1.fffdc5p-2f);
  p = __builtin_fmaf(p, s, 0x1.fffff6p-1f);
  p = __builtin_fmaf(p, s, 1.f);
  const int32_t mi = (int32_t)(__builtin_bit_cast(uint32_t, t) - 0x4B400000u);
  const int32_t half = mi >> 1;
  const float lo = __builtin_bit_cast(float, (uint32_t)(half + 127) << 23);
  const float hi = __builtin_bit_cast(float, (uint32_t)(mi - half + 127) << 23);
  return p * lo * hi;
}
)";
  return s + isa_probe_source();
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
    // Grow the group while some depth serves all of it (a later stage may need a shallower one).
    int depth = printers[i].max_row_depth();
    size_t j = i + 1;
    for (; j < printers.size(); ++j) {
      int d = depth;
      for (; d >= 1; --d) {
        bool all = true;
        for (size_t m = i + 1; m <= j && all; ++m) all = shares_rows(printers, i, m, d);
        if (all) break;
      }
      if (d < 1) break;
      depth = d;
    }
    if (j - i == 1) {
      printers[i].print();
    } else {
      print_row_fused(printers, i, j, depth, w);
    }
    i = j;
  }
  w.close();
}

}  // namespace korch::cpu
