#include "ir/ops/op_util.h"

namespace korch::ops {

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  KORCH_CHECK(in.size() <= out.size(), "broadcast {} to {}", shape_str(in), shape_str(out));
  std::vector<int64_t> st(out.size(), 0);
  std::vector<int64_t> in_st = shape_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    KORCH_CHECK(in[i] == out[off + i] || in[i] == 1, "broadcast {} to {}", shape_str(in), shape_str(out));
    st[off + i] = in[i] == 1 ? 0 : in_st[i];
  }
  return st;
}

std::vector<int64_t> spatial_ints(const Attributes& attrs, const char* name, size_t n, int64_t def, int64_t min_value) {
  std::vector<int64_t> v = attrs.get_ints(name, std::vector<int64_t>(n, def));
  if (v.size() != n) fail("attribute '{}' has {} values, expected {}", name, v.size(), n);
  for (int64_t x : v)
    if (x < min_value) fail("attribute '{}' has invalid value {} (must be >= {})", name, x, min_value);
  return v;
}

void fail_element_type(std::string_view op, DType t) {
  fail_unsupported("{}: element type {} is not supported", op, dtype_name(t));
}

OpDef make_op(const char* name, int min_opset, InferFn infer, EvalFn eval, int max_opset) {
  OpDef d;
  d.op_type = name;
  d.min_opset = min_opset;
  d.max_opset = max_opset;
  d.infer = std::move(infer);
  d.eval = std::move(eval);
  return d;
}

std::optional<std::vector<int64_t>> axes_from_attr_or_input(const OpInferContext& ctx, const char* attr,
                                                            int input_index) {
  if (ctx.attrs().has(attr)) return ctx.attrs().get_ints(attr);
  if (ctx.has_input(input_index)) return ctx.require_constant(input_index, attr).to_int_vector();
  return std::nullopt;
}

std::optional<std::vector<int64_t>> axes_from_attr_or_input(const OpEvalContext& ctx, const char* attr,
                                                            int input_index) {
  if (ctx.attrs().has(attr)) return ctx.attrs().get_ints(attr);
  if (ctx.has_input(input_index)) return ctx.input(input_index).to_int_vector();
  return std::nullopt;
}

}  // namespace korch::ops
