// korch cache info|clear: what the cache folder holds (support/cache_folder.h) and emptying it.
#include <nlohmann/json.hpp>

#include "commands.h"
#include "profile/tuning_db.h"
#include "support/cache_folder.h"
#include "support/host_compiler.h"

namespace korch::cli {

namespace {

int64_t tuning_records(const CacheEntry& e) {
  if (!e.exists) return 0;
  try {
    return TuningDb::open(e.path)->size();
  } catch (const Error&) {
    return -1;  // unreadable: info still lists it
  }
}

}  // namespace

Command add_cache(CLI::App& app) {
  app.require_subcommand(1);
  app.footer(
      "Examples:\n  korch cache info\n  korch cache clear                 compiled kernels only (rebuilt on demand)\n"
      "  korch cache clear --keep 500M     the least recently used beyond 500 MiB\n"
      "  korch cache clear --tuning-db     also the measured costs (hours of measuring on big models)\n"
      "Compiled kernels are capped at $KORCH_CACHE_MAX_SIZE (default 2G; \"none\" for no cap): each compile\n"
      "removes the least recently used beyond it.");
  CLI::App* info = app.add_subcommand("info", "Where the cache is, what it holds and how big it is");
  auto json = std::make_shared<bool>(false);
  info->add_flag("--json", *json, "Print JSON instead of a table");
  CLI::App* clear = app.add_subcommand("clear", "Delete compiled kernels (and, when asked, the tuning database)");
  auto keep = std::make_shared<std::string>("0");
  auto db = std::make_shared<bool>(false);
  clear->add_option("--keep", *keep, "Keep the most recently used compiled kernels up to this size (e.g. 500M, 2G)")
      ->capture_default_str();
  clear->add_flag("--tuning-db", *db, "Also delete the tuning database (every measured cost)");
  return [info, clear, json, keep, db]() {
    const std::string root = korch_cache_root();
    if (info->parsed()) {
      const std::vector<CacheEntry> entries = cache_entries(root);
      const int64_t cap = cache_cap();
      int64_t rebuildable = 0;
      for (const CacheEntry& e : entries) rebuildable += e.rebuildable ? e.bytes : 0;
      if (*json) {
        nlohmann::json j = {{"root", root}, {"cap_bytes", cap}, {"compiled_bytes", rebuildable}, {"entries", nlohmann::json::array()}};
        for (const CacheEntry& e : entries) {
          nlohmann::json x = {{"name", e.name}, {"path", e.path}, {"exists", e.exists}, {"files", e.files},
                              {"bytes", e.bytes}, {"rebuildable", e.rebuildable}};
          if (!e.rebuildable) x["records"] = tuning_records(e);
          j["entries"].push_back(x);
        }
        fmt::print("{}\n", j.dump(2));
        return 0;
      }
      fmt::print("cache: {} ($KORCH_CACHE_DIR, else ~/.cache/korch)\n", root);
      for (const CacheEntry& e : entries) {
        std::string detail = !e.exists ? "absent" : fmt::format("{}, {} files", format_size(e.bytes), e.files);
        if (e.exists && !e.rebuildable) {
          const int64_t n = tuning_records(e);
          detail += n < 0 ? ", unreadable" : fmt::format(", {} records", n);
        }
        fmt::print("  {:<10} {:<44} {}\n", e.name, e.what, detail);
      }
      fmt::print("compiled kernels: {} of a {} cap\n", format_size(rebuildable),
                 cap < 0 ? std::string("no") : format_size(cap));
      return 0;
    }
    const int64_t keep_bytes = parse_size(*keep, "--keep");
    const TrimResult t = trim_compiled(root, keep_bytes);
    fmt::print("removed {} compiled files ({}); {} left in {}\n", t.files_removed, format_size(t.bytes_removed),
               format_size(t.bytes_left), root);
    if (*db) fmt::print("removed the tuning database ({})\n", format_size(remove_tuning_db(root)));
    return 0;
  };
}

}  // namespace korch::cli
