#include "profile/tuning_db.h"

#include <sqlite3.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <thread>

#include "support/error.h"
#include "support/host_compiler.h"

namespace korch {

namespace {

// How long a connection waits for another process's lock before giving up. Measuring a batch of
// kernels takes seconds, but each transaction holds the lock for well under a millisecond.
constexpr int kBusyTimeoutMs = 30000;

TuningStatus parse_status(const std::string& s, const std::string& path) {
  if (s == "ok") return TuningStatus::kOk;
  if (s == "failed") return TuningStatus::kFailed;
  if (s == "unemittable") return TuningStatus::kUnemittable;
  if (s == "inflight") return TuningStatus::kInFlight;
  fail_io("tuning database {} holds an unknown record status '{}' (written by a newer Korch?); "
          "delete the file to start over", path, s);
}

std::string column_text(sqlite3_stmt* st, int i) {
  const unsigned char* t = sqlite3_column_text(st, i);
  return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(st, i)) : std::string();
}

// Column order of kSelect and kInsert.
constexpr const char* kSelect =
    "SELECT key, signature, device, generator, status, seconds, spread, reps, note, created, variant, pace "
    "FROM records WHERE key = ?1";
constexpr const char* kInsert =
    "INSERT OR REPLACE INTO records "
    "(key, signature, device, generator, status, seconds, spread, reps, note, created, variant, pace) "
    "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

TuningRecord read_row(sqlite3_stmt* st, const std::string& path) {
  TuningRecord r;
  r.key = column_text(st, 0);
  r.signature = column_text(st, 1);
  r.device = column_text(st, 2);
  r.generator = sqlite3_column_int(st, 3);
  r.status = parse_status(column_text(st, 4), path);
  r.seconds = sqlite3_column_double(st, 5);
  r.spread = sqlite3_column_double(st, 6);
  r.reps = sqlite3_column_int64(st, 7);
  r.note = column_text(st, 8);
  r.created = sqlite3_column_int64(st, 9);
  r.variant = column_text(st, 10);
  r.pace = sqlite3_column_double(st, 11);
  return r;
}

// Resets a statement on scope exit so its read lock is released even when a row throws.
struct StmtReset {
  sqlite3_stmt* st;
  ~StmtReset() {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
  }
};

}  // namespace

const char* tuning_status_name(TuningStatus s) {
  switch (s) {
    case TuningStatus::kOk: return "ok";
    case TuningStatus::kFailed: return "failed";
    case TuningStatus::kUnemittable: return "unemittable";
    case TuningStatus::kInFlight: return "inflight";
  }
  return "?";
}

std::string make_tuning_key(const std::string& signature, const std::string& device, int generator) {
  return signature + "|" + device + "|g" + std::to_string(generator);
}

std::string TuningDb::default_path() { return korch_cache_root() + "/tuning.db"; }

TuningDb::TuningDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

TuningDb::~TuningDb() {
  sqlite3_finalize(get_stmt_);
  sqlite3_finalize(put_stmt_);
  sqlite3_close_v2(db_);
}

void TuningDb::fail_sqlite(const char* what) {
  const int code = sqlite3_extended_errcode(db_);
  const int primary = code & 0xff;
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT)
    fail_io("tuning database {} is not a valid SQLite database ({}: {}); delete it to start over "
            "(it only caches measurements)", path_, what, sqlite3_errmsg(db_));
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
    fail_io("tuning database {} stayed locked by another process for {} s ({}): {}", path_,
            kBusyTimeoutMs / 1000, what, sqlite3_errmsg(db_));
  fail_io("tuning database {}: {} failed: {}", path_, what, sqlite3_errmsg(db_));
}

void TuningDb::exec(const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    sqlite3_free(err);  // sqlite3_errmsg still holds the same message
    fail_sqlite(sql);
  }
}

std::unique_ptr<TuningDb> TuningDb::open(const std::string& path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(p.parent_path(), ec);
    if (ec) fail_io("cannot create the folder of tuning database {}: {}", path, ec.message());
  }
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                 SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    fail_io("cannot open tuning database {}: {}", path, msg);
  }
  std::unique_ptr<TuningDb> db(new TuningDb(raw, path));
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  // The first statement that reads the file: a non-SQLite file fails here with SQLITE_NOTADB.
  // Switching a new file to WAL while another process does the same can return SQLITE_BUSY at
  // once, without the busy handler (TuningDbTest.TwoProcessesWriteConcurrently failed so about
  // one run in ten): try again until the busy timeout.
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const int rc = sqlite3_exec(raw, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) break;
    const bool busy = (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
    if (!busy || std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(kBusyTimeoutMs))
      db->fail_sqlite("PRAGMA journal_mode=WAL");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  db->exec("PRAGMA synchronous=NORMAL");
  // IMMEDIATE: two processes creating the schema at once serialise instead of deadlocking.
  db->exec("BEGIN IMMEDIATE");
  try {
    db->exec("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)");
    db->exec(
        "CREATE TABLE IF NOT EXISTS records ("
        " key TEXT PRIMARY KEY NOT NULL, signature TEXT NOT NULL, device TEXT NOT NULL,"
        " generator INTEGER NOT NULL, status TEXT NOT NULL, seconds REAL NOT NULL,"
        " spread REAL NOT NULL, reps INTEGER NOT NULL, note TEXT NOT NULL, created INTEGER NOT NULL,"
        " variant TEXT NOT NULL DEFAULT '', pace REAL NOT NULL DEFAULT 0)");
    db->exec("CREATE TABLE IF NOT EXISTS machine_pace (device TEXT PRIMARY KEY NOT NULL, best REAL NOT NULL)");
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(raw, "SELECT MAX(version) FROM schema_version", -1, &st, nullptr) != SQLITE_OK)
      db->fail_sqlite("reading the schema version");
    int version = 0;
    const int step = sqlite3_step(st);
    if (step == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL) version = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    if (step != SQLITE_ROW) db->fail_sqlite("reading the schema version");
    if (version > kSchemaVersion)
      fail_io("tuning database {} has schema version {}, newer than this Korch understands ({}); "
              "use the newer Korch or point KORCH_CACHE_DIR elsewhere", path, version, kSchemaVersion);
    // Version 1 had no schedule variant: its records keep measuring the default schedule ('').
    if (version == 1) db->exec("ALTER TABLE records ADD COLUMN variant TEXT NOT NULL DEFAULT ''");
    // Versions 1-2 did not record the machine's pace: their records' pace is unknown (0).
    if (version >= 1 && version < 3) db->exec("ALTER TABLE records ADD COLUMN pace REAL NOT NULL DEFAULT 0");
    if (version < kSchemaVersion) {
      db->exec("DELETE FROM schema_version");
      db->exec(("INSERT INTO schema_version (version) VALUES (" + std::to_string(kSchemaVersion) + ")").c_str());
    }
    db->exec("COMMIT");
  } catch (...) {
    sqlite3_exec(raw, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  if (sqlite3_prepare_v2(raw, kSelect, -1, &db->get_stmt_, nullptr) != SQLITE_OK)
    db->fail_sqlite("preparing the lookup");
  if (sqlite3_prepare_v2(raw, kInsert, -1, &db->put_stmt_, nullptr) != SQLITE_OK)
    db->fail_sqlite("preparing the insert");
  return db;
}

std::optional<TuningRecord> TuningDb::get(const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  StmtReset reset{get_stmt_};
  sqlite3_bind_text(get_stmt_, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(get_stmt_);
  if (rc == SQLITE_ROW) return read_row(get_stmt_, path_);
  if (rc != SQLITE_DONE) fail_sqlite("looking up a record");
  return std::nullopt;
}

void TuningDb::put(const TuningRecord& r) {
  std::lock_guard<std::mutex> lock(mu_);
  StmtReset reset{put_stmt_};
  sqlite3_stmt* st = put_stmt_;
  const char* status = tuning_status_name(r.status);
  sqlite3_bind_text(st, 1, r.key.data(), static_cast<int>(r.key.size()), SQLITE_STATIC);
  sqlite3_bind_text(st, 2, r.signature.data(), static_cast<int>(r.signature.size()), SQLITE_STATIC);
  sqlite3_bind_text(st, 3, r.device.data(), static_cast<int>(r.device.size()), SQLITE_STATIC);
  sqlite3_bind_int(st, 4, r.generator);
  sqlite3_bind_text(st, 5, status, -1, SQLITE_STATIC);
  sqlite3_bind_double(st, 6, r.seconds);
  sqlite3_bind_double(st, 7, r.spread);
  sqlite3_bind_int64(st, 8, r.reps);
  sqlite3_bind_text(st, 9, r.note.data(), static_cast<int>(r.note.size()), SQLITE_STATIC);
  sqlite3_bind_int64(st, 10, r.created != 0 ? r.created : static_cast<int64_t>(std::time(nullptr)));
  sqlite3_bind_text(st, 11, r.variant.data(), static_cast<int>(r.variant.size()), SQLITE_STATIC);
  sqlite3_bind_double(st, 12, r.pace);
  // Autocommit: the row is durable against a process kill once step returns DONE.
  if (sqlite3_step(st) != SQLITE_DONE) fail_sqlite("writing a record");
}

std::map<std::string, TuningRecord> TuningDb::get_many(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<std::string, TuningRecord> out;
  // One read transaction: one lock acquisition and one consistent snapshot for all keys.
  exec("BEGIN");
  try {
    for (const std::string& key : keys) {
      StmtReset reset{get_stmt_};
      sqlite3_bind_text(get_stmt_, 1, key.data(), static_cast<int>(key.size()), SQLITE_STATIC);
      const int rc = sqlite3_step(get_stmt_);
      if (rc == SQLITE_ROW) {
        out.emplace(key, read_row(get_stmt_, path_));
      } else if (rc != SQLITE_DONE) {
        fail_sqlite("looking up records");
      }
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
  return out;
}

double TuningDb::best_pace(const std::string& device) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT best FROM machine_pace WHERE device = ?1", -1, &st, nullptr) != SQLITE_OK)
    fail_sqlite("reading the machine's pace");
  sqlite3_bind_text(st, 1, device.data(), static_cast<int>(device.size()), SQLITE_STATIC);
  const int rc = sqlite3_step(st);
  const double best = rc == SQLITE_ROW ? sqlite3_column_double(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_sqlite("reading the machine's pace");
  return best;
}

void TuningDb::offer_pace(const std::string& device, double seconds) {
  if (!(seconds > 0)) return;
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* st = nullptr;
  // One statement: two processes offering at once keep the lower.
  if (sqlite3_prepare_v2(db_,
                         "INSERT INTO machine_pace (device, best) VALUES (?1, ?2) "
                         "ON CONFLICT(device) DO UPDATE SET best = MIN(best, excluded.best)",
                         -1, &st, nullptr) != SQLITE_OK)
    fail_sqlite("recording the machine's pace");
  sqlite3_bind_text(st, 1, device.data(), static_cast<int>(device.size()), SQLITE_STATIC);
  sqlite3_bind_double(st, 2, seconds);
  const int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) fail_sqlite("recording the machine's pace");
}

int64_t TuningDb::size() {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db_, "SELECT COUNT(*) FROM records", -1, &st, nullptr) != SQLITE_OK)
    fail_sqlite("counting records");
  const int rc = sqlite3_step(st);
  const int64_t n = rc == SQLITE_ROW ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) fail_sqlite("counting records");
  return n;
}

}  // namespace korch
