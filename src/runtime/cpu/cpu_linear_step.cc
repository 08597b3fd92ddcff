// LinearStep: one oneDNN 2.6 primitive (convolution, deconvolution or matmul) with post-ops,
// created from the JSON description that match_linear writes (codegen/linear_match.cc documents it).
//
// User memory is at args[slot], row-major unless the description gives strides. Each primitive
// argument is a Binding: a oneDNN memory over the user pointer (handle set per run) and, when the
// primitive chose another layout, an owned buffer plus a reorder. Constant weights are reordered
// on the first run only (their pointer and contents never change; a new pointer is reordered
// again, to stay correct).
//
// Layout of Conv src/dst ("format" in the description): "blocked" lets oneDNN choose
// (format_tag::any: NHWC for brgconv, nChw4c/16c for grouped jit kernels) and reorders the user
// tensors in and out; "plain" runs on NCHW directly, which oneDNN 2.6 serves with its im2col +
// gemm convolution. "auto" is blocked except for plain_is_faster(). Measured on this machine
// (AMD EPYC, avx512_core; tests/codegen/linear_bench_test.cc, 2 threads, CPU-time medians,
// reorders included), plain -> blocked:
//   resnet18 3x3 64c 56x56 4.29 -> 2.35 ms, 1x1 64->256 56x56 5.45 -> 1.88, mobilenet_v2
//   depthwise 144c 56x56 4.03 -> 0.94, stem 7x7 s2 7.95 -> 2.63, candy 9x9 3->32 21.5 -> 8.3,
//   resnext grouped 3x3 4.14 -> 0.93.
// "plain" stays selectable for the profiler. MatMul always runs on plain src/dst (what oneDNN
// picks anyway) with `any` weights when they are constant (blocked once, e.g. ba16a64b).
#include "runtime/cpu/cpu_linear_step.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

#include "runtime/cpu/cpu_dnnl.h"
#include "runtime/cpu/cpu_quant_lstm_step.h"
#include "runtime/cpu/cpu_rnn_step.h"
#include "support/error.h"

namespace korch::cpu {

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

namespace {

using nlohmann::json;
using dnnl::memory;
using dt = memory::data_type;

memory::dims dims_of(const json& j) { return j.get<memory::dims>(); }

memory::desc plain_desc(const memory::dims& d, dt t = dt::f32) {
  memory::dims strides(d.size(), 1);
  for (size_t i = d.size(); i-- > 1;) strides[i - 1] = strides[i] * d[i];
  return memory::desc(d, t, strides);
}

memory::desc any_desc(const memory::dims& d, dt t = dt::f32) { return memory::desc(d, t, memory::format_tag::any); }

dt data_type(const json& d, const char* role) {
  if (!d.contains("dtypes")) return dt::f32;
  const std::string t = d.at("dtypes").at(role).get<std::string>();
  if (t == "u8") return dt::u8;
  if (t == "s8") return dt::s8;
  if (t == "s32") return dt::s32;
  if (t == "f32") return dt::f32;
  fail("linear step: unknown data type '{}'", t);
}

// oneDNN's fallbacks: its reference kernels and im2col + gemm, many times slower than a jit kernel
// (the channels-last retry in DnnlLinearStep::build and dnnl_runs_channels_last).
bool is_fallback_impl(const std::string& impl) {
  return impl.find("ref") != std::string::npos || impl.find("gemm") != std::string::npos;
}

dnnl::algorithm eltwise_alg(const std::string& a) {
  static const std::unordered_map<std::string, dnnl::algorithm> m = {
      {"relu", dnnl::algorithm::eltwise_relu},         {"elu", dnnl::algorithm::eltwise_elu},
      {"logistic", dnnl::algorithm::eltwise_logistic}, {"tanh", dnnl::algorithm::eltwise_tanh},
      {"exp", dnnl::algorithm::eltwise_exp},           {"log", dnnl::algorithm::eltwise_log},
      {"sqrt", dnnl::algorithm::eltwise_sqrt},         {"abs", dnnl::algorithm::eltwise_abs},
      {"soft_relu", dnnl::algorithm::eltwise_soft_relu}, {"mish", dnnl::algorithm::eltwise_mish},
      {"hardswish", dnnl::algorithm::eltwise_hardswish}, {"linear", dnnl::algorithm::eltwise_linear},
      {"pow", dnnl::algorithm::eltwise_pow},           {"clip", dnnl::algorithm::eltwise_clip},
      {"gelu_erf", dnnl::algorithm::eltwise_gelu_erf}, {"gelu_tanh", dnnl::algorithm::eltwise_gelu_tanh},
      {"swish", dnnl::algorithm::eltwise_swish}};
  auto it = m.find(a);
  if (it == m.end()) fail("linear step: unknown eltwise post-op '{}'", a);
  return it->second;
}

dnnl::algorithm binary_alg(const std::string& a) {
  static const std::unordered_map<std::string, dnnl::algorithm> m = {
      {"add", dnnl::algorithm::binary_add}, {"mul", dnnl::algorithm::binary_mul},
      {"sub", dnnl::algorithm::binary_sub}, {"div", dnnl::algorithm::binary_div},
      {"max", dnnl::algorithm::binary_max}, {"min", dnnl::algorithm::binary_min}};
  auto it = m.find(a);
  if (it == m.end()) fail("linear step: unknown binary post-op '{}'", a);
  return it->second;
}

// The scratchpad of every oneDNN step the calling thread runs (steps run one at a time on it):
// grown to the largest asked for, never shrunk. With oneDNN's own (scratchpad_mode::library),
// 2.6 allocates its global scratchpad before each execution and frees it after when no other
// primitive holds it, which for the megabytes a Winograd convolution needs is an mmap, page
// faults and an munmap per run. densenet121 with Winograd steps (cpu_backend.h), 2 threads,
// alternating runs: 24.9 -> 24.05 ms (32.3 -> 30.2 ms while this VM ran slower); resnet18 the same.
void* thread_scratchpad(size_t bytes) {
  struct Buffer {
    void* p = nullptr;
    size_t n = 0;
    ~Buffer() { std::free(p); }
  };
  thread_local Buffer b;
  if (bytes > b.n) {
    const size_t n = (bytes + 4095) / 4096 * 4096;
    void* p = std::aligned_alloc(4096, n);
    if (!p) throw std::bad_alloc();
    std::free(b.p);
    b.p = p;
    b.n = n;
  }
  return b.p;
}

// One primitive argument bound to a user slot.
struct Binding {
  int arg = 0;          // DNNL_ARG_*
  int slot = -1;        // args[] index
  bool output = false;
  bool once = false;    // constant input: reorder on the first run (or a new pointer) only
  memory user;          // plain, over args[slot]
  memory inner;         // the primitive's layout when it differs from plain; else empty
  bool external = false;  // args[slot] itself holds `inner`'s layout (layout handoff): no reorder
  dnnl::reorder reorder;
  const void* reordered_from = nullptr;
};

class DnnlLinearStep final : public LinearStep {
 public:
  explicit DnnlLinearStep(const json& d);
  void run(void* const* args) override;
  std::string implementation() const override;
  std::string src_layout() const override { return layout_key(DNNL_ARG_SRC); }
  std::string dst_layout() const override { return layout_key(DNNL_ARG_DST); }
  int64_t dst_layout_bytes() const override {
    const Binding* b = binding(DNNL_ARG_DST);
    return b && b->inner ? static_cast<int64_t>(b->inner.get_desc().get_size()) : 0;
  }
  int src_slot() const override { const Binding* b = binding(DNNL_ARG_SRC); return b ? b->slot : -1; }
  int result_slot() const override { const Binding* b = binding(DNNL_ARG_DST); return b ? b->slot : -1; }
  bool reads_only_as_src(int slot) const override {
    if (sum_slot_ == slot) return false;
    for (const Binding& b : bindings_)
      if (b.slot == slot && b.arg != DNNL_ARG_SRC) return false;
    return src_slot() == slot;
  }
  bool reads_only_as_sum(int slot) const override {
    if (sum_slot_ != slot) return false;
    for (const Binding& b : bindings_)
      if (b.slot == slot) return false;
    return true;
  }
  void set_sum_in_layout(bool on) override { sum_in_layout_ = on && sum_slot_ >= 0 && binding(DNNL_ARG_DST)->inner; }
  void set_src_in_layout(bool on) override { if (Binding* b = binding(DNNL_ARG_SRC)) b->external = on && b->inner; }
  void set_dst_in_layout(bool on) override { if (Binding* b = binding(DNNL_ARG_DST)) b->external = on && b->inner; }
  std::vector<std::pair<const void*, int64_t>> constant_copies() const override {
    std::vector<std::pair<const void*, int64_t>> copies;
    for (const Binding& b : bindings_)
      if (b.once && b.inner && b.reordered_from)
        copies.emplace_back(b.inner.get_data_handle(), static_cast<int64_t>(b.inner.get_desc().get_size()));
    return copies;
  }
  runtime::ReorderStats reorders_per_run() const override {
    runtime::ReorderStats r;
    for (const Binding& b : bindings_)
      if (b.inner && !b.external && !b.once) {
        ++r.count;
        r.bytes += static_cast<int64_t>(b.user.get_desc().get_size());
      }
    // The residual goes into the dst buffer first: a reorder when that buffer has another layout
    // (a plain copy otherwise, not counted).
    const Binding* dst = binding(DNNL_ARG_DST);
    if (sum_slot_ >= 0 && !sum_in_layout_ && dst && dst->inner) {
      ++r.count;
      r.bytes += static_cast<int64_t>(sum_user_.get_desc().get_size());
    }
    return r;
  }

 private:
  void build(const json& d);
  const Binding* binding(int arg) const {
    for (const Binding& b : bindings_)
      if (b.arg == arg) return &b;
    return nullptr;
  }
  Binding* binding(int arg) { return const_cast<Binding*>(std::as_const(*this).binding(arg)); }
  // The primitive's layout for `arg` as a comparable key: dims, data type, strides and inner
  // blocks ("" when it is the plain user layout).
  std::string layout_key(int arg) const {
    const Binding* b = binding(arg);
    if (!b || !b->inner) return "";
    const auto& m = b->inner.get_desc().data;
    const auto& bd = m.format_desc.blocking;
    std::string k = fmt::format("t{} f{} o{}:", static_cast<int>(m.data_type), static_cast<int>(m.format_kind), m.offset0);
    for (int i = 0; i < m.ndims; ++i) k += fmt::format("{}/{}/{},", m.dims[i], m.padded_dims[i], bd.strides[i]);
    for (int i = 0; i < bd.inner_nblks; ++i) k += fmt::format("b{}:{},", bd.inner_idxs[i], bd.inner_blks[i]);
    return k;
  }
  // `user`: the layout at args[slot]; `chosen`: the primitive's (an owned buffer + reorder if
  // they differ). `once`: a constant input, reordered on its first run only.
  void bind(int arg, int slot, const memory::desc& user, const memory::desc& chosen, bool output, bool once);

  dnnl::primitive_desc pd_;
  dnnl::primitive prim_;
  dnnl::stream stream_;
  std::vector<Binding> bindings_;
  std::unordered_map<int, memory> exec_args_;
  // ConvInteger / MatMulInteger: x's zero point in the s32 memory oneDNN takes at run time; a
  // constant is written once, else it is read from args[zp_slot_] (u8 or s8) each run.
  int zp_slot_ = -1;
  bool zp_unsigned_ = true;
  memory zp_mem_;
  memory scratchpad_;  // over thread_scratchpad() when the primitive asks for one
  // A residual Add/Sub run as a sum post-op: copied (reordered) into the dst memory first.
  int sum_slot_ = -1;
  memory sum_user_;
  dnnl::reorder sum_copy_;
  bool sum_in_layout_ = false;  // args[sum_slot_] already holds the residual in the dst layout
};

bool is_per_channel(const memory::dims& operand, const memory::dims& dst, size_t channel_dim) {
  for (size_t i = 0; i < dst.size(); ++i)
    if (operand[i] != (i == channel_dim ? dst[i] : 1)) return false;
  return dst[channel_dim] > 1;
}

// The "auto" layout rule's one exception to blocked: a channel-reducing 1x1 convolution (IC >= 4
// OC, stride 1, no padding) on at most 28x28 pixels is one sgemm on NCHW, and the reorders around
// a blocked kernel cost more than it saves there. 2 threads, wall medians, plain vs blocked (ms):
// 384->64 14x14 0.122 vs 0.142, 576->96 14x14 0.243 vs 0.292, 192->32 28x28 0.127 vs 0.201,
// 1024->256 14x14 0.609 vs 0.703; but 256->64 at 56x56 1.08 vs 0.86 and expanding 1x1 convs
// (64->384 14x14 0.377 vs 0.170) go blocked.
bool plain_is_faster(const json& d) {
  if (d.at("op") != "Conv" || d.contains("dtypes")) return false;  // int8: oneDNN has no NCHW kernel but ref_int8
  const json& c = d.at("conv");
  const auto src = dims_of(d.at("src_dims")), wei = dims_of(d.at("weights_dims")), dst = dims_of(d.at("dst_dims"));
  if (c.at("group").get<int64_t>() != 1) return false;
  int64_t pixels = 1;
  for (size_t i = 2; i < dst.size(); ++i) {
    if (wei[i] != 1 || c.at("strides")[i - 2] != 1 || c.at("pads_begin")[i - 2] != 0 || c.at("pads_end")[i - 2] != 0)
      return false;
    pixels *= dst[i];
  }
  return src[1] >= 4 * dst[1] && pixels <= 28 * 28;
}

// A spatial axis of size 1 in the source, the weights and the destination, unpadded, is no axis at
// all, but oneDNN picks its kernels by shape: a [5, 1]-kernel convolution over a [512, 1] image
// (magika's 1-D convolution written in 2-D) took 7.7 ms where the same one in 1-D took 3.3 ms (2
// threads, brgconv either way). Such axes are dropped from every dims and strides field and from
// the conv parameters (one spatial axis stays); the user memory is the same bytes.
json squeeze_unit_spatial(json d) {
  const std::string op = d.at("op").get<std::string>();
  if (op != "Conv" && op != "ConvTranspose") return d;
  json& c = d.at("conv");
  auto erase = [](json& arr, size_t i) {
    if (arr.is_array() && i < arr.size()) arr.erase(i);
  };
  for (size_t i = d.at("dst_dims").size(); i-- > 2;) {
    const size_t rank = d.at("dst_dims").size(), s = i - 2;
    if (rank <= 3) break;
    if (d.at("src_dims")[i] != 1 || d.at("weights_dims")[i] != 1 || d.at("dst_dims")[i] != 1 ||
        c.at("pads_begin")[s] != 0 || c.at("pads_end")[s] != 0)
      continue;
    for (const char* key : {"src_dims", "weights_dims", "dst_dims", "src_strides", "weights_strides", "dst_strides"})
      if (d.contains(key)) erase(d[key], i);
    for (const char* key : {"strides", "dilations", "pads_begin", "pads_end"})
      if (c.contains(key)) erase(c[key], s);
    for (json& operand : d.at("operands"))
      if (operand.at("dims").size() == rank) erase(operand.at("dims"), i);
  }
  return d;
}

DnnlLinearStep::DnnlLinearStep(const json& d) : stream_(cpu_engine()) { build(squeeze_unit_spatial(d)); }

void DnnlLinearStep::bind(int arg, int slot, const memory::desc& user, const memory::desc& chosen, bool output,
                          bool once) {
  Binding b;
  b.arg = arg;
  b.slot = slot;
  b.output = output;
  b.once = once;
  b.user = memory(user, cpu_engine(), DNNL_MEMORY_NONE);
  if (chosen != user) {
    b.inner = memory(chosen, cpu_engine());
    b.reorder = output ? dnnl::reorder(b.inner, b.user) : dnnl::reorder(b.user, b.inner);
  }
  exec_args_[arg] = b.inner ? b.inner : b.user;
  bindings_.push_back(std::move(b));
}

void DnnlLinearStep::build(const json& d) {
  const std::string op = d.at("op").get<std::string>();
  const json& operands = d.at("operands");
  const std::vector<int> slots = d.at("operand_slots").get<std::vector<int>>();
  const int result_slot = d.at("result_slot").get<int>();
  if (slots.size() != operands.size() || result_slot < 0 ||
      std::any_of(slots.begin(), slots.end(), [](int s) { return s < 0; }))
    fail("linear step description has unfilled operand_slots/result_slot");
  const memory::dims src = dims_of(d.at("src_dims")), wei = dims_of(d.at("weights_dims")), dst = dims_of(d.at("dst_dims"));
  const bool deconv = op == "ConvTranspose";
  const bool conv = op == "Conv" || deconv;  // channels at dim 1, `conv` attributes
  if (!conv && op != "MatMul") fail_unsupported("linear step: unknown op '{}'", op);
  // User memory: row-major unless the description gives strides (a transposed view).
  const dt src_t = data_type(d, "src"), wei_t = data_type(d, "weights"), dst_t = data_type(d, "dst");
  auto user_desc = [&](const char* role, const memory::dims& dims, dt t) {
    const std::string key = std::string(role) + "_strides";
    return d.contains(key) ? memory::desc(dims, t, dims_of(d.at(key))) : plain_desc(dims, t);
  };
  const memory::desc src_user = user_desc("src", src, src_t), wei_user = user_desc("weights", wei, wei_t);
  const memory::desc dst_user = user_desc("dst", dst, dst_t);
  // A channels-last Conv (dst_strides given: NHWC memory) runs on its user layout when oneDNN has a
  // fast kernel for it (brgconv and the depthwise jit kernels read NHWC; no reorder either side),
  // else as "blocked" with reorders (see the retry below).
  const bool channels_last = conv && d.contains("dst_strides");
  const bool weights_const = operands.at(1).at("constant").get<bool>();
  const std::string format = d.value("format", "auto");
  if (format != "auto" && format != "blocked" && format != "plain") fail("linear step: unknown format '{}'", format);
  // conv.algorithm "winograd" (a schedule the profiler times beside "direct"): oneDNN's Winograd
  // kernels read and write blocked layouts only, so the step reorders its user tensors around it.
  const std::string algorithm = conv ? d.at("conv").value("algorithm", "direct") : "direct";
  if (algorithm != "direct" && (algorithm != "winograd" || deconv))
    fail("linear step: unknown {} algorithm '{}'", op, algorithm);
  const bool winograd = algorithm == "winograd";
  bool blocked = conv && (winograd || format == "blocked" || (format == "auto" && !channels_last && !plain_is_faster(d)));

  // Post-ops; a first binary Add of a per-channel operand becomes the primitive's own bias.
  const json& ops = d.at("post_ops");
  size_t first = 0;
  int bias_operand = -1;
  const size_t channel_dim = conv ? 1 : dst.size() - 1;
  // (Not for an int8 step: its bias is an f32 post-op after the output scales.)
  if (!d.contains("dtypes") && !ops.empty() && ops[0].at("type") == "binary" && ops[0].at("alg") == "add") {
    const int k = ops[0].at("operand").get<int>();
    if (is_per_channel(dims_of(operands.at(static_cast<size_t>(k)).at("dims")), dst, channel_dim)) {
      bias_operand = k;
      first = 1;
    }
  }
  // Full-shape binary operands (a residual) cannot be plain next to a blocked dst: oneDNN then
  // picks a plain gemm convolution (5x slower on resnet's 3x3 64c 56x56, measured), and 2.6's
  // brgconv (NHWC) takes no full-shape binary at all. So with `any` layouts the first full-shape
  // Add/Sub becomes a sum post-op (the operand is reordered into the dst buffer before the
  // primitive runs), and any further full-shape binary gets the dst's layout (`full_md`, reordered
  // per run; plain until known).
  auto operand_dims = [&](int k) { return dims_of(operands.at(static_cast<size_t>(k)).at("dims")); };
  int sum_op = -1;
  for (size_t i = first; (blocked || channels_last) && dst_t == dt::f32 && i < ops.size() && sum_op < 0; ++i)
    if (ops[i].at("type") == "binary" && (ops[i].at("alg") == "add" || ops[i].at("alg") == "sub") &&
        ops[i].contains("operand") && operand_dims(ops[i].at("operand").get<int>()) == dst)
      sum_op = static_cast<int>(i);
  std::vector<std::pair<int, int>> binary_args;  // (post-op index, operand)
  std::vector<std::pair<int, float>> value_args;  // (post-op index, constant)
  auto make_attr = [&](const memory::desc& full_md, bool with_post_ops) {
    dnnl::post_ops po;
    binary_args.clear();
    value_args.clear();
    for (size_t i = first; with_post_ops && i < ops.size(); ++i) {
      const json& o = ops[i];
      if (o.at("type") == "eltwise") {
        po.append_eltwise(1.0f, eltwise_alg(o.at("alg").get<std::string>()), o.at("alpha").get<float>(),
                          o.at("beta").get<float>());
      } else if (static_cast<int>(i) == sum_op) {
        po.append_sum(o.at("alg") == "add" ? 1.0f : -1.0f);
      } else if (o.contains("value")) {  // a single constant the step holds
        po.append_binary(binary_alg(o.at("alg").get<std::string>()), plain_desc(memory::dims(dst.size(), 1)));
        value_args.emplace_back(static_cast<int>(i - first), o.at("value").get<float>());
      } else {
        const int k = o.at("operand").get<int>();
        po.append_binary(binary_alg(o.at("alg").get<std::string>()),
                         operand_dims(k) == dst ? full_md : plain_desc(operand_dims(k)));
        binary_args.emplace_back(static_cast<int>(i - first), k);
      }
    }
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // thread_scratchpad()
    attr.set_post_ops(po);
    if (d.contains("src_zero_point") || d.contains("src_zero_point_value"))
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (d.contains("output_scales"))
      attr.set_output_scales(d.at("output_scales_mask").get<int>(), d.at("output_scales").get<std::vector<float>>());
    return attr;
  };

  // MatMul reads strided activations in place unless oneDNN then falls back to its reference
  // kernel (many times slower than a reorder to row-major per run): see the retry below.
  memory::desc src_md = blocked ? any_desc(src, src_t) : src_user;
  memory::desc wei_md = weights_const ? any_desc(wei, wei_t) : wei_user;
  memory::desc dst_md = blocked ? any_desc(dst, dst_t) : dst_user;
  memory::desc bias_md;
  if (bias_operand >= 0) {
    memory::dims bd = conv ? memory::dims{dst[1]} : memory::dims(dst.size(), 1);
    if (!conv) bd.back() = dst.back();
    bias_md = plain_desc(bd);
  }
  auto make_pd = [&](const dnnl::primitive_attr& attr) -> dnnl::primitive_desc {
    if (conv) {
      const json& c = d.at("conv");
      auto strides = dims_of(c.at("strides")), dil = dims_of(c.at("dilations"));
      auto pl = dims_of(c.at("pads_begin")), pr = dims_of(c.at("pads_end"));
      const auto inference = dnnl::prop_kind::forward_inference;
      if (deconv) {
        const auto alg = dnnl::algorithm::deconvolution_direct;
        auto dd = bias_operand >= 0
            ? dnnl::deconvolution_forward::desc(inference, alg, src_md, wei_md, bias_md, dst_md, strides, dil, pl, pr)
            : dnnl::deconvolution_forward::desc(inference, alg, src_md, wei_md, dst_md, strides, dil, pl, pr);
        return dnnl::deconvolution_forward::primitive_desc(dd, attr, cpu_engine());
      }
      const auto alg = winograd ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct;
      auto cd = bias_operand >= 0
          ? dnnl::convolution_forward::desc(inference, alg, src_md, wei_md, bias_md, dst_md, strides, dil, pl, pr)
          : dnnl::convolution_forward::desc(inference, alg, src_md, wei_md, dst_md, strides, dil, pl, pr);
      return dnnl::convolution_forward::primitive_desc(cd, attr, cpu_engine());
    }
    auto md = bias_operand >= 0 ? dnnl::matmul::desc(src_md, wei_md, bias_md, dst_md)
                                : dnnl::matmul::desc(src_md, wei_md, dst_md);
    return dnnl::matmul::primitive_desc(md, attr, cpu_engine());
  };
  memory::desc full_md = dst_user;
  try {
    bool has_full = false;
    for (size_t i = first; i < ops.size(); ++i)
      has_full |= static_cast<int>(i) != sum_op && ops[i].at("type") == "binary" && ops[i].contains("operand") &&
                  operand_dims(ops[i].at("operand").get<int>()) == dst;
    if (channels_last && format == "auto" && !winograd) {
      // On the user's NHWC memory unless oneDNN has only its reference or im2col-gemm kernel for it.
      try {
        pd_ = make_pd(make_attr(full_md, true));
        if (is_fallback_impl(pd_.impl_info_str())) blocked = true;
      } catch (const dnnl::error&) {
        blocked = true;
      }
      if (blocked) {
        src_md = any_desc(src, src_t);
        dst_md = any_desc(dst, dst_t);
      }
    }
    if (blocked && has_full)  // the layout the kernel picks for dst without post-ops
      full_md = make_pd(make_attr(full_md, false)).query_md(dnnl::query::dst_md, 0);
    if (!channels_last || format != "auto" || blocked) pd_ = make_pd(make_attr(full_md, true));
    const bool strided = src_md != plain_desc(src, src_t) || wei_md != plain_desc(wei, wei_t);
    if (!conv && strided && std::string(pd_.impl_info_str()).find("ref") != std::string::npos) {
      src_md = plain_desc(src, src_t);
      if (!weights_const) wei_md = plain_desc(wei, wei_t);
      pd_ = make_pd(make_attr(full_md, true));
    }
    // An int8 step with an epilogue that oneDNN serves only with its reference kernel (1x1
    // convolutions with binary post-ops: 1000x slower on squeezenet1_0) is refused: the plan then
    // runs the epilogue as a loop kernel after the plain int8 step.
    if (d.contains("dtypes") && (!ops.empty() || d.contains("output_scales")) &&
        std::string(pd_.impl_info_str()).rfind("ref", 0) == 0)
      fail_unsupported("oneDNN has only its reference kernel ({}) for this int8 {} with its epilogue", pd_.impl_info_str(), op);
    prim_ = dnnl::primitive(pd_);
  } catch (const dnnl::error& e) {
    fail_unsupported("oneDNN cannot create the {} primitive ({}): {}", op, e.what(), d.dump());
  }
  const memory::desc src_chosen = pd_.query_md(dnnl::query::src_md, 0);
  const memory::desc wei_chosen = pd_.query_md(dnnl::query::weights_md, 0);
  const memory::desc dst_chosen = pd_.query_md(dnnl::query::dst_md, 0);
  bind(DNNL_ARG_SRC, slots[0], src_user, src_chosen, false, false);
  bind(DNNL_ARG_WEIGHTS, slots[1], wei_user, wei_chosen, false, weights_const);
  if (bias_operand >= 0) bind(DNNL_ARG_BIAS, slots[static_cast<size_t>(bias_operand)], bias_md, bias_md, false, false);
  for (auto [index, k] : binary_args) {
    const memory::desc md = operand_dims(k) == dst ? dst_user : plain_desc(operand_dims(k));
    const bool operand_const = operands.at(static_cast<size_t>(k)).at("constant").get<bool>();
    bind(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, slots[static_cast<size_t>(k)], md,
         operand_dims(k) == dst ? full_md : md, false, operand_const);
  }
  for (auto [index, v] : value_args) {
    memory m(plain_desc(memory::dims(dst.size(), 1)), cpu_engine());
    *static_cast<float*>(m.get_data_handle()) = v;
    exec_args_[DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1] = m;
  }
  bind(DNNL_ARG_DST, result_slot, dst_user, dst_chosen, true, false);
  if (pd_.scratchpad_desc().get_size() > 0) {
    scratchpad_ = memory(pd_.scratchpad_desc(), cpu_engine(), DNNL_MEMORY_NONE);
    exec_args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
  }
  if (d.contains("src_zero_point") || d.contains("src_zero_point_value")) {
    zp_mem_ = memory(memory::desc({1}, dt::s32, memory::format_tag::a), cpu_engine());
    *static_cast<int32_t*>(zp_mem_.get_data_handle()) = d.value("src_zero_point_value", 0);
    if (d.contains("src_zero_point")) zp_slot_ = slots.at(d.at("src_zero_point").get<size_t>());
    zp_unsigned_ = src_t == dt::u8;
    exec_args_[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = zp_mem_;
  }
  if (sum_op >= 0) {
    const int k = ops[static_cast<size_t>(sum_op)].at("operand").get<int>();
    sum_slot_ = slots[static_cast<size_t>(k)];
    sum_user_ = memory(dst_user, cpu_engine(), DNNL_MEMORY_NONE);
    sum_copy_ = dnnl::reorder(sum_user_, exec_args_.at(DNNL_ARG_DST));
  }
}

std::string DnnlLinearStep::implementation() const {
  // "acdb" (NHWC), "abcd16b" (nChw16c): dims by falling stride, then the inner blocks.
  auto tag = [](const memory::desc& m) {
    const auto& bd = m.data.format_desc.blocking;
    std::vector<int> order(static_cast<size_t>(m.data.ndims));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return bd.strides[a] > bd.strides[b]; });
    std::string s;
    for (int i : order) s += static_cast<char>('a' + i);
    for (int i = 0; i < bd.inner_nblks; ++i) s += fmt::format("{}{}", bd.inner_blks[i], static_cast<char>('a' + bd.inner_idxs[i]));
    return s;
  };
  return fmt::format("{} src {} wei {} dst {}", pd_.impl_info_str(), tag(pd_.query_md(dnnl::query::src_md, 0)),
                     tag(pd_.query_md(dnnl::query::weights_md, 0)), tag(pd_.query_md(dnnl::query::dst_md, 0)));
}

void DnnlLinearStep::run(void* const* args) {
  Binding* out = nullptr;
  for (Binding& b : bindings_) {
    void* p = args[b.slot];
    if (b.external) {
      b.inner.set_data_handle(p);
      if (b.output) out = &b;
      continue;
    }
    b.user.set_data_handle(p);
    if (b.output) { out = &b; continue; }
    if (!b.inner || (b.once && b.reordered_from == p)) continue;
    b.reorder.execute(stream_, b.user, b.inner);
    b.reordered_from = p;
  }
  if (zp_slot_ >= 0) {
    const void* p = args[zp_slot_];
    *static_cast<int32_t*>(zp_mem_.get_data_handle()) =
        zp_unsigned_ ? static_cast<int32_t>(*static_cast<const uint8_t*>(p)) : static_cast<int32_t>(*static_cast<const int8_t*>(p));
  }
  if (sum_slot_ >= 0 && sum_in_layout_) {
    const memory& dst = exec_args_.at(DNNL_ARG_DST);
    std::memcpy(dst.get_data_handle(), args[sum_slot_], dst.get_desc().get_size());
  } else if (sum_slot_ >= 0) {
    sum_user_.set_data_handle(args[sum_slot_]);
    sum_copy_.execute(stream_, sum_user_, exec_args_.at(DNNL_ARG_DST));
  }
  if (scratchpad_) scratchpad_.set_data_handle(thread_scratchpad(scratchpad_.get_desc().get_size()));
  prim_.execute(stream_, exec_args_);
  if (out && out->inner && !out->external) out->reorder.execute(stream_, out->inner, out->user);
  stream_.wait();
}

}  // namespace

bool dnnl_runs_channels_last() {
  static const bool runs = [] {
    try {
      const memory::dims src = {1, 64, 56, 56}, wei = {64, 64, 3, 3};
      const memory::desc nhwc(src, dt::f32, memory::format_tag::nhwc);
      dnnl::convolution_forward::desc cd(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                         nhwc, any_desc(wei), nhwc, {1, 1}, {1, 1}, {1, 1});
      dnnl::convolution_forward::primitive_desc pd(cd, cpu_engine());
      return !is_fallback_impl(pd.impl_info_str());
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return runs;
}

std::unique_ptr<LinearStep> LinearStep::create(const nlohmann::json& desc) {
  try {
    const std::string op = desc.at("op").get<std::string>();
    if (op == "LSTM" || op == "GRU" || op == "RNN") return create_rnn_step(desc);
    if (op == "DynamicQuantizeLSTM") return create_quant_lstm_step(desc);
    return std::make_unique<DnnlLinearStep>(desc);
  } catch (const nlohmann::json::exception& e) {
    fail("malformed linear step description: {}", e.what());
  } catch (const dnnl::error& e) {
    fail_unsupported("oneDNN: {}", e.what());
  }
}

}  // namespace korch::cpu
