// Unit tests for the layout family (src/ir/ops/layout*.cc).
#include <gtest/gtest.h>

#include <limits>
#include <numeric>

#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

using test::eval_op;
using test::make_attrs;

Tensor run1(const std::string& op, int opset, const std::vector<Tensor>& inputs, Attributes attrs = {}) {
  return eval_op(op, opset, inputs, std::move(attrs)).at(0);
}

// Type inference with the given inputs where `constant[i]` says whether input i is known.
std::vector<TensorType> infer(const std::string& op, int opset, const std::vector<Tensor>& inputs,
                              const std::vector<bool>& constant, Attributes attrs = {}) {
  Node n;
  n.op_type = op;
  n.attrs = std::move(attrs);
  n.outputs.push_back(100);
  std::vector<TensorType> types;
  for (const Tensor& t : inputs) types.push_back(t.type());
  std::vector<const TensorType*> tp;
  std::vector<const Tensor*> cp;
  for (size_t i = 0; i < inputs.size(); ++i) {
    n.inputs.push_back(static_cast<ValueId>(i));
    tp.push_back(&types[i]);
    cp.push_back(constant[i] ? &inputs[i] : nullptr);
  }
  return infer_node(n, opset, tp, cp);
}

using I = std::vector<int64_t>;
Tensor iota_f(Shape s) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  std::iota(v.begin(), v.end(), 0.f);
  return Tensor::from_vector(v, std::move(s));
}
Tensor i64(I v) { return test::vec1(v); }
std::vector<float> F(const Tensor& t) { return t.to_float_vector(); }

// Expects `stmt` to throw korch::Error with `want_code` and a message containing `text`.
#define EXPECT_KORCH_ERROR(stmt, want_code, text)                                               \
  do {                                                                                     \
    try {                                                                                  \
      stmt;                                                                                \
      ADD_FAILURE() << "no error thrown";                                                  \
    } catch (const Error& e) {                                                             \
      EXPECT_EQ(e.code(), want_code) << e.what();                                          \
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();         \
    }                                                                                      \
  } while (0)

TEST(LayoutOps, ReshapeZeroMinusOneAndAllowzero) {
  Tensor x = iota_f({2, 3, 4});
  Tensor y = run1("Reshape", 13, {x, i64({0, -1})});
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(F(y), F(x));
  Tensor empty(DType::kFloat32, {0, 3});
  EXPECT_EQ(run1("Reshape", 14, {empty, i64({3, 0})}, make_attrs({{"allowzero", int64_t{1}}})).shape(), (Shape{3, 0}));
  // Without allowzero the 0 copies the input dim.
  EXPECT_EQ(run1("Reshape", 14, {empty, i64({0, 3})}).shape(), (Shape{0, 3}));
  EXPECT_KORCH_ERROR(run1("Reshape", 13, {x, i64({-1, -1})}), ErrorCode::kInvalid, "more than one -1");
  EXPECT_KORCH_ERROR(run1("Reshape", 13, {x, i64({5, -1})}), ErrorCode::kInvalid, "cannot be inferred");
  EXPECT_KORCH_ERROR(run1("Reshape", 13, {x, i64({2, 3})}), ErrorCode::kInvalid, "24 elements");
  EXPECT_KORCH_ERROR(infer("Reshape", 13, {x, i64({0, -1})}, {false, false}), ErrorCode::kUnsupported,
                     "compile-time constant");
}

TEST(LayoutOps, FlattenSqueezeUnsqueeze) {
  Tensor x = iota_f({2, 3, 4, 5});
  EXPECT_EQ(run1("Flatten", 13, {x}, make_attrs({{"axis", int64_t{-1}}})).shape(), (Shape{24, 5}));
  EXPECT_EQ(run1("Flatten", 13, {x}, make_attrs({{"axis", int64_t{0}}})).shape(), (Shape{1, 120}));
  EXPECT_EQ(run1("Flatten", 9, {x}).shape(), (Shape{2, 60}));
  EXPECT_KORCH_ERROR(run1("Flatten", 13, {x}, make_attrs({{"axis", int64_t{5}}})), ErrorCode::kInvalid, "out of range");

  Tensor s = iota_f({1, 3, 1, 2});
  EXPECT_EQ(run1("Squeeze", 13, {s}).shape(), (Shape{3, 2}));
  EXPECT_EQ(run1("Squeeze", 13, {s, i64({-2})}).shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(run1("Squeeze", 11, {s}, make_attrs({{"axes", I{0}}})).shape(), (Shape{3, 1, 2}));
  EXPECT_KORCH_ERROR(run1("Squeeze", 13, {s, i64({1})}), ErrorCode::kInvalid, "size 3");

  Tensor u = iota_f({3, 4});
  EXPECT_EQ(run1("Unsqueeze", 13, {u, i64({3, 0})}).shape(), (Shape{1, 3, 4, 1}));
  EXPECT_EQ(run1("Unsqueeze", 11, {u}, make_attrs({{"axes", I{-1}}})).shape(), (Shape{3, 4, 1}));
  EXPECT_KORCH_ERROR(run1("Unsqueeze", 13, {u, i64({1, 1})}), ErrorCode::kInvalid, "repeated");
  EXPECT_EQ(F(run1("Unsqueeze", 13, {u, i64({1})})), F(u));
}

// Naive reference transpose over float iota input.
std::vector<float> naive_transpose(const Shape& in, const I& perm) {
  Shape out;
  for (int64_t p : perm) out.push_back(in[static_cast<size_t>(p)]);
  std::vector<int64_t> ist = shape_strides(in);
  std::vector<float> r;
  std::vector<int64_t> id(out.size(), 0);
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < out.size(); ++d) off += id[d] * ist[static_cast<size_t>(perm[d])];
    r.push_back(static_cast<float>(off));
    for (size_t d = out.size(); d-- > 0;) {
      if (++id[d] < out[d]) break;
      id[d] = 0;
    }
  }
  return r;
}

TEST(LayoutOps, Transpose) {
  Tensor x = iota_f({2, 3, 4, 5});
  for (I perm : {I{0, 1, 2, 3}, I{0, 2, 1, 3}, I{3, 2, 1, 0}, I{1, 3, 0, 2}, I{0, 1, 3, 2}}) {
    Tensor y = run1("Transpose", 13, {x}, make_attrs({{"perm", perm}}));
    EXPECT_EQ(F(y), naive_transpose(x.shape(), perm)) << shape_str(perm);
  }
  EXPECT_EQ(F(run1("Transpose", 13, {x})), naive_transpose(x.shape(), {3, 2, 1, 0}));
  // Large enough to take the parallel path.
  Tensor big = iota_f({64, 33, 40});
  EXPECT_EQ(F(run1("Transpose", 13, {big}, make_attrs({{"perm", I{2, 0, 1}}}))), naive_transpose(big.shape(), {2, 0, 1}));
  // Other element types are moved bit-exactly.
  Tensor d = Tensor::from_vector<double>({1.5, 2.5, 3.5, 4.5, 5.5, 6.5}, {2, 3});
  EXPECT_EQ(run1("Transpose", 13, {d}), Tensor::from_vector<double>({1.5, 4.5, 2.5, 5.5, 3.5, 6.5}, {3, 2}));
  Tensor b = Tensor::from_vector<bool>({true, false, false, true, true, false}, {3, 2});
  EXPECT_EQ(run1("Transpose", 13, {b}), Tensor::from_vector<bool>({true, false, true, false, true, false}, {2, 3}));
  Tensor h = Tensor::from_vector<Float16>({Float16(1.f), Float16(2.f), Float16(3.f), Float16(4.f)}, {2, 2});
  EXPECT_EQ(F(run1("Transpose", 13, {h})), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_KORCH_ERROR(run1("Transpose", 13, {x}, make_attrs({{"perm", I{0, 0, 1, 2}}})), ErrorCode::kInvalid,
                     "not a permutation");
  EXPECT_KORCH_ERROR(run1("Transpose", 13, {x}, make_attrs({{"perm", I{0, 1}}})), ErrorCode::kInvalid, "rank 4");
}

TEST(LayoutOps, ConcatAndSplit) {
  Tensor a = iota_f({2, 2}), b = Tensor::from_vector<float>({10, 11, 12, 13, 14, 15}, {2, 3});
  Tensor c = run1("Concat", 13, {a, b}, make_attrs({{"axis", int64_t{-1}}}));
  EXPECT_EQ(c.shape(), (Shape{2, 5}));
  EXPECT_EQ(F(c), (std::vector<float>{0, 1, 10, 11, 12, 2, 3, 13, 14, 15}));
  Tensor ib = Tensor::from_vector<int64_t>({7, 8}, {1, 2});
  Tensor ia = Tensor::from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(run1("Concat", 13, {ia, ib}, make_attrs({{"axis", int64_t{0}}})),
            Tensor::from_vector<int64_t>({1, 2, 3, 4, 7, 8}, {3, 2}));
  EXPECT_KORCH_ERROR(run1("Concat", 13, {a, b}, make_attrs({{"axis", int64_t{0}}})), ErrorCode::kInvalid, "incompatible");
  EXPECT_KORCH_ERROR(run1("Concat", 13, {a, ia}, make_attrs({{"axis", int64_t{0}}})), ErrorCode::kInvalid, "type");

  Tensor x = iota_f({7});
  auto parts = eval_op("Split", 18, {x}, make_attrs({{"num_outputs", int64_t{3}}}), 3);
  EXPECT_EQ(F(parts[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(F(parts[1]), (std::vector<float>{3, 4, 5}));
  EXPECT_EQ(F(parts[2]), (std::vector<float>{6}));
  parts = eval_op("Split", 11, {iota_f({2, 5})}, make_attrs({{"axis", int64_t{1}}, {"split", I{1, 4}}}), 2);
  EXPECT_EQ(F(parts[0]), (std::vector<float>{0, 5}));
  EXPECT_EQ(F(parts[1]), (std::vector<float>{1, 2, 3, 4, 6, 7, 8, 9}));
  parts = eval_op("Split", 13, {x, i64({2, 0, 5})}, {}, 3);
  EXPECT_EQ(parts[1].shape(), (Shape{0}));
  EXPECT_EQ(F(parts[2]), (std::vector<float>{2, 3, 4, 5, 6}));
  EXPECT_KORCH_ERROR(eval_op("Split", 13, {x}, {}, 2), ErrorCode::kInvalid, "evenly");
  EXPECT_KORCH_ERROR(eval_op("Split", 13, {x, i64({2, 2})}, {}, 2), ErrorCode::kInvalid, "add up");
}

TEST(LayoutOps, SliceClampingAndSteps) {
  Tensor x = iota_f({10});
  const int64_t big = std::numeric_limits<int64_t>::max(), small = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(F(run1("Slice", 13, {x, i64({-3}), i64({big})})), (std::vector<float>{7, 8, 9}));
  EXPECT_EQ(F(run1("Slice", 13, {x, i64({20}), i64({-20}), i64({0}), i64({-3})})), (std::vector<float>{9, 6, 3, 0}));
  EXPECT_EQ(F(run1("Slice", 13, {x, i64({-1}), i64({small}), Tensor(), i64({-1})})),
            (std::vector<float>{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(run1("Slice", 13, {x, i64({5}), i64({2})}).shape(), (Shape{0}));
  EXPECT_EQ(F(run1("Slice", 13, {x, i64({1}), i64({big}), i64({0}), i64({big})})), (std::vector<float>{1}));
  EXPECT_EQ(F(run1("Slice", 13, {x, i64({8}), i64({small}), i64({0}), i64({small})})), (std::vector<float>{8}));
  Tensor m = iota_f({3, 4});
  Tensor y = run1("Slice", 13, {m, i64({0, 3}), i64({big, 0}), i64({-2, -1}), i64({2, -2})});
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(F(y), (std::vector<float>{3, 1, 11, 9}));
  Tensor y32 = run1("Slice", 13, {m, Tensor::from_vector<int32_t>({1}, {1}), Tensor::from_vector<int32_t>({3}, {1}),
                                  Tensor::from_vector<int32_t>({1}, {1})});
  EXPECT_EQ(F(y32), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  // Opset < 10: attributes.
  EXPECT_EQ(F(run1("Slice", 9, {m}, make_attrs({{"starts", I{1, 1}}, {"ends", I{1000, -1}}}))),
            (std::vector<float>{5, 6, 9, 10}));
  EXPECT_KORCH_ERROR(run1("Slice", 13, {x, i64({0}), i64({5}), i64({0}), i64({0})}), ErrorCode::kInvalid,
                     "step must not be 0");
  EXPECT_KORCH_ERROR(run1("Slice", 13, {m, i64({0, 0}), i64({1, 1}), i64({1, -1})}), ErrorCode::kInvalid, "repeated");
}

TEST(LayoutOps, GatherFamily) {
  Tensor x = iota_f({3, 4});
  Tensor g = run1("Gather", 13, {x, Tensor::from_vector<int64_t>({-1, 0}, {2})});
  EXPECT_EQ(F(g), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  Tensor gs = run1("Gather", 13, {x, Tensor::scalar<int32_t>(2)}, make_attrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(gs.shape(), (Shape{3}));
  EXPECT_EQ(F(gs), (std::vector<float>{2, 6, 10}));
  Tensor g2 = run1("Gather", 13, {x, Tensor::from_vector<int64_t>({3, 0, 1, 1}, {2, 2})}, make_attrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(g2.shape(), (Shape{3, 2, 2}));
  EXPECT_EQ(F(g2)[4], 7.f);
  EXPECT_KORCH_ERROR(run1("Gather", 13, {x, Tensor::from_vector<int64_t>({3}, {1})}), ErrorCode::kInvalid, "index 3");
  EXPECT_KORCH_ERROR(run1("Gather", 13, {x, Tensor::from_vector<float>({0}, {1})}), ErrorCode::kInvalid, "int32 or int64");

  Tensor ge = run1("GatherElements", 13, {x, Tensor::from_vector<int64_t>({2, -3, 0, 1}, {1, 4})});
  EXPECT_EQ(F(ge), (std::vector<float>{8, 1, 2, 7}));
  Tensor ge1 = run1("GatherElements", 13, {x, Tensor::from_vector<int32_t>({3, 3, 0, 1, 2, 2}, {3, 2})},
                    make_attrs({{"axis", int64_t{1}}}));
  EXPECT_EQ(F(ge1), (std::vector<float>{3, 3, 4, 5, 10, 10}));
  EXPECT_KORCH_ERROR(run1("GatherElements", 13, {x, Tensor::from_vector<int64_t>({-4}, {1, 1})}), ErrorCode::kInvalid,
                     "index -4");

  Tensor d = iota_f({2, 2, 3});
  Tensor nd = run1("GatherND", 13, {d, Tensor::from_vector<int64_t>({1, 0, 0, -1}, {2, 2})});
  EXPECT_EQ(F(nd), (std::vector<float>{6, 7, 8, 3, 4, 5}));
  Tensor ndb = run1("GatherND", 13, {d, Tensor::from_vector<int64_t>({1, 2, 0, 0}, {2, 1, 2})},
                    make_attrs({{"batch_dims", int64_t{1}}}));
  EXPECT_EQ(ndb.shape(), (Shape{2, 1}));
  EXPECT_EQ(F(ndb), (std::vector<float>{5, 6}));
  EXPECT_KORCH_ERROR(run1("GatherND", 13, {d, Tensor::from_vector<int64_t>({2}, {1, 1})}), ErrorCode::kInvalid, "index 2");
}

TEST(LayoutOps, ScatterFamily) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {1, 5});
  Tensor idx = Tensor::from_vector<int64_t>({1, 3, 1}, {1, 3});
  Tensor upd = Tensor::from_vector<float>({10, 20, 30}, {1, 3});
  EXPECT_EQ(F(run1("ScatterElements", 16, {x, idx, upd}, make_attrs({{"axis", int64_t{1}}, {"reduction", std::string("add")}}))),
            (std::vector<float>{1, 42, 3, 24, 5}));
  EXPECT_EQ(F(run1("ScatterElements", 18, {x, idx, upd}, make_attrs({{"axis", int64_t{1}}, {"reduction", std::string("min")}}))),
            (std::vector<float>{1, 2, 3, 4, 5}));
  EXPECT_EQ(F(run1("ScatterElements", 13, {x, Tensor::from_vector<int32_t>({-1}, {1, 1}),
                                            Tensor::from_vector<float>({9}, {1, 1})},
                   make_attrs({{"axis", int64_t{1}}}))),
            (std::vector<float>{1, 2, 3, 4, 9}));
  EXPECT_EQ(F(run1("Scatter", 10, {x, idx, upd}, make_attrs({{"axis", int64_t{1}}}))), (std::vector<float>{1, 30, 3, 20, 5}));
  EXPECT_KORCH_ERROR(run1("ScatterElements", 16, {x, idx, upd}, make_attrs({{"reduction", std::string("max")}})),
                     ErrorCode::kInvalid, "not valid at opset 16");
  EXPECT_KORCH_ERROR(run1("ScatterElements", 13, {x, Tensor::from_vector<int64_t>({5}, {1, 1}),
                                                  Tensor::from_vector<float>({9}, {1, 1})},
                          make_attrs({{"axis", int64_t{1}}})),
                     ErrorCode::kInvalid, "index 5");

  Tensor d = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor ni = Tensor::from_vector<int64_t>({2, 0, 2}, {3, 1});
  Tensor nu = Tensor::from_vector<int32_t>({10, 20, 30, 40, 2, 3}, {3, 2});
  EXPECT_EQ(run1("ScatterND", 16, {d, ni, nu}, make_attrs({{"reduction", std::string("mul")}})),
            Tensor::from_vector<int32_t>({30, 80, 3, 4, 100, 360}, {3, 2}));
  EXPECT_EQ(run1("ScatterND", 13, {d, Tensor::from_vector<int64_t>({1, 1}, {1, 2}), Tensor::from_vector<int32_t>({0}, {1})}),
            Tensor::from_vector<int32_t>({1, 2, 3, 0, 5, 6}, {3, 2}));
  EXPECT_KORCH_ERROR(run1("ScatterND", 13, {d, ni, Tensor::from_vector<int32_t>({1, 2, 3}, {3})}), ErrorCode::kInvalid,
                     "updates shape");
}

TEST(LayoutOps, ExpandAndTile) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3}, {3, 1});
  Tensor y = run1("Expand", 13, {x, i64({2, 1, 4})});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(F(y)[5], 2.f);
  EXPECT_EQ(F(y)[23], 3.f);
  EXPECT_EQ(run1("Expand", 13, {x, i64({1})}).shape(), (Shape{3, 1}));
  EXPECT_KORCH_ERROR(run1("Expand", 13, {x, i64({2, 2})}), ErrorCode::kInvalid, "");
  Tensor t = run1("Tile", 13, {Tensor::from_vector<uint16_t>({1, 2, 3, 4}, {2, 2}), i64({2, 3})});
  EXPECT_EQ(t.shape(), (Shape{4, 6}));
  EXPECT_EQ(t.to_int_vector(), (I{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(run1("Tile", 13, {x, i64({0, 2})}).shape(), (Shape{0, 2}));
  EXPECT_KORCH_ERROR(run1("Tile", 13, {x, i64({2})}), ErrorCode::kInvalid, "rank 2");
}

TEST(LayoutOps, DepthSpace) {
  const int64_t N = 1, C = 8, H = 2, W = 3, b = 2;
  Tensor x = iota_f({N, C, H, W});
  for (std::string mode : {"DCR", "CRD"}) {
    Tensor y = run1("DepthToSpace", 13, {x}, make_attrs({{"blocksize", b}, {"mode", mode}}));
    ASSERT_EQ(y.shape(), (Shape{1, 2, 4, 6}));
    std::vector<float> got = F(y);
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t h = 0; h < H * b; ++h)
        for (int64_t w = 0; w < W * b; ++w) {
          int64_t bh = h % b, bw = w % b;
          int64_t ic = mode == "DCR" ? (bh * b + bw) * 2 + c : c * b * b + bh * b + bw;
          float want = static_cast<float>((ic * H + h / b) * W + w / b);
          EXPECT_EQ(got[static_cast<size_t>((c * H * b + h) * W * b + w)], want) << mode;
        }
  }
  // SpaceToDepth inverts DCR DepthToSpace.
  Tensor d2s = run1("DepthToSpace", 13, {x}, make_attrs({{"blocksize", b}}));
  EXPECT_EQ(run1("SpaceToDepth", 13, {d2s}, make_attrs({{"blocksize", b}})), x);
  EXPECT_KORCH_ERROR(run1("DepthToSpace", 13, {iota_f({1, 6, 2, 2})}, make_attrs({{"blocksize", b}})), ErrorCode::kInvalid,
                     "divisible");
  EXPECT_KORCH_ERROR(run1("DepthToSpace", 13, {x}, make_attrs({{"blocksize", b}, {"mode", std::string("XYZ")}})),
                     ErrorCode::kInvalid, "mode");
}

TEST(LayoutOps, Pad) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  // Opset < 11: attributes.
  Tensor c = run1("Pad", 10, {x}, make_attrs({{"pads", I{0, 1, 1, 0}}, {"value", 9.f}}));
  EXPECT_EQ(F(c), (std::vector<float>{9, 1, 2, 3, 9, 4, 5, 6, 9, 9, 9, 9}));
  Tensor r = run1("Pad", 13, {x, i64({0, 2, 0, 2})}, make_attrs({{"mode", std::string("reflect")}}));
  EXPECT_EQ(F(r), (std::vector<float>{3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4}));
  // (Pads {1, 1, 0, 0} would read as {1, 1, 1, 1}: GCC 12.2 with AVX-512 miscompiles that int64
  // initializer list into a broadcast.)
  Tensor e = run1("Pad", 13, {x, i64({1, 2, 0, 0})}, make_attrs({{"mode", std::string("edge")}}));
  EXPECT_EQ(F(e), (std::vector<float>{1, 1, 1, 2, 3, 1, 1, 1, 2, 3, 4, 4, 4, 5, 6}));
  Tensor w = run1("Pad", 19, {x, i64({0, 4, 0, 1})}, make_attrs({{"mode", std::string("wrap")}}));
  EXPECT_EQ(F(w), (std::vector<float>{3, 1, 2, 3, 1, 2, 3, 1, 6, 4, 5, 6, 4, 5, 6, 4}));
  // Negative pads crop; constant_value input; axes input (opset 18).
  Tensor n = run1("Pad", 13, {x, i64({0, -1, 1, 1}), Tensor::scalar<float>(-1.f)});
  EXPECT_EQ(F(n), (std::vector<float>{2, 3, -1, 5, 6, -1, -1, -1, -1}));
  Tensor a = run1("Pad", 18, {x, i64({1, 0}), Tensor(), i64({-1})});
  EXPECT_EQ(F(a), (std::vector<float>{0, 1, 2, 3, 0, 4, 5, 6}));
  // Reflect after cropping reflects the cropped data.
  Tensor rc = run1("Pad", 13, {iota_f({5}), i64({-2, 2})}, make_attrs({{"mode", std::string("reflect")}}));
  EXPECT_EQ(F(rc), (std::vector<float>{2, 3, 4, 3, 2}));
  Tensor bi = run1("Pad", 13, {Tensor::from_vector<int64_t>({5, 6}, {2}), i64({1, 1}), Tensor::scalar<int64_t>(7)});
  EXPECT_EQ(bi.to_int_vector(), (I{7, 5, 6, 7}));
  EXPECT_KORCH_ERROR(run1("Pad", 13, {x, i64({0, 1})}), ErrorCode::kInvalid, "pads has 2 entries");
  EXPECT_KORCH_ERROR(run1("Pad", 13, {x, i64({0, -2, 0, -2})}), ErrorCode::kInvalid, "crop more");
  EXPECT_KORCH_ERROR(run1("Pad", 18, {x, i64({0, 1, 0, 1})}, make_attrs({{"mode", std::string("wrap")}})), ErrorCode::kInvalid,
                     "opset 19");
  EXPECT_KORCH_ERROR(infer("Pad", 13, {x, i64({0, 1, 0, 1})}, {true, false}), ErrorCode::kUnsupported, "pads");
}

TEST(LayoutOps, CompressAndReverseSequence) {
  Tensor x = iota_f({3, 2});
  Tensor cond = Tensor::from_vector<bool>({false, true, true}, {3});
  EXPECT_EQ(F(run1("Compress", 11, {x, cond}, make_attrs({{"axis", int64_t{0}}}))), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(F(run1("Compress", 11, {x, cond})), (std::vector<float>{1, 2}));
  EXPECT_EQ(F(run1("Compress", 11, {x, Tensor::from_vector<bool>({false, true}, {2})}, make_attrs({{"axis", int64_t{-1}}}))),
            (std::vector<float>{1, 3, 5}));
  EXPECT_KORCH_ERROR(run1("Compress", 11, {x, Tensor::from_vector<bool>({false, false, true}, {3})},
                          make_attrs({{"axis", int64_t{1}}})),
                     ErrorCode::kInvalid, "position 2");
  EXPECT_KORCH_ERROR(infer("Compress", 11, {x, cond}, {true, false}), ErrorCode::kUnsupported, "condition");

  Tensor s = iota_f({4, 2, 2});  // [time, batch, 2]
  Tensor y = run1("ReverseSequence", 10, {s, Tensor::from_vector<int64_t>({3, 1}, {2})});
  EXPECT_EQ(F(y), (std::vector<float>{8, 9, 2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15}));
  Tensor sb = iota_f({2, 3});  // [batch, time]
  Tensor yb = run1("ReverseSequence", 10, {sb, Tensor::from_vector<int64_t>({2, 3}, {2})},
                   make_attrs({{"batch_axis", int64_t{0}}, {"time_axis", int64_t{1}}}));
  EXPECT_EQ(F(yb), (std::vector<float>{1, 0, 2, 5, 4, 3}));
  EXPECT_KORCH_ERROR(run1("ReverseSequence", 10, {s, Tensor::from_vector<int64_t>({5, 1}, {2})}), ErrorCode::kInvalid,
                     "out of range");
}

}  // namespace
}  // namespace korch
