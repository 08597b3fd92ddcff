#include "runtime/cpu/cpu_device_id.h"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sstream>

namespace korch {

namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// The value of the first "key : value" line of cpuinfo with this key, "" when absent.
std::string first_field(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(line.substr(0, colon)) == key) return trim(line.substr(colon + 1));
  }
  return "";
}

// Runs of whitespace become one space; ':' and '|' (separators of the id and the key) become '_'.
std::string clean_model(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += (c == ':' || c == '|') ? '_' : c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string host_cpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  if (in) text << in.rdbuf();
  return text.str();
}

// The extensions generated code may use, as the compiler's macro and /proc/cpuinfo's flag.
struct IsaFeature {
  const char* macro;
  const char* flag;
};
constexpr IsaFeature kIsaFeatures[] = {
    {"__SSE4_2__", "sse4_2"},      {"__POPCNT__", "popcnt"},        {"__AVX__", "avx"},
    {"__AVX2__", "avx2"},          {"__FMA__", "fma"},              {"__F16C__", "f16c"},
    {"__BMI__", "bmi1"},           {"__BMI2__", "bmi2"},            {"__AVXVNNI__", "avx_vnni"},
    {"__AVX512F__", "avx512f"},    {"__AVX512DQ__", "avx512dq"},    {"__AVX512BW__", "avx512bw"},
    {"__AVX512VL__", "avx512vl"},  {"__AVX512CD__", "avx512cd"},    {"__AVX512VNNI__", "avx512_vnni"},
    {"__AVX512BF16__", "avx512_bf16"}, {"__AVX512FP16__", "avx512_fp16"}, {"__AMX_TILE__", "amx_tile"},
};

}  // namespace

std::string cpu_device_id_from_cpuinfo(const std::string& cpuinfo, int threads) {
  std::string model = clean_model(first_field(cpuinfo, "model name"));
  if (model.empty()) model = clean_model(first_field(cpuinfo, "Processor"));  // some ARM kernels
  if (model.empty()) model = "unknown";
  const std::set<std::string> flags = cpu_flags_from_cpuinfo(cpuinfo);
  std::string isa;
  auto add = [&](const std::string& s) { isa += (isa.empty() ? "" : "+") + s; };
  if (flags.count("avx2")) add("avx2");
  if (flags.count("fma")) add("fma");
  if (flags.count("avx512f")) add("avx512f");
  if (isa.empty()) isa = "noavx2";
  return fmt::format("cpu:{}:{}t:{}", model, threads, isa);
}

std::string cpu_device_id(int threads) { return cpu_device_id_from_cpuinfo(host_cpuinfo(), threads); }

std::set<std::string> cpu_flags_from_cpuinfo(const std::string& cpuinfo) {
  std::set<std::string> flags;
  std::istringstream words(first_field(cpuinfo, "flags"));
  for (std::string w; words >> w;) flags.insert(w);
  return flags;
}

std::set<std::string> host_cpu_flags() { return cpu_flags_from_cpuinfo(host_cpuinfo()); }

std::string isa_probe_source() {
  std::string s = "// The x86 extensions this library was compiled for; the loader checks them against its CPU.\n"
                  "extern \"C\" const char* " + std::string(kIsaProbeSymbol) + "() {\n  return \"\"\n";
  for (const auto& [macro, flag] : kIsaFeatures) s += fmt::format("#ifdef {}\n      \" {}\"\n#endif\n", macro, flag);
  return s + "      ;\n}\n";
}

std::vector<std::string> missing_cpu_features(const std::string& needed, const std::set<std::string>& have) {
  std::vector<std::string> missing;
  std::istringstream words(needed);
  for (std::string w; words >> w;)
    if (!have.count(w)) missing.push_back(w);
  return missing;
}

}  // namespace korch
