// The oneDNN engine every CPU library step shares (one per process).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

namespace korch::cpu {

dnnl::engine& cpu_engine();

}  // namespace korch::cpu
