#include <gtest/gtest.h>

#include "core/error.h"
#include "core/signature.h"

namespace memtrain {
namespace {

TEST(Signature, SizeIsTheProductOfTheShape) {
  const Signature s = Signature::of_shape({32, 57});
  EXPECT_EQ(s.size, 32 * 57);
  EXPECT_EQ(s.describe(), "32x57");
  EXPECT_EQ(Signature::of_shape({8, 1, 96, 96}).size, 8 * 96 * 96);
}

TEST(Signature, RejectsEmptyDimensions) { EXPECT_THROW(Signature::of_shape({4, 0}), Error); }

}  // namespace
}  // namespace memtrain
