// RnnStep: an ONNX LSTM, GRU or RNN node as oneDNN 2.6 RNN primitives (one per direction), from
// the description codegen/rnn_match.h writes.
//
// ONNX and oneDNN differ in gate order and weight layout, so the constant weights are converted
// once (first run) into oneDNN's ldigo / ldgo user layout, with the gates permuted and the two
// ONNX biases (Wb + Rb) summed, then reordered into the layout the primitive chose:
//   LSTM  ONNX i, o, f, c -> oneDNN i, f, c, o; peepholes ONNX i, o, f -> oneDNN i, f, o
//   GRU   ONNX z, r, h    -> oneDNN u, r, o (the same order); linear_before_reset = 1 is
//         oneDNN's lbr_gru, whose fourth bias is Rbh (added inside the reset product)
//   RNN   one gate; Tanh / Relu / Sigmoid are eltwise_tanh / relu / logistic.
// A single direction with layout 0 reads X, initial_h/c and writes Y, Y_h/c in place (ONNX's
// [T, 1, N, H] is oneDNN's tnc). Otherwise the step copies through its own buffers: two
// directions interleave in Y ([T, 2, N, H]) and layout 1 puts batch first.
// With two threads or more, the two directions of a bidirectional op run side by side, one thread
// each (each with its own stream and scratchpad), rather than one after the other on all threads:
// a recurrent step is a small GEMM whose fork/join costs about what it computes.
#include "runtime/cpu/cpu_rnn_step.h"

#include <fmt/format.h>
#include <omp.h>

#include <cstring>
#include <exception>
#include <vector>

#include "runtime/cpu/cpu_dnnl.h"
#include "runtime/cpu/cpu_lstm_batch1.h"
#include "support/error.h"

namespace korch::cpu {

namespace {

using nlohmann::json;
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

using namespace rnn_slots;

struct Direction {
  dnnl::primitive prim;
  dnnl::primitive_desc pd;
  std::unordered_map<int, memory> args;
  memory wl_user, wi_user, wl, wi;  // weights: ldigo user copy and the primitive's layout
  std::vector<float> wl_buf, wi_buf, bias, peephole;
  std::vector<float> x_own, h0_own, c0_own, y_own, yh_own, yc_own;  // copies, when not in place
  // Its own stream: the two directions may run at once.
  dnnl::stream stream;
};

class DnnlRnnStep final : public LinearStep {
 public:
  explicit DnnlRnnStep(const json& d);
  void run(void* const* args) override;
  std::vector<std::pair<const void*, int64_t>> constant_copies() const override {
    if (!weights_ready_) return {};
    if (batch1_) return batch1_->constant_copies();
    std::vector<std::pair<const void*, int64_t>> copies;
    for (const Direction& d : dirs_)
      for (const memory* m : {&d.wl, &d.wi})
        if (*m) copies.emplace_back(m->get_data_handle(), static_cast<int64_t>(m->get_desc().get_size()));
    return copies;
  }
  std::string implementation() const override {
    if (batch1_) return fmt::format("korch batch-1 LSTM {}x{} ({} direction{})", op_, hidden_, D_, D_ == 1 ? "" : "s");
    return fmt::format("{} {}x{} ({} direction{})", dirs_[0].pd.impl_info_str(), op_, hidden_, dirs_.size(),
                       dirs_.size() == 1 ? "" : "s");
  }

 private:
  void prepare_weights(void* const* args);
  // Element offset of (t, d, n) in Y and of (d, n) in a state, in ONNX's layout.
  int64_t y_offset(int64_t t, int64_t d, int64_t n) const {
    return (layout_ == 0 ? (t * D_ + d) * N_ + n : (n * T_ + t) * D_ + d) * hidden_;
  }
  int64_t state_offset(int64_t d, int64_t n) const { return (layout_ == 0 ? d * N_ + n : n * D_ + d) * hidden_; }

  std::string op_;
  int64_t T_, N_, I_, hidden_, D_;
  int layout_;
  bool reverse_, lbr_, peephole_;
  int gates_, bias_gates_;
  std::vector<int> in_, out_;
  std::vector<Direction> dirs_;
  std::unique_ptr<Batch1Lstm> batch1_;  // an LSTM on one sequence: our kernel instead of dirs_
  bool weights_ready_ = false;
  dnnl::stream stream_;
};

dnnl::algorithm activation(const std::string& a) {
  if (a == "relu") return dnnl::algorithm::eltwise_relu;
  if (a == "sigmoid") return dnnl::algorithm::eltwise_logistic;
  return dnnl::algorithm::eltwise_tanh;
}

DnnlRnnStep::DnnlRnnStep(const json& d) : stream_(cpu_engine()) {
  op_ = d.at("op").get<std::string>();
  RnnDesc r = read_rnn_desc(d, 8, "RNN step description");
  T_ = r.seq, N_ = r.batch, I_ = r.input, hidden_ = r.hidden, D_ = r.directions, reverse_ = r.reverse;
  in_ = std::move(r.in);
  out_ = std::move(r.out);
  layout_ = d.at("layout").get<int>();
  lbr_ = d.at("linear_before_reset").get<bool>();
  peephole_ = d.at("peephole").get<bool>();
  const bool lstm = op_ == "LSTM", gru = op_ == "GRU";
  if (lstm && N_ == 1 && batch1_lstm_available()) {
    batch1_ = std::make_unique<Batch1Lstm>(T_, I_, hidden_, D_, reverse_, peephole_);
    return;
  }
  gates_ = lstm ? 4 : gru ? 3 : 1;
  bias_gates_ = gru && lbr_ ? 4 : gates_;
  const int64_t H = hidden_;
  auto md = [](memory::dims dims, tag t) { return memory::desc(dims, dt::f32, t); };
  const memory::desc none;
  const memory::desc src_layer = md({T_, N_, I_}, tag::tnc), dst_layer = md({T_, N_, H}, tag::tnc);
  const memory::desc state = md({1, 1, N_, H}, tag::ldnc);
  const memory::desc wl_any = md({1, 1, I_, gates_, H}, tag::any), wi_any = md({1, 1, H, gates_, H}, tag::any);
  const memory::desc bias = md({1, 1, bias_gates_, H}, tag::ldgo);
  const memory::desc peep = peephole_ ? md({1, 1, 3, H}, tag::ldgo) : none;
  // oneDNN's LSTM takes initial (and final) h and c together or neither: a missing one of a pair
  // is a zero state (or a discarded result) in the step's own buffer.
  const bool given_h0 = in_[kH0] >= 0, given_c0 = lstm && in_[kC0] >= 0;
  const bool want_yh = out_[kYh] >= 0, want_yc = lstm && out_[kYc] >= 0;
  const bool h0 = given_h0 || given_c0, c0 = lstm && h0, yh = want_yh || want_yc, yc = lstm && yh;
  const auto inference = dnnl::prop_kind::forward_inference;
  const std::vector<std::string> acts = d.contains("activations") ? d.at("activations").get<std::vector<std::string>>()
                                                                  : std::vector<std::string>{};
  // Each direction's scratchpad its own: the two may run at once (oneDNN's shared one is not).
  dnnl::primitive_attr own_scratchpad;
  own_scratchpad.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dirs_.resize(static_cast<size_t>(D_));
  for (int64_t k = 0; k < D_; ++k) {
    Direction& dir = dirs_[static_cast<size_t>(k)];
    const auto direction = (D_ == 2 ? k == 1 : reverse_) ? dnnl::rnn_direction::unidirectional_right2left
                                                          : dnnl::rnn_direction::unidirectional_left2right;
    if (lstm) {
      dnnl::lstm_forward::desc ld(inference, direction, src_layer, h0 ? state : none, c0 ? state : none, wl_any, wi_any,
                                  peep, bias, dst_layer, yh ? state : none, yc ? state : none);
      dir.pd = dnnl::lstm_forward::primitive_desc(ld, own_scratchpad, cpu_engine());
    } else if (gru && lbr_) {
      dnnl::lbr_gru_forward::desc gd(inference, direction, src_layer, h0 ? state : none, wl_any, wi_any, bias, dst_layer,
                                     yh ? state : none);
      dir.pd = dnnl::lbr_gru_forward::primitive_desc(gd, own_scratchpad, cpu_engine());
    } else if (gru) {
      dnnl::gru_forward::desc gd(inference, direction, src_layer, h0 ? state : none, wl_any, wi_any, bias, dst_layer,
                                 yh ? state : none);
      dir.pd = dnnl::gru_forward::primitive_desc(gd, own_scratchpad, cpu_engine());
    } else {
      const std::string& a = acts.at(static_cast<size_t>(k));
      dnnl::vanilla_rnn_forward::desc rd(inference, activation(a), direction, src_layer, h0 ? state : none, wl_any,
                                         wi_any, bias, dst_layer, yh ? state : none);
      dir.pd = dnnl::vanilla_rnn_forward::primitive_desc(rd, own_scratchpad, cpu_engine());
    }
    dir.prim = dnnl::primitive(dir.pd);
    dir.stream = dnnl::stream(cpu_engine());
    dir.wl_buf.assign(static_cast<size_t>(I_ * gates_ * H), 0.f);
    dir.wi_buf.assign(static_cast<size_t>(H * gates_ * H), 0.f);
    dir.bias.assign(static_cast<size_t>(bias_gates_ * H), 0.f);
    dir.wl_user = memory(md({1, 1, I_, gates_, H}, tag::ldigo), cpu_engine(), dir.wl_buf.data());
    dir.wi_user = memory(md({1, 1, H, gates_, H}, tag::ldigo), cpu_engine(), dir.wi_buf.data());
    dir.wl = memory(dir.pd.weights_desc(), cpu_engine());
    dir.wi = memory(dir.pd.query_md(dnnl::query::weights_md, 1), cpu_engine());
    auto& a = dir.args;
    a[DNNL_ARG_WEIGHTS_LAYER] = dir.wl;
    a[DNNL_ARG_WEIGHTS_ITER] = dir.wi;
    a[DNNL_ARG_BIAS] = memory(bias, cpu_engine(), dir.bias.data());
    if (peephole_) {
      dir.peephole.assign(static_cast<size_t>(3 * H), 0.f);
      a[DNNL_ARG_WEIGHTS_PEEPHOLE] = memory(peep, cpu_engine(), dir.peephole.data());
    }
    // Copies where ONNX's layout is not oneDNN's (see the top of the file).
    const bool x_copy = layout_ != 0, state_copy = layout_ != 0, y_copy = layout_ != 0 || D_ == 2 || out_[kY] < 0;
    if (x_copy && k == 0) dir.x_own.resize(static_cast<size_t>(T_ * N_ * I_));
    if (h0 && (state_copy || !given_h0)) dir.h0_own.assign(static_cast<size_t>(N_ * H), 0.f);
    if (c0 && (state_copy || !given_c0)) dir.c0_own.assign(static_cast<size_t>(N_ * H), 0.f);
    if (y_copy) dir.y_own.resize(static_cast<size_t>(T_ * N_ * H));
    if (yh && (state_copy || !want_yh)) dir.yh_own.resize(static_cast<size_t>(N_ * H));
    if (yc && (state_copy || !want_yc)) dir.yc_own.resize(static_cast<size_t>(N_ * H));
    a[DNNL_ARG_SRC_LAYER] = memory(src_layer, cpu_engine(), DNNL_MEMORY_NONE);
    auto own_or_none = [](std::vector<float>& own) { return own.empty() ? DNNL_MEMORY_NONE : static_cast<void*>(own.data()); };
    a[DNNL_ARG_DST_LAYER] = memory(dst_layer, cpu_engine(), own_or_none(dir.y_own));
    if (h0) a[DNNL_ARG_SRC_ITER] = memory(state, cpu_engine(), own_or_none(dir.h0_own));
    if (c0) a[DNNL_ARG_SRC_ITER_C] = memory(state, cpu_engine(), own_or_none(dir.c0_own));
    if (yh) a[DNNL_ARG_DST_ITER] = memory(state, cpu_engine(), own_or_none(dir.yh_own));
    if (yc) a[DNNL_ARG_DST_ITER_C] = memory(state, cpu_engine(), own_or_none(dir.yc_own));
    const memory::desc scratch = dir.pd.scratchpad_desc();
    if (scratch.get_size() > 0) a[DNNL_ARG_SCRATCHPAD] = memory(scratch, cpu_engine());
  }
}

void DnnlRnnStep::prepare_weights(void* const* args) {
  const int64_t H = hidden_;
  const bool lstm = op_ == "LSTM";
  // oneDNN gate g is ONNX gate onnx_gate[g].
  const std::vector<int> onnx_gate = lstm ? std::vector<int>{0, 2, 3, 1} : op_ == "GRU" ? std::vector<int>{0, 1, 2}
                                                                                         : std::vector<int>{0};
  const auto* W = static_cast<const float*>(args[in_[kW]]);
  const auto* R = static_cast<const float*>(args[in_[kR]]);
  const auto* B = in_[kB] >= 0 ? static_cast<const float*>(args[in_[kB]]) : nullptr;
  const auto* P = in_[kP] >= 0 ? static_cast<const float*>(args[in_[kP]]) : nullptr;
  const int64_t GH = gates_ * H;
  for (int64_t k = 0; k < D_; ++k) {
    Direction& dir = dirs_[static_cast<size_t>(k)];
    const float* w = W + k * GH * I_;
    const float* r = R + k * GH * H;
    for (int g = 0; g < gates_; ++g) {
      const int64_t og = onnx_gate[static_cast<size_t>(g)];
      for (int64_t o = 0; o < H; ++o) {
        const int64_t row = og * H + o;
        for (int64_t i = 0; i < I_; ++i) dir.wl_buf[static_cast<size_t>((i * gates_ + g) * H + o)] = w[row * I_ + i];
        for (int64_t j = 0; j < H; ++j) dir.wi_buf[static_cast<size_t>((j * gates_ + g) * H + o)] = r[row * H + j];
        if (B) {
          const float wb = B[k * 2 * GH + row], rb = B[k * 2 * GH + GH + row];
          const bool reset_bias_apart = lbr_ && g == 2;  // lbr_gru: Rbh is the fourth bias
          dir.bias[static_cast<size_t>(g * H + o)] = reset_bias_apart ? wb : wb + rb;
          if (reset_bias_apart) dir.bias[static_cast<size_t>(3 * H + o)] = rb;
        }
      }
    }
    if (peephole_ && P) {
      const int onnx_p[3] = {0, 2, 1};  // oneDNN i, f, o from ONNX i, o, f
      for (int g = 0; g < 3; ++g)
        for (int64_t o = 0; o < H; ++o) dir.peephole[static_cast<size_t>(g * H + o)] = P[k * 3 * H + onnx_p[g] * H + o];
    }
    dnnl::reorder(dir.wl_user, dir.wl).execute(stream_, dir.wl_user, dir.wl);
    dnnl::reorder(dir.wi_user, dir.wi).execute(stream_, dir.wi_user, dir.wi);
  }
  stream_.wait();
  weights_ready_ = true;
}

void DnnlRnnStep::run(void* const* args) {
  if (batch1_) {
    auto in = [&](int k) { return in_[k] >= 0 ? static_cast<const float*>(args[in_[k]]) : nullptr; };
    auto out = [&](int k) { return out_[k] >= 0 ? static_cast<float*>(args[out_[k]]) : nullptr; };
    if (!weights_ready_) batch1_->set_weights(in(kW), in(kR), in(kB), in(kP));
    weights_ready_ = true;
    batch1_->run(in(kX), in(kH0), in(kC0), out(kY), out(kYh), out(kYc));
    return;
  }
  if (!weights_ready_) prepare_weights(args);
  const int64_t H = hidden_;
  const size_t row = static_cast<size_t>(H) * sizeof(float);
  auto* X = static_cast<float*>(args[in_[kX]]);
  float* xs = X;
  if (layout_ != 0) {  // [N, T, I] -> [T, N, I]
    xs = dirs_[0].x_own.data();
    for (int64_t t = 0; t < T_; ++t)
      for (int64_t n = 0; n < N_; ++n)
        std::memcpy(xs + (t * N_ + n) * I_, X + (n * T_ + t) * I_, static_cast<size_t>(I_) * sizeof(float));
  }
  auto ptr = [&](int slot) { return slot >= 0 ? static_cast<float*>(args[slot]) : nullptr; };
  float *h0 = ptr(in_[kH0]), *c0 = ptr(in_[kC0]), *Y = ptr(out_[kY]), *Yh = ptr(out_[kYh]), *Yc = ptr(out_[kYc]);
  auto run_direction = [&](int64_t k) {
    Direction& dir = dirs_[static_cast<size_t>(k)];
    auto& a = dir.args;
    a[DNNL_ARG_SRC_LAYER].set_data_handle(xs);
    // States: in place at ONNX's offset (layout 0), else gathered into / scattered from copies.
    auto state_in = [&](int arg, float* onnx, std::vector<float>& own, bool gather) {
      if (!a.count(arg)) return;
      if (own.empty()) {
        a[arg].set_data_handle(onnx + state_offset(k, 0));
      } else if (gather && onnx) {
        for (int64_t n = 0; n < N_; ++n) std::memcpy(own.data() + n * H, onnx + state_offset(k, n), row);
      }
    };
    state_in(DNNL_ARG_SRC_ITER, h0, dir.h0_own, true);
    state_in(DNNL_ARG_SRC_ITER_C, c0, dir.c0_own, true);
    state_in(DNNL_ARG_DST_ITER, Yh, dir.yh_own, false);
    state_in(DNNL_ARG_DST_ITER_C, Yc, dir.yc_own, false);
    if (dir.y_own.empty()) a[DNNL_ARG_DST_LAYER].set_data_handle(Y);
    dir.prim.execute(dir.stream, a);
    dir.stream.wait();
    if (!dir.y_own.empty() && Y)
      for (int64_t t = 0; t < T_; ++t)
        for (int64_t n = 0; n < N_; ++n) std::memcpy(Y + y_offset(t, k, n), dir.y_own.data() + (t * N_ + n) * H, row);
    auto state_out = [&](float* onnx, const std::vector<float>& own) {
      if (onnx && !own.empty())
        for (int64_t n = 0; n < N_; ++n) std::memcpy(onnx + state_offset(k, n), own.data() + n * H, row);
    };
    state_out(Yh, dir.yh_own);
    state_out(Yc, dir.yc_own);
  };
  // The two directions are independent: side by side rather than each on all threads in turn.
  for_each_direction(D_, run_direction);
}

}  // namespace

std::unique_ptr<LinearStep> create_rnn_step(const nlohmann::json& desc) { return std::make_unique<DnnlRnnStep>(desc); }

RnnDesc read_rnn_desc(const json& d, size_t inputs, const char* what) {
  RnnDesc r;
  r.seq = d.at("seq").get<int64_t>();
  r.batch = d.at("batch").get<int64_t>();
  r.input = d.at("input").get<int64_t>();
  r.hidden = d.at("hidden").get<int64_t>();
  r.directions = d.at("directions").get<int64_t>();
  r.reverse = d.at("reverse").get<bool>();
  r.in = d.at("input_slots").get<std::vector<int>>();
  r.out = d.at("output_slots").get<std::vector<int>>();
  r.in.resize(inputs, -1);
  r.out.resize(3, -1);
  if (r.in[kX] < 0 || r.in[kW] < 0 || r.in[kR] < 0) fail("{} without X, W or R: {}", what, d.dump());
  return r;
}

void for_each_direction(int64_t directions, const std::function<void(int64_t)>& fn) {
  if (directions != 2 || omp_get_max_threads() < 2 || omp_in_parallel()) {
    for (int64_t d = 0; d < directions; ++d) fn(d);
    return;
  }
  std::exception_ptr error[2];
#pragma omp parallel num_threads(2)
  {
    const int d = omp_get_thread_num();
    try {
      fn(d);
    } catch (...) {
      error[d] = std::current_exception();
    }
  }
  for (const std::exception_ptr& e : error)
    if (e) std::rethrow_exception(e);
}

}  // namespace korch::cpu
