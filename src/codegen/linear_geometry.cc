// linear_geometry: Conv / ConvTranspose / MatMul / Einsum nodes as oneDNN convolution,
// deconvolution and matmul problems (linear_internal.h).
//
// Examples:
//   Conv X[1,32,56,56] W[32,1,3,3] group=32  -> src [1,32,56,56], weights [32,1,1,3,3] (G, O/G,
//     I/G, kh, kw: the same memory as ONNX's [O, I/G, kh, kw]), dst [1,32,56,56]
//   ConvTranspose X[1,64,28,28] W[64,32,2,2] strides=2 -> weights [32,64,2,2] with strides
//     [4,128,2,1] (ONNX stores input channels first)
//   MatMul [1,197,768] x [768,3072] -> [197,768] x [768,3072] (rows collapsed: one GEMM)
//   Einsum "BGHID,BGHJD->BGHIJ" -> batched matmul [B,G,H,I,D] x [B,G,H,D,J] where the weights
//     are B's memory read through strides (K before N: transposed)
#include "codegen/linear_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "ir/op_registry.h"

namespace korch::linear_detail {

namespace {

// Python-style floor division (ONNX's ConvTranspose splits odd total padding this way).
int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t i = s.size(); i-- > 1;) st[i - 1] = st[i] * s[i];
  return st;
}

struct ConvAttrs {
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad;
  int64_t group = 1;
};

std::string read_conv_attrs(const Node& n, size_t ns, ConvAttrs& a) {
  a.strides = n.attrs.get_ints("strides", std::vector<int64_t>(ns, 1));
  a.dilations = n.attrs.get_ints("dilations", std::vector<int64_t>(ns, 1));
  a.pads = n.attrs.get_ints("pads", std::vector<int64_t>(2 * ns, 0));
  a.auto_pad = n.attrs.get_string("auto_pad", "NOTSET");
  if (a.auto_pad.empty()) a.auto_pad = "NOTSET";
  a.group = n.attrs.get_int("group", 1);
  if (a.strides.size() != ns || a.dilations.size() != ns || a.pads.size() != 2 * ns || a.group < 1)
    return fmt::format("{} with malformed strides/dilations/pads/group", n.op_type);
  if (a.auto_pad != "NOTSET" && a.auto_pad != "SAME_UPPER" && a.auto_pad != "SAME_LOWER" && a.auto_pad != "VALID")
    return fmt::format("{} auto_pad '{}'", n.op_type, a.auto_pad);
  return "";
}

// A channels-last Conv (ir/ops/conv.cc) has X [N, spatial.., C] and Y [N, spatial.., M] in the
// graph: oneDNN gets the NCHW dims with the memory's NHWC strides (src_strides, dst_strides).
LinearGeometry conv(const Graph& g, const Node& n) {
  LinearGeometry r;
  const bool cl = channels_last_layout(n.attrs);
  const Shape& xg = g.type(n.inputs[0]).shape;
  const Shape& w = g.type(n.inputs[1]).shape;
  const Shape& yg = g.type(n.outputs[0]).shape;
  const size_t rank = xg.size();
  if (rank < 3 || rank > 5) return {fmt::format("Conv with input rank {} (oneDNN: 1-D to 3-D)", rank)};
  if (yg.size() != rank) return {"Conv with inconsistent shapes"};
  const auto first = channels_first_perm(static_cast<int64_t>(rank));
  const Shape x = cl ? permute_shape(xg, first) : xg, y = cl ? permute_shape(yg, first) : yg;
  const size_t ns = rank - 2;
  ConvAttrs a;
  if (auto why = read_conv_attrs(n, ns, a); !why.empty()) return {why};
  if (w.size() != rank || y.size() != rank || x[1] % a.group != 0 || w[0] % a.group != 0 || w[1] * a.group != x[1])
    return {"Conv with inconsistent shapes"};
  std::vector<int64_t> pb(ns), pe(ns), dd(ns);
  for (size_t i = 0; i < ns; ++i) {
    const int64_t in = x[2 + i], k = w[2 + i], s = a.strides[i], ek = (k - 1) * a.dilations[i] + 1;
    if (a.auto_pad == "SAME_UPPER" || a.auto_pad == "SAME_LOWER") {
      const AxisPads p = same_auto_pads(in, (in + s - 1) / s, s, ek, a.auto_pad == "SAME_UPPER");
      pb[i] = p.before;
      pe[i] = p.after;
    } else if (a.auto_pad == "NOTSET") {
      pb[i] = a.pads[i];
      pe[i] = a.pads[ns + i];
    }
    dd[i] = a.dilations[i] - 1;
    if ((in + pb[i] + pe[i] - ek) / s + 1 != y[2 + i]) return {"Conv output shape does not match its attributes"};
  }
  Shape wd = w;
  if (a.group > 1) {  // oneDNN grouped weights [G, O/G, I/G, k...]: the same memory as ONNX [O, I/G, k...]
    wd = {a.group, w[0] / a.group};
    wd.insert(wd.end(), w.begin() + 1, w.end());
  }
  r.fields = {{"op", "Conv"}, {"src_dims", x}, {"weights_dims", wd}, {"dst_dims", y},
              {"conv", {{"strides", a.strides}, {"dilations", dd}, {"pads_begin", pb}, {"pads_end", pe}, {"group", a.group}}}};
  if (cl) {  // the NHWC memory read as NCHW dims: stride of dim first[i] of the row-major NHWC tensor
    auto strides = [&](const Shape& s) {
      const std::vector<int64_t> st = row_major_strides(s);
      return permute_shape(st, first);
    };
    r.fields["src_strides"] = strides(xg);
    r.fields["dst_strides"] = strides(yg);
    r.channels_last = true;
  }
  r.src_dims = x;
  r.weights_dims = wd;
  r.onnx_out = yg;
  r.dnnl_dst = y;
  r.channel_first = true;
  return r;
}

// ONNX: out = s*(in-1) + output_padding + ((k-1)*d+1) - pad_begin - pad_end. oneDNN's
// deconvolution has no output_padding: it is the same as a smaller end padding.
LinearGeometry conv_transpose(const Graph& g, const Node& n) {
  LinearGeometry r;
  const Shape& x = g.type(n.inputs[0]).shape;
  const Shape& w = g.type(n.inputs[1]).shape;
  const Shape& y = g.type(n.outputs[0]).shape;
  const size_t rank = x.size();
  if (rank < 3 || rank > 5) return {fmt::format("ConvTranspose with input rank {} (oneDNN: 1-D to 3-D)", rank)};
  const size_t ns = rank - 2;
  ConvAttrs a;
  if (auto why = read_conv_attrs(n, ns, a); !why.empty()) return {why};
  if (w.size() != rank || y.size() != rank || w[0] != x[1] || x[1] % a.group != 0 || y[1] != w[1] * a.group)
    return {"ConvTranspose with inconsistent shapes"};
  std::vector<int64_t> opad = n.attrs.get_ints("output_padding", std::vector<int64_t>(ns, 0));
  if (opad.size() == 2 * ns) opad.resize(ns);
  if (opad.size() != ns) return {"ConvTranspose with malformed output_padding"};
  const bool explicit_pads = n.attrs.has("pads") && a.auto_pad == "NOTSET";
  const bool has_oshape = n.attrs.has("output_shape");
  std::vector<int64_t> pb(ns), pe(ns), dd(ns);
  for (size_t i = 0; i < ns; ++i) {
    const int64_t in = x[2 + i], s = a.strides[i], ek = (w[2 + i] - 1) * a.dilations[i] + 1;
    const int64_t natural = s * (in - 1) + opad[i] + ek;
    if (a.auto_pad == "VALID") {
      pb[i] = 0;
    } else if (explicit_pads || (a.auto_pad == "NOTSET" && !has_oshape)) {
      pb[i] = a.pads[i];
    } else {  // the interpreter's rule (ir/ops/conv.cc) for SAME_* and output_shape
      const int64_t total = natural - y[2 + i];
      pb[i] = a.auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
    }
    pe[i] = s * (in - 1) + ek - pb[i] - y[2 + i];  // output_padding folded in
    dd[i] = a.dilations[i] - 1;
    if (pb[i] < 0 || pe[i] < 0) return {"ConvTranspose whose output padding exceeds its end padding"};
  }
  // ONNX W [C, M/G, k..] is [G, C/G, M/G, k..] in memory; oneDNN wants dims [G, M/G, C/G, k..].
  const int64_t G = a.group, ic = x[1] / G, oc = w[1];
  int64_t ksize = 1;
  for (size_t i = 2; i < w.size(); ++i) ksize *= w[i];
  Shape wd = {oc, ic};
  std::vector<int64_t> ws = {ksize, oc * ksize};
  if (G > 1) {
    wd.insert(wd.begin(), G);
    ws.insert(ws.begin(), ic * oc * ksize);
  }
  const std::vector<int64_t> kst = row_major_strides(Shape(w.begin() + 2, w.end()));
  wd.insert(wd.end(), w.begin() + 2, w.end());
  ws.insert(ws.end(), kst.begin(), kst.end());
  r.fields = {{"op", "ConvTranspose"}, {"src_dims", x}, {"weights_dims", wd}, {"weights_strides", ws}, {"dst_dims", y},
              {"conv", {{"strides", a.strides}, {"dilations", dd}, {"pads_begin", pb}, {"pads_end", pe}, {"group", G}}}};
  r.src_dims = x;
  r.weights_dims = wd;
  r.onnx_out = r.dnnl_dst = y;
  r.channel_first = true;
  return r;
}

LinearGeometry matmul(const Graph& g, const Node& n) {
  LinearGeometry r;
  Shape a = g.type(n.inputs[0]).shape, b = g.type(n.inputs[1]).shape;
  if (a.empty() || b.empty()) return {"MatMul with a scalar operand"};
  r.unit_dims_dropped = a.size() == 1 || b.size() == 1;
  if (a.size() == 1) a.insert(a.begin(), 1);
  if (b.size() == 1) b.push_back(1);
  const size_t rk = std::max(a.size(), b.size());
  if (rk > 12) return {fmt::format("MatMul of rank {} (oneDNN: at most 12)", rk)};
  a.insert(a.begin(), rk - a.size(), 1);
  b.insert(b.begin(), rk - b.size(), 1);
  Shape dst(rk);
  bool b_batch_unit = true;
  for (size_t i = 0; i + 2 < rk; ++i) {
    if (a[i] != b[i] && a[i] != 1 && b[i] != 1) return {"MatMul batch dims do not broadcast"};
    dst[i] = std::max(a[i], b[i]);
    b_batch_unit &= b[i] == 1;
  }
  dst[rk - 2] = a[rk - 2];
  dst[rk - 1] = b[rk - 1];
  if (a[rk - 1] != b[rk - 2]) return {"MatMul inner dims differ"};
  // Weights without batch dims (every Linear layer): one 2-D GEMM over all rows is what oneDNN
  // runs fastest, and it is the same memory.
  if (b_batch_unit && rk > 2) {
    int64_t rows = 1;
    for (size_t i = 0; i + 1 < rk; ++i) rows *= a[i];
    a = {rows, a[rk - 1]};
    b = {b[rk - 2], b[rk - 1]};
    dst = {rows, dst[rk - 1]};
    r.rows_collapsed = true;
  }
  r.fields = {{"op", "MatMul"}, {"src_dims", a}, {"weights_dims", b}, {"dst_dims", dst}};
  r.src_dims = a;
  r.weights_dims = b;
  r.onnx_out = g.type(n.outputs[0]).shape;
  r.dnnl_dst = dst;
  return r;
}

// Two-operand Einsum without ellipsis whose output is [batch.., M?, N?] in that order, with one
// contracted label: a batched matmul over strided views of both operands.
LinearGeometry einsum(const Graph& g, const Node& n) {
  LinearGeometry r;
  std::string eq;
  for (char c : n.attrs.get_string("equation", "")) if (c != ' ') eq += c;
  const size_t arrow = eq.find("->"), comma = eq.find(',');
  if (n.inputs.size() != 2 || arrow == std::string::npos || comma == std::string::npos || comma > arrow ||
      eq.find('.') != std::string::npos || eq.find(',', comma + 1) < arrow)
    return {fmt::format("Einsum '{}' (only two operands, an explicit output and no ellipsis)", eq)};
  const std::string ta = eq.substr(0, comma), tb = eq.substr(comma + 1, arrow - comma - 1), to = eq.substr(arrow + 2);
  const Shape& sa = g.type(n.inputs[0]).shape;
  const Shape& sb = g.type(n.inputs[1]).shape;
  if (ta.size() != sa.size() || tb.size() != sb.size()) return {"Einsum subscripts do not match the operand ranks"};
  std::map<char, int64_t> size, stride_a, stride_b;
  const auto st_a = row_major_strides(sa), st_b = row_major_strides(sb);
  for (size_t i = 0; i < ta.size(); ++i) {
    if (stride_a.count(ta[i])) return {"Einsum with a repeated label (a diagonal)"};
    size[ta[i]] = sa[i];
    stride_a[ta[i]] = st_a[i];
  }
  for (size_t i = 0; i < tb.size(); ++i) {
    if (stride_b.count(tb[i])) return {"Einsum with a repeated label (a diagonal)"};
    if (size.count(tb[i]) && size[tb[i]] != sb[i]) return {"Einsum label sizes differ (broadcasting)"};
    size[tb[i]] = sb[i];
    stride_b[tb[i]] = st_b[i];
  }
  std::string batch, m, nn, k;
  for (char c : to) {
    const bool in_a = stride_a.count(c), in_b = stride_b.count(c);
    if (in_a && in_b) batch += c;
    else if (in_a) m += c;
    else if (in_b) nn += c;
    else return {"Einsum output label missing from the inputs"};
  }
  for (auto& [c, s] : size)
    if (to.find(c) == std::string::npos) {
      if (!stride_a.count(c) || !stride_b.count(c)) return {"Einsum summing a label of one operand only"};
      k += c;
    }
  if (k.size() != 1 || to != batch + m + nn)
    return {fmt::format("Einsum '{}' is not a batched matmul with [batch.., M.., N..] output", eq)};
  if (batch.size() + 2 > 12) return {"Einsum with more than 10 batch labels"};
  // Several M (or N) labels are one dim when their operand stores them as one (row-major within).
  auto collapse = [&](const std::string& labels, std::map<char, int64_t>& st, int64_t& extent, int64_t& stride) {
    extent = 1;
    stride = 1;
    for (size_t i = 0; i < labels.size(); ++i) {
      if (i + 1 < labels.size() && st[labels[i]] != st[labels[i + 1]] * size[labels[i + 1]]) return false;
      extent *= size[labels[i]];
      stride = st[labels[i]];
    }
    return true;
  };
  int64_t M = 1, N = 1, m_stride = 1, n_stride = 1;
  if (!collapse(m, stride_a, M, m_stride) || !collapse(nn, stride_b, N, n_stride))
    return {fmt::format("Einsum '{}': its M or N labels are not contiguous in the operand", eq)};
  const int64_t K = size[k[0]];
  Shape src, wei, dst;
  std::vector<int64_t> src_st, wei_st;
  for (char c : batch) {
    src.push_back(size[c]); wei.push_back(size[c]); dst.push_back(size[c]);
    src_st.push_back(stride_a[c]); wei_st.push_back(stride_b[c]);
  }
  src.insert(src.end(), {M, K});
  src_st.insert(src_st.end(), {m.empty() ? K * stride_a[k[0]] : m_stride, stride_a[k[0]]});
  wei.insert(wei.end(), {K, N});
  wei_st.insert(wei_st.end(), {stride_b[k[0]], n_stride});
  dst.insert(dst.end(), {M, N});
  r.fields = {{"op", "MatMul"}, {"src_dims", src}, {"src_strides", src_st}, {"weights_dims", wei},
              {"weights_strides", wei_st}, {"dst_dims", dst}};
  r.src_dims = src;
  r.weights_dims = wei;
  r.onnx_out = g.type(n.outputs[0]).shape;
  r.dnnl_dst = dst;
  // [m1, m2, N] as [m1*m2, N] is MatMul's collapsed-rows case; other shape changes allow only
  // full-shape or single-value epilogue operands.
  r.rows_collapsed = batch.empty() && nn.size() == 1 && m.size() > 1;
  r.unit_dims_dropped = !r.rows_collapsed && (m.size() != 1 || nn.size() != 1);
  return r;
}

}  // namespace

LinearGeometry linear_geometry(const Graph& g, const Node& n) {
  if (n.op_type == "Conv") {
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) return {"Conv with a bias input (fission splits it off)"};
    return conv(g, n);
  }
  if (n.op_type == "ConvTranspose") {
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue) return {"ConvTranspose with a bias input (fission splits it off)"};
    return conv_transpose(g, n);
  }
  if (n.op_type == "MatMul" || n.op_type == "MatMulInteger") return matmul(g, n);
  if (n.op_type == "ConvInteger") return conv(g, n);  // inputs 2 and 3 are zero points, not a bias
  if (n.op_type == "Einsum") return einsum(g, n);
  return {fmt::format("{} is not supported by the oneDNN linear step", n.op_type)};
}

}  // namespace korch::linear_detail
