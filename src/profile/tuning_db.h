// The persistent tuning database: measured kernel times keyed by (signature, device, generator).
//
// One SQLite file (default $KORCH_CACHE_DIR/tuning.db, else ~/.cache/korch/tuning.db) in WAL mode
// with synchronous=NORMAL and a busy timeout, so two korch processes can share it: readers never
// block the writer, and a writer waits for the other instead of failing. Every put() is its own
// committed transaction, so a killed process loses at most the record it was writing (a power loss
// may lose the last few commits; the data is a cache and can be re-measured).
// After open() the file exists, is in WAL mode and holds the current schema.
// A TuningDb handle is thread-safe (calls are serialised by an internal mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;
struct sqlite3_stmt;

namespace korch {

enum class TuningStatus {
  kOk,           // measured; seconds/spread/reps are valid
  kFailed,       // compiled and ran but failed the correctness gate (note: why)
  kUnemittable,  // the generator cannot emit this kernel (note: why)
  kInFlight,     // being measured (reps = attempt): found at start-up, the process measuring it died
};
const char* tuning_status_name(TuningStatus s);  // "ok" | "failed" | "unemittable" | "inflight"

struct TuningRecord {
  std::string key;        // caller-made, see make_tuning_key(); primary key
  std::string signature;  // content_hash of the canonical kernel signature text
  std::string device;     // e.g. cpu_device_id(threads)
  int generator = 0;      // code generator version that produced the kernel; 0: a library call
                          // alone, kept across generator bumps (Backend::measured_generator)
  TuningStatus status = TuningStatus::kOk;
  double seconds = 0;     // median time of one call
  double spread = 0;      // (p90 - p10) / median of the kept measurement
  int64_t reps = 0;       // timed samples behind `seconds`
  std::string note;       // failure reason / kernel source path / what bounded the measurement
  int64_t created = 0;    // unix time; put() fills in now when 0
  // The schedule variant `seconds` belongs to (Backend::schedule_variants): "" = the default
  // schedule, not (yet) compared with others; kVariantInFlight while they are being timed.
  std::string variant;
  static constexpr const char* kVariantInFlight = "*";
  // The machine's pace when `seconds` was taken: its pace probe over the best the device has
  // shown (profile/pace.h); 1 at its best, 1.6 in a slow phase; 0: unknown (not probed).
  double pace = 0;
};

// "<signature>|<device>|g<generator>": the key the CostProvider uses.
std::string make_tuning_key(const std::string& signature, const std::string& device, int generator);

class TuningDb {
 public:
  // 2: records name their schedule variant; 3: records carry the machine's pace, and the
  // fastest pace probe per device is kept (machine_pace)
  static constexpr int kSchemaVersion = 3;

  // Creates missing parent folders, the file and the schema. Throws korch::Error (kIo) naming
  // `path` when it cannot be created, is not a SQLite database (suggesting deleting it) or was
  // written by a newer Korch (schema version above kSchemaVersion).
  static std::unique_ptr<TuningDb> open(const std::string& path);
  // $KORCH_CACHE_DIR/tuning.db, else $HOME/.cache/korch/tuning.db.
  static std::string default_path();

  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  std::optional<TuningRecord> get(const std::string& key);
  // Inserts or replaces by key and commits before returning.
  void put(const TuningRecord& r);
  // The records among `keys` that exist, read in one transaction (a consistent snapshot).
  std::map<std::string, TuningRecord> get_many(const std::vector<std::string>& keys);
  int64_t size();
  const std::string& path() const { return path_; }

  // The fastest pace probe (Device::pace_probe_seconds) recorded for `device`; 0 when none.
  double best_pace(const std::string& device);
  // Records a pace probe: kept when it is the fastest for `device` so far.
  void offer_pace(const std::string& device, double seconds);

 private:
  TuningDb(sqlite3* db, std::string path);
  void exec(const char* sql);
  [[noreturn]] void fail_sqlite(const char* what);

  sqlite3* db_ = nullptr;
  std::string path_;
  sqlite3_stmt* get_stmt_ = nullptr;
  sqlite3_stmt* put_stmt_ = nullptr;
  std::mutex mu_;
};

}  // namespace korch
