// The IR text form: parser. The grammar and a worked example are at the top of text_printer.cc.
//
// A hand-written lexer + recursive-descent parser. Every malformed input ends in korch::fail
// ("line L:C: expected X, got Y"); nothing indexes past the token list (it ends with an
// end-of-input token that next() never steps over) and constants are only allocated once their
// values have been read, so the memory used is bounded by the text's size.
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <unordered_map>

#include "ir/text_format.h"

namespace korch {

namespace {

enum class Tok { kEof, kIdent, kNumber, kString, kPunct };

struct Token {
  Tok kind = Tok::kEof;
  std::string text;  // strings: the unescaped contents
  int line = 1, col = 1;
};

bool ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }
bool ident_char(char c) { return ident_start(c) || digit(c) || c == '.'; }

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEof: return "end of input";
    case Tok::kString: {
      std::string s = t.text.size() > 24 ? t.text.substr(0, 24) + "..." : t.text;
      return "string \"" + s + "\"";
    }
    default: {
      std::string s = t.text.size() > 32 ? t.text.substr(0, 32) + "..." : t.text;
      return "'" + s + "'";
    }
  }
}

std::vector<Token> lex(const std::string& src) {
  std::vector<Token> out;
  size_t i = 0;
  int line = 1, col = 1;
  auto advance = [&](size_t n) {
    for (size_t k = 0; k < n && i < src.size(); ++k, ++i) {
      if (src[i] == '\n') { ++line; col = 1; }
      else ++col;
    }
  };
  auto at = [&](size_t k) -> char { return i + k < src.size() ? src[i + k] : '\0'; };
  while (i < src.size()) {
    char c = src[i];
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') { advance(1); continue; }
    if (c == '#') {
      while (i < src.size() && src[i] != '\n') advance(1);
      continue;
    }
    Token t;
    t.line = line;
    t.col = col;
    if (ident_start(c) || (c == '-' && ident_start(at(1)))) {
      // '-inf' / '-nan' lex as one token (a number); other '-ident' are caught by the parser.
      size_t j = i + 1;
      while (j < src.size() && ident_char(src[j])) ++j;
      t.text = src.substr(i, j - i);
      t.kind = c == '-' ? Tok::kNumber : Tok::kIdent;
      advance(j - i);
    } else if (digit(c) || (c == '-' && digit(at(1)))) {
      size_t j = i + 1;
      bool hex = c == '0' && (at(1) == 'x' || at(1) == 'X');
      while (j < src.size()) {
        char d = src[j];
        if (ident_char(d)) { ++j; continue; }
        char prev = src[j - 1];
        if ((d == '+' || d == '-') && !hex && (prev == 'e' || prev == 'E')) { ++j; continue; }
        break;
      }
      t.kind = Tok::kNumber;
      t.text = src.substr(i, j - i);
      advance(j - i);
    } else if (c == '"') {
      t.kind = Tok::kString;
      advance(1);
      while (true) {
        if (i >= src.size() || src[i] == '\n')
          fail("line {}:{}: unterminated string (expected a closing '\"')", t.line, t.col);
        char d = src[i];
        if (d == '"') { advance(1); break; }
        if (d != '\\') { t.text += d; advance(1); continue; }
        int eline = line, ecol = col;
        char e = at(1);
        advance(2);
        switch (e) {
          case '"': t.text += '"'; break;
          case '\\': t.text += '\\'; break;
          case 'n': t.text += '\n'; break;
          case 't': t.text += '\t'; break;
          case 'r': t.text += '\r'; break;
          case 'x': {
            auto hexval = [](char h) -> int {
              if (h >= '0' && h <= '9') return h - '0';
              if (h >= 'a' && h <= 'f') return h - 'a' + 10;
              if (h >= 'A' && h <= 'F') return h - 'A' + 10;
              return -1;
            };
            int hi = hexval(at(0)), lo = hexval(at(1));
            if (hi < 0 || lo < 0) fail("line {}:{}: expected two hex digits after '\\x'", eline, ecol);
            t.text += static_cast<char>(hi * 16 + lo);
            advance(2);
            break;
          }
          default:
            fail("line {}:{}: unknown escape in string (expected one of \\\" \\\\ \\n \\t \\r \\xHH)", eline, ecol);
        }
      }
    } else if (std::strchr("{}()[]<>:,=%", c) != nullptr && c != '\0') {
      t.kind = Tok::kPunct;
      t.text = std::string(1, c);
      advance(1);
    } else {
      auto u = static_cast<unsigned char>(c);
      if (u >= 0x21 && u < 0x7f) fail("line {}:{}: unexpected character '{}'", line, col, c);
      fail("line {}:{}: unexpected byte 0x{:02x}", line, col, u);
    }
    out.push_back(std::move(t));
  }
  Token eof;
  eof.line = line;
  eof.col = col;
  out.push_back(eof);
  return out;
}

bool is_hex_token(const std::string& s) {
  return s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
}
// Whether a number token is written as a float (not an integer).
bool looks_float(const Token& t) {
  if (t.kind != Tok::kNumber && t.kind != Tok::kIdent) return false;
  if (t.text == "inf" || t.text == "-inf" || t.text == "nan" || t.text == "-nan") return true;
  if (t.kind != Tok::kNumber || is_hex_token(t.text)) return false;
  return t.text.find_first_of(".eE") != std::string::npos;
}

struct ValueDef {
  ValueId id;
  int line, col;
};

class Parser {
 public:
  explicit Parser(const std::string& text) : toks_(lex(text)) {}

  Graph parse() {
    expect_keyword("graph", "'graph' at the start of the text");
    g_.name = parse_name("the graph name");
    if (peek_punct("(")) {
      next();
      expect_keyword("opset", "'opset'");
      Token t = next();
      g_.opset = static_cast<int>(to_int(t, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(),
                                          "an opset version"));
      expect_punct(")");
    }
    expect_punct("{");
    while (!peek_punct("}")) statement();
    next();
    if (peek().kind != Tok::kEof) error(peek(), "end of input after the graph's closing '}'");
    return std::move(g_);
  }

 private:
  std::vector<Token> toks_;
  size_t pos_ = 0;
  Graph g_;
  std::unordered_map<std::string, ValueDef> defs_;

  // --- token helpers ---------------------------------------------------------------------------
  const Token& peek(size_t k = 0) const { return toks_[std::min(pos_ + k, toks_.size() - 1)]; }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  [[noreturn]] void error(const Token& t, const std::string& expected) const {
    fail("line {}:{}: expected {}, got {}", t.line, t.col, expected, describe(t));
  }
  bool peek_punct(const char* p) const { return peek().kind == Tok::kPunct && peek().text == p; }
  bool peek_ident(const char* s) const { return peek().kind == Tok::kIdent && peek().text == s; }
  void expect_punct(const char* p) {
    if (!peek_punct(p)) error(peek(), fmt::format("'{}'", p));
    next();
  }
  void expect_keyword(const char* kw, const char* what) {
    if (!peek_ident(kw)) error(peek(), what);
    next();
  }
  std::string parse_name(const char* what) {
    const Token& t = peek();
    if ((t.kind == Tok::kIdent && t.text != "_") || t.kind == Tok::kString) return next().text;
    error(t, what);
  }

  // --- numbers ---------------------------------------------------------------------------------
  int64_t to_int(const Token& t, int64_t lo, int64_t hi, const char* what) const {
    if (t.kind != Tok::kNumber || looks_float(t)) error(t, what);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec == std::errc::result_out_of_range) fail("line {}:{}: {} is out of range for {}", t.line, t.col, t.text, what);
    if (ec != std::errc() || p != t.text.data() + t.text.size()) error(t, what);
    if (v < lo || v > hi) fail("line {}:{}: {} is out of range for {}", t.line, t.col, t.text, what);
    return v;
  }

  // Reads one float element of `dt` (f32/f64/f16/bf16) and returns its bit pattern.
  uint64_t parse_float_bits(DType dt) {
    const Token& t = next();
    const char* what = dt == DType::kFloat32 ? "an f32 value"
                       : dt == DType::kFloat64 ? "an f64 value"
                       : dt == DType::kFloat16 ? "an f16 value"
                                               : "a bf16 value";
    int width = dtype_size(dt) * 8;
    uint64_t sign_bit = 1ull << (width - 1);
    uint64_t canonical = dt == DType::kFloat32   ? 0x7fc00000ull
                         : dt == DType::kFloat64 ? 0x7ff8000000000000ull
                         : dt == DType::kFloat16 ? 0x7e00ull
                                                 : 0x7fc0ull;
    if (t.kind != Tok::kNumber && t.kind != Tok::kIdent) error(t, what);
    bool neg = !t.text.empty() && t.text[0] == '-';
    std::string core = neg ? t.text.substr(1) : t.text;
    if (core == "nan") {
      if (!peek_punct("(")) return canonical | (neg ? sign_bit : 0);
      next();
      const Token& b = next();
      if (neg) fail("line {}:{}: a NaN with explicit bits takes its sign from the bits (write nan(0x...))", t.line, t.col);
      if (b.kind != Tok::kNumber || !is_hex_token(b.text)) error(b, "the NaN's bit pattern as 0x<hex>");
      uint64_t bits = 0;
      auto [p, ec] = std::from_chars(b.text.data() + 2, b.text.data() + b.text.size(), bits, 16);
      if (ec != std::errc() || p != b.text.data() + b.text.size() || (width < 64 && bits >> width))
        fail("line {}:{}: {} is not a {}-bit pattern", b.line, b.col, b.text, width);
      uint64_t exp_mask = dt == DType::kFloat32   ? 0x7f800000ull
                          : dt == DType::kFloat64 ? 0x7ff0000000000000ull
                          : dt == DType::kFloat16 ? 0x7c00ull
                                                  : 0x7f80ull;
      uint64_t mant_mask = (sign_bit - 1) & ~exp_mask;
      if ((bits & exp_mask) != exp_mask || (bits & mant_mask) == 0)
        fail("line {}:{}: {} is not a NaN of {}", b.line, b.col, b.text, dtype_name(dt));
      expect_punct(")");
      return bits;
    }
    if (dt == DType::kFloat64) {
      double d = 0;
      if (core == "inf") d = neg ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      else d = to_floating<double>(t, what);
      uint64_t bits;
      std::memcpy(&bits, &d, 8);
      return bits;
    }
    float f = 0;
    if (core == "inf") f = neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    else f = to_floating<float>(t, what);
    if (dt == DType::kFloat32) {
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    uint16_t bits = dt == DType::kFloat16 ? Float16(f).bits : BFloat16(f).bits;
    if (core != "inf" && (bits & 0x7fffu) == (dt == DType::kFloat16 ? 0x7c00u : 0x7f80u))
      fail("line {}:{}: {} is out of range for {}", t.line, t.col, t.text, dtype_name(dt));
    return bits;
  }

  template <typename F>
  F to_floating(const Token& t, const char* what) const {
    if (t.kind != Tok::kNumber || is_hex_token(t.text)) error(t, what);
    F v = 0;
    auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
    if (ec == std::errc::result_out_of_range) fail("line {}:{}: {} is out of range for {}", t.line, t.col, t.text, what);
    if (ec != std::errc() || p != t.text.data() + t.text.size()) error(t, what);
    return v;
  }

  // Appends one element of dtype `dt` to `out`.
  void parse_element(DType dt, std::vector<std::byte>& out) {
    auto put = [&](auto v) {
      size_t n = out.size();
      out.resize(n + sizeof(v));
      std::memcpy(out.data() + n, &v, sizeof(v));
    };
    auto ranged = [&](int64_t lo, int64_t hi, const char* what) { return to_int(next(), lo, hi, what); };
    switch (dt) {
      case DType::kFloat32: put(static_cast<uint32_t>(parse_float_bits(dt))); break;
      case DType::kFloat64: put(parse_float_bits(dt)); break;
      case DType::kFloat16: case DType::kBFloat16: put(static_cast<uint16_t>(parse_float_bits(dt))); break;
      case DType::kInt8: put(static_cast<int8_t>(ranged(INT8_MIN, INT8_MAX, "an i8 value"))); break;
      case DType::kInt16: put(static_cast<int16_t>(ranged(INT16_MIN, INT16_MAX, "an i16 value"))); break;
      case DType::kInt32: put(static_cast<int32_t>(ranged(INT32_MIN, INT32_MAX, "an i32 value"))); break;
      case DType::kInt64: put(ranged(INT64_MIN, INT64_MAX, "an i64 value")); break;
      case DType::kUInt8: put(static_cast<uint8_t>(ranged(0, UINT8_MAX, "a u8 value"))); break;
      case DType::kUInt16: put(static_cast<uint16_t>(ranged(0, UINT16_MAX, "a u16 value"))); break;
      case DType::kUInt32: put(static_cast<uint32_t>(ranged(0, UINT32_MAX, "a u32 value"))); break;
      case DType::kUInt64: {
        const Token& t = next();
        uint64_t v = 0;
        auto [p, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (t.kind != Tok::kNumber || ec != std::errc() || p != t.text.data() + t.text.size())
          error(t, "a u64 value");
        put(v);
        break;
      }
      case DType::kBool: {
        const Token& t = next();
        if (t.kind == Tok::kIdent && (t.text == "true" || t.text == "false")) put(static_cast<uint8_t>(t.text == "true"));
        else if (t.kind == Tok::kNumber && (t.text == "0" || t.text == "1")) put(static_cast<uint8_t>(t.text == "1"));
        else error(t, "a bool value (true or false)");
        break;
      }
      case DType::kUndefined: case DType::kString: KORCH_CHECK(false, "parse_element: no elements");
    }
  }

  TensorType parse_type() {
    const Token& t = next();
    std::optional<DType> dt;
    if (t.kind == Tok::kIdent) dt = dtype_from_name(t.text);
    if (!dt) error(t, "a dtype (f32, f16, bf16, f64, i8, i16, i32, i64, u8, u16, u32, u64, bool)");
    TensorType type{*dt, {}};
    expect_punct("[");
    if (!peek_punct("]")) {
      while (true) {
        type.shape.push_back(to_int(next(), INT64_MIN, INT64_MAX, "a dimension (an integer)"));
        if (peek_punct("]")) break;
        expect_punct(",");
      }
    }
    next();
    return type;
  }

  // body := '[' elems ']' | '<' 'elided' N 'values' '>'. `at` is the type's position for messages.
  Tensor parse_body(const TensorType& type, const Token& at) {
    if (peek_punct("<") && peek(1).kind == Tok::kIdent && peek(1).text == "elided")
      fail("line {}:{}: the values of this constant were elided by the printer "
           "(PrintOptions::max_constant_elements); the text cannot be parsed back",
           peek().line, peek().col);
    if (dtype_size(type.dtype) == 0)
      fail("line {}:{}: constants of dtype {} are not supported", at.line, at.col, dtype_name(type.dtype));
    int64_t numel = 1;
    for (int64_t d : type.shape) {
      if (d < 0) fail("line {}:{}: a constant's dimensions must be >= 0, got {}", at.line, at.col, type_str(type));
      if (d != 0 && numel > std::numeric_limits<int64_t>::max() / d)
        fail("line {}:{}: constant type {} has too many elements", at.line, at.col, type_str(type));
      numel *= d;
    }
    expect_punct("[");
    std::vector<std::byte> bytes;
    int64_t count = 0;
    if (!peek_punct("]")) {
      while (true) {
        if (count == numel)
          fail("line {}:{}: too many values: {} holds {}", peek().line, peek().col, type_str(type), numel);
        parse_element(type.dtype, bytes);
        ++count;
        if (peek_punct("]")) break;
        expect_punct(",");
      }
    }
    const Token& close = next();
    if (count != numel)
      fail("line {}:{}: expected {} values for {}, got {}", close.line, close.col, numel, type_str(type), count);
    Tensor t(type);
    if (!bytes.empty()) std::memcpy(t.raw(), bytes.data(), bytes.size());
    return t;
  }

  // --- values ----------------------------------------------------------------------------------
  void check_new(const std::string& name, const Token& at) const {
    auto it = defs_.find(name);
    if (it != defs_.end())
      fail("line {}:{}: value '{}' is already defined (at line {}:{})", at.line, at.col, name, it->second.line,
           it->second.col);
  }
  void record(const std::string& name, ValueId id, const Token& at) { defs_[name] = ValueDef{id, at.line, at.col}; }

  ValueId parse_use(bool allow_omitted) {
    const Token& t = peek();
    if (allow_omitted && t.kind == Tok::kIdent && t.text == "_") {
      next();
      return kNoValue;
    }
    std::string name = parse_name(allow_omitted ? "a value name or '_'" : "a value name");
    auto it = defs_.find(name);
    if (it == defs_.end()) fail("line {}:{}: undefined value '{}' (values must be defined before use)", t.line, t.col, name);
    return it->second.id;
  }

  // --- statements ------------------------------------------------------------------------------
  void statement() {
    const Token& t = peek();
    if (t.kind == Tok::kIdent && t.text == "input") {
      next();
      input_decl();
    } else if (t.kind == Tok::kIdent && t.text == "const") {
      next();
      const Token at = peek();
      std::string name = parse_name("a value name");
      check_new(name, at);
      expect_punct(":");
      const Token type_at = peek();
      TensorType type = parse_type();
      expect_punct("=");
      Tensor value = parse_body(type, type_at);
      record(name, g_.add_constant(name, std::move(value)), at);
    } else if (t.kind == Tok::kIdent && t.text == "output") {
      next();
      while (true) {
        g_.outputs.push_back(parse_use(false));
        if (!peek_punct(",")) break;
        next();
      }
    } else if ((t.kind == Tok::kPunct && (t.text == "%" || t.text == "(")) ||
               (t.kind == Tok::kIdent && t.text == "_")) {
      node();
    } else {
      error(t, "a statement ('input', 'const', 'output', a node '%out: type = Op(...)', or '}')");
    }
  }

  void input_decl() {
    while (true) {
      const Token at = peek();
      std::string name = parse_name("a value name");
      check_new(name, at);
      expect_punct(":");
      const Token type_at = peek();
      TensorType type = parse_type();
      ValueId id = g_.add_input(name, type);
      if (peek_punct("=")) {
        next();
        g_.value(id).constant = std::make_shared<const Tensor>(parse_body(type, type_at));
      }
      record(name, id, at);
      if (!peek_punct(",")) break;
      next();
    }
  }

  void node() {
    struct Out {
      std::string name;
      TensorType type;
      Token at;
      bool omitted;
    };
    std::vector<Out> outs;
    if (peek_punct("(")) {
      next();
      expect_punct(")");
    } else {
      while (true) {
        if (peek_ident("_")) {
          outs.push_back(Out{"", {}, next(), true});
        } else {
          expect_punct("%");
          const Token at = peek();
          std::string name = parse_name("an output value name after '%'");
          check_new(name, at);
          for (const Out& o : outs)
            if (!o.omitted && o.name == name)
              fail("line {}:{}: value '{}' is already defined (at line {}:{})", at.line, at.col, name, o.at.line,
                   o.at.col);
          expect_punct(":");
          outs.push_back(Out{name, parse_type(), at, false});
        }
        if (!peek_punct(",")) break;
        next();
      }
    }
    expect_punct("=");
    Node n;
    n.op_type = parse_name("an operator name");
    expect_punct("(");
    if (!peek_punct(")")) {
      while (true) {
        n.inputs.push_back(parse_use(true));
        if (peek_punct(")")) break;
        expect_punct(",");
      }
    }
    next();
    if (peek_punct("{")) parse_attrs(n.attrs);
    bool has_name = false, has_domain = false;
    while (peek_ident("name") || peek_ident("domain")) {
      const Token key = next();
      bool& seen = key.text == "name" ? has_name : has_domain;
      if (seen) fail("line {}:{}: the node's {} is given twice", key.line, key.col, key.text);
      seen = true;
      expect_punct("=");
      if (peek().kind != Tok::kString) error(peek(), fmt::format("the node's {} as a string", key.text));
      (key.text == "name" ? n.name : n.domain) = next().text;
    }
    // Outputs become visible after the inputs were resolved: a node cannot consume its own output.
    for (const Out& o : outs) {
      if (o.omitted) {
        n.outputs.push_back(kNoValue);
      } else {
        ValueId id = g_.add_value(o.name, o.type);
        record(o.name, id, o.at);
        n.outputs.push_back(id);
      }
    }
    g_.add_node(std::move(n));
  }

  // --- attributes ------------------------------------------------------------------------------
  void parse_attrs(Attributes& attrs) {
    expect_punct("{");
    if (peek_punct("}")) {
      next();
      return;
    }
    while (true) {
      const Token at = peek();
      std::string key = parse_name("an attribute name");
      if (attrs.has(key)) fail("line {}:{}: attribute '{}' is given twice", at.line, at.col, key);
      expect_punct("=");
      attrs.set(key, parse_attr_value());
      if (peek_punct("}")) break;
      expect_punct(",");
    }
    next();
  }

  AttrValue parse_attr_value() {
    const Token& t = peek();
    if (t.kind == Tok::kString) return next().text;
    if (t.kind == Tok::kPunct && t.text == "[") return parse_list("");
    if (t.kind == Tok::kIdent && (t.text == "ints" || t.text == "floats" || t.text == "strings")) {
      std::string kind = next().text;
      return parse_list(kind);
    }
    if (t.kind == Tok::kPunct && t.text == "<") {
      next();
      expect_keyword("tensor", "'tensor' after '<'");
      const Token type_at = peek();
      TensorType type = parse_type();
      expect_punct("=");
      Tensor value = parse_body(type, type_at);
      expect_punct(">");
      return value;
    }
    if (looks_float(t)) return bits_to_float(parse_float_bits(DType::kFloat32));
    if (t.kind == Tok::kNumber) return to_int(next(), INT64_MIN, INT64_MAX, "an int attribute");
    error(t, "an attribute value (int, float, \"string\", [list], ints[], floats[], strings[] or <tensor ...>)");
  }

  static float bits_to_float(uint64_t bits) {
    auto b = static_cast<uint32_t>(bits);
    float f;
    std::memcpy(&f, &b, 4);
    return f;
  }

  // kind: "ints" / "floats" / "strings", or "" to infer it from the elements.
  AttrValue parse_list(std::string kind) {
    const Token open = peek();
    expect_punct("[");
    if (peek_punct("]")) {
      if (kind.empty())
        fail("line {}:{}: an empty list needs its kind: write ints[], floats[] or strings[]", open.line, open.col);
      next();
      if (kind == "ints") return std::vector<int64_t>{};
      if (kind == "floats") return std::vector<float>{};
      return std::vector<std::string>{};
    }
    if (kind.empty()) {
      // Strings if the first element is one; floats if any element is written as a float.
      if (peek().kind == Tok::kString) {
        kind = "strings";
      } else {
        kind = "ints";
        for (size_t k = 0; peek(k).kind != Tok::kEof && !(peek(k).kind == Tok::kPunct && peek(k).text == "]"); ++k)
          if (looks_float(peek(k))) {
            kind = "floats";
            break;
          }
      }
    }
    std::vector<int64_t> ints;
    std::vector<float> floats;
    std::vector<std::string> strings;
    while (true) {
      if (kind == "ints") {
        ints.push_back(to_int(next(), INT64_MIN, INT64_MAX, "an integer list element"));
      } else if (kind == "floats") {
        floats.push_back(bits_to_float(parse_float_bits(DType::kFloat32)));
      } else {
        if (peek().kind != Tok::kString) error(peek(), "a string list element");
        strings.push_back(next().text);
      }
      if (peek_punct("]")) break;
      expect_punct(",");
    }
    next();
    if (kind == "ints") return ints;
    if (kind == "floats") return floats;
    return strings;
  }
};

}  // namespace

Graph parse_graph(const std::string& text) { return Parser(text).parse(); }

}  // namespace korch
