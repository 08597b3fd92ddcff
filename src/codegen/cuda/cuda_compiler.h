// Batch compilation of generated CUDA C++ to PTX with NVRTC, cached on disk (the CUDA mirror of
// cpu/cpu_compiler.h).
//
// NVRTC is loaded with dlopen at run time ($KORCH_NVRTC, libnvrtc.so.13, libnvrtc.so,
// /usr/local/cuda/lib64/libnvrtc.so.13) and never linked, so the korch binary starts on machines
// without CUDA; NVRTC needs no driver or GPU. One source = one NVRTC program holding many
// kernels (a program costs ~18 ms plus its kernels). The cache key is a content hash of the
// source, the options and NVRTC's version, so a changed generator or toolkit never reuses stale
// PTX. Cache folder: $KORCH_CACHE_DIR/cuda, else ~/.cache/korch/cuda (<hash>.cu next to
// <hash>.ptx); writes are atomic (temp file + rename).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace korch::cuda {

struct NvrtcConfig {
  std::string arch = "compute_90";   // H200 (sm_90); PTX for the virtual architecture
  std::vector<std::string> options;  // added after --gpu-architecture and -std=c++17
  std::string cache_dir;             // "" = default
  int jobs = 2;                      // programs compiled at once (threads)
};

// Whether NVRTC could be loaded; otherwise *why says what was tried and why it failed.
bool nvrtc_available(std::string* why);

struct PtxModule {
  std::string ptx;
  std::string source_path, ptx_path;  // in the cache (for error reports and artifacts)
  bool cached = false;                // true when NVRTC did not run
  std::string log;                    // NVRTC's log (warnings) when it ran
};

// Compiles each source to PTX (cache hits skip NVRTC), up to config.jobs at once. Throws
// korch::Error (kUnsupported): when NVRTC is missing (one line naming what was tried), or when a
// source does not compile (naming its .cu path, with NVRTC's log). `on_unit` (may be empty) is
// called once per source: cached = true for each cache hit, all first, then false as NVRTC
// finishes each of the others (serialised).
std::vector<PtxModule> compile_to_ptx(const std::vector<std::string>& sources, const NvrtcConfig& config = {},
                                      const std::function<void(bool cached)>& on_unit = {});

// "12.8" (the loaded NVRTC's version), "" when it is not available.
std::string nvrtc_version();

}  // namespace korch::cuda
