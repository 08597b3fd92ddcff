#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/op_registry.h"
#include "ir/op_test_util.h"

namespace korch {
namespace {

// Evaluates a single-output node; undefined tensors in `ins` are omitted optional inputs.
Tensor run(const std::string& op, const std::vector<Tensor>& ins, int opset = 17, Attributes attrs = {}) {
  return test::eval_op(op, opset, ins, std::move(attrs)).at(0);
}

Error run_error(const std::string& op, const std::vector<Tensor>& ins, int opset = 17, Attributes attrs = {}) {
  try {
    run(op, ins, opset, std::move(attrs));
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << op << " did not fail";
  return Error(ErrorCode::kIo, "");
}

Tensor F(std::vector<float> v, Shape s) { return Tensor::from_vector<float>(v, std::move(s)); }
template <typename T>
Tensor T_(std::vector<T> v, Shape s) { return Tensor::from_vector<T>(v, std::move(s)); }
std::vector<float> fv(const Tensor& t) { return t.to_float_vector(); }
template <typename T>
std::vector<T> vals(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

Attributes attr(const std::string& k, AttrValue v) {
  Attributes a;
  a.set(k, std::move(v));
  return a;
}

TEST(ElementwiseBinary, AddSameShapeAndScalar) {
  EXPECT_EQ(fv(run("Add", {F({1, 2, 3}, {3}), F({10, 20, 30}, {3})})), (std::vector<float>{11, 22, 33}));
  Tensor r = run("Sub", {F({5}, {}), F({1, 2, 3, 4}, {2, 2})});
  EXPECT_EQ(r.shape(), (Shape{2, 2}));
  EXPECT_EQ(fv(r), (std::vector<float>{4, 3, 2, 1}));
  EXPECT_EQ(fv(run("Sub", {F({1, 2, 3, 4}, {2, 2}), F({1}, {1})})), (std::vector<float>{0, 1, 2, 3}));
}

// Naive reference for broadcasting: index each input through its broadcast strides.
void check_broadcast(const Shape& sa, const Shape& sb) {
  Shape so = broadcast_shapes(sa, sb);
  Tensor a(DType::kFloat32, sa), b(DType::kFloat32, sb);
  for (int64_t i = 0; i < a.numel(); ++i) a.data<float>()[i] = static_cast<float>(i % 97) * 0.5f;
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = static_cast<float>(i % 89) - 40.f;
  Tensor r = run("Mul", {a, b});
  ASSERT_EQ(r.shape(), so);
  const size_t rank = so.size();
  auto offset = [&](const Shape& s, const std::vector<int64_t>& idx) {
    int64_t off = 0;
    size_t lead = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d) off = off * s[d] + (s[d] == 1 ? 0 : idx[lead + d]);
    return off;
  };
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < r.numel(); ++i) {
    int64_t rem = i;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = rem % so[d];
      rem /= so[d];
    }
    float want = a.data<float>()[offset(sa, idx)] * b.data<float>()[offset(sb, idx)];
    ASSERT_EQ(r.data<float>()[i], want) << "at " << i << " for " << shape_str(sa) << "*" << shape_str(sb);
  }
}

TEST(ElementwiseBinary, GenericBroadcastMatchesNaive) {
  check_broadcast({2, 3, 4}, {3, 1});
  check_broadcast({3, 1}, {2, 1, 4});
  check_broadcast({1, 5}, {4, 1});
  check_broadcast({2, 1, 3, 1}, {1, 4, 1, 5});
  check_broadcast({}, {2, 3});
  check_broadcast({2, 3}, {1, 1});
  // Large enough for the parallel paths (rows and single long row).
  check_broadcast({2, 16, 40, 40}, {1, 16, 1, 1});
  check_broadcast({2, 16, 40, 40}, {2, 16, 1, 1});
  check_broadcast({3, 200, 100}, {3, 200, 100});
  check_broadcast({300, 400}, {});
  check_broadcast({300, 1}, {1, 400});
}

TEST(ElementwiseBinary, EmptyTensor) {
  Tensor r = run("Add", {F({}, {0, 3}), F({1, 2, 3}, {3})});
  EXPECT_EQ(r.shape(), (Shape{0, 3}));
}

TEST(ElementwiseBinary, Errors) {
  Error e = run_error("Add", {F({1, 2, 3}, {3}), F({1, 2}, {2})});
  EXPECT_EQ(e.code(), ErrorCode::kInvalid);
  EXPECT_NE(std::string(e.what()).find("not broadcastable"), std::string::npos) << e.what();
  e = run_error("Add", {F({1}, {1}), T_<int32_t>({1}, {1})});
  EXPECT_EQ(e.code(), ErrorCode::kInvalid);
  EXPECT_NE(std::string(e.what()).find("must match"), std::string::npos) << e.what();
  e = run_error("And", {F({1}, {1}), F({1}, {1})});
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_NE(std::string(e.what()).find("element type f32"), std::string::npos) << e.what();
}

TEST(ElementwiseBinary, IntegerArithmetic) {
  EXPECT_EQ(vals<int8_t>(run("Add", {T_<int8_t>({127, -128}, {2}), T_<int8_t>({1, -1}, {2})})),
            (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(vals<uint16_t>(run("Mul", {T_<uint16_t>({65535}, {1}), T_<uint16_t>({65535}, {1})})),
            (std::vector<uint16_t>{1}));
  // Division truncates toward zero; x/0 gives 0; INT_MIN/-1 wraps.
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  EXPECT_EQ(vals<int32_t>(run("Div", {T_<int32_t>({-7, 7, 7, 5, kMin}, {5}), T_<int32_t>({2, -2, 2, 0, -1}, {5})})),
            (std::vector<int32_t>{-3, -3, 3, 0, kMin}));
}

TEST(ElementwiseBinary, Mod) {
  Tensor a = T_<int32_t>({-4, 7, 5, -5}, {4}), b = T_<int32_t>({3, -3, 0, 2}, {4});
  EXPECT_EQ(vals<int32_t>(run("Mod", {a, b})), (std::vector<int32_t>{2, -2, 0, 1}));
  EXPECT_EQ(vals<int32_t>(run("Mod", {a, b}, 17, attr("fmod", int64_t{1}))), (std::vector<int32_t>{-1, 1, 0, -1}));
  EXPECT_EQ(fv(run("Mod", {F({-4.5f, 7.f}, {2}), F({2.f, -3.f}, {2})}, 17, attr("fmod", int64_t{1}))),
            (std::vector<float>{-0.5f, 1.f}));
  EXPECT_EQ(run_error("Mod", {a, b}, 17, attr("fmod", int64_t{2})).code(), ErrorCode::kInvalid);
  EXPECT_EQ(run_error("Mod", {a, b}, 9).code(), ErrorCode::kUnsupported);  // Mod starts at opset 10
}

TEST(ElementwiseBinary, PowMixedTypes) {
  Tensor r = run("Pow", {F({2, 3, 4}, {3}), T_<int64_t>({3, 2, -1}, {3})});
  EXPECT_EQ(r.dtype(), DType::kFloat32);
  EXPECT_EQ(fv(r), (std::vector<float>{8, 9, 0.25f}));
  r = run("Pow", {T_<int32_t>({1, 2, 3}, {3}), F({4, 5, 6}, {3})});
  EXPECT_EQ(r.dtype(), DType::kInt32);
  EXPECT_EQ(vals<int32_t>(r), (std::vector<int32_t>{1, 32, 729}));
  r = run("Pow", {T_<int64_t>({2, -1, 2, 1}, {4}), T_<int64_t>({10, 3, -1, -5}, {4})});
  EXPECT_EQ(vals<int64_t>(r), (std::vector<int64_t>{1024, -1, 0, 1}));
  // Before opset 12 base and exponent must share a type.
  EXPECT_EQ(run_error("Pow", {F({2}, {1}), T_<int64_t>({3}, {1})}, 11).code(), ErrorCode::kInvalid);
}

TEST(ElementwiseBinary, Variadic) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor r = run("Max", {F({1, 5, 3}, {3}), F({4}, {1}), F({0, 0, 9, 1, 1, 1}, {2, 3})});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(fv(r), (std::vector<float>{4, 5, 9, 4, 5, 4}));
  r = run("Min", {F({1, nan}, {2}), F({nan, 0}, {2})});
  EXPECT_TRUE(std::isnan(fv(r)[0]));
  EXPECT_TRUE(std::isnan(fv(r)[1]));
  EXPECT_EQ(fv(run("Mean", {F({1, 2}, {2}), F({3, 4}, {2}), F({5, 0}, {2})})), (std::vector<float>{3, 2}));
  EXPECT_EQ(fv(run("Sum", {F({1, 2}, {2})})), (std::vector<float>{1, 2}));
  EXPECT_EQ(vals<uint8_t>(run("Min", {T_<uint8_t>({1, 200}, {2}), T_<uint8_t>({3, 100}, {2})})),
            (std::vector<uint8_t>{1, 100}));
}

TEST(ElementwiseBinary, CompareAndLogic) {
  Tensor r = run("Less", {F({1, 2, 3}, {3}), F({2}, {})});
  EXPECT_EQ(r.dtype(), DType::kBool);
  EXPECT_EQ(vals<bool>(r), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(vals<bool>(run("GreaterOrEqual", {F({1, 2, 3}, {3}), F({2}, {})})), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(vals<bool>(run("Equal", {T_<bool>({true, false}, {2}), T_<bool>({true, true}, {2})})),
            (std::vector<bool>{true, false}));
  Tensor a = T_<bool>({true, true, false, false}, {4}), b = T_<bool>({true, false, true, false}, {4});
  EXPECT_EQ(vals<bool>(run("And", {a, b})), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(vals<bool>(run("Or", {a, b})), (std::vector<bool>{true, true, true, false}));
  EXPECT_EQ(vals<bool>(run("Xor", {a, b})), (std::vector<bool>{false, true, true, false}));
  EXPECT_EQ(vals<bool>(run("Not", {a})), (std::vector<bool>{false, false, true, true}));
}

TEST(ElementwiseBinary, BitOps) {
  Tensor x = T_<uint8_t>({16, 4, 1}, {3}), y = T_<uint8_t>({1, 2, 9}, {3});
  EXPECT_EQ(vals<uint8_t>(run("BitShift", {x, y}, 17, attr("direction", std::string("LEFT")))),
            (std::vector<uint8_t>{32, 16, 0}));
  EXPECT_EQ(vals<uint8_t>(run("BitShift", {x, y}, 17, attr("direction", std::string("RIGHT")))),
            (std::vector<uint8_t>{8, 1, 0}));
  EXPECT_EQ(run_error("BitShift", {x, y}, 17, attr("direction", std::string("UP"))).code(), ErrorCode::kInvalid);
  EXPECT_EQ(vals<int16_t>(run("BitwiseXor", {T_<int16_t>({5, -1}, {2}), T_<int16_t>({3}, {1})}, 18)),
            (std::vector<int16_t>{6, -4}));
  EXPECT_EQ(vals<int32_t>(run("BitwiseNot", {T_<int32_t>({0, 5}, {2})}, 18)), (std::vector<int32_t>{-1, -6}));
}

TEST(ElementwiseBinary, PRelu) {
  Tensor x = F({-1, 2, -3, 4, -5, 6}, {2, 3});
  EXPECT_EQ(fv(run("PRelu", {x, F({0.5f, 1, 2}, {3})})), (std::vector<float>{-0.5f, 2, -6, 4, -5, 6}));
  Error e = run_error("PRelu", {F({1, 2}, {2}), F({1, 2, 3, 4}, {2, 2})});
  EXPECT_NE(std::string(e.what()).find("unidirectionally"), std::string::npos) << e.what();
}

TEST(ElementwiseBinary, Where) {
  Tensor c = T_<bool>({true, false}, {2, 1});
  Tensor r = run("Where", {c, F({1, 2, 3}, {3}), F({-1}, {})});
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(fv(r), (std::vector<float>{1, 2, 3, -1, -1, -1}));
  r = run("Where", {T_<bool>({false, true}, {2}), T_<int64_t>({7, 8}, {2}), T_<int64_t>({0, 0}, {2})});
  EXPECT_EQ(vals<int64_t>(r), (std::vector<int64_t>{0, 8}));
  EXPECT_EQ(run_error("Where", {F({1}, {1}), F({1}, {1}), F({1}, {1})}).code(), ErrorCode::kInvalid);
}

TEST(ElementwiseBinary, ClipVersions) {
  Tensor x = F({-3, 0, 3}, {3});
  Attributes a;
  a.set("min", -1.f);
  a.set("max", 2.f);
  EXPECT_EQ(fv(run("Clip", {x}, 6, a)), (std::vector<float>{-1, 0, 2}));
  EXPECT_EQ(fv(run("Clip", {x}, 6, attr("max", 1.f))), (std::vector<float>{-3, 0, 1}));
  EXPECT_EQ(fv(run("Clip", {x, F({-1}, {}), F({2}, {})}, 13)), (std::vector<float>{-1, 0, 2}));
  EXPECT_EQ(fv(run("Clip", {x, Tensor(), F({1}, {})}, 13)), (std::vector<float>{-3, 0, 1}));
  EXPECT_EQ(vals<int8_t>(run("Clip", {T_<int8_t>({-100, 5, 100}, {3}), T_<int8_t>({-10}, {})}, 13)),
            (std::vector<int8_t>{-10, 5, 100}));
  EXPECT_EQ(fv(run("Clip", {x, F({2}, {}), F({1}, {})}, 13)), (std::vector<float>{1, 1, 1}));  // min > max
  EXPECT_EQ(run_error("Clip", {x, F({1, 2}, {2})}, 13).code(), ErrorCode::kInvalid);
}

TEST(ElementwiseUnary, MathAndRounding) {
  EXPECT_EQ(fv(run("Round", {F({0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f}, {6})})),
            (std::vector<float>{0, 2, 2, -0, -2, 2}));
  EXPECT_EQ(fv(run("Floor", {F({-1.5f, 1.5f}, {2})})), (std::vector<float>{-2, 1}));
  EXPECT_FLOAT_EQ(fv(run("Exp", {F({1}, {1})}))[0], std::exp(1.f));
  Tensor d = run("Sqrt", {T_<double>({2.0}, {1})});
  EXPECT_EQ(d.dtype(), DType::kFloat64);
  EXPECT_EQ(d.data<double>()[0], std::sqrt(2.0));
  Error e = run_error("Sqrt", {T_<int32_t>({4}, {1})});
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_NE(std::string(e.what()).find("element type i32"), std::string::npos) << e.what();
}

TEST(ElementwiseUnary, IntegerCapable) {
  EXPECT_EQ(vals<int32_t>(run("Abs", {T_<int32_t>({-3, 4}, {2})})), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(vals<int64_t>(run("Neg", {T_<int64_t>({-3, 4}, {2})})), (std::vector<int64_t>{3, -4}));
  EXPECT_EQ(vals<int8_t>(run("Relu", {T_<int8_t>({-3, 4}, {2})})), (std::vector<int8_t>{0, 4}));
  EXPECT_EQ(fv(run("Sign", {F({-2, 0, 3}, {3})})), (std::vector<float>{-1, 0, 1}));
  EXPECT_EQ(run_error("Neg", {T_<uint8_t>({1}, {1})}).code(), ErrorCode::kUnsupported);
}

TEST(ElementwiseUnary, Activations) {
  std::vector<float> s = fv(run("Sigmoid", {F({-200, 0, 200}, {3})}));
  EXPECT_EQ(s, (std::vector<float>{0, 0.5f, 1}));
  std::vector<float> sp = fv(run("Softplus", {F({-200, 0, 200}, {3})}));
  EXPECT_EQ(sp[2], 200.f);
  EXPECT_FLOAT_EQ(sp[1], std::log(2.f));
  EXPECT_EQ(fv(run("LeakyRelu", {F({-2, 2}, {2})}, 17, attr("alpha", 0.5f))), (std::vector<float>{-1, 2}));
  EXPECT_EQ(fv(run("ThresholdedRelu", {F({0.5f, 1.f, 2.f}, {3})})), (std::vector<float>{0, 0, 2}));
  EXPECT_EQ(fv(run("HardSigmoid", {F({-10, 0, 10}, {3})})), (std::vector<float>{0, 0.5f, 1}));
  EXPECT_EQ(fv(run("HardSwish", {F({-4, 0, 4}, {3})})), (std::vector<float>{0, 0, 4}));
  EXPECT_EQ(fv(run("Shrink", {F({-2, 0.2f, 2}, {3})}, 17, attr("bias", 0.5f))), (std::vector<float>{-1.5f, 0, 1.5f}));
  EXPECT_EQ(run_error("Celu", {F({1}, {1})}, 17, attr("alpha", 0.f)).code(), ErrorCode::kInvalid);
}

TEST(ElementwiseUnary, GeluVersions) {
  float x = 1.f;
  float exact = 0.5f * x * (1.f + std::erf(x / std::sqrt(2.f)));
  EXPECT_FLOAT_EQ(fv(run("Gelu", {F({x}, {1})}, 20))[0], exact);
  float approx = fv(run("Gelu", {F({x}, {1})}, 20, attr("approximate", std::string("tanh"))))[0];
  EXPECT_NEAR(approx, exact, 1e-3);
  EXPECT_NE(approx, exact);
  EXPECT_EQ(run_error("Gelu", {F({x}, {1})}, 17).code(), ErrorCode::kUnsupported);  // opset 20+
  EXPECT_EQ(run_error("Gelu", {F({x}, {1})}, 20, attr("approximate", std::string("erf"))).code(), ErrorCode::kInvalid);
}

TEST(ElementwiseUnary, Predicates) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F({inf, -inf, nan, 1}, {4});
  EXPECT_EQ(vals<bool>(run("IsNaN", {x})), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(vals<bool>(run("IsInf", {x})), (std::vector<bool>{true, true, false, false}));
  EXPECT_EQ(vals<bool>(run("IsInf", {x}, 17, attr("detect_positive", int64_t{0}))),
            (std::vector<bool>{false, true, false, false}));
}

TEST(ElementwiseUnary, HalfTypes) {
  Tensor a = T_<Float16>({Float16(1.5f), Float16(-2.f)}, {2});
  Tensor r = run("Add", {a, a});
  EXPECT_EQ(r.dtype(), DType::kFloat16);
  EXPECT_EQ(fv(r), (std::vector<float>{3, -4}));
  EXPECT_EQ(fv(run("Relu", {a})), (std::vector<float>{1.5f, 0}));
}

TEST(ElementwiseCast, Conversions) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = F({1.9f, -1.9f, 300.f, -1.f, nan}, {5});
  EXPECT_EQ(vals<int8_t>(run("Cast", {x}, 17, attr("to", int64_t{3}))), (std::vector<int8_t>{1, -1, 44, -1, 0}));
  EXPECT_EQ(vals<uint8_t>(run("Cast", {x}, 17, attr("to", int64_t{2}))), (std::vector<uint8_t>{1, 255, 44, 255, 0}));
  EXPECT_EQ(vals<bool>(run("Cast", {F({0, 2, -0.f}, {3})}, 17, attr("to", int64_t{9}))),
            (std::vector<bool>{false, true, false}));
  EXPECT_EQ(fv(run("Cast", {T_<bool>({true, false}, {2})}, 17, attr("to", int64_t{1}))), (std::vector<float>{1, 0}));
  Tensor bf = run("Cast", {F({1.00390625f}, {1})}, 17, attr("to", int64_t{16}));  // halfway: rounds to even
  EXPECT_EQ(bf.dtype(), DType::kBFloat16);
  EXPECT_EQ(fv(bf)[0], 1.f);
  Tensor like = run("CastLike", {T_<int64_t>({7}, {1}), T_<double>({0}, {1})}, 15);
  EXPECT_EQ(like.dtype(), DType::kFloat64);
  EXPECT_EQ(like.data<double>()[0], 7.0);
}

TEST(ElementwiseCast, Errors) {
  Error e = run_error("Cast", {F({1}, {1})}, 19, attr("to", int64_t{17}));
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_NE(std::string(e.what()).find("FLOAT8E4M3FN"), std::string::npos) << e.what();
  EXPECT_EQ(run_error("Cast", {F({1}, {1})}, 17, attr("to", int64_t{8})).code(), ErrorCode::kUnsupported);
  EXPECT_EQ(run_error("Cast", {F({1}, {1})}, 17, attr("to", int64_t{99})).code(), ErrorCode::kInvalid);
  EXPECT_EQ(run_error("Cast", {F({1}, {1})}, 17).code(), ErrorCode::kInvalid);
}

}  // namespace
}  // namespace korch
