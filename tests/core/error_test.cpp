#include <gtest/gtest.h>

#include <string>

#include "core/error.h"

namespace memtrain {
namespace {

int checked_half(int even) {
  MEMTRAIN_ASSERT(even % 2 == 0, "callers pass even numbers");
  return even / 2;
}

TEST(Error, AnInternalAssertionThrowsNamingFileLineAndCondition) {
  EXPECT_EQ(checked_half(4), 2);
  try {
    checked_half(3);
    FAIL() << "the assertion did not fire";
  } catch (const InternalError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("internal error at ", 0), 0u) << what;
    EXPECT_NE(what.find("error_test.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("even % 2 == 0 (callers pass even numbers)"), std::string::npos) << what;
  }
}

// Code that handles bad input catches memtrain::Error; a bug must not be
// mistaken for one.
TEST(Error, AnInternalErrorIsNotAnInputError) {
  bool caught_as_input_error = false;
  try {
    try {
      checked_half(1);
    } catch (const Error&) {
      caught_as_input_error = true;
    }
  } catch (const InternalError&) {
  }
  EXPECT_FALSE(caught_as_input_error);
}

}  // namespace
}  // namespace memtrain
