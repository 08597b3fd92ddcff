#include "orchestrate/blp.h"

#include <gtest/gtest.h>

namespace korch {
namespace {

TEST(Blp, EvaluatesAndChecksRows) {
  Blp b;
  const int x = b.add_var("x", 2), y = b.add_var("y", 3);
  b.add_row("cover", {{x, 1}, {y, 1}}, 1, 1e300);
  b.add_row("needs", {{y, 1}, {x, -1}}, 0, 1e300);  // x => y
  EXPECT_DOUBLE_EQ(b.evaluate({1, 1}), 5);
  EXPECT_TRUE(b.feasible({0, 1}));
  EXPECT_TRUE(b.feasible({1, 1}));
  EXPECT_FALSE(b.feasible({1, 0}));
  EXPECT_FALSE(b.feasible({0, 0}));
  EXPECT_FALSE(b.feasible({0.5, 1}));
}

TEST(Blp, LpTextHasEveryPart) {
  Blp b;
  const int x = b.add_var("k0", 1.5), y = b.add_var("k1", 2);
  b.add_row("out_y", {{x, 1}, {y, 1}}, 1, std::numeric_limits<double>::infinity());
  b.add_row("once", {{x, 1}, {y, 1}}, 1, 1);
  b.add_row("range", {{x, 1}, {y, -1}}, -1, 0);
  const std::string lp = to_lp_text(b);
  EXPECT_NE(lp.find("Minimize\n obj: + 1.5 k0 + 2 k1\n"), std::string::npos) << lp;
  EXPECT_NE(lp.find(" out_y: + 1 k0 + 1 k1 >= 1\n"), std::string::npos) << lp;
  EXPECT_NE(lp.find(" once: + 1 k0 + 1 k1 = 1\n"), std::string::npos) << lp;
  EXPECT_NE(lp.find(" range_lo: + 1 k0 - 1 k1 >= -1\n"), std::string::npos) << lp;
  EXPECT_NE(lp.find(" range_hi: + 1 k0 - 1 k1 <= 0\n"), std::string::npos) << lp;
  EXPECT_NE(lp.find("Binary\n k0\n k1\nEnd\n"), std::string::npos) << lp;
}

}  // namespace
}  // namespace korch
