#include "codegen/rnn_match.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <tuple>
#include <vector>

namespace korch {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool present(const Node& n, size_t i) { return i < n.inputs.size() && n.inputs[i] != kNoValue; }

// The fields every recurrent step's description has.
void put_sizes(nlohmann::json& d, const Node& n, int64_t seq, int64_t batch, int64_t input, int64_t hidden,
               int64_t directions, bool reverse) {
  d["op"] = n.op_type;
  d["seq"] = seq;
  d["batch"] = batch;
  d["input"] = input;
  d["hidden"] = hidden;
  d["directions"] = directions;
  d["reverse"] = reverse;
}

}  // namespace

bool is_rnn_op(const std::string& op) {
  return op == "LSTM" || op == "GRU" || op == "RNN" || op == "DynamicQuantizeLSTM";
}

namespace {

// onnxruntime's com.microsoft DynamicQuantizeLSTM (ir/ops/rnn_quant.cc): inputs X, W, R, B,
// sequence_lens, initial_h, initial_c, P, W_scale, W_zero_point, R_scale, R_zero_point. The
// scales and zero points go into the description (one scale per column, one zero point per
// direction), so the step needs none of them as arguments.
RnnMatchResult match_quant_lstm(const Graph& g, const Node& n) {
  RnnMatchResult res;
  auto refuse = [&](std::string why) {
    res.reason = fmt::format("{} (node '{}'): {}", n.op_type, n.name, why);
    return res;
  };
  if (n.domain != "com.microsoft") return refuse("not onnxruntime's op");
  const char* names[] = {"X",         "W",           "R", "B",       "sequence_lens",
                         "initial_h", "initial_c",   "P", "W_scale", "W_zero_point",
                         "R_scale",   "R_zero_point"};
  for (size_t i : {0, 1, 2, 8, 9, 10, 11})
    if (!present(n, i)) return refuse(fmt::format("{} is required", names[i]));
  for (size_t i : {0, 3, 5, 6, 7, 8, 10})
    if (present(n, i) && g.type(n.inputs[i]).dtype != DType::kFloat32)
      return refuse(fmt::format("{} is {}; the step is f32 only", names[i], dtype_name(g.type(n.inputs[i]).dtype)));
  for (size_t i : {1, 2, 3, 4, 7, 8, 9, 10, 11})
    if (present(n, i) && !g.value(n.inputs[i]).constant) return refuse(fmt::format("{} is not a constant", names[i]));
  for (size_t i : {1, 2})
    if (g.type(n.inputs[i]).dtype != DType::kInt8 && g.type(n.inputs[i]).dtype != DType::kUInt8)
      return refuse(fmt::format("{} is {}, not int8 or uint8", names[i], dtype_name(g.type(n.inputs[i]).dtype)));
  const Attributes& a = n.attrs;
  if (a.has("clip")) return refuse("clip is not supported by the step");
  if (a.get_int("input_forget", 0) != 0) return refuse("input_forget is not supported by the step");
  if (a.get_int("layout", 0) != 0) return refuse("layout 1");
  if (a.has("activations")) {
    std::vector<std::string> acts;
    for (const std::string& s : a.get_strings("activations")) acts.push_back(lower(s));
    for (size_t i = 0; i < acts.size(); ++i)
      if (acts[i] != (i % 3 == 0 ? "sigmoid" : "tanh")) return refuse("activations other than the defaults");
  }
  const std::string dir = a.get_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") return refuse(fmt::format("direction '{}'", dir));
  const int64_t nd = dir == "bidirectional" ? 2 : 1;
  const Shape& x = g.type(n.inputs[0]).shape;
  const Shape& r = g.type(n.inputs[2]).shape;
  if (x.size() != 3 || r.size() != 3) return refuse("X and R must have rank 3");
  const int64_t seq = x[0], batch = x[1], input = x[2], hidden = r[1], G = 4 * hidden;
  if (seq < 1 || batch < 1 || input < 1 || hidden < 1) return refuse("an empty sequence, batch or state");
  if (present(n, 4)) {
    const Tensor& lens = *g.value(n.inputs[4]).constant;
    for (int64_t b = 0; b < lens.numel(); ++b)
      if (lens.get_as_int(b) != seq) return refuse("sequence_lens shorter than the sequence");
  }
  nlohmann::json d;
  for (auto [scale_i, zp_i, key] : {std::tuple<size_t, size_t, const char*>{8, 9, "w"}, {10, 11, "r"}}) {
    const Tensor& sc = *g.value(n.inputs[scale_i]).constant;
    const Tensor& zp = *g.value(n.inputs[zp_i]).constant;
    const bool per_column = sc.numel() == nd * G;
    if (!per_column && sc.numel() != nd) return refuse(fmt::format("{} has {} values", names[scale_i], sc.numel()));
    if (zp.numel() != sc.numel()) return refuse(fmt::format("{} has {} values", names[zp_i], zp.numel()));
    const int64_t per_dir = per_column ? G : 1;
    nlohmann::json scales = nlohmann::json::array(), zps = nlohmann::json::array();
    for (int64_t k = 0; k < nd; ++k) {
      for (int64_t c = 1; c < per_dir; ++c)
        if (zp.get_as_int(k * per_dir + c) != zp.get_as_int(k * per_dir))
          return refuse(fmt::format("{} is not one value per direction", names[zp_i]));
      zps.push_back(zp.get_as_int(k * per_dir));
      for (int64_t c = 0; c < G; ++c) scales.push_back(sc.get_as_double(k * per_dir + (per_column ? c : 0)));
    }
    d[std::string(key) + "_scales"] = std::move(scales);
    d[std::string(key) + "_zero_points"] = std::move(zps);
    d[std::string(key) + "_signed"] = g.type(n.inputs[key[0] == 'w' ? 1 : 2]).dtype == DType::kInt8;
  }
  put_sizes(d, n, seq, batch, input, hidden, nd, dir == "reverse");
  res.ok = true;
  res.desc = std::move(d);
  return res;
}

}  // namespace

RnnMatchResult match_rnn(const Graph& g, const Node& n) {
  RnnMatchResult res;
  auto refuse = [&](std::string why) {
    res.reason = fmt::format("{} (node '{}'): {}", n.op_type, n.name, why);
    return res;
  };
  if (!is_rnn_op(n.op_type)) return refuse("not a recurrent op");
  if (n.op_type == "DynamicQuantizeLSTM") return match_quant_lstm(g, n);
  if (n.inputs.size() < 3 || !present(n, 0) || !present(n, 1) || !present(n, 2)) return refuse("X, W and R are required");
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (size_t i = 0; i < n.inputs.size() && i < 8; ++i)
    if (present(n, i) && i != 4 && g.type(n.inputs[i]).dtype != DType::kFloat32)
      return refuse(fmt::format("{} is {}; the library call is f32 only", names[i], dtype_name(g.type(n.inputs[i]).dtype)));
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}, size_t{7}})
    if (present(n, i) && !g.value(n.inputs[i]).constant)
      return refuse(fmt::format("{} is not a constant", names[i]));
  const Attributes& a = n.attrs;
  const int64_t layout = g.opset >= 14 ? a.get_int("layout", 0) : 0;
  const Shape& x = g.type(n.inputs[0]).shape;
  const Shape& r = g.type(n.inputs[2]).shape;
  if (x.size() != 3 || r.size() != 3) return refuse("X and R must have rank 3");
  const int64_t seq = x[layout == 0 ? 0 : 1], batch = x[layout == 0 ? 1 : 0], input = x[2], hidden = r[2];
  if (seq < 1 || batch < 1 || input < 1 || hidden < 1) return refuse("an empty sequence, batch or state");
  if (a.has("clip")) return refuse("clip is not supported by the library call");
  if (n.op_type == "LSTM" && a.get_int("input_forget", 0) != 0) return refuse("input_forget is not supported by the library call");
  if (a.has("activation_alpha") || a.has("activation_beta")) return refuse("activation parameters are not supported by the library call");
  const std::string dir = a.get_string("direction", "forward");
  const int dirs = dir == "bidirectional" ? 2 : 1;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") return refuse(fmt::format("direction '{}'", dir));
  if (present(n, 4)) {
    const Tensor* lens = g.value(n.inputs[4]).constant.get();
    if (!lens) return refuse("sequence_lens is not a constant");
    for (int64_t b = 0; b < lens->numel(); ++b)
      if (lens->get_as_int(b) != seq)
        return refuse(fmt::format("sequence_lens[{}] = {} is shorter than the sequence ({})", b, lens->get_as_int(b), seq));
  }
  std::vector<std::string> acts;
  if (a.has("activations"))
    for (const std::string& s : a.get_strings("activations")) acts.push_back(lower(s));
  nlohmann::json d;
  if (n.op_type == "RNN") {
    if (acts.empty()) acts = {"tanh"};
    if (dirs == 1 && acts.size() == 2) acts.resize(1);  // the schema's default lists two
    if (dirs == 2 && acts.size() == 1) acts.push_back(acts[0]);
    if (static_cast<int>(acts.size()) != dirs) return refuse(fmt::format("{} activations for {} directions", acts.size(), dirs));
    for (const std::string& s : acts)
      if (s != "tanh" && s != "relu" && s != "sigmoid") return refuse(fmt::format("activation '{}' is not supported by the library call", s));
    d["activations"] = acts;
  } else {
    const std::vector<std::string> def = n.op_type == "LSTM" ? std::vector<std::string>{"sigmoid", "tanh", "tanh"}
                                                             : std::vector<std::string>{"sigmoid", "tanh"};
    if (!acts.empty()) {
      std::vector<std::string> want = def;
      if (dirs == 2 && acts.size() == 2 * def.size()) want.insert(want.end(), def.begin(), def.end());
      if (acts != want) return refuse("activations other than the defaults are not supported by the library call");
    }
  }
  put_sizes(d, n, seq, batch, input, hidden, dirs, dir == "reverse");
  d["layout"] = layout;
  d["linear_before_reset"] = n.op_type == "GRU" && a.get_int("linear_before_reset", 0) != 0;
  d["peephole"] = n.op_type == "LSTM" && present(n, 7);
  res.ok = true;
  res.desc = std::move(d);
  return res;
}

}  // namespace korch
