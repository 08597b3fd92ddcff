// oneDNN 2.6 convolutions with and without an eltwise post-op (swish, logistic): what fusing a
// SiLU into a convolution costs here, against the separate Sigmoid+Mul loop kernel Korch
// generates. EfficientNet-B0's shapes (stem, depthwise, 1x1 expansions), channels-last
// activations, weights in the layout oneDNN prefers, bias; median of 250 runs after 50, 2 threads.
// Question it answers: why do Korch's plans keep a convolution's SiLU as its own kernel when
// oneDNN could apply it as a post-op? (bench/results/onednn_eltwise_postops.md)
//
//   g++ -O2 -std=c++17 bench/onednn_eltwise_postops.cc -ldnnl -o /tmp/eltwise_postops
//   OMP_NUM_THREADS=2 /tmp/eltwise_postops
// It builds against oneDNN 3.x too (PyPI's onednn-cpu-gomp + onednn-devel-cpu-gomp 2023.2 = 3.2,
// unpacked with unzip; bench/results/onednn_eltwise_postops.md has the command).
#include <dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace {

using namespace dnnl;
using tag = memory::format_tag;

struct Shape {
  int ic, oc, hw, k, stride, groups;
};

enum class Post { kNone, kSwish, kLogistic };

double median_us(engine& eng, stream& st, const Shape& s, Post post, const char** impl) {
  const int pad = s.k / 2, out = (s.hw + 2 * pad - s.k) / s.stride + 1;
  const memory::dims w = s.groups > 1 ? memory::dims{s.groups, s.oc / s.groups, s.ic / s.groups, s.k, s.k}
                                      : memory::dims{s.oc, s.ic, s.k, s.k};
  const memory::desc src({1, s.ic, s.hw, s.hw}, memory::data_type::f32, tag::nhwc);
  const memory::desc dst({1, s.oc, out, out}, memory::data_type::f32, tag::nhwc);
  const memory::desc wd(w, memory::data_type::f32, tag::any), bd({s.oc}, memory::data_type::f32, tag::x);
  post_ops po;
  primitive_attr attr;
#if DNNL_VERSION_MAJOR >= 3  // v3 API: no op descriptors, no eltwise scale
  if (post == Post::kSwish) po.append_eltwise(algorithm::eltwise_swish, 1.f, 0.f);
  if (post == Post::kLogistic) po.append_eltwise(algorithm::eltwise_logistic, 0.f, 0.f);
  attr.set_post_ops(po);
  convolution_forward::primitive_desc pd(eng, prop_kind::forward_inference, algorithm::convolution_direct, src, wd, bd,
                                         dst, {s.stride, s.stride}, {pad, pad}, {pad, pad}, attr);
#else
  convolution_forward::desc d(prop_kind::forward_inference, algorithm::convolution_direct, src, wd, bd, dst,
                              {s.stride, s.stride}, {pad, pad}, {pad, pad});
  if (post == Post::kSwish) po.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f);
  if (post == Post::kLogistic) po.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f);
  attr.set_post_ops(po);
  convolution_forward::primitive_desc pd(d, attr, eng);
#endif
  memory sm(src, eng), dm(dst, eng), wm(pd.weights_desc(), eng), bm(bd, eng);
  auto fill = [](memory& m, size_t bytes, float v) {
    float* p = static_cast<float*>(m.get_data_handle());
    std::fill(p, p + bytes / sizeof(float), v);
  };
  fill(sm, src.get_size(), 0.5f);
  fill(wm, pd.weights_desc().get_size(), 0.01f);
  fill(bm, bd.get_size(), 0.f);
  convolution_forward conv(pd);
  std::vector<double> t;
  for (int i = 0; i < 300; ++i) {
    const auto a = std::chrono::steady_clock::now();
    conv.execute(st, {{DNNL_ARG_SRC, sm}, {DNNL_ARG_WEIGHTS, wm}, {DNNL_ARG_BIAS, bm}, {DNNL_ARG_DST, dm}});
    st.wait();
    const auto b = std::chrono::steady_clock::now();
    if (i >= 50) t.push_back(std::chrono::duration<double, std::micro>(b - a).count());
  }
  std::sort(t.begin(), t.end());
  *impl = pd.impl_info_str();
  return t[t.size() / 2];
}

}  // namespace

int main() {
  engine eng(engine::kind::cpu, 0);
  stream st(eng);
  const Shape shapes[] = {{3, 32, 224, 3, 2, 1},    {32, 32, 112, 3, 1, 32},  {16, 96, 112, 1, 1, 1},
                          {96, 96, 112, 3, 2, 96},  {24, 144, 56, 1, 1, 1},   {144, 144, 56, 3, 1, 144},
                          {40, 240, 28, 1, 1, 1},   {80, 480, 14, 1, 1, 1}};
  std::printf("oneDNN %d.%d\n\n", DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR);
  std::printf("| ic | oc | hw | k | stride | groups | impl | none us | swish us | logistic us | swish adds us | outputs |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& s : shapes) {
    const char* impl = "";
    const double none = median_us(eng, st, s, Post::kNone, &impl);
    const double swish = median_us(eng, st, s, Post::kSwish, &impl);
    const double logistic = median_us(eng, st, s, Post::kLogistic, &impl);
    const int out = (s.hw + 2 * (s.k / 2) - s.k) / s.stride + 1;
    std::printf("| %d | %d | %d | %d | %d | %d | %s | %.1f | %.1f | %.1f | %.1f | %d |\n", s.ic, s.oc, s.hw, s.k,
                s.stride, s.groups, impl, none, swish, logistic, swish - none, s.oc * out * out);
  }
}
