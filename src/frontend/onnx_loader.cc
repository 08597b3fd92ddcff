#include "frontend/onnx_loader.h"

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <unordered_map>

#include "frontend/control_flow.h"
#include "frontend/shape_inference.h"
#include "frontend/simplify.h"
#include "ir/op_registry.h"
#include "ir/text_format.h"
#include "support/dump.h"
#include "support/file_io.h"

namespace korch {

namespace fs = std::filesystem;

namespace {

// ONNX element type name for messages (onnx 1.12's proto predates the newer codes).
std::string onnx_type_name(int code) {
  static const char* const names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64",
                                      "STRING", "BOOL", "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64",
                                      "COMPLEX128", "BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                                      "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1", "FLOAT8E8M0", "UINT2", "INT2"};
  if (code >= 0 && code < static_cast<int>(std::size(names))) return names[code];
  return fmt::format("#{}", code);
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) fail_io("'{}': no such file", path);
  if (fs::is_directory(path, ec)) fail_io("'{}' is a directory, not an ONNX file", path);
  return read_file_bytes(path);
}

bool parse_proto(google::protobuf::MessageLite& msg, const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  in.SetTotalBytesLimit(INT32_MAX);
  return msg.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

template <typename Src, typename Dst>
void copy_field(const google::protobuf::RepeatedField<Src>& from, Tensor& t) {
  Dst* d = reinterpret_cast<Dst*>(t.raw());
  for (int i = 0; i < from.size(); ++i) d[i] = static_cast<Dst>(from.Get(i));
}

// Reads external data for `tp` (`need` bytes of `dtype`, `shape`) from a file next to the model;
// the tensor is allocated only once the file is known to hold it.
Tensor read_external(const onnx::TensorProto& tp, const std::string& base_dir, DType dtype, const Shape& shape,
                     int64_t need) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  if (location.empty()) fail("tensor '{}': external data without a location", tp.name());
  fs::path rel(location);
  if (rel.is_absolute() || location.find("..") != std::string::npos)
    fail("tensor '{}': external data location '{}' must be a relative path inside the model folder", tp.name(), location);
  fs::path file = fs::path(base_dir) / rel;
  std::ifstream f(file, std::ios::binary);
  if (!f) fail_io("tensor '{}': cannot open external data file '{}'", tp.name(), file.string());
  f.seekg(0, std::ios::end);
  int64_t size = static_cast<int64_t>(f.tellg());
  if (length >= 0 && length != need)
    fail("tensor '{}': external data length {} does not match its shape ({} bytes)", tp.name(), length, need);
  if (offset < 0 || offset > size || need > size - offset)
    fail("tensor '{}': external data file '{}' is too short ({} bytes, needs {} at offset {})", tp.name(), file.string(),
         size, need, offset);
  Tensor t(dtype, shape);
  f.seekg(offset);
  f.read(reinterpret_cast<char*>(t.raw()), need);
  if (!f) fail_io("tensor '{}': error reading '{}'", tp.name(), file.string());
  return t;
}

Tensor tensor_from_proto(const onnx::TensorProto& tp, const std::string& base_dir) {
  auto dtype = dtype_from_onnx(tp.data_type());
  if (!dtype) fail_unsupported("tensor '{}' has element type {}, which Korch does not support", tp.name(),
                                onnx_type_name(tp.data_type()));
  if (dtype_size(*dtype) == 0)
    fail_unsupported("tensor '{}' has element type {}, which Korch does not support", tp.name(), dtype_name(*dtype));
  Shape shape(tp.dims().begin(), tp.dims().end());
  // Sizes are checked against the data present before anything is allocated: a shape claiming
  // more elements than the model holds is an error, not an allocation failure.
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) fail("tensor '{}' has a negative dimension", tp.name());
    if (d > 0 && n > (int64_t{1} << 50) / d)
      fail("tensor '{}': its shape {} has more elements than any model holds", tp.name(), shape_str(shape));
    n *= d;
  }
  const size_t nbytes = static_cast<size_t>(n) * dtype_size(*dtype);
  if (tp.data_location() == onnx::TensorProto::EXTERNAL)
    return read_external(tp, base_dir, *dtype, shape, static_cast<int64_t>(nbytes));
  if (tp.has_raw_data()) {
    if (tp.raw_data().size() != nbytes)
      fail("tensor '{}': raw data has {} bytes, its shape {} needs {}", tp.name(), tp.raw_data().size(), shape_str(shape), nbytes);
    Tensor t(*dtype, shape);
    if (nbytes) std::memcpy(t.raw(), tp.raw_data().data(), nbytes);
    return t;
  }
  int count = -1;  // values in the typed field this element type uses
  switch (*dtype) {
    case DType::kFloat32: count = tp.float_data_size(); break;
    case DType::kFloat64: count = tp.double_data_size(); break;
    case DType::kInt64: count = tp.int64_data_size(); break;
    case DType::kInt32: case DType::kInt16: case DType::kInt8: case DType::kUInt16: case DType::kUInt8:
    case DType::kBool: case DType::kFloat16: case DType::kBFloat16: count = tp.int32_data_size(); break;
    case DType::kUInt32: case DType::kUInt64: count = tp.uint64_data_size(); break;
    default: fail_unsupported("tensor '{}': element type {} not supported", tp.name(), dtype_name(*dtype));
  }
  if (count != n) fail("tensor '{}': has {} values, its shape {} needs {}", tp.name(), count, shape_str(shape), n);
  Tensor t(*dtype, shape);
  switch (*dtype) {
    case DType::kFloat32: copy_field<float, float>(tp.float_data(), t); break;
    case DType::kFloat64: copy_field<double, double>(tp.double_data(), t); break;
    case DType::kInt64: copy_field<int64_t, int64_t>(tp.int64_data(), t); break;
    case DType::kInt32: copy_field<int32_t, int32_t>(tp.int32_data(), t); break;
    case DType::kInt16: copy_field<int32_t, int16_t>(tp.int32_data(), t); break;
    case DType::kInt8: copy_field<int32_t, int8_t>(tp.int32_data(), t); break;
    case DType::kUInt16: copy_field<int32_t, uint16_t>(tp.int32_data(), t); break;
    case DType::kUInt8: copy_field<int32_t, uint8_t>(tp.int32_data(), t); break;
    case DType::kBool: copy_field<int32_t, bool>(tp.int32_data(), t); break;
    case DType::kFloat16: case DType::kBFloat16: copy_field<int32_t, uint16_t>(tp.int32_data(), t); break;
    case DType::kUInt32: copy_field<uint64_t, uint32_t>(tp.uint64_data(), t); break;
    case DType::kUInt64: copy_field<uint64_t, uint64_t>(tp.uint64_data(), t); break;
    default: break;
  }
  return t;
}

AttrValue attr_from_proto(const onnx::AttributeProto& a, const std::string& base_dir) {
  using A = onnx::AttributeProto;
  switch (a.type()) {
    case A::INT: return a.i();
    case A::FLOAT: return a.f();
    case A::STRING: return a.s();
    case A::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case A::FLOATS: return std::vector<float>(a.floats().begin(), a.floats().end());
    case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case A::TENSOR: return tensor_from_proto(a.t(), base_dir);
    case A::GRAPH: case A::GRAPHS:
      fail_unsupported("attribute '{}' holds a subgraph; Korch supports subgraphs only in If and Loop nodes it can "
                       "inline (control_flow.h)",
                       a.name());
    default: fail_unsupported("attribute '{}' has unsupported attribute type {}", a.name(), static_cast<int>(a.type()));
  }
}

// The default-domain opset the model declares (or LoadOptions::assume_opset); -1 when none.
int model_opset(const onnx::ModelProto& model, const LoadOptions& options) {
  int opset = -1;
  for (const auto& imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx") opset = static_cast<int>(imp.version());
  return options.assume_opset > 0 ? options.assume_opset : opset;
}

// Unknown operators are reported first: that is the most useful thing to tell a user. Control-flow
// nodes are control_flow.h's to judge.
void check_operators_known(const onnx::ModelProto& model, int opset) {
  for (int i = 0; i < model.graph().node_size(); ++i) {
    const auto& np = model.graph().node(i);
    bool default_domain = np.domain().empty() || np.domain() == "ai.onnx";
    if (is_control_flow(np)) continue;
    if (!OpRegistry::global().find(np.domain(), np.op_type())) {
      std::string where = default_domain ? fmt::format("opset {}", opset) : fmt::format("domain '{}'", np.domain());
      fail_unsupported("node '{}': unsupported operator '{}' ({})", np.name().empty() ? fmt::format("{}_{}", np.op_type(), i) : np.name(),
                       np.op_type(), where);
    }
  }
}

Graph convert_model(const onnx::ModelProto& model, const std::string& path, const LoadOptions& options) {
  const std::string base_dir = fs::path(path).parent_path().string();
  Graph g;
  g.name = model.graph().name().empty() ? "main" : model.graph().name();
  int opset = model_opset(model, options);
  check_operators_known(model, opset);
  if (opset < 0) {
    if (model.opset_import_size() == 0 && model.graph().node_size() == 0) opset = kMaxOpset;
    else fail("model declares no default-domain opset");
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    fail_unsupported("model uses opset {}; Korch supports default-domain opsets {} through {}", opset, kMinOpset, kMaxOpset);
  g.opset = opset;
  const onnx::GraphProto& gp = model.graph();
  if (gp.sparse_initializer_size() > 0) fail_unsupported("sparse initializers are not supported");

  std::unordered_map<std::string, ValueId> by_name;
  auto define = [&](const std::string& name, ValueId id) {
    if (!by_name.emplace(name, id).second) fail("tensor name '{}' is defined more than once", name);
  };
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) fail("an initializer has no name");
    define(init.name(), g.add_constant(init.name(), tensor_from_proto(init, base_dir)));
  }
  // Options naming inputs the model does not have are reported before anything else.
  std::set<std::string> input_names;
  for (const auto& in : gp.input())
    if (!by_name.count(in.name())) input_names.insert(in.name());
  for (const auto& [name, t] : options.frozen_inputs)
    if (!input_names.count(name)) fail("frozen input '{}' is not an input of the model", name);
  // A --shape name that is not an input may name a dimension (a dim_param such as 'batch'): it
  // then fixes every dimension of that name, in every input.
  std::set<std::string> dim_names;
  for (const auto& in : gp.input())
    if (!by_name.count(in.name()) && in.type().has_tensor_type() && in.type().tensor_type().has_shape())
      for (const auto& dim : in.type().tensor_type().shape().dim())
        if (dim.has_dim_param() && !dim.dim_param().empty()) dim_names.insert(dim.dim_param());
  std::map<std::string, int64_t> named_dims;
  for (const auto& [name, shape] : options.input_shapes) {
    if (input_names.count(name)) continue;
    if (!dim_names.count(name))
      fail("--shape names '{}', which is neither an input nor a named dimension of the model (inputs: {}; named "
           "dimensions: {})",
           name, fmt::join(input_names, ", "), dim_names.empty() ? "none" : fmt::format("{}", fmt::join(dim_names, ", ")));
    if (shape.size() != 1)
      fail("--shape {}={}: '{}' is a dimension name, so it takes one size (--shape {}=N)", name, shape_str(shape), name,
           name);
    named_dims[name] = shape[0];
  }
  // A dimension is fixed when it has a value >= 0; -1 (as some exporters write) and names are dynamic.
  auto fixed = [](const onnx::TensorShapeProto::Dimension& dim) { return dim.has_dim_value() && dim.dim_value() >= 0; };
  for (const auto& in : gp.input()) {
    if (by_name.count(in.name())) continue;  // initializer listed as input (IR < 4): a constant
    if (!in.type().has_tensor_type()) fail_unsupported("input '{}' is not a tensor (sequences/maps are not supported)", in.name());
    const auto& tt = in.type().tensor_type();
    auto dtype = dtype_from_onnx(tt.elem_type());
    if (!dtype || *dtype == DType::kString)
      fail_unsupported("input '{}' has element type {}, which Korch does not support", in.name(),
                       onnx_type_name(tt.elem_type()));
    if (auto fz = options.frozen_inputs.find(in.name()); fz != options.frozen_inputs.end()) {
      if (fz->second.dtype() != *dtype)
        fail("frozen input '{}' is {} but the model declares {}", in.name(), dtype_name(fz->second.dtype()), dtype_name(*dtype));
      define(in.name(), g.add_constant(in.name(), fz->second));
      continue;
    }
    Shape shape;
    auto it = options.input_shapes.find(in.name());
    if (it != options.input_shapes.end()) {
      shape = it->second;
      if (tt.has_shape()) {
        if (tt.shape().dim_size() != static_cast<int>(shape.size()))
          fail("--shape {}={} has rank {}, the model declares rank {}", in.name(), shape_str(shape), shape.size(),
               tt.shape().dim_size());
        for (int d = 0; d < tt.shape().dim_size(); ++d) {
          const auto& dim = tt.shape().dim(d);
          if (fixed(dim) && dim.dim_value() != shape[static_cast<size_t>(d)])
            fail("--shape {}={} conflicts with the model's fixed dimension {} = {}", in.name(), shape_str(shape), d,
                 dim.dim_value());
        }
      }
    } else {
      if (!tt.has_shape()) fail("input '{}' has no shape; give one with --shape {}=DxDx...", in.name(), in.name());
      for (int d = 0; d < tt.shape().dim_size(); ++d) {
        const auto& dim = tt.shape().dim(d);
        if (fixed(dim)) {
          shape.push_back(dim.dim_value());
          continue;
        }
        if (dim.has_dim_param() && named_dims.count(dim.dim_param())) {
          shape.push_back(named_dims.at(dim.dim_param()));
          continue;
        }
        if (dim.has_dim_param() && !dim.dim_param().empty())
          fail("input '{}' has symbolic dimension '{}' at axis {}; fix it with --shape {}=N (every dimension of that "
               "name) or --shape {}=DxDx...",
               in.name(), dim.dim_param(), d, dim.dim_param(), in.name());
        fail("input '{}' has a dynamic dimension ({}) at axis {}; fix it with --shape {}=DxDx...", in.name(),
             dim.has_dim_value() ? fmt::format("{}", dim.dim_value()) : "no value", d, in.name());
      }
    }
    define(in.name(), g.add_input(in.name(), TensorType{*dtype, shape}));
  }

  // Nodes: create output values first so node order in the file does not matter, then sort.
  std::vector<std::pair<const onnx::NodeProto*, std::string>> protos;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    std::string name = np.name().empty() ? fmt::format("{}_{}", np.op_type(), i) : np.name();
    protos.emplace_back(&np, name);
    for (const auto& out : np.output()) {
      if (out.empty()) continue;
      define(out, g.add_value(out, TensorType{}));
    }
  }
  for (const auto& [np, name] : protos) {
    Node n;
    n.name = name;
    n.op_type = np->op_type();
    n.domain = np->domain();
    auto label = [&] { return fmt::format("{}: node '{}' ({}, opset {})", path, n.name, n.op_type, opset); };
    try {
      for (const auto& in : np->input()) {
        if (in.empty()) { n.inputs.push_back(kNoValue); continue; }
        auto it = by_name.find(in);
        if (it == by_name.end()) fail("input '{}' is not produced by any node, graph input or initializer", in);
        n.inputs.push_back(it->second);
      }
      for (const auto& out : np->output()) n.outputs.push_back(out.empty() ? kNoValue : by_name.at(out));
      for (const auto& a : np->attribute()) {
        if (!a.ref_attr_name().empty()) fail_unsupported("attribute '{}' refers to a function attribute", a.name());
        n.attrs.set(a.name(), attr_from_proto(a, base_dir));
      }
    } catch (const Error& e) {
      rethrow_with_context(e, label());
    }
    g.add_node(std::move(n));
  }
  for (const auto& out : gp.output()) {
    auto it = by_name.find(out.name());
    if (it == by_name.end()) fail("graph output '{}' is not produced by any node, input or initializer", out.name());
    g.outputs.push_back(it->second);
  }
  if (g.outputs.empty()) fail("model has no outputs");
  try {
    g.topo_sort();
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
  return g;
}

}  // namespace

Graph load_onnx_bytes(const std::string& bytes, const std::string& path, const LoadOptions& options) {
  onnx::ModelProto model;
  if (bytes.empty()) fail("'{}': file is empty", path);
  if (!parse_proto(model, bytes)) fail("'{}': not a valid ONNX model (truncated or corrupt protobuf)", path);
  if (!model.has_graph()) fail("'{}': not a valid ONNX model (no graph)", path);
  Graph g;
  try {
    // If/Loop are spliced into the main graph first; a condition or trip count is evaluated by
    // converting and folding the part of the model it is computed from.
    check_operators_known(model, model_opset(model, options));
    inline_control_flow(model, options, [&](const onnx::ModelProto& cone, const LoadOptions& cone_options) {
      try {
        Graph c = convert_model(cone, path, cone_options);
        infer_shapes_and_fold(c, path);
        return c;
      } catch (const Error& e) {  // the caller names the model once
        std::string msg = e.what();
        if (msg.rfind(path + ": ", 0) == 0) msg.erase(0, path.size() + 2);
        throw Error(e.code(), msg);
      }
    });
    g = convert_model(model, path, options);
  } catch (const Error& e) {
    if (std::string(e.what()).rfind(path, 0) == 0) throw;
    rethrow_with_context(e, path);
  }
  infer_shapes_and_fold(g, path);
  if (options.simplify) simplify_graph(g);
  try {
    verify_graph(g, /*registry_check=*/false);
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
  if (!dump_dir().empty()) {
    PrintOptions po;
    po.max_constant_elements = 64;
    dump_stage("frontend", print_graph(g, po));
  }
  return g;
}

Graph load_onnx(const std::string& path, const LoadOptions& options) {
  return load_onnx_bytes(read_file(path), path, options);
}

std::vector<std::string> onnx_input_names(const std::string& path) {
  onnx::ModelProto model;
  if (!parse_proto(model, read_file(path))) fail("'{}': not a valid ONNX model (truncated or corrupt protobuf)", path);
  std::set<std::string> inits;
  for (const auto& t : model.graph().initializer()) inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : model.graph().input())
    if (!inits.count(in.name())) names.push_back(in.name());
  return names;
}

Tensor load_onnx_tensor(const std::string& path) {
  onnx::TensorProto tp;
  std::string bytes = read_file(path);
  if (!parse_proto(tp, bytes)) fail("'{}': not a valid ONNX TensorProto", path);
  try {
    return tensor_from_proto(tp, fs::path(path).parent_path().string());
  } catch (const Error& e) {
    rethrow_with_context(e, path);
  }
}

Shape parse_shape_text(const std::string& text) {
  Shape s;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) fail("malformed shape '{}' (expected e.g. 1x3x224x224)", text);
    for (char c : cur)
      if (c < '0' || c > '9') fail("malformed shape '{}' (expected e.g. 1x3x224x224)", text);
    s.push_back(std::stoll(cur));
    cur.clear();
  };
  for (char c : text) {
    if (c == 'x' || c == 'X' || c == ',') flush();
    else if (c != ' ') cur += c;
  }
  if (!text.empty()) flush();
  return s;
}

}  // namespace korch
