#include "codegen/rnn_match.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include <fmt/format.h>

namespace korch {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool present(const Node& n, size_t i) { return i < n.inputs.size() && n.inputs[i] != kNoValue; }

}  // namespace

bool is_rnn_op(const std::string& op) { return op == "LSTM" || op == "GRU" || op == "RNN"; }

RnnMatchResult match_rnn(const Graph& g, const Node& n) {
  RnnMatchResult res;
  auto refuse = [&](std::string why) {
    res.reason = fmt::format("{} (node '{}'): {}", n.op_type, n.name, why);
    return res;
  };
  if (!is_rnn_op(n.op_type)) return refuse("not a recurrent op");
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
  d["op"] = n.op_type;
  d["seq"] = seq;
  d["batch"] = batch;
  d["input"] = input;
  d["hidden"] = hidden;
  d["directions"] = dirs;
  d["reverse"] = dir == "reverse";
  d["layout"] = layout;
  d["linear_before_reset"] = n.op_type == "GRU" && a.get_int("linear_before_reset", 0) != 0;
  d["peephole"] = n.op_type == "LSTM" && present(n, 7);
  res.ok = true;
  res.desc = std::move(d);
  return res;
}

}  // namespace korch
