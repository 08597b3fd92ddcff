// An ONNX LSTM / GRU / RNN node as oneDNN RNN primitives (codegen/rnn_match.h describes what is
// accepted and the JSON). LinearStep::create builds one for a description whose "op" is LSTM,
// GRU or RNN; it has no layout handoff (its inputs and outputs are plain ONNX tensors).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/cpu/cpu_linear_step.h"

namespace korch::cpu {

std::unique_ptr<LinearStep> create_rnn_step(const nlohmann::json& desc);  // throws dnnl / json errors

// Argument slots of the ONNX recurrent ops' inputs and outputs (DynamicQuantizeLSTM's first eight
// inputs are LSTM's), as a description's input_slots / output_slots list them.
namespace rnn_slots {
enum { kX, kW, kR, kB, kSeqLens, kH0, kC0, kP };
enum { kY, kYh, kYc };
}  // namespace rnn_slots

// What every recurrent step's description carries (codegen/rnn_match.cc writes it with put_sizes
// and the slot lists): its sizes, its direction, and its argument slots, padded with -1 (absent)
// to `inputs` and 3 outputs. Throws naming `what` when X, W or R has no slot.
struct RnnDesc {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, directions = 0;
  bool reverse = false;
  std::vector<int> in, out;
};
RnnDesc read_rnn_desc(const nlohmann::json& d, size_t inputs, const char* what);

// fn(d) for each direction d < directions (1 or 2): the two side by side, one thread each, when
// OpenMP has two threads and no parallel region is running (a library call inside then runs on
// its thread); an exception from either is rethrown after both finish.
void for_each_direction(int64_t directions, const std::function<void(int64_t)>& fn);

}  // namespace korch::cpu
