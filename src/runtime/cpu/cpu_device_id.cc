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

}  // namespace

std::string cpu_device_id_from_cpuinfo(const std::string& cpuinfo, int threads) {
  std::string model = clean_model(first_field(cpuinfo, "model name"));
  if (model.empty()) model = clean_model(first_field(cpuinfo, "Processor"));  // some ARM kernels
  if (model.empty()) model = "unknown";
  std::set<std::string> flags;
  std::istringstream words(first_field(cpuinfo, "flags"));
  for (std::string w; words >> w;) flags.insert(w);
  std::string isa;
  auto add = [&](const std::string& s) { isa += (isa.empty() ? "" : "+") + s; };
  if (flags.count("avx2")) add("avx2");
  if (flags.count("fma")) add("fma");
  if (flags.count("avx512f")) add("avx512f-disabled");
  if (isa.empty()) isa = "noavx2";
  return fmt::format("cpu:{}:{}t:{}", model, threads, isa);
}

std::string cpu_device_id(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::stringstream text;
  if (in) text << in.rdbuf();
  return cpu_device_id_from_cpuinfo(text.str(), threads);
}

}  // namespace korch
