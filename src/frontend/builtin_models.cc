#include "frontend/builtin_models.h"

#include <onnx/onnx_pb.h>

#include <random>

#include "support/error.h"

namespace korch {

namespace {

// Minimal builder over onnx::GraphProto.
class Builder {
 public:
  explicit Builder(const std::string& name) : rng_(1234) {
    model_.set_ir_version(8);
    model_.set_producer_name("korch-builtin");
    auto* imp = model_.add_opset_import();
    imp->set_domain("");
    imp->set_version(17);
    g()->set_name(name);
  }
  onnx::GraphProto* g() { return model_.mutable_graph(); }

  void input(const std::string& name, const std::vector<int64_t>& shape) { value_info(g()->add_input(), name, shape); }
  void output(const std::string& name) { g()->add_output()->set_name(name); }

  // Seeded weights ~ U(-scale, scale).
  std::string weight(const std::string& name, const std::vector<int64_t>& shape, float scale, float offset = 0.f) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : shape) { t->add_dims(d); n *= d; }
    std::uniform_real_distribution<float> u(-scale, scale);
    for (int64_t i = 0; i < n; ++i) t->add_float_data(offset + u(rng_));
    return name;
  }
  std::string ints(const std::string& name, const std::vector<int64_t>& v) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t x : v) t->add_int64_data(x);
    return name;
  }
  std::string scalar(const std::string& name, float v) {
    auto* t = g()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_float_data(v);
    return name;
  }

  onnx::NodeProto* node(const std::string& op, const std::vector<std::string>& in, const std::string& out) {
    auto* n = g()->add_node();
    n->set_op_type(op);
    n->set_name(out + "_" + op);
    for (const auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  }
  static void attr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void attr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr_f(onnx::NodeProto* n, const std::string& name, float v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  static void value_info(onnx::ValueInfoProto* vi, const std::string& name, const std::vector<int64_t>& shape) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) tt->mutable_shape()->add_dim()->set_dim_value(d);
  }
  onnx::ModelProto model_;
  std::mt19937 rng_;
};

std::string conv_bn_relu(Builder& b, const std::string& x, const std::string& name, int64_t cin, int64_t cout,
                         int64_t k, int64_t stride) {
  auto* c = b.node("Conv", {x, b.weight(name + ".w", {cout, cin, k, k}, 0.3f), b.weight(name + ".b", {cout}, 0.1f)},
                   name + ".conv");
  Builder::attr(c, "kernel_shape", {k, k});
  Builder::attr(c, "pads", {k / 2, k / 2, k / 2, k / 2});
  Builder::attr(c, "strides", {stride, stride});
  auto* bn = b.node("BatchNormalization",
                    {name + ".conv", b.weight(name + ".gamma", {cout}, 0.2f, 1.f), b.weight(name + ".beta", {cout}, 0.1f),
                     b.weight(name + ".mean", {cout}, 0.1f), b.weight(name + ".var", {cout}, 0.2f, 1.f)},
                    name + ".bn");
  Builder::attr_f(bn, "epsilon", 1e-5f);
  b.node("Relu", {name + ".bn"}, name);
  return name;
}

std::string tiny_convnet() {
  Builder b("tiny_convnet");
  b.input("image", {1, 3, 32, 32});
  std::string x = conv_bn_relu(b, "image", "stem", 3, 16, 3, 2);
  auto* mp = b.node("MaxPool", {x}, "pool");
  Builder::attr(mp, "kernel_shape", {2, 2});
  Builder::attr(mp, "strides", {2, 2});
  std::string y = conv_bn_relu(b, "pool", "block1", 16, 16, 3, 1);
  auto* c2 = b.node("Conv", {y, b.weight("block2.w", {16, 16, 3, 3}, 0.2f)}, "block2");
  Builder::attr(c2, "pads", {1, 1, 1, 1});
  b.node("Add", {"block2", "pool"}, "residual");
  b.node("Relu", {"residual"}, "residual_relu");
  b.node("GlobalAveragePool", {"residual_relu"}, "gap");
  auto* fl = b.node("Flatten", {"gap"}, "flat");
  Builder::attr(fl, "axis", int64_t{1});
  auto* gemm = b.node("Gemm", {"flat", b.weight("fc.w", {10, 16}, 0.5f), b.weight("fc.b", {10}, 0.1f)}, "logits");
  Builder::attr(gemm, "transB", int64_t{1});
  auto* sm = b.node("Softmax", {"logits"}, "probs");
  Builder::attr(sm, "axis", int64_t{-1});
  b.output("probs");
  return b.bytes();
}

std::string tiny_transformer() {
  const int64_t T = 16, D = 32, H = 4, Dh = D / H, F = 64;
  Builder b("tiny_transformer");
  b.input("tokens", {1, T, D});
  auto layer_norm = [&](const std::string& x, const std::string& name) {
    auto* n = b.node("LayerNormalization", {x, b.weight(name + ".g", {D}, 0.1f, 1.f), b.weight(name + ".b", {D}, 0.1f)}, name);
    Builder::attr(n, "axis", int64_t{-1});
    Builder::attr_f(n, "epsilon", 1e-5f);
    return name;
  };
  auto linear = [&](const std::string& x, const std::string& name, int64_t in, int64_t out) {
    b.node("MatMul", {x, b.weight(name + ".w", {in, out}, 0.3f)}, name + ".mm");
    b.node("Add", {name + ".mm", b.weight(name + ".b", {out}, 0.05f)}, name);
    return name;
  };
  auto heads = [&](const std::string& x, const std::string& name, std::vector<int64_t> perm) {
    b.node("Reshape", {x, b.ints(name + ".shape", {1, T, H, Dh})}, name + ".r");
    auto* t = b.node("Transpose", {name + ".r"}, name);
    Builder::attr(t, "perm", perm);
    return name;
  };
  std::string ln1 = layer_norm("tokens", "ln1");
  std::string q = heads(linear(ln1, "q", D, D), "qh", {0, 2, 1, 3});
  std::string k = heads(linear(ln1, "k", D, D), "kh", {0, 2, 3, 1});
  std::string v = heads(linear(ln1, "v", D, D), "vh", {0, 2, 1, 3});
  b.node("MatMul", {q, k}, "scores");
  b.node("Div", {"scores", b.scalar("sqrt_dh", std::sqrt(static_cast<float>(Dh)))}, "scaled");
  auto* sm = b.node("Softmax", {"scaled"}, "attn");
  Builder::attr(sm, "axis", int64_t{-1});
  b.node("MatMul", {"attn", v}, "ctx");
  auto* t = b.node("Transpose", {"ctx"}, "ctx_t");
  Builder::attr(t, "perm", {0, 2, 1, 3});
  b.node("Reshape", {"ctx_t", b.ints("ctx.shape", {1, T, D})}, "ctx_r");
  b.node("Add", {"tokens", linear("ctx_r", "proj", D, D)}, "res1");
  std::string ln2 = layer_norm("res1", "ln2");
  std::string h = linear(ln2, "fc1", D, F);
  // GELU as exported by torch 1.13: x * 0.5 * (1 + erf(x / sqrt(2)))
  b.node("Div", {h, b.scalar("sqrt2", std::sqrt(2.f))}, "gelu.div");
  b.node("Erf", {"gelu.div"}, "gelu.erf");
  b.node("Add", {"gelu.erf", b.scalar("one", 1.f)}, "gelu.add");
  b.node("Mul", {h, "gelu.add"}, "gelu.mul");
  b.node("Mul", {"gelu.mul", b.scalar("half", 0.5f)}, "gelu");
  b.node("Add", {"res1", linear("gelu", "fc2", F, D)}, "out");
  b.output("out");
  return b.bytes();
}

}  // namespace

std::vector<std::string> builtin_model_names() { return {"tiny_convnet", "tiny_transformer"}; }

std::string builtin_model_bytes(const std::string& name) {
  if (name == "tiny_convnet") return tiny_convnet();
  if (name == "tiny_transformer") return tiny_transformer();
  fail("unknown built-in model '{}' (have: tiny_convnet, tiny_transformer)", name);
}

}  // namespace korch
