// The IR text form: printer. The parser is in text_parser.cc.
//
// Example (a worked one; every construct appears):
//
//   graph tiny (opset 17) {
//     input x: f32[1,3,8,8]
//     input "onnx::mask/0": bool[2]
//     const w: f32[4,3,3,3] = [0.1, -0.2, 1e-30, nan, -inf, -0, ...]
//     const shape: i64[2] = [1, -1]
//     const h: f16[3] = [0.1, nan(0x7e01), 65504]
//     %y: f32[1,4,8,8] = Conv(x, w, _) {pads=[1, 1, 1, 1], alpha=0.5, mode="NOTSET"} name="conv0"
//     %a: f32[1,2,8,8], _, %c: f32[1,1,8,8] = Split(y) {axis=1, split=<tensor i64[3] = [2, 1, 1]>}
//     %g: f32[1,2,8,8] = Gelu(a) {} domain="com.microsoft" name="gelu"
//     output a
//     output c
//   }
//
// Grammar (whitespace and newlines are free; `#` starts a comment that runs to the end of line):
//
//   graph      := 'graph' NAME [ '(' 'opset' INT ')' ] '{' statement* '}'
//   statement  := 'input' NAME ':' type [ '=' body ]          (an input; '= body' also makes it
//                                                              a constant, ONNX's initializer-input)
//               | 'const' NAME ':' type '=' body
//               | 'output' NAME (',' NAME)*
//               | outputs '=' OPNAME '(' [ use (',' use)* ] ')' [ attrs ] node_meta*
//   outputs    := out (',' out)* | '(' ')'                    ('()' : a node without outputs)
//   out        := '%' NAME ':' type | '_'                     ('_' : omitted optional output)
//   use        := NAME | '_'                                  ('_' : omitted optional input)
//   node_meta  := 'name' '=' STRING | 'domain' '=' STRING     (each at most once; "" when absent)
//   NAME       := IDENT | STRING        IDENT = [A-Za-z_][A-Za-z0-9_.]*, except '_' itself
//   OPNAME     := IDENT | STRING
//   type       := DTYPE '[' [ INT (',' INT)* ] ']'            DTYPE: f32 f16 bf16 f64 i8 i16 i32
//                                                              i64 u8 u16 u32 u64 bool (+ undef,
//                                                              string for value types only)
//   body       := '[' [ elem (',' elem)* ']'                  flat, row-major; '[x]' for a scalar
//               | '<' 'elided' INT 'values' '>'               (printed when eliding; unparseable)
//   elem       := integer | float | 'true' | 'false'          per the dtype
//   float      := decimal ('1', '-0', '0.1', '1e-30') | ['-'] 'inf' | ['-'] 'nan'
//               | 'nan' '(' HEXBITS ')'                       NaN with its full bit pattern,
//                                                              e.g. nan(0x7fc00001), nan(0xfe01)
//   attrs      := '{' [ attr (',' attr)* ] '}'
//   attr       := NAME '=' avalue
//   avalue     := INT                   -> int              3, -1
//               | FLOAT                 -> float            0.5, 1.0, -0.0, 1e-30, inf, nan
//               | STRING                -> string           "NOTSET"
//               | '[' ... ']'           -> ints / floats / strings by element kind
//               | 'ints' '[' ... ']' | 'floats' '[' ... ']' | 'strings' '[' ... ']'
//                                                            (an explicit kind; required when empty)
//               | '<' 'tensor' type '=' body '>'             -> tensor
//   STRING     := '"' ... '"'  with escapes \" \\ \n \t \r \xHH; other bytes >= 0x80 stay raw.
//
// Exactness: float values print as the shortest decimal that reads back to the same bits (f32 and
// f64 via std::to_chars; f16/bf16: the shortest decimal that rounds back to the same half value).
// Attribute floats always carry a '.', an exponent, or are inf/nan, so they never read as ints;
// an unprefixed list whose elements include any float is a float list. NaNs other than the
// dtype's canonical quiet NaN (and its negation) print their bits. Every dtype round-trips
// bit-exactly (bool bytes other than 0/1 excepted).
//
// Order: inputs (graph order), constants (value order), nodes (graph order), outputs. parse_graph
// numbers values in declaration order, so value ids can differ from the printed graph's; names,
// types, constants and structure are identical. Values named "" or sharing a name with an earlier
// value print as "<name>#<id>" so the text stays unambiguous (then names differ after parsing).
// Values that are neither inputs, constants nor node outputs are not printed.
#include <charconv>
#include <cmath>
#include <cstring>
#include <set>
#include <string_view>

#include "ir/text_format.h"

namespace korch {

namespace {

bool is_ident(std::string_view s) {
  if (s.empty() || s == "_") return false;
  auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (!alpha(s[0])) return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '.') return false;
  return true;
}

void append_quoted(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
        else out += ch;
    }
  }
  out += '"';
}

std::string quoted(std::string_view s) {
  std::string out;
  append_quoted(out, s);
  return out;
}

std::string name_text(std::string_view s) { return is_ident(s) ? std::string(s) : quoted(s); }

template <typename F>
std::string shortest(F v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// NaN: `nan` / `-nan` for the canonical quiet NaN (with / without sign), else the bit pattern.
std::string nan_text(uint64_t bits, uint64_t canonical, uint64_t sign_bit, int hex_digits) {
  if (bits == canonical) return "nan";
  if (bits == (canonical | sign_bit)) return "-nan";
  return fmt::format("nan(0x{:0{}x})", bits, hex_digits);
}

std::string f32_text(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if (std::isnan(v)) return nan_text(bits, 0x7fc00000u, 0x80000000u, 8);
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return shortest(v);
}

std::string f64_text(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  if (std::isnan(v)) return nan_text(bits, 0x7ff8000000000000ull, 0x8000000000000000ull, 16);
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  return shortest(v);
}

// Shortest decimal that the parser (decimal -> float -> half, round to nearest even) maps back to
// `bits`. Every finite half value is exact in float, so precision 9 always succeeds.
template <typename H>
std::string half_text(uint16_t bits, uint16_t canonical_nan) {
  H h;
  h.bits = bits;
  float f = static_cast<float>(h);
  if (std::isnan(f)) return nan_text(bits, canonical_nan, 0x8000u, 4);
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  std::string exact = shortest(f);
  for (int p = 1; p <= 9; ++p) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::general, p);
    float c = 0;
    std::from_chars(buf, r.ptr, c);
    if (H(c).bits != bits) continue;
    std::string s = shortest(c);  // e.g. "1e+02" -> 100.f -> "100"
    return s.size() < exact.size() ? s : exact;  // ties keep the exact value: 65504, not 65500
  }
  return exact;
}

template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

std::string element_text(const Tensor& t, int64_t i) {
  const std::byte* p = t.raw() + static_cast<size_t>(i) * static_cast<size_t>(dtype_size(t.dtype()));
  switch (t.dtype()) {
    case DType::kFloat32: return f32_text(load<float>(p));
    case DType::kFloat64: return f64_text(load<double>(p));
    case DType::kFloat16: return half_text<Float16>(load<uint16_t>(p), 0x7e00u);
    case DType::kBFloat16: return half_text<BFloat16>(load<uint16_t>(p), 0x7fc0u);
    case DType::kInt8: return std::to_string(load<int8_t>(p));
    case DType::kInt16: return std::to_string(load<int16_t>(p));
    case DType::kInt32: return std::to_string(load<int32_t>(p));
    case DType::kInt64: return std::to_string(load<int64_t>(p));
    case DType::kUInt8: return std::to_string(load<uint8_t>(p));
    case DType::kUInt16: return std::to_string(load<uint16_t>(p));
    case DType::kUInt32: return std::to_string(load<uint32_t>(p));
    case DType::kUInt64: return std::to_string(load<uint64_t>(p));
    case DType::kBool: return load<uint8_t>(p) ? "true" : "false";
    case DType::kUndefined: case DType::kString: break;
  }
  return "?";
}

void append_body(std::string& out, const Tensor& t, const PrintOptions& options) {
  int64_t n = t.numel();
  if (options.max_constant_elements >= 0 && n > options.max_constant_elements) {
    out += fmt::format("<elided {} values>", n);
    return;
  }
  if (dtype_size(t.dtype()) == 0) {  // not constructible by the parser either
    out += fmt::format("<elided {} values>", n);
    return;
  }
  out += '[';
  for (int64_t i = 0; i < n; ++i) {
    if (i) out += ", ";
    out += element_text(t, i);
  }
  out += ']';
}

// Attribute floats must not read back as ints.
std::string attr_float_text(float v) {
  std::string s = f32_text(v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // 'n': inf / nan
  return s;
}

void append_attr(std::string& out, const AttrValue& v, const PrintOptions& options) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          out += std::to_string(x);
        } else if constexpr (std::is_same_v<T, float>) {
          out += attr_float_text(x);
        } else if constexpr (std::is_same_v<T, std::string>) {
          append_quoted(out, x);
        } else if constexpr (std::is_same_v<T, Tensor>) {
          out += fmt::format("<tensor {} = ", type_str(x.type()));
          append_body(out, x, options);
          out += '>';
        } else {  // lists
          using E = typename T::value_type;
          if (x.empty()) {
            out += std::is_same_v<E, int64_t> ? "ints[]" : std::is_same_v<E, float> ? "floats[]" : "strings[]";
            return;
          }
          out += '[';
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) out += ", ";
            if constexpr (std::is_same_v<E, int64_t>) out += std::to_string(x[i]);
            else if constexpr (std::is_same_v<E, float>) out += attr_float_text(x[i]);
            else append_quoted(out, x[i]);
          }
          out += ']';
        }
      },
      v);
}

}  // namespace

std::string print_graph(const Graph& g, const PrintOptions& options) {
  // A unique printed name per value.
  std::vector<std::string> names(g.values.size());
  std::set<std::string> used;
  for (size_t i = 0; i < g.values.size(); ++i) {
    std::string n = g.values[i].name;
    if (n.empty() || used.count(n)) {
      std::string base = n + "#" + std::to_string(i);
      n = base;
      for (int k = 2; used.count(n); ++k) n = base + "#" + std::to_string(k);
    }
    used.insert(n);
    names[i] = name_text(n);
  }
  auto ref = [&](ValueId v) -> std::string {
    if (v == kNoValue) return "_";
    if (v < 0 || static_cast<size_t>(v) >= names.size()) return fmt::format("\"<bad value id {}>\"", v);
    return names[static_cast<size_t>(v)];
  };

  std::string out = fmt::format("graph {} (opset {}) {{\n", name_text(g.name), g.opset);
  std::vector<char> is_input(g.values.size(), 0);
  for (ValueId v : g.inputs) {
    if (v < 0 || static_cast<size_t>(v) >= g.values.size()) continue;
    is_input[static_cast<size_t>(v)] = 1;
    const Value& val = g.value(v);
    out += fmt::format("  input {}: {}", ref(v), type_str(val.type));
    if (val.constant) {
      out += " = ";
      append_body(out, *val.constant, options);
    }
    out += '\n';
  }
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& val = g.values[i];
    if (!val.constant || is_input[i]) continue;
    // The declared type is the tensor's; the parser rebuilds it from the type.
    out += fmt::format("  const {}: {} = ", names[i], type_str(val.constant->type()));
    append_body(out, *val.constant, options);
    out += '\n';
  }
  for (const Node& n : g.nodes) {
    out += "  ";
    if (n.outputs.empty()) out += "()";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i) out += ", ";
      ValueId o = n.outputs[i];
      if (o == kNoValue || o < 0 || static_cast<size_t>(o) >= g.values.size()) {
        out += "_";
      } else {
        out += fmt::format("%{}: {}", ref(o), type_str(g.value(o).type));
      }
    }
    out += fmt::format(" = {}(", name_text(n.op_type));
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (i) out += ", ";
      out += ref(n.inputs[i]);
    }
    out += ")";
    if (!n.attrs.all().empty()) {
      out += " {";
      bool first = true;
      for (const auto& [k, v] : n.attrs.all()) {
        if (!first) out += ", ";
        first = false;
        out += name_text(k);
        out += '=';
        append_attr(out, v, options);
      }
      out += "}";
    }
    if (!n.domain.empty()) out += fmt::format(" domain={}", quoted(std::string_view(n.domain)));
    if (!n.name.empty()) out += fmt::format(" name={}", quoted(std::string_view(n.name)));
    out += '\n';
  }
  for (ValueId v : g.outputs) out += fmt::format("  output {}\n", ref(v));
  out += "}\n";
  return out;
}

}  // namespace korch
