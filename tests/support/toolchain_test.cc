// Guards against toolchain miscompiles we have hit. GCC 12.2 with -march=native on AVX-512 hosts
// built std::vector<int64_t>{1, 1, 0, 0} as {1, 1, 1, 1} (a vpbroadcastq of its first element),
// with -mno-avx512f too on a Sapphire Rapids Xeon (its tuning); CMakeLists.txt adds
// -mno-avx512f -mtune=generic.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

__attribute__((noinline)) std::vector<int64_t> pass_through(std::vector<int64_t> v) { return v; }

TEST(Toolchain, BraceInitialisedInt64Vector) {
  std::vector<int64_t> v = pass_through({1, 1, 0, 0});
  ASSERT_EQ(v.size(), 4u);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], 1);
  EXPECT_EQ(v[2], 0);
  EXPECT_EQ(v[3], 0);
}

}  // namespace
