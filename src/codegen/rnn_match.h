// LSTM, GRU and RNN nodes as one library call per direction (oneDNN's RNN primitives on the CPU,
// runtime/cpu/cpu_rnn_step.h) instead of the reference interpreter.
//
// The description (JSON) a backend whose fusion rules say `library_rnn` runs:
//   {"op": "LSTM"|"GRU"|"RNN", "seq", "batch", "input", "hidden", "directions": 1|2,
//    "reverse": the single direction runs backwards, "layout": 0|1 (ONNX's),
//    "linear_before_reset": GRU's flag, "activations": RNN's function per direction
//    ("tanh"|"relu"|"sigmoid"), "peephole": P is given,
//    "input_slots": args[] position of each ONNX input X, W, R, B, sequence_lens, initial_h,
//                   initial_c, P (-1: absent), "output_slots": of Y, Y_h, Y_c (-1: not needed)}
// W, R, B and P must be constants (the step converts them to the library's layout once).
// What the library cannot express is refused with a reason and runs in the interpreter as
// before: clip, input_forget, activations other than the defaults (LSTM, GRU) or other than
// Tanh/Relu/Sigmoid without parameters (RNN), sequence_lens that are not a constant equal to the
// sequence length for every batch element, element types other than f32, non-constant weights.
//
// onnxruntime's com.microsoft DynamicQuantizeLSTM (int8/uint8 W and R) is matched too, for the
// CPU's own step (runtime/cpu/cpu_quant_lstm_step.h): {"op": "DynamicQuantizeLSTM", "seq",
// "batch", "input", "hidden", "directions", "reverse", "w_scales" / "r_scales" (a scale per
// column, directions x 4H), "w_zero_points" / "r_zero_points" (one a direction), "w_signed" /
// "r_signed" (int8, else uint8), the slots as above over its 12 inputs}; refused with clip,
// input_forget, other activations, layout 1, short sequences or non-constant weights.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace korch {

struct RnnMatchResult {
  bool ok = false;
  nlohmann::json desc;  // without input_slots / output_slots (the caller knows the slots)
  std::string reason;   // when !ok: why the node runs in the interpreter
};

bool is_rnn_op(const std::string& op_type);  // LSTM, GRU, RNN, DynamicQuantizeLSTM

RnnMatchResult match_rnn(const Graph& g, const Node& n);

}  // namespace korch
