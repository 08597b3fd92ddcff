// plan_library_call(): pure planning of GPU library calls (cuda_library.h).
#include "runtime/cuda/cuda_library.h"

#include <fmt/format.h>

#include <limits>

#include "support/error.h"

namespace korch::cuda {

namespace {

using json = nlohmann::json;
using Dims = std::vector<int64_t>;

std::vector<int64_t> row_major(const Dims& d) {
  std::vector<int64_t> s(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

Dims strides_or_row_major(const json& desc, const char* key, const Dims& dims) {
  return desc.contains(key) ? desc.at(key).get<Dims>() : row_major(dims);
}

int slot(const json& desc, size_t operand) {
  const json& slots = desc.at("operand_slots");
  return operand < slots.size() ? slots[operand].get<int>() : -1;
}

// One operand's [rows, cols] matrix (row-major problem view) given its strides: contiguous rows
// (the library's plain column-major [cols, rows]) or contiguous columns (op T). Empty on failure.
std::optional<GemmPlan::Matrix> matrix(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  GemmPlan::Matrix m;
  if (col_stride == 1 || cols == 1) {
    m.rows = cols;
    m.cols = rows;
    m.ld = rows == 1 ? cols : row_stride;
    if (m.ld < cols) return std::nullopt;
    return m;
  }
  if (row_stride == 1 || rows == 1) {
    m.rows = rows;
    m.cols = cols;
    m.ld = cols == 1 ? rows : col_stride;
    m.transposed = true;
    if (m.ld < rows) return std::nullopt;
    return m;
  }
  return std::nullopt;
}

LibraryPlan gemm(const json& d) {
  LibraryPlan p;
  const Dims a = d.at("src_dims").get<Dims>(), b = d.at("weights_dims").get<Dims>(), c = d.at("dst_dims").get<Dims>();
  const size_t r = c.size();
  if (r < 2 || a.size() != r || b.size() != r) fail("linear step: MatMul dims of different ranks");
  const Dims as = strides_or_row_major(d, "src_strides", a), bs = strides_or_row_major(d, "weights_strides", b);
  const Dims cs = row_major(c);
  GemmPlan g;
  g.m = c[r - 2];
  g.n = c[r - 1];
  g.k = a[r - 1];
  if (a[r - 2] != g.m || b[r - 1] != g.n || b[r - 2] != g.k) fail("linear step: MatMul dims do not agree");
  // Batch dims: one uniform stride per operand (cuBLASLt's strided batch), 0 where broadcast.
  int64_t sa = 0, sb = 0, sc = 0, batch = 1;
  bool first = true;
  for (size_t i = r - 2; i-- > 0;) {  // innermost batch dim first
    if (c[i] == 1) continue;
    const int64_t ea = a[i] == 1 ? 0 : as[i], eb = b[i] == 1 ? 0 : bs[i], ec = cs[i];
    if (first) {
      sa = ea;
      sb = eb;
      sc = ec;
      first = false;
    } else if (ea != sa * batch || eb != sb * batch || ec != sc * batch) {
      p.reason = "a MatMul whose batch dims are not one uniform stride per operand (cuBLASLt takes one batch stride)";
      return p;
    }
    batch *= c[i];
  }
  auto ma = matrix(g.m, g.k, as[r - 2], as[r - 1]);
  auto mb = matrix(g.k, g.n, bs[r - 2], bs[r - 1]);
  if (!ma || !mb) {
    p.reason = "a MatMul operand whose rows and columns are both strided (cuBLASLt needs one of them contiguous)";
    return p;
  }
  if (std::max({g.m, g.n, g.k, batch}) > std::numeric_limits<int32_t>::max()) {
    p.reason = "a MatMul dim beyond 2^31";
    return p;
  }
  g.a = *mb;  // library A = row-major B (weights)
  g.b = *ma;  // library B = row-major A (src)
  g.a.batch_stride = sb;
  g.b.batch_stride = sa;
  g.c.rows = g.n;
  g.c.cols = g.m;
  g.c.ld = g.n;
  g.c.batch_stride = sc;
  g.batch = batch;
  g.b.slot = slot(d, 0);
  g.a.slot = slot(d, 1);
  g.c.slot = d.at("result_slot").get<int>();
  p.gemm = g;
  return p;
}

LibraryPlan conv(const json& d) {
  LibraryPlan p;
  const bool transpose = d.at("op") == "ConvTranspose";
  if (d.contains("src_strides") || d.contains("dst_strides")) {
    p.reason = "a channels-last convolution (the CUDA backend runs NCHW)";
    return p;
  }
  const Dims x = d.at("src_dims").get<Dims>(), y = d.at("dst_dims").get<Dims>(), wd = d.at("weights_dims").get<Dims>();
  const json& c = d.at("conv");
  const Dims st = c.at("strides").get<Dims>(), dl = c.at("dilations").get<Dims>();
  const Dims pb = c.at("pads_begin").get<Dims>(), pe = c.at("pads_end").get<Dims>();
  const int64_t groups = c.at("group").get<int64_t>();
  const size_t ns = x.size() - 2;
  if (x.size() < 3 || y.size() != x.size() || st.size() != ns || dl.size() != ns || pb.size() != ns || pe.size() != ns ||
      wd.size() < ns)
    fail("linear step: malformed convolution geometry");
  const Dims k(wd.end() - static_cast<std::ptrdiff_t>(ns), wd.end());
  ConvPlan cp;
  cp.transpose = transpose;
  cp.groups = static_cast<int>(groups);
  for (size_t i = 0; i < ns; ++i) {
    const int64_t ek = (k[i] - 1) * (dl[i] + 1) + 1;
    if (!transpose && pb[i] != pe[i]) {
      p.reason = fmt::format("a convolution with asymmetric padding ({} before, {} after): cuDNN pads both sides alike",
                             pb[i], pe[i]);
      return p;
    }
    if (transpose) {
      // Y (the forward conv's input) must map back onto X with symmetric pads pb. Output
      // padding arrives as a smaller end padding (pe = pb - output_padding, linear_geometry.cc);
      // below the stride, the floor in cuDNN's shape rule absorbs it.
      const int64_t fwd = (y[2 + i] + 2 * pb[i] - ek) / st[i] + 1;
      if (pe[i] > pb[i] || pb[i] - pe[i] >= st[i] || fwd != x[2 + i]) {
        p.reason = fmt::format("a ConvTranspose whose padding ({} before, {} after, stride {}) is not symmetric plus "
                               "output padding below the stride (axis {}: {} -> {})",
                               pb[i], pe[i], st[i], i, x[2 + i], y[2 + i]);
        return p;
      }
    }
    cp.pads.push_back(static_cast<int>(pb[i]));
    cp.strides.push_back(static_cast<int>(st[i]));
    cp.dilations.push_back(static_cast<int>(dl[i] + 1));
  }
  for (int64_t v : x) cp.x.push_back(static_cast<int>(v));
  for (int64_t v : y) cp.y.push_back(static_cast<int>(v));
  if (transpose) cp.w = {cp.x[1], cp.y[1] / cp.groups};
  else cp.w = {cp.y[1], cp.x[1] / cp.groups};
  for (int64_t v : k) cp.w.push_back(static_cast<int>(v));
  if (ns == 1) {  // cuDNN's smallest convolution is 2-D: a unit height
    cp.x.insert(cp.x.begin() + 2, 1);
    cp.y.insert(cp.y.begin() + 2, 1);
    cp.w.insert(cp.w.begin() + 2, 1);
    cp.pads.insert(cp.pads.begin(), 0);
    cp.strides.insert(cp.strides.begin(), 1);
    cp.dilations.insert(cp.dilations.begin(), 1);
  }
  cp.src_slot = slot(d, 0);
  cp.weights_slot = slot(d, 1);
  cp.dst_slot = d.at("result_slot").get<int>();
  p.conv = cp;
  return p;
}

}  // namespace

LibraryPlan plan_library_call(const json& d) {
  try {
    LibraryPlan p;
    const std::string op = d.value("op", std::string());
    if (op == "LSTM" || op == "GRU" || op == "RNN" || d.contains("input_slots")) {
      p.reason = "a recurrent layer (LSTM/GRU/RNN): the CUDA runtime has no cuDNN RNN call yet";
      return p;
    }
    if (d.contains("dtypes")) {
      p.reason = "an integer linear op (ConvInteger/MatMulInteger): the CUDA runtime has no int8 library call yet";
      return p;
    }
    if (d.contains("post_ops") && !d.at("post_ops").empty()) {
      p.reason = "a linear op with a fused epilogue: the CUDA runtime calls libraries without epilogues";
      return p;
    }
    if (d.contains("operands") && d.at("operands").size() != 2) {
      p.reason = "a linear op reading more than its src and weights";
      return p;
    }
    if (op == "MatMul") return gemm(d);
    if (op == "Conv" || op == "ConvTranspose") return conv(d);
    p.reason = fmt::format("a {} linear step (no GPU library call)", op);
    return p;
  } catch (const json::exception& e) {
    fail("malformed linear step description: {}", e.what());
  }
}

}  // namespace korch::cuda
