#include "profile/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace korch {
namespace {

// Everything written to a tmpfile so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  std::fseek(f, 0, SEEK_END);
  return out;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n') {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

TEST(Progress, FormatDuration) {
  EXPECT_EQ(format_duration(0), "0s");
  EXPECT_EQ(format_duration(-5), "0s");
  EXPECT_EQ(format_duration(3.4), "3s");
  EXPECT_EQ(format_duration(59.6), "1m00s");
  EXPECT_EQ(format_duration(98.3), "1m38s");
  EXPECT_EQ(format_duration(3600 + 5 * 60 + 7), "1h05m");
}

TEST(Progress, FormatLine) {
  EXPECT_EQ(format_progress_line("measure", 123, 4567, 45.2, 3.0, "conv3x3"),
            "measure [#...................] 123/4567 (2.7%) 45.2/s  ETA 1m38s  elapsed 3s  conv3x3");
  EXPECT_EQ(format_progress_line("compile", 5, 10, std::nullopt, 0.2, ""),
            "compile [##########..........] 5/10 (50.0%) ?/s  ETA ?  elapsed 0s");
  EXPECT_EQ(format_progress_line("x", 10, 10, 1234.0, 61, ""),
            "x [####################] 10/10 (100.0%) 1234/s  ETA 0s  elapsed 1m01s");
  EXPECT_EQ(format_progress_line("scan", 7, 0, 0.5, 14, "n"), "scan 7 0.50/s  elapsed 14s  n");
  EXPECT_EQ(format_progress_line("stall", 1, 10, 0.0, 1, ""),
            "stall [##..................] 1/10 (10.0%) 0.00/s  ETA ?  elapsed 1s");
}

ProgressOptions fake(double* t, bool tty) {
  ProgressOptions o;
  o.tty = tty;
  o.enabled = true;
  o.clock = [t] { return *t; };
  return o;
}

TEST(Progress, LogModeThrottlesToOneLinePerInterval) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  {
    ProgressBar bar("measure", 40, f, fake(&t, false));
    for (int i = 0; i < 40; ++i) {
      t += 0.5;
      bar.tick();
    }
    EXPECT_EQ(lines(contents(f)).size(), 4u);  // at 5, 10, 15, 20 s
    bar.set_note("done");
    bar.finish();
    bar.finish();  // idempotent
  }  // the destructor adds nothing either
  const auto ls = lines(contents(f));
  ASSERT_EQ(ls.size(), 5u);
  EXPECT_NE(ls[0].find(" 10/40 "), std::string::npos) << ls[0];
  EXPECT_NE(ls[0].find("2.0/s"), std::string::npos) << ls[0];
  EXPECT_NE(ls[0].find("ETA 15s"), std::string::npos) << ls[0];
  EXPECT_NE(ls[4].find(" 40/40 "), std::string::npos) << ls[4];
  EXPECT_NE(ls[4].find("done"), std::string::npos) << ls[4];
  EXPECT_EQ(contents(f).find('\r'), std::string::npos);
  std::fclose(f);
}

TEST(Progress, ShortLogRunPrintsOnlyTheFinalLine) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  {
    ProgressBar bar("compile", 3, f, fake(&t, false));
    for (int i = 0; i < 3; ++i) {
      t += 0.2;
      bar.tick();
    }
  }
  const auto ls = lines(contents(f));
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_NE(ls[0].find("3/3 (100.0%)"), std::string::npos) << ls[0];
  std::fclose(f);
}

TEST(Progress, TtyModeRedrawsInPlaceAtMostEvery100ms) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  ProgressBar bar("measure", 1000, f, fake(&t, true));
  for (int i = 0; i < 1000; ++i) {
    t += 0.001;
    bar.tick();
  }
  bar.finish();
  const std::string out = contents(f);
  const auto redraws = std::count(out.begin(), out.end(), '\r');
  EXPECT_GE(redraws, 9);
  EXPECT_LE(redraws, 12);  // 1 s of ticks at <= 10 per second, plus the first and the final
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1);
  EXPECT_EQ(out.back(), '\n');
  std::fclose(f);
}

TEST(Progress, RateFollowsRecentSpeed) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  ProgressOptions o = fake(&t, false);
  o.rate_time_constant = 2.0;
  ProgressBar bar("x", 1000, f, o);
  EXPECT_FALSE(bar.rate().has_value());
  for (int i = 0; i < 100; ++i) {  // 10 items/s for 10 s
    t += 0.1;
    bar.tick();
  }
  ASSERT_TRUE(bar.rate().has_value());
  EXPECT_NEAR(*bar.rate(), 10.0, 0.5);
  for (int i = 0; i < 200; ++i) {  // then 100 items/s for 2 s... and 10 s more
    t += 0.01;
    bar.tick(1);
  }
  for (int i = 0; i < 100; ++i) {
    t += 0.1;
    bar.tick(10);
  }
  EXPECT_NEAR(*bar.rate(), 100.0, 5.0);
  bar.finish();  // before fclose: the destructor would write to the closed file
  std::fclose(f);
}

TEST(Progress, SkippedItemsCountButTheRateIsOfTheWork) {
  // 90 of 100 compile units are cache hits, reported at once; the other 10 take 1 s each.
  EXPECT_EQ(format_progress_line("c", 95, 100, 1.0, 5, "", 20, 90),
            "c [###################.] 95/100 (95.0%) 90 cached 1.0/s  ETA 5s  elapsed 5s");
  std::FILE* f = std::tmpfile();
  double t = 0;
  ProgressBar bar("compiling", 100, f, fake(&t, false));
  bar.skip(90);
  for (int i = 0; i < 5; ++i) {
    t += 1.0;
    bar.tick();
  }
  ASSERT_TRUE(bar.rate().has_value());
  EXPECT_NEAR(*bar.rate(), 1.0, 1e-9);  // not 95 items in 5 s
  EXPECT_EQ(bar.done(), 95);
  const auto ls = lines(contents(f));
  ASSERT_EQ(ls.size(), 1u);  // the line at 5 s
  EXPECT_NE(ls[0].find("95/100 (95.0%) 90 cached 1.0/s  ETA 5s"), std::string::npos) << ls[0];
  bar.finish();
  std::fclose(f);
}

TEST(Progress, DisabledPrintsNothing) {
  std::FILE* f = std::tmpfile();
  double t = 0;
  ProgressOptions o = fake(&t, false);
  o.enabled = false;
  {
    ProgressBar bar("x", 10, f, o);
    for (int i = 0; i < 10; ++i) {
      t += 10;
      bar.tick();
    }
    EXPECT_EQ(bar.done(), 10);
  }
  setenv("KORCH_PROGRESS", "0", 1);
  {
    ProgressOptions e = fake(&t, false);
    e.enabled.reset();
    ProgressBar bar("y", 10, f, e);
    t += 10;
    bar.tick(10);
  }
  unsetenv("KORCH_PROGRESS");
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

TEST(Progress, ConcurrentTicksAreCounted) {
  std::FILE* f = std::tmpfile();
  ProgressOptions o;
  o.tty = false;
  o.enabled = true;
  ProgressBar bar("threads", 40000, f, o);
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k)
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) bar.tick();
    });
  for (auto& th : ts) th.join();
  EXPECT_EQ(bar.done(), 40000);
  bar.finish();
  EXPECT_NE(contents(f).find("40000/40000"), std::string::npos);
  std::fclose(f);
}

}  // namespace
}  // namespace korch
