// The cache folder (korch_cache_root(), host_compiler.h): what Korch keeps between runs, and how
// `korch cache` shows and trims it. Only these entries are ever read or deleted, whatever else
// the folder holds (KORCH_CACHE_DIR may point anywhere):
//   tuning.db (+ -wal, -shm)  measured kernel costs: hours of measuring on a big model; kept unless
//                             asked for by name (`korch cache clear --tuning-db`)
//   kernels/                  compiled CPU kernel libraries   } rebuilt on demand: capped by size,
//   cuda/                     NVRTC output (PTX)              } least recently used removed first
//   cuda_emu/                 host builds of CUDA kernels     }
// A library's modification time is its last use (a cache hit touches it), so trimming keeps what
// recent compiles used. Artifacts hold their own copy of their library: trimming never breaks one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace korch {

struct CacheEntry {
  std::string name;        // "tuning.db", "kernels", ...
  std::string path;
  std::string what;        // one line for people
  bool rebuildable = false;
  bool exists = false;
  int64_t files = 0, bytes = 0;
};

std::vector<CacheEntry> cache_entries(const std::string& root);

// The cap on the rebuildable folders: $KORCH_CACHE_MAX_SIZE (parse_size; "none" = no cap), else
// kDefaultCacheCap. Throws korch::Error (kInvalid) naming the variable when it does not parse.
constexpr int64_t kDefaultCacheCap = int64_t{2} << 30;  // 2 GiB
int64_t cache_cap();

struct TrimResult {
  int64_t files_removed = 0, bytes_removed = 0, bytes_left = 0;
};
// Removes the least recently used files of the rebuildable folders until they hold at most
// `max_bytes` together (0: empties them). Files being written by a running compile (".tmp" in
// the name, younger than an hour) are left alone.
TrimResult trim_compiled(const std::string& root, int64_t max_bytes);
// Deletes tuning.db and its -wal/-shm files; returns the bytes freed.
int64_t remove_tuning_db(const std::string& root);

// "1536", "500K", "300M", "2G", "1.5G" (powers of 1024) -> bytes. Throws korch::Error (kInvalid)
// naming `what` otherwise.
int64_t parse_size(const std::string& text, const std::string& what);
// 1536 -> "1.5 KiB".
std::string format_size(int64_t bytes);

}  // namespace korch
