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

// The post-ops as a library epilogue (cuda_library.h), or why none expresses them.
std::string plan_epilogue(const json& d, bool conv, LibraryEpilogue& e) {
  const json ops = d.value("post_ops", json::array());
  if (ops.empty()) return "";
  if (d.at("op") == "ConvTranspose") return "a ConvTranspose with a fused epilogue (cuDNN's backward-data call has none)";
  const Dims dst = d.at("dst_dims").get<Dims>();
  const json operands = d.value("operands", json::array());
  size_t i = 0;
  // A scale first: alpha (a constant Mul is eltwise linear with beta 0, a Div a binary div).
  const json& first = ops.front();
  if (first.at("type") == "eltwise" && first.at("alg") == "linear" && first.at("beta").get<double>() == 0) {
    e.alpha = first.at("alpha").get<double>();
    ++i;
  } else if (first.at("type") == "binary" && first.at("alg") == "div" && first.contains("value") &&
             first.at("value").get<double>() != 0) {
    e.alpha = 1 / first.at("value").get<double>();
    ++i;
  }
  const char* lib = conv ? "cuDNN's fused convolution" : "cuBLASLt";
  for (; i < ops.size(); ++i) {
    const json& op = ops[i];
    const std::string type = op.at("type"), alg = op.at("alg");
    if (e.act != LibraryEpilogue::Act::kNone)
      return fmt::format("an epilogue {} {} after its activation ({} adds before it)", type, alg, lib);
    if (type == "binary" && alg == "add" && op.contains("operand")) {
      const size_t k = op.at("operand").get<size_t>();
      const Dims dims = operands.at(k).at("dims").get<Dims>();
      if (dims == dst) {
        if (e.residual) return fmt::format("two full-shape addends in one epilogue ({} adds one)", lib);
        e.residual = true;
        e.residual_slot = slot(d, k);
        continue;
      }
      const size_t channel = conv ? 1 : dst.size() - 1;
      bool per_channel = dims.size() == dst.size() && dims[channel] == dst[channel];
      for (size_t a = 0; per_channel && a < dims.size(); ++a) per_channel = a == channel || dims[a] == 1;
      if (!per_channel)
        return fmt::format("an epilogue operand of dims [{}] ({} adds a per-channel bias or a full-shape tensor)",
                           fmt::join(dims, ","), lib);
      if (e.bias) return fmt::format("two biases in one epilogue ({} adds one)", lib);
      e.bias = true;
      e.bias_slot = slot(d, k);
      e.bias_length = dst[channel];
      continue;
    }
    if (type == "eltwise" && alg == "relu" && op.at("alpha").get<double>() == 0) {
      e.act = LibraryEpilogue::Act::kRelu;
      continue;
    }
    if (type == "eltwise" && alg == "gelu_tanh" && !conv) {
      e.act = LibraryEpilogue::Act::kGeluTanh;
      continue;
    }
    return fmt::format("an epilogue {} {} ({} applies a scale, a bias, a residual and then ReLU{})", type, alg, lib,
                       conv ? "" : " or tanh-GELU");
  }
  return "";
}

}  // namespace

std::string LibraryEpilogue::describe() const {
  std::vector<std::string> parts;
  if (alpha != 1) parts.push_back(fmt::format("x{:g}", alpha));
  if (residual) parts.push_back("residual");
  if (bias) parts.push_back(fmt::format("bias[{}]", bias_length));
  std::string s = fmt::format("{}", fmt::join(parts, " + "));
  if (act != Act::kNone) s += (s.empty() ? "" : ", ") + std::string(act == Act::kRelu ? "relu" : "gelu_tanh");
  return s;
}

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
    if (op == "MatMul") p = gemm(d);
    else if (op == "Conv" || op == "ConvTranspose") p = conv(d);
    else p.reason = fmt::format("a {} linear step (no GPU library call)", op);
    if (!p.ok()) return p;
    p.reason = plan_epilogue(d, op != "MatMul", p.epilogue);
    // Every operand past src and weights must be one the epilogue reads.
    const size_t extra = d.value("operands", json::array()).size();
    const size_t read = 2 + p.epilogue.bias + p.epilogue.residual;
    if (p.ok() && extra > 2 && extra != read) p.reason = "a linear op reading operands its library call has no place for";
    if (!p.ok()) p.gemm.reset(), p.conv.reset();
    return p;
  } catch (const json::exception& e) {
    fail("malformed linear step description: {}", e.what());
  }
}

}  // namespace korch::cuda
