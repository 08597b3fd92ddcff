// An ONNX LSTM / GRU / RNN node as oneDNN RNN primitives (codegen/rnn_match.h describes what is
// accepted and the JSON). LinearStep::create builds one for a description whose "op" is LSTM,
// GRU or RNN; it has no layout handoff (its inputs and outputs are plain ONNX tensors).
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "runtime/cpu/cpu_linear_step.h"

namespace korch::cpu {

std::unique_ptr<LinearStep> create_rnn_step(const nlohmann::json& desc);  // throws dnnl / json errors

// fn(d) for each direction d < directions (1 or 2): the two side by side, one thread each, when
// OpenMP has two threads and no parallel region is running (a library call inside then runs on
// its thread); an exception from either is rethrown after both finish.
void for_each_direction(int64_t directions, const std::function<void(int64_t)>& fn);

}  // namespace korch::cpu
