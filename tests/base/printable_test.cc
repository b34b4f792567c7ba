// Printable: peer text made safe for a log line.
#include "base/printable.h"

#include <gtest/gtest.h>

#include <string>

namespace ps {
namespace {

TEST(PrintableTest, PlainNamesStayAsTheyAre) {
  EXPECT_EQ(Printable("worker-12"), "worker-12");
  EXPECT_EQ(Printable(""), "");
}

TEST(PrintableTest, LineBreaksQuotesAndControlBytesAreEscaped) {
  EXPECT_EQ(Printable("a\nE1203 forged"), "a\\nE1203 forged");
  EXPECT_EQ(Printable("tab\there\r"), "tab\\there\\r");
  EXPECT_EQ(Printable("say \"hi\" \\ bye"), "say \\\"hi\\\" \\\\ bye");
  EXPECT_EQ(Printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(Printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(Printable("\xc3\xa9"), "\\xc3\\xa9");  // not printable ASCII
}

TEST(PrintableTest, LongTextIsCut) {
  const std::string long_name(1000, 'x');
  EXPECT_EQ(Printable(long_name, 8), "xxxxxxxx...");
  EXPECT_EQ(Printable(long_name).size(), 64u + 3u);
  EXPECT_EQ(Printable("exactly8", 8), "exactly8");
}

}  // namespace
}  // namespace ps
