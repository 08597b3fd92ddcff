// Pattern helpers for rewrite passes (see rewrite.h).
//
// A pass walks g.nodes once in topological order with a Rewriter:
//
//   bool my_pass(Graph& g) {
//     Rewriter rw(g);
//     for (size_t i = 0, end = g.nodes.size(); i < end; ++i) {
//       Node& n = rw.visit(i);            // n's inputs now refer to replacement values
//       if (<n matches>) rw.replace(n.outputs[0], x);   // every use of n's output reads x instead
//     }
//     return rw.finish();                 // applies the replacements; true when something changed
//   }
//
// Replacements are recorded and resolved lazily: a node visited later sees its inputs already
// replaced (visit), so chains (Identity of Identity...) collapse in one walk. Graph outputs keep
// their names: replacing an output value renames the replacement, which is therefore only allowed
// when the replacement is a node output that is not itself a graph input, constant or output
// (replace() returns false otherwise and records nothing). Nodes made dead stay in g.nodes until
// Graph::remove_dead_code (simplify() runs it after every pass that changed something).
// Passes may edit a visited node in place as long as its output types stay the same (then call
// mark_changed), and may append nodes (append_node); finish() re-sorts topologically when they did.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"

namespace korch {

// Consumers of every value (node ids, one entry per input slot) and graph-output flags.
struct UseInfo {
  std::vector<std::vector<NodeId>> consumers;
  std::vector<char> is_graph_output;
  explicit UseInfo(const Graph& g);
  int uses(ValueId v) const;  // node input slots + graph output slots
};

// The node producing `v`, or nullptr for graph inputs, constants and kNoValue.
const Node* producer_of(const Graph& g, ValueId v);
// `v` is read by exactly one node input slot and is not a graph output.
bool has_single_consumer(const Graph& g, const UseInfo& uses, ValueId v);
// The constant held by `v`, or nullptr.
const Tensor* constant_of(const Graph& g, ValueId v);
// The constant behind `v` when `v` is a constant or an Expand of a constant (the broadcast source;
// its values repeat along the expanded dims), else nullptr.
const Tensor* constant_through_expand(const Graph& g, ValueId v);
// When `n` is a 1x1 Conv with stride 1, no padding, one group and no bias input, in either layout
// (rank 3 and up): its float32/float64 constant weight, else nullptr.
const Tensor* pointwise_conv_weight(const Graph& g, const Node& n);
// Every element of `t` (any numeric dtype) equals `x`.
bool all_elements_equal(const Tensor& t, double x);
// The int64/int32 elements of the constant `v`; nullopt when `v` is not a constant.
std::optional<std::vector<int64_t>> constant_ints(const Graph& g, ValueId v);
// When `t`, broadcast (numpy rules) against an output of rank `out_rank`, varies at most along
// output axis `axis` (every other dim of t is 1): its values along that axis as doubles, one per
// index (size 1 when t is constant along it). nullopt otherwise.
std::optional<std::vector<double>> values_along_axis(const Tensor& t, int64_t out_rank, int64_t axis);

// Per-axis start and step of a Slice with constant parameters and positive steps (the output
// shape comes from the node's output type; starts are normalised and clamped). nullopt when a
// parameter is not constant or a step is not positive.
struct SliceSpec {
  std::vector<int64_t> start, step;
};
std::optional<SliceSpec> slice_spec(const Graph& g, const Node& n);
// When `v` is the output of a Slice that keeps every axis whole but one, which it cuts to
// [start, start + len) with step 1: that cut of `source`. nullopt otherwise.
struct SlicePiece {
  ValueId source = kNoValue;
  int64_t axis = -1, start = 0, len = 0;
};
std::optional<SlicePiece> slice_piece(const Graph& g, ValueId v);
// The input of Concat `concat` that spans exactly [start, start + len) of it along `axis` (its
// normalised axis), or kNoValue.
ValueId concat_input_spanning(const Graph& g, const Node& concat, int64_t axis, int64_t start, int64_t len);

class Rewriter {
 public:
  explicit Rewriter(Graph& g);

  // Node i with its inputs resolved through the replacements recorded so far.
  Node& visit(size_t i);
  ValueId resolve(ValueId v) const;

  // Whether replace(old, repl) would be accepted (types equal, graph output rules).
  bool can_replace(ValueId old, ValueId repl) const;
  // Every use of `old` (node inputs, graph outputs) will read `repl`. False when not allowed.
  bool replace(ValueId old, ValueId repl);
  void mark_changed() { changed_ = true; }

  // A fresh value/node name derived from `base`.
  std::string fresh_name(const std::string& base);
  ValueId add_constant(const std::string& base, Tensor t);
  // A 1-D int64 constant (shapes, axes).
  ValueId int_list(const std::vector<int64_t>& v) {
    return add_constant("rewrite/ints", Tensor::from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}));
  }
  // Appends node `op` over `inputs` (output types from the op registry); returns its outputs.
  // Invalidates references into g.nodes.
  std::vector<ValueId> append_node(const std::string& op, const std::vector<ValueId>& inputs, Attributes attrs = {},
                                   int num_outputs = 1);
  // Turns node `n` (in place) into Reshape(x, out_shape): same output type, no attributes.
  // False (nothing changed) when the shape has a 0 dim and the opset has no allowzero (< 14).
  bool make_reshape(Node& n, ValueId x);

  // Applies the replacements to every node input and graph output, re-sorts when nodes were
  // appended. Returns whether the graph changed (a use rewired, or mark_changed()).
  bool finish();

  Graph& graph() { return g_; }

 private:
  Graph& g_;
  std::vector<ValueId> repl_;                  // per value: its replacement, or kNoValue
  std::vector<char> is_output_, output_taken_;  // graph outputs; values that will carry an output's name
  std::unordered_set<std::string> names_;
  bool changed_ = false, appended_ = false;
  int counter_ = 0;
};

}  // namespace korch
