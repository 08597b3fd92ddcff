#include "profile/pace.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "profile/scripted_device.h"
#include "profile/tuning_db.h"
#include "temp_dir.h"

namespace korch {
namespace {

using testing::ScriptedDevice;

class MachinePaceTest : public ::testing::Test {
 protected:
  PaceOptions quick() const {
    PaceOptions o;
    o.enabled = true;
    o.interval_seconds = 0;
    o.retry_seconds = 0.001;
    o.max_wait_seconds = 1;
    o.other_load = [] { return 0.0; };  // nothing else on the cores
    return o;
  }
  testing::TempDir tmp_{"korch-pace"};
  std::unique_ptr<TuningDb> db_ = TuningDb::open((tmp_.path() / "tuning.db").string());
};

// The pace is a probe over the fastest probe the database has seen for the device (which a faster
// probe becomes); never below 1.
TEST_F(MachinePaceTest, PaceIsAProbeOverTheFastestSeen) {
  ScriptedDevice dev({10, 12, 8, 16});
  MachinePace pace(dev, *db_, "dev", quick());
  EXPECT_DOUBLE_EQ(pace.probe(), 1.0);  // the first: the best so far
  EXPECT_DOUBLE_EQ(pace.probe(), 1.2);
  EXPECT_DOUBLE_EQ(pace.probe(), 1.0);  // 8: the new best
  EXPECT_DOUBLE_EQ(pace.probe(), 2.0);
  EXPECT_DOUBLE_EQ(db_->best_pace("dev"), 8e-6);
  EXPECT_TRUE(pace.is_slow(2.0));
  EXPECT_FALSE(pace.is_slow(1.2));
  ScriptedDevice none({0});  // a device without a probe: pace unknown, never slow
  MachinePace unknown(none, *db_, "none", quick());
  EXPECT_EQ(unknown.settle(), 0);
  EXPECT_EQ(db_->best_pace("none"), 0);
}

// A slow machine is waited for, probing again, until it is back at its pace.
TEST_F(MachinePaceTest, SettleWaitsForASlowMachine) {
  ScriptedDevice dev({10, 20, 19, 18, 11});
  std::vector<std::string> said;
  MachinePace pace(dev, *db_, "dev", quick(), [&](const std::string& s) { said.push_back(s); });
  EXPECT_DOUBLE_EQ(pace.probe(), 1.0);
  EXPECT_DOUBLE_EQ(pace.settle(), 1.1);
  EXPECT_EQ(dev.probes, 5);
  EXPECT_GT(pace.waited_seconds(), 0);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_NE(said[0].find("2.00x its fastest"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("back to pace"), std::string::npos) << said[1];
}

// settle(false): the pace now, never waited for (a measurement taken again only because the
// machine ran at its pace a moment ago).
TEST_F(MachinePaceTest, SettleWithoutWaitingReturnsThePaceNow) {
  ScriptedDevice dev({10, 20, 11});
  MachinePace pace(dev, *db_, "dev", quick());
  EXPECT_DOUBLE_EQ(pace.probe(), 1.0);
  EXPECT_DOUBLE_EQ(pace.settle(false), 2.0);
  EXPECT_EQ(dev.probes, 2);
  EXPECT_EQ(pace.waited_seconds(), 0);
}

// The wait has a budget over the MachinePace's life: once spent, a slow machine is measured on
// (the records then carry its pace).
TEST_F(MachinePaceTest, TheWaitHasABudgetAndLoadIsNotWaitedFor) {
  PaceOptions o = quick();
  o.max_wait_seconds = 0.05;
  ScriptedDevice dev({10, 20});
  std::vector<std::string> said;
  MachinePace pace(dev, *db_, "dev", o, [&](const std::string& s) { said.push_back(s); });
  pace.probe();
  EXPECT_DOUBLE_EQ(pace.settle(), 2.0);
  EXPECT_GE(pace.waited_seconds(), 0.05);
  EXPECT_LT(pace.waited_seconds(), 1.0);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_NE(said[1].find("still slow"), std::string::npos) << said[1];
  const int probes = dev.probes;
  EXPECT_DOUBLE_EQ(pace.settle(), 2.0);  // budget spent: one probe, no wait
  EXPECT_EQ(dev.probes, probes + 1);
  EXPECT_EQ(said.size(), 2u);

  // Another process on the cores: load, not the machine's pace. Its pace is unknown (0), and it
  // is not waited for.
  o.other_load = [] { return 1.5; };
  ScriptedDevice loaded({10, 20});
  MachinePace busy(loaded, *db_, "busy", o);
  busy.probe();
  EXPECT_DOUBLE_EQ(busy.probe(), 2.0);  // the probe itself
  EXPECT_EQ(busy.current(), 0);
  EXPECT_EQ(busy.settle(), 0);
  EXPECT_EQ(busy.waited_seconds(), 0);
}

// Disabled (the library's default): no probe, every pace unknown, never a wait.
TEST_F(MachinePaceTest, DisabledTakesNoProbe) {
  PaceOptions o = quick();
  o.enabled = false;
  ScriptedDevice dev({10, 20});
  MachinePace pace(dev, *db_, "dev", o);
  EXPECT_EQ(pace.probe(), 0);
  EXPECT_EQ(pace.settle(), 0);
  EXPECT_EQ(dev.probes, 0);
  EXPECT_EQ(db_->best_pace("dev"), 0);
}

// settle() probes at most once per interval.
TEST_F(MachinePaceTest, SettleProbesAtMostOncePerInterval) {
  PaceOptions o = quick();
  o.interval_seconds = 60;
  ScriptedDevice dev({10, 30});
  MachinePace pace(dev, *db_, "dev", o);
  EXPECT_DOUBLE_EQ(pace.settle(), 1.0);
  EXPECT_DOUBLE_EQ(pace.settle(), 1.0);  // within the interval: the last pace
  EXPECT_EQ(dev.probes, 1);
}

// wait_for_pace() probes now, inside settle()'s interval (a closed-loop run that came out slow
// waits right after it), and waits for a slow machine as settle() does, naming what waits.
TEST_F(MachinePaceTest, WaitForPaceProbesNowAndWaits) {
  PaceOptions o = quick();
  o.interval_seconds = 60;
  ScriptedDevice dev({10, 30, 25, 11});
  std::vector<std::string> said;
  MachinePace pace(dev, *db_, "dev", o, [&](const std::string& s) { said.push_back(s); });
  EXPECT_DOUBLE_EQ(pace.settle(), 1.0);
  EXPECT_DOUBLE_EQ(pace.wait_for_pace("the closed loop's run"), 1.1);
  EXPECT_EQ(dev.probes, 4);
  ASSERT_EQ(said.size(), 2u);
  EXPECT_NE(said[0].find("before the closed loop's run on"), std::string::npos) << said[0];
}

// The CPU's probe times 100 passes, or once its budget is spent the passes so far (at least 11): a
// probe on a machine whose cores other processes' threads hold stays short (cpu_device.cc).
TEST(CpuPaceProbe, ABudgetSpentEndsTheProbeAfterElevenPasses) {
  int passes = 0;
  EXPECT_GT(cpu::cpu_pace_probe(10.0, &passes), 0);
  EXPECT_EQ(passes, 100);
  EXPECT_GT(cpu::cpu_pace_probe(0.0, &passes), 0);
  EXPECT_EQ(passes, 11);
}

}  // namespace
}  // namespace korch
