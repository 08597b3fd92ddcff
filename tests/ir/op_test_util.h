// Helpers shared by the operator unit tests (tests/ir/ops_*_test.cc).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ir/op_registry.h"

namespace korch::test {

// Attributes from {name, value} pairs.
inline Attributes make_attrs(std::initializer_list<std::pair<const char*, AttrValue>> kv) {
  Attributes a;
  for (auto& [k, v] : kv) a.set(k, v);
  return a;
}

// A 1-D tensor holding `v`.
template <typename T>
Tensor vec1(const std::vector<T>& v) {
  return Tensor::from_vector<T>(v, {static_cast<int64_t>(v.size())});
}

// A node `op` (also its name) with inputs 0..n_in-1 and outputs n_in..n_in+n_out-1.
inline Node make_node(const std::string& op, size_t n_in, size_t n_out, Attributes attrs = {}) {
  Node n;
  n.name = op;
  n.op_type = op;
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  for (size_t i = 0; i < n_out; ++i) n.outputs.push_back(static_cast<ValueId>(n_in + i));
  n.attrs = std::move(attrs);
  return n;
}

// Evaluates one `op` node with `n_out` outputs; an undefined Tensor in `inputs` is an omitted
// optional input.
inline std::vector<Tensor> eval_op(const std::string& op, int opset, const std::vector<Tensor>& inputs,
                                   Attributes attrs = {}, size_t n_out = 1) {
  Node n = make_node(op, inputs.size(), n_out, std::move(attrs));
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) n.inputs[i] = kNoValue;
    ptrs.push_back(inputs[i].defined() ? &inputs[i] : nullptr);
  }
  return eval_node(n, opset, ptrs);
}

// The message of the korch::Error `f` throws; "" when it throws none.
inline std::string error_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The code of the korch::Error `f` throws (its message into *msg); a test failure when it throws none.
inline ErrorCode error_code(const std::function<void()>& f, std::string* msg = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (msg) *msg = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kIo;
}


// Runs shape inference (all inputs treated as constants) then evaluation of `n`, checking that the
// evaluated outputs have exactly the inferred types. nullptr in `in` is an omitted input.
inline std::vector<Tensor> eval_node_checked(const Node& n, int opset, const std::vector<const Tensor*>& in) {
  std::vector<TensorType> store;
  store.reserve(in.size());
  std::vector<const TensorType*> types;
  for (const Tensor* t : in) store.push_back(t ? t->type() : TensorType{});
  for (size_t i = 0; i < in.size(); ++i) types.push_back(in[i] ? &store[i] : nullptr);
  std::vector<TensorType> inferred = infer_node(n, opset, types, in);
  std::vector<Tensor> out = eval_node(n, opset, in);
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].type(), inferred[i]);
  return out;
}

// Expects inference or evaluation of `n` to throw korch::Error with `code` and a message
// containing `msg`.
inline void expect_node_error(const Node& n, int opset, const std::vector<const Tensor*>& in, ErrorCode code,
                              const std::string& msg) {
  std::vector<TensorType> store;
  store.reserve(in.size());
  std::vector<const TensorType*> types;
  for (const Tensor* t : in) store.push_back(t ? t->type() : TensorType{});
  for (size_t i = 0; i < in.size(); ++i) types.push_back(in[i] ? &store[i] : nullptr);
  try {
    infer_node(n, opset, types, in);
    eval_node(n, opset, in);
    FAIL() << "expected an error containing '" << msg << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(msg), std::string::npos) << e.what();
  }
}

}  // namespace korch::test
