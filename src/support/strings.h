// Small string helpers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace korch {

// ONNX tensor name -> file-name stem: every char outside [A-Za-z0-9_.-] becomes '_'.
std::string sanitize_name(const std::string& name);
std::vector<std::string> split(const std::string& s, char sep);
std::string human_bytes(double bytes);   // "12.3 MB"
std::string human_count(double n);       // "1.23 G"
std::string utc_minute(int64_t unix_time);  // "2026-12-07 18:50 UTC"

}  // namespace korch
