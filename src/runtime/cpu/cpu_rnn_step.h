// An ONNX LSTM / GRU / RNN node as oneDNN RNN primitives (codegen/rnn_match.h describes what is
// accepted and the JSON). LinearStep::create builds one for a description whose "op" is LSTM,
// GRU or RNN; it has no layout handoff (its inputs and outputs are plain ONNX tensors).
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/cpu/cpu_linear_step.h"

namespace korch::cpu {

std::unique_ptr<LinearStep> create_rnn_step(const nlohmann::json& desc);  // throws dnnl / json errors

}  // namespace korch::cpu
