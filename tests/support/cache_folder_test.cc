#include "support/cache_folder.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "support/error.h"
#include "temp_dir.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, size_t bytes, int age_hours) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
  fs::last_write_time(p, fs::file_time_type::clock::now() - std::chrono::hours(age_hours));
}

TEST(CacheFolder, ParsesSizes) {
  EXPECT_EQ(parse_size("1536", "x"), 1536);
  EXPECT_EQ(parse_size("500K", "x"), 500 * 1024);
  EXPECT_EQ(parse_size("2G", "x"), int64_t{2} << 30);
  EXPECT_EQ(parse_size("1.5MiB", "x"), 3 * 512 * 1024);
  EXPECT_EQ(parse_size("0", "x"), 0);
  for (const char* bad : {"", "lots", "-1", "5Q", "1e400"}) {
    try {
      parse_size(bad, "--keep");
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--keep"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(format_size(1536), "1.5 KiB");
  EXPECT_EQ(format_size(12), "12 B");
}

// Least recently used first, only the rebuildable folders, never a file a compile is writing.
TEST(CacheFolder, TrimsLeastRecentlyUsedCompiledFilesOnly) {
  testing::TempDir root("korch-cache-test");
  const fs::path r = root.path();
  write(r / "kernels" / "old.so", 1000, 50);
  write(r / "kernels" / "mid.so", 1000, 20);
  write(r / "cuda_emu" / "new.so", 1000, 1);
  write(r / "kernels" / "x.so.tmp12.3", 1000, 0);  // in flight: younger than an hour
  write(r / "tuning.db", 5000, 100);
  write(r / "notes.txt", 7000, 100);               // not Korch's: never counted or deleted
  write(r / "other" / "a.so", 7000, 100);

  const std::vector<CacheEntry> entries = cache_entries(r.string());
  int64_t compiled = 0;
  for (const CacheEntry& e : entries) {
    if (e.rebuildable) compiled += e.bytes;
    if (e.name == "tuning.db") {
      EXPECT_TRUE(e.exists);
      EXPECT_EQ(e.bytes, 5000);
    }
  }
  EXPECT_EQ(compiled, 4000);

  TrimResult t = trim_compiled(r.string(), 2500);
  EXPECT_EQ(t.files_removed, 2);  // old, then mid
  EXPECT_EQ(t.bytes_left, 2000);
  EXPECT_FALSE(fs::exists(r / "kernels" / "old.so"));
  EXPECT_FALSE(fs::exists(r / "kernels" / "mid.so"));
  EXPECT_TRUE(fs::exists(r / "cuda_emu" / "new.so"));

  t = trim_compiled(r.string(), 0);
  EXPECT_EQ(t.files_removed, 1);
  EXPECT_TRUE(fs::exists(r / "kernels" / "x.so.tmp12.3"));
  EXPECT_TRUE(fs::exists(r / "tuning.db"));
  EXPECT_TRUE(fs::exists(r / "notes.txt"));
  EXPECT_TRUE(fs::exists(r / "other" / "a.so"));

  EXPECT_EQ(remove_tuning_db(r.string()), 5000);
  EXPECT_FALSE(fs::exists(r / "tuning.db"));
  EXPECT_TRUE(fs::exists(r / "notes.txt"));
}

TEST(CacheFolder, CapFromTheEnvironment) {
  ::setenv("KORCH_CACHE_MAX_SIZE", "300M", 1);
  EXPECT_EQ(cache_cap(), int64_t{300} << 20);
  ::setenv("KORCH_CACHE_MAX_SIZE", "none", 1);
  EXPECT_EQ(cache_cap(), -1);
  ::setenv("KORCH_CACHE_MAX_SIZE", "big", 1);
  EXPECT_THROW(cache_cap(), Error);
  ::unsetenv("KORCH_CACHE_MAX_SIZE");
  EXPECT_EQ(cache_cap(), kDefaultCacheCap);
}

}  // namespace
}  // namespace korch
