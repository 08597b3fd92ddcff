// The closed loop's scratch artifacts left by a killed compile are swept; a running compile's are not.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "pipeline/compile_steps.h"

namespace korch {
namespace {

namespace fs = std::filesystem;

// A process id that no process holds now: a child that has exited and been reaped.
pid_t gone_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  return child;
}

TEST(ClosedLoopScratch, FoldersOfAGoneCompileAreRemovedOthersStay) {
  const fs::path folder = fs::path(testing::TempDir()) / fmt::format("scratch-sweep-{}", getpid());
  fs::remove_all(folder);
  fs::create_directories(folder);
  const pid_t gone = gone_pid();
  const std::vector<std::string> orphaned = {fmt::format("korch-unfused-{}-ab12", gone),
                                             fmt::format("korch-round2-{}-ab12", gone)};
  const std::vector<std::string> kept = {fmt::format("korch-unfused-{}-ab12", getpid()),  // a running compile
                                         fmt::format("korch-bench-{}", gone),             // not the loop's
                                         "korch-unfused-notapid-ab12", "korch-unfused-0-ab12", "other"};
  for (const auto& names : {orphaned, kept})
    for (const std::string& name : names) {
      fs::create_directories(folder / name);
      std::ofstream(folder / name / "program.json") << "{}";
    }
  EXPECT_EQ(compile_steps::remove_orphaned_scratch(folder), 2);
  for (const std::string& name : orphaned) EXPECT_FALSE(fs::exists(folder / name)) << name;
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(folder / name)) << name;
  EXPECT_EQ(compile_steps::remove_orphaned_scratch(folder / "missing"), 0);  // no folder: nothing, no throw
  fs::remove_all(folder);
}

}  // namespace
}  // namespace korch
