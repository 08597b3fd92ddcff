// oneDNN 2.6 convolutions on channels-last (nhwc) against blocked (nChw8c, nChw16c) activations:
// every convolution of MobileNetV2 after its stem (3x3 depthwise and 1x1 pointwise, bias and a
// ReLU6 post-op), at a batch given on the command line. Weights in the layout oneDNN prefers
// (format any). Median of 50 runs after 10, the faster of two such passes per layout; 2 threads.
// Question it answers: does a blocked activation layout (a pass like channels-last, with loop
// kernels on [N, C/8, H, W, 8]) pay on this CPU? (bench/results/onednn_conv_layouts.md)
//
//   g++ -O2 -std=c++17 bench/onednn_conv_layouts.cc -ldnnl -o /tmp/conv_layouts
//   OMP_NUM_THREADS=2 /tmp/conv_layouts 1      # batch 1; also 4 and 16
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;

struct Shape {
  int ic, oc, hw, k, stride, groups;
};

double median_us(engine& eng, stream& st, const Shape& s, tag t, int batch) {
  const int pad = s.k / 2, out = (s.hw + 2 * pad - s.k) / s.stride + 1;
  const memory::dims w = s.groups > 1 ? memory::dims{s.groups, s.oc / s.groups, s.ic / s.groups, s.k, s.k}
                                      : memory::dims{s.oc, s.ic, s.k, s.k};
  const auto f32 = memory::data_type::f32;
  const memory::desc src({batch, s.ic, s.hw, s.hw}, f32, t), dst({batch, s.oc, out, out}, f32, t);
  const memory::desc wd(w, f32, tag::any), bd({s.oc}, f32, tag::a);
  convolution_forward::desc cd(prop_kind::forward_inference, algorithm::convolution_direct, src, wd, bd, dst,
                               {s.stride, s.stride}, {pad, pad}, {pad, pad});
  post_ops po;
  po.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 6.f);
  primitive_attr attr;
  attr.set_post_ops(po);
  convolution_forward::primitive_desc pd(cd, attr, eng);
  memory a(pd.src_desc(), eng), b(pd.weights_desc(), eng), c(pd.dst_desc(), eng), bias(bd, eng);
  float* ap = static_cast<float*>(a.get_data_handle());
  float* wp = static_cast<float*>(b.get_data_handle());
  std::fill(ap, ap + pd.src_desc().get_size() / 4, 0.5f);
  std::fill(wp, wp + pd.weights_desc().get_size() / 4, 0.01f);
  convolution_forward conv(pd);
  std::vector<double> times;
  for (int i = 0; i < 60; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    conv.execute(st, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, c}});
    st.wait();
    if (i >= 10)
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// MobileNetV2's inverted residual blocks (expansion 1x1, depthwise 3x3, projection 1x1) after the stem.
std::vector<Shape> mobilenet_v2() {
  std::vector<Shape> v = {{32, 32, 112, 3, 1, 32}, {32, 16, 112, 1, 1, 1}};
  struct Stage {
    int out, repeats, stride;
  };
  const Stage stages[] = {{24, 2, 2}, {32, 3, 2}, {64, 4, 2}, {96, 3, 1}, {160, 3, 2}, {320, 1, 1}};
  int c = 16, hw = 112;
  for (const Stage& st : stages)
    for (int r = 0; r < st.repeats; ++r) {
      const int e = c * 6, stride = r == 0 ? st.stride : 1, out_hw = (hw + 2 - 3) / stride + 1;
      v.push_back({c, e, hw, 1, 1, 1});
      v.push_back({e, e, hw, 3, stride, e});
      v.push_back({e, st.out, out_hw, 1, 1, 1});
      c = st.out;
      hw = out_hw;
    }
  v.push_back({320, 1280, 7, 1, 1, 1});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int batch = argc > 1 ? std::atoi(argv[1]) : 1;
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  const tag tags[3] = {tag::nhwc, tag::nChw8c, tag::nChw16c};
  double total[3] = {0, 0, 0};
  std::printf("batch %d, us          nhwc   nChw8c  nChw16c\n", batch);
  for (const Shape& s : mobilenet_v2()) {
    double t[3];
    for (int pass = 0; pass < 2; ++pass)
      for (int i = 0; i < 3; ++i) {
        const double x = median_us(eng, st, s, tags[i], batch);
        t[i] = pass ? std::min(t[i], x) : x;
      }
    for (int i = 0; i < 3; ++i) total[i] += t[i];
    std::printf("%4d->%4d %3dx%-3d k%d s%d %s %8.1f %8.1f %8.1f\n", s.ic, s.oc, s.hw, s.hw, s.k, s.stride,
                s.groups > 1 ? "dw" : "  ", t[0], t[1], t[2]);
  }
  std::printf("total us: nhwc %.0f  nChw8c %.0f  nChw16c %.0f\n", total[0], total[1], total[2]);
}
