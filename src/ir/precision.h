// Float64 versions of float32 graphs: the reference interpreter in double precision.
//
// A model-level result computed in float32 carries rounding noise that grows with the model's
// conditioning; two correct float32 runs (onnxruntime's own optimisation levels, or Korch and
// onnxruntime) can differ by 1e-3. Running the same graph in float64 gives a result whose own error
// is ~1e-9 times smaller, so "how far is each float32 run from the float64 run" tells noise from
// bugs (scripts/compare_with_ort.py's f64 rule).
//
// to_f64(g) makes every float32 value float64: graph inputs, constants (initializers and values
// folded when the model was loaded), node outputs, Cast/EyeLike targets (to/dtype = FLOAT), the
// float tensors that attributes carry (Constant's value/value_float(s), ConstantOfShape's value,
// including its float32 default) and LayerNormalization's stash type. Float16/BFloat16 values and
// every other type stay as they are; float attributes (alpha, epsilon...) keep their float32 value,
// which the float64 ops read exactly as the float32 ones do.
//
// An op that has no float64 implementation (inference rejects the converted node; ONNX itself
// defines QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear for float32 only) is kept in
// float32: its float64 inputs are cast to float32 (constants: the original float32 tensor), its
// float32 outputs cast back to float64, and the node is listed in F64Graph::kept_f32.
//
// Limitation: constant subgraphs folded while the model was loaded (frontend/shape_inference.h)
// were folded in float32; their results enter the float64 graph as exact float32 values (one
// rounding each, like the model's float32 weights themselves).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace korch {

struct F64Graph {
  Graph graph;
  // Nodes of the input graph that stay float32 (Casts around them): "name (OpType)".
  std::vector<std::string> kept_f32;
};

// The float64 version of `g` (see above). Value ids of `g` keep their meaning (same names, f32
// types widened); Casts around kept nodes add values and nodes. The result passes verify_graph().
F64Graph convert_to_f64(const Graph& g);
inline Graph to_f64(const Graph& g) { return convert_to_f64(g).graph; }

// A float32 tensor converted exactly to float64; other tensors returned unchanged.
Tensor widen_to_f64(const Tensor& t);

// Runs `g` in float64: converts it, widens the float32 inputs (given in g's own types), interprets.
// Outputs that `g` declares float32 come back as float64 (not rounded); others keep their types.
// `kept_f32` (optional) receives F64Graph::kept_f32.
std::vector<Tensor> interpret_f64(const Graph& g, const std::vector<Tensor>& inputs,
                                  std::vector<std::string>* kept_f32 = nullptr);

}  // namespace korch
