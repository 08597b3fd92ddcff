#include "profile/tuning_db.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "support/error.h"
#include "temp_dir.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

// A fresh folder per test, removed afterwards.
class TuningDbTest : public ::testing::Test {
 protected:
  std::string db_path() const { return (dir_ / "sub" / "dir" / "tuning.db").string(); }
  // A database file as schema `version` wrote it: its records table (the v1 columns, then
  // `more_columns`) with `rows` inserted.
  void write_old_schema(int version, const std::string& more_columns, const std::string& rows) {
    fs::create_directories(fs::path(db_path()).parent_path());
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
    const std::string sql =
        "CREATE TABLE schema_version (version INTEGER NOT NULL);"
        "INSERT INTO schema_version (version) VALUES (" +
        std::to_string(version) +
        ");"
        "CREATE TABLE records (key TEXT PRIMARY KEY NOT NULL, signature TEXT NOT NULL, device TEXT NOT NULL,"
        " generator INTEGER NOT NULL, status TEXT NOT NULL, seconds REAL NOT NULL, spread REAL NOT NULL,"
        " reps INTEGER NOT NULL, note TEXT NOT NULL, created INTEGER NOT NULL" +
        more_columns + ");" + rows;
    ASSERT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  }
  testing::TempDir tmp_{"korch-tuning"};
  const fs::path& dir_ = tmp_.path();
};

TuningRecord make_record(const std::string& sig, double seconds) {
  TuningRecord r;
  r.signature = sig;
  r.device = "cpu:test:2t:avx2";
  r.generator = 3;
  r.key = make_tuning_key(r.signature, r.device, r.generator);
  r.status = TuningStatus::kOk;
  r.seconds = seconds;
  r.spread = 0.05;
  r.reps = 42;
  r.note = "src/kernels/abc.cc";
  r.created = 1700000000;
  return r;
}

void expect_same(const TuningRecord& a, const TuningRecord& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.signature, b.signature);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.generator, b.generator);
  EXPECT_EQ(a.status, b.status);
  EXPECT_DOUBLE_EQ(a.seconds, b.seconds);
  EXPECT_DOUBLE_EQ(a.spread, b.spread);
  EXPECT_EQ(a.reps, b.reps);
  EXPECT_EQ(a.note, b.note);
  EXPECT_EQ(a.created, b.created);
}

std::string pragma_text(const std::string& path, const char* sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &st, nullptr), SQLITE_OK);
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

TEST_F(TuningDbTest, RoundTripAndReplace) {
  auto db = TuningDb::open(db_path());
  EXPECT_TRUE(fs::exists(db_path()));  // parent folders created
  EXPECT_EQ(db->size(), 0);
  EXPECT_FALSE(db->get("missing").has_value());

  TuningRecord r = make_record("0123456789abcdef", 1.5e-5);
  db->put(r);
  auto got = db->get(r.key);
  ASSERT_TRUE(got.has_value());
  expect_same(*got, r);

  TuningRecord failed = r;
  failed.status = TuningStatus::kFailed;
  failed.note = "relative L2 error 0.3 > 1e-4";
  db->put(failed);  // same key replaces
  EXPECT_EQ(db->size(), 1);
  expect_same(*db->get(r.key), failed);

  TuningRecord unemittable = make_record("fedcba9876543210", 0);
  unemittable.status = TuningStatus::kUnemittable;
  unemittable.created = 0;  // put fills in the time
  db->put(unemittable);
  auto u = db->get(unemittable.key);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->status, TuningStatus::kUnemittable);
  EXPECT_GT(u->created, 1700000000);
  EXPECT_EQ(db->size(), 2);
}

TEST_F(TuningDbTest, PersistsAcrossReopenAndUsesWal) {
  TuningRecord r = make_record("aaaa", 2e-3);
  {
    auto db = TuningDb::open(db_path());
    db->put(r);
  }
  EXPECT_EQ(pragma_text(db_path(), "PRAGMA journal_mode"), "wal");
  auto db = TuningDb::open(db_path());
  EXPECT_EQ(db->size(), 1);
  expect_same(*db->get(r.key), r);
}

TEST_F(TuningDbTest, GetMany) {
  auto db = TuningDb::open(db_path());
  std::vector<std::string> keys;
  for (int i = 0; i < 100; ++i) {
    TuningRecord r = make_record("sig" + std::to_string(i), i * 1e-6);
    if (i % 2 == 0) db->put(r);
    keys.push_back(r.key);
  }
  keys.push_back("not-there");
  auto got = db->get_many(keys);
  EXPECT_EQ(got.size(), 50u);
  for (int i = 0; i < 100; i += 2) {
    ASSERT_TRUE(got.count(keys[i])) << keys[i];
    EXPECT_DOUBLE_EQ(got.at(keys[i]).seconds, i * 1e-6);
  }
  EXPECT_FALSE(got.count(keys[1]));
  EXPECT_TRUE(db->get_many({}).empty());
}

TEST_F(TuningDbTest, RecordSurvivesKilledProcess) {
  { auto db = TuningDb::open(db_path()); }  // schema exists before the fork
  TuningRecord r = make_record("killed", 7e-4);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child opens its own connection (SQLite handles must not cross fork), writes one record
    // and dies without closing anything.
    try {
      auto db = TuningDb::open(db_path());
      db->put(r);
      raise(SIGKILL);
    } catch (...) {
    }
    _exit(1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  auto db = TuningDb::open(db_path());
  auto got = db->get(r.key);
  ASSERT_TRUE(got.has_value());
  expect_same(*got, r);
}

TEST_F(TuningDbTest, TwoHandlesWriteConcurrently) {
  auto a = TuningDb::open(db_path());
  auto b = TuningDb::open(db_path());
  a->put(make_record("from-a", 1));
  ASSERT_TRUE(b->get(make_record("from-a", 1).key).has_value());  // visible to the other handle

  constexpr int kPerThread = 200;
  auto writer = [](TuningDb* db, const std::string& prefix) {
    for (int i = 0; i < kPerThread; ++i) db->put(make_record(prefix + std::to_string(i), i));
  };
  std::thread ta(writer, a.get(), "a");
  std::thread tb(writer, b.get(), "b");
  ta.join();
  tb.join();
  EXPECT_EQ(a->size(), 2 * kPerThread + 1);
  EXPECT_EQ(b->size(), 2 * kPerThread + 1);
}

// Two processes (what two korch runs sharing ~/.cache/korch do), both creating the schema and
// writing at once: the busy timeout makes them wait for each other instead of failing.
TEST_F(TuningDbTest, TwoProcessesWriteConcurrently) {
  constexpr int kPerProcess = 150;
  std::vector<pid_t> pids;
  for (int p = 0; p < 2; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 0;
      try {
        auto db = TuningDb::open(db_path());
        for (int i = 0; i < kPerProcess; ++i) db->put(make_record(std::to_string(p) + "-" + std::to_string(i), i));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child %d: %s\n", p, e.what());
        rc = 1;
      }
      _exit(rc);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(TuningDb::open(db_path())->size(), 2 * kPerProcess);
}

TEST_F(TuningDbTest, CorruptFileNamesPathAndSuggestsDeleting) {
  fs::create_directories(fs::path(db_path()).parent_path());
  {
    std::ofstream out(db_path());
    for (int i = 0; i < 200; ++i) out << "this is not a sqlite database\n";
  }
  try {
    TuningDb::open(db_path());
    FAIL() << "expected korch::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    const std::string msg = e.what();
    EXPECT_NE(msg.find(db_path()), std::string::npos) << msg;
    EXPECT_NE(msg.find("delete"), std::string::npos) << msg;
  }
}

TEST_F(TuningDbTest, NewerSchemaIsRejected) {
  { auto db = TuningDb::open(db_path()); }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db_path().c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  try {
    TuningDb::open(db_path());
    FAIL() << "expected korch::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(db_path()), std::string::npos) << msg;
    EXPECT_NE(msg.find("99"), std::string::npos) << msg;
  }
}

// A database written before records named their schedule variant (schema 1) opens, keeps its
// records (as measured on the default schedule) and takes variants from then on.
TEST_F(TuningDbTest, SchemaOneGainsTheVariantColumn) {
  write_old_schema(1, "",
                   "INSERT INTO records VALUES ('old|dev|g1', 'old', 'dev', 1, 'ok', 0.5, 0.1, 7, 'from v1', 42);");
  {
    auto db = TuningDb::open(db_path());
    std::optional<TuningRecord> old = db->get("old|dev|g1");
    ASSERT_TRUE(old.has_value());
    EXPECT_DOUBLE_EQ(old->seconds, 0.5);
    EXPECT_EQ(old->note, "from v1");
    EXPECT_EQ(old->variant, "");
    EXPECT_EQ(old->pace, 0);  // unknown
    TuningRecord r = make_record("new", 0.25);
    r.variant = "block128 vec4 rows1 auto";
    r.pace = 1.6;
    db->put(r);
  }
  auto db = TuningDb::open(db_path());  // opened again: already the current schema
  EXPECT_EQ(db->get(make_record("new", 0.25).key)->variant, "block128 vec4 rows1 auto");
  EXPECT_DOUBLE_EQ(db->get(make_record("new", 0.25).key)->pace, 1.6);
  EXPECT_EQ(db->size(), 2);
}

// Schema 2 (variants, no pace): its records' pace is unknown (0), and the fastest pace probe per
// device is kept from then on.
TEST_F(TuningDbTest, SchemaTwoGainsThePaceOfRecordsAndDevices) {
  write_old_schema(2, ", variant TEXT NOT NULL DEFAULT ''",
                   "INSERT INTO records VALUES ('old|dev|g1', 'old', 'dev', 1, 'ok', 0.5, 0.1, 7, 'from v2', 42, '');");
  auto db = TuningDb::open(db_path());
  EXPECT_EQ(db->get("old|dev|g1")->pace, 0);
  EXPECT_EQ(db->best_pace("dev"), 0);  // none yet
  db->offer_pace("dev", 12e-6);
  db->offer_pace("dev", 20e-6);  // slower: not kept
  db->offer_pace("other", 30e-6);
  db->offer_pace("dev", 0);  // no probe: ignored
  EXPECT_DOUBLE_EQ(db->best_pace("dev"), 12e-6);
  db->offer_pace("dev", 11e-6);
  EXPECT_DOUBLE_EQ(TuningDb::open(db_path())->best_pace("dev"), 11e-6);
  EXPECT_DOUBLE_EQ(db->best_pace("other"), 30e-6);
}

TEST_F(TuningDbTest, UncreatableFolderIsAnIoError) {
  const std::string file = (dir_ / "plain-file").string();
  std::ofstream(file) << "x";
  try {
    TuningDb::open(file + "/tuning.db");
    FAIL() << "expected korch::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST_F(TuningDbTest, DefaultPathFollowsKorchCacheDir) {
  const char* old = std::getenv("KORCH_CACHE_DIR");
  const std::string saved = old ? old : "";
  setenv("KORCH_CACHE_DIR", "/some/where", 1);
  EXPECT_EQ(TuningDb::default_path(), "/some/where/tuning.db");
  unsetenv("KORCH_CACHE_DIR");
  EXPECT_NE(TuningDb::default_path().find(".cache/korch/tuning.db"), std::string::npos);
  if (old) setenv("KORCH_CACHE_DIR", saved.c_str(), 1);
}

// Throughput numbers for the report (printed; the bounds only catch a pathological slowdown such
// as an fsync per put).
TEST_F(TuningDbTest, ThroughputOf10kRecords) {
  auto db = TuningDb::open(db_path());
  constexpr int kN = 10000;
  std::vector<std::string> keys;
  keys.reserve(kN);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) {
    TuningRecord r = make_record(std::to_string(i), i * 1e-7);
    keys.push_back(r.key);
    db->put(r);
  }
  const auto t1 = std::chrono::steady_clock::now();
  auto got = db->get_many(keys);
  const auto t2 = std::chrono::steady_clock::now();
  EXPECT_EQ(got.size(), static_cast<size_t>(kN));
  const double put_s = std::chrono::duration<double>(t1 - t0).count();
  const double get_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("[ perf     ] put: %d records in %.3f s = %.0f records/s; get_many(%d keys): %.1f ms\n",
              kN, put_s, kN / put_s, kN, get_s * 1e3);
  EXPECT_LT(put_s, 10.0);
  EXPECT_LT(get_s, 2.0);
}

}  // namespace
}  // namespace korch
