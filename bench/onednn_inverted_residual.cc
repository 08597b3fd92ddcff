// MobileNetV2's inverted residual blocks on oneDNN 2.6 (batch 1, ReLU6 after each convolution,
// bias, random data; median of 300 runs after 50, 2 threads). Two questions from issue 12:
//  1. The depthwise post-op (post_ops::append_dw): a 1x1 convolution and the 3x3 depthwise one
//     after it as one primitive, so the expanded activation (six times the block's channels) is
//     never written whole. Would a linear kernel of the two beat the two kernels Korch runs?
//  2. Blocked activations (nChw16c, what OpenVINO keeps end to end) against channels-last (NHWC,
//     what Korch's CNN plans run): is either layout's convolution faster, one primitive at a time?
// (bench/results/onednn_inverted_residual.md)
//
//   g++ -O2 -std=c++17 bench/onednn_inverted_residual.cc -ldnnl -o /tmp/inverted_residual
//   OMP_NUM_THREADS=2 /tmp/inverted_residual
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <dnnl.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;
using dt = memory::data_type;

struct Shape {
  int ic, mid, hw, stride;  // 1x1: ic -> mid at hw x hw; then 3x3 depthwise on mid, stride
};

void fill_random(memory& m, size_t bytes, std::mt19937& rng, float scale) {
  std::normal_distribution<float> n(0.f, scale);
  float* p = static_cast<float*>(m.get_data_handle());
  for (size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = n(rng);
}

template <typename F>
double median_us(F&& run) {
  std::vector<double> t;
  for (int i = 0; i < 350; ++i) {
    const auto a = std::chrono::steady_clock::now();
    run();
    const auto b = std::chrono::steady_clock::now();
    if (i >= 50) t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

post_ops relu6() {
  post_ops po;
  po.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
  return po;
}

struct Result {
  double separate = 0, fused = 0, max_rel = 0;
  std::string impl_1x1, impl_dw, impl_fused;
};

Result probe(engine& eng, stream& st, const Shape& s, tag act) {
  std::mt19937 rng(7);
  const int out = (s.hw + 2 - 3) / s.stride + 1;
  const memory::desc src({1, s.ic, s.hw, s.hw}, dt::f32, act);
  const memory::desc mid({1, s.mid, s.hw, s.hw}, dt::f32, act);
  const memory::desc dst({1, s.mid, out, out}, dt::f32, act);
  const memory::desc w1({s.mid, s.ic, 1, 1}, dt::f32, tag::any), b1({s.mid}, dt::f32, tag::x);
  const memory::desc w2({s.mid, 1, 1, 3, 3}, dt::f32, tag::any), b2({s.mid}, dt::f32, tag::x);
  Result r;

  // Separate: the 1x1 (+ReLU6) writes the expanded activation, the depthwise (+ReLU6) reads it.
  primitive_attr a1;
  a1.set_post_ops(relu6());
  convolution_forward::primitive_desc pd1(
      {prop_kind::forward_inference, algorithm::convolution_direct, src, w1, b1, mid, {1, 1}, {0, 0}, {0, 0}}, a1, eng);
  convolution_forward::primitive_desc pd2({prop_kind::forward_inference,
                                           algorithm::convolution_direct,
                                           mid,
                                           w2,
                                           b2,
                                           dst,
                                           {s.stride, s.stride},
                                           {1, 1},
                                           {1, 1}},
                                          a1, eng);
  r.impl_1x1 = pd1.impl_info_str();
  r.impl_dw = pd2.impl_info_str();
  memory sm(src, eng), mm(mid, eng), dm(dst, eng), w1m(pd1.weights_desc(), eng), b1m(b1, eng),
      w2m(pd2.weights_desc(), eng), b2m(b2, eng);
  fill_random(sm, src.get_size(), rng, 1.f);
  fill_random(w1m, pd1.weights_desc().get_size(), rng, 1.f / std::sqrt(float(s.ic)));
  fill_random(b1m, b1.get_size(), rng, 0.1f);
  fill_random(w2m, pd2.weights_desc().get_size(), rng, 1.f / 3.f);
  fill_random(b2m, b2.get_size(), rng, 0.1f);
  convolution_forward c1(pd1), c2(pd2);
  r.separate = median_us([&] {
    c1.execute(st, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, w1m}, {DNNL_ARG_BIAS, b1m}, {DNNL_ARG_DST, mm}});
    c2.execute(st, {{DNNL_ARG_SRC, mm}, {DNNL_ARG_WEIGHTS, w2m}, {DNNL_ARG_BIAS, b2m}, {DNNL_ARG_DST, dm}});
    st.wait();
  });

  // Fused: the 1x1 with post-ops ReLU6, depthwise 3x3 (stride), ReLU6. Its dst is the
  // depthwise's output; the depthwise's weights and bias are extra arguments.
  post_ops po = relu6();
  po.append_dw(dt::f32, dt::f32, dt::f32, 3, s.stride, 1, 0, {});
  po.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
  primitive_attr af;
  af.set_post_ops(po);
  try {
    convolution_forward::primitive_desc pdf(
        {prop_kind::forward_inference, algorithm::convolution_direct, src, w1, b1, mid, {1, 1}, {0, 0}, {0, 0}}, af,
        eng);
    r.impl_fused = pdf.impl_info_str();
    memory fdm(pdf.dst_desc(), eng), fw1(pdf.weights_desc(), eng);
    // The fused primitive may want its own weights layouts: reorder the separate ones into them.
    reorder(w1m, fw1).execute(st, w1m, fw1);
    const memory::desc fw2d = pdf.query_md(query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    memory fw2(fw2d, eng);
    reorder(w2m, fw2).execute(st, w2m, fw2);
    st.wait();
    convolution_forward cf(pdf);
    const std::unordered_map<int, memory> args{{DNNL_ARG_SRC, sm},
                                               {DNNL_ARG_WEIGHTS, fw1},
                                               {DNNL_ARG_BIAS, b1m},
                                               {DNNL_ARG_DST, fdm},
                                               {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS, fw2},
                                               {DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS, b2m}};
    r.fused = median_us([&] {
      cf.execute(st, args);
      st.wait();
    });
    // Same numbers as the separate pair? (its dst in the separate pair's layout)
    memory fd_plain(dst, eng);
    reorder(fdm, fd_plain).execute(st, fdm, fd_plain);
    st.wait();
    const float* a = static_cast<const float*>(dm.get_data_handle());
    const float* b = static_cast<const float*>(fd_plain.get_data_handle());
    double num = 0, den = 0;
    for (size_t i = 0; i < dst.get_size() / sizeof(float); ++i) {
      num += (a[i] - b[i]) * double(a[i] - b[i]);
      den += double(a[i]) * a[i];
    }
    r.max_rel = std::sqrt(num / std::max(den, 1e-30));
  } catch (const dnnl::error& e) {
    r.impl_fused = std::string("none: ") + e.what();
  }
  return r;
}

struct Conv {
  int ic, oc, hw, k, stride, groups;
};

// One convolution (+ReLU6) on activations in layout `act`; its implementation's name in `impl`.
double conv_us(engine& eng, stream& st, const Conv& s, tag act, std::string& impl) {
  std::mt19937 rng(3);
  const int pad = s.k / 2, out = (s.hw + 2 * pad - s.k) / s.stride + 1;
  const memory::dims w = s.groups > 1 ? memory::dims{s.groups, s.oc / s.groups, s.ic / s.groups, s.k, s.k}
                                      : memory::dims{s.oc, s.ic, s.k, s.k};
  const memory::desc src({1, s.ic, s.hw, s.hw}, dt::f32, act), dst({1, s.oc, out, out}, dt::f32, act);
  const memory::desc wd(w, dt::f32, tag::any), bd({s.oc}, dt::f32, tag::x);
  primitive_attr a;
  a.set_post_ops(relu6());
  convolution_forward::primitive_desc pd({prop_kind::forward_inference,
                                          algorithm::convolution_direct,
                                          src,
                                          wd,
                                          bd,
                                          dst,
                                          {s.stride, s.stride},
                                          {pad, pad},
                                          {pad, pad}},
                                         a, eng);
  impl = pd.impl_info_str();
  memory sm(src, eng), dm(dst, eng), wm(pd.weights_desc(), eng), bm(bd, eng);
  fill_random(sm, src.get_size(), rng, 1.f);
  fill_random(wm, pd.weights_desc().get_size(), rng, 0.1f);
  fill_random(bm, bd.get_size(), rng, 0.1f);
  convolution_forward c(pd);
  return median_us([&] {
    c.execute(st, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, dm}});
    st.wait();
  });
}

}  // namespace

int main() {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  // MobileNetV2 (batch 1): the expansion 1x1 and the depthwise 3x3 of each stage's blocks.
  const std::vector<Shape> shapes = {{16, 96, 112, 2}, {24, 144, 56, 1}, {24, 144, 56, 2},
                                     {32, 192, 28, 1}, {32, 192, 28, 2}, {64, 384, 14, 1},
                                     {96, 576, 14, 1}, {96, 576, 14, 2}, {160, 960, 7, 1}};
  std::printf(
      "| 1x1 then 3x3 dw (ic -> mid, hw, stride) | layout | separate us | fused us | fused/separate | rel L2 | impls "
      "(1x1 / dw / fused) |\n|---|---|---|---|---|---|---|\n");
  for (tag act : {tag::nhwc, tag::nChw16c})
    for (const Shape& s : shapes) {
      const Result r = probe(eng, st, s, act);
      std::printf("| %d -> %d, %d, s%d | %s | %.1f | %.1f | %.2f | %.1e | %s / %s / %s |\n", s.ic, s.mid, s.hw,
                  s.stride, act == tag::nhwc ? "nhwc" : "nChw16c", r.separate, r.fused,
                  r.fused > 0 ? r.fused / r.separate : 0.0, r.max_rel, r.impl_1x1.c_str(), r.impl_dw.c_str(),
                  r.impl_fused.c_str());
    }

  // Every convolution of MobileNetV2 (batch 1) in both layouts.
  const std::vector<Conv> convs = {
      {32, 32, 112, 3, 1, 32},   {32, 16, 112, 1, 1, 1},    {16, 96, 112, 1, 1, 1},    {96, 96, 112, 3, 2, 96},
      {96, 24, 56, 1, 1, 1},     {24, 144, 56, 1, 1, 1},    {144, 144, 56, 3, 1, 144}, {144, 24, 56, 1, 1, 1},
      {144, 144, 56, 3, 2, 144}, {144, 32, 28, 1, 1, 1},    {32, 192, 28, 1, 1, 1},    {192, 192, 28, 3, 1, 192},
      {192, 32, 28, 1, 1, 1},    {192, 192, 28, 3, 2, 192}, {192, 64, 14, 1, 1, 1},    {64, 384, 14, 1, 1, 1},
      {384, 384, 14, 3, 1, 384}, {384, 64, 14, 1, 1, 1},    {384, 96, 14, 1, 1, 1},    {96, 576, 14, 1, 1, 1},
      {576, 576, 14, 3, 1, 576}, {576, 96, 14, 1, 1, 1},    {576, 576, 14, 3, 2, 576}, {576, 160, 7, 1, 1, 1},
      {160, 960, 7, 1, 1, 1},    {960, 960, 7, 3, 1, 960},  {960, 160, 7, 1, 1, 1},    {960, 320, 7, 1, 1, 1},
      {320, 1280, 7, 1, 1, 1}};
  std::printf(
      "\n| conv (ic -> oc, hw, k, stride, groups) | nhwc us | nChw16c us | nChw16c/nhwc | impls (nhwc / nChw16c) "
      "|\n|---|---|---|---|---|\n");
  double sum_nhwc = 0, sum_blocked = 0;
  for (const Conv& c : convs) {
    std::string i1, i2;
    const double a = conv_us(eng, st, c, tag::nhwc, i1), b = conv_us(eng, st, c, tag::nChw16c, i2);
    sum_nhwc += a;
    sum_blocked += b;
    std::printf("| %d -> %d, %d, k%d s%d g%d | %.1f | %.1f | %.2f | %s / %s |\n", c.ic, c.oc, c.hw, c.k, c.stride,
                c.groups, a, b, b / a, i1.c_str(), i2.c_str());
  }
  std::printf("| all %zu | %.1f | %.1f | %.3f | |\n", convs.size(), sum_nhwc, sum_blocked, sum_blocked / sum_nhwc);
}
