#include "support/process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "support/error.h"
#include "temp_dir.h"

namespace korch {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(ChildProcess, EchoesLinesThroughCat) {
  ChildProcess cat({"cat"}, "");
  std::string why;
  ASSERT_TRUE(cat.write_line("hello", &why)) << why;
  ASSERT_TRUE(cat.write_line("{\"samples_ms\": [1, 2]}", &why)) << why;
  EXPECT_EQ(cat.read_line(10, &why).value_or("<" + why + ">"), "hello");
  EXPECT_EQ(cat.read_line(10, &why).value_or("<" + why + ">"), "{\"samples_ms\": [1, 2]}");
  EXPECT_TRUE(cat.running());
  EXPECT_EQ(cat.end(), "exited with status 0");  // its input closed: cat ends by itself
  EXPECT_FALSE(cat.running());
}

TEST(ChildProcess, SaysHowADeadChildEnded) {
  testing::TempDir dir("korch-process");
  const std::string err = (dir.path() / "child.stderr").string();
  ChildProcess child({"sh", "-c", "read x; echo \"got $x\"; echo \"oops\" >&2; exit 3"}, err);
  std::string why;
  ASSERT_TRUE(child.write_line("a", &why)) << why;
  EXPECT_EQ(child.read_line(10, &why).value_or("<" + why + ">"), "got a");
  EXPECT_FALSE(child.read_line(10, &why).has_value());
  EXPECT_EQ(why, "exited with status 3");
  // Writing to it now fails instead of raising SIGPIPE in this process.
  EXPECT_FALSE(child.write_line("b", &why));
  EXPECT_EQ(why, "exited with status 3");
  std::stringstream text;
  text << std::ifstream(err).rdbuf();
  EXPECT_EQ(text.str(), "oops\n");
}

TEST(ChildProcess, GivesUpOnAChildThatNeverAnswers) {
  ChildProcess child({"sleep", "60"}, "");
  std::string why;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.read_line(0.3, &why).has_value());
  EXPECT_EQ(why, "no answer in 0.3 s");
  EXPECT_LT(seconds_since(t0), 5);
  EXPECT_TRUE(child.running());
  t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(child.end(0.1), "killed by signal 15 (Terminated)");
  EXPECT_LT(seconds_since(t0), 5);
}

TEST(ChildProcess, NoticesAnExitWhileItsOutputStaysOpen) {
  // The child exits but a process it started keeps its stdout: no end of file comes.
  ChildProcess child({"sh", "-c", "sleep 3 & exit 4"}, "");
  std::string why;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(child.read_line(20, &why).has_value());
  EXPECT_EQ(why, "exited with status 4");
  EXPECT_LT(seconds_since(t0), 2.5);
}

TEST(ChildProcess, ThrowsWhenTheProgramCannotStart) {
  EXPECT_THROW(ChildProcess({"/nonexistent/korch-no-such-program"}, ""), Error);
  EXPECT_THROW(ChildProcess({"cat"}, "/nonexistent/folder/stderr.txt"), Error);
}

}  // namespace
}  // namespace korch
