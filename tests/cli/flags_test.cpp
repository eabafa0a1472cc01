#include <gtest/gtest.h>

#include "cli/flags.h"
#include "core/error.h"

namespace memtrain::cli {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(Flags, ReadsValuesInBothSpellingsAndSwitches) {
  Flags f({"--steps", "12", "--budget=40%", "--quiet"}, {"quiet"}, "train");
  EXPECT_EQ(f.integer("steps", 1, 1, 100), 12);
  EXPECT_EQ(f.text("budget", ""), "40%");
  EXPECT_TRUE(f.has("quiet"));
  EXPECT_EQ(f.integer("batch", 32, 1, 100), 32);
  EXPECT_NO_THROW(f.check_all_used());
}

TEST(Flags, ErrorsNameTheFlagAndTheValidRange) {
  EXPECT_EQ(error_of([] {
              Flags({"--steps", "0"}, {}, "train").integer("steps", 1, 1, 100);
            }),
            "--steps 0 is out of range; expected an integer in 1..100");
  EXPECT_EQ(error_of([] {
              Flags({"--steps", "ten"}, {}, "train").integer("steps", 1, 1, 100);
            }),
            "--steps 'ten' is not an integer; expected an integer in 1..100");
  EXPECT_EQ(error_of([] {
              Flags({"--lr", "x"}, {}, "train").real("lr", 1, 0, 2);
            }).rfind("--lr 'x' is not a number", 0),
            0u);
  // A flag with no value (last, or before another flag) lacks it if the command knows it, and is
  // unknown otherwise: only a lookup can tell which.
  EXPECT_EQ(error_of([] { Flags({"--steps"}, {}, "train").has("steps"); }), "train: flag --steps needs a value");
  EXPECT_EQ(error_of([] {
              Flags({"--steps", "--lr", "1"}, {}, "train").integer("steps", 1, 1, 9);
            }),
            "train: flag --steps needs a value");
  EXPECT_EQ(error_of([] { Flags({"--bogus"}, {}, "train").check_all_used(); }),
            "train: unknown flag --bogus; see memtrain train --help");
  EXPECT_EQ(error_of([] { Flags({"steps"}, {}, "train"); }),
            "train: unexpected argument 'steps'; flags look like --name value");
  EXPECT_EQ(error_of([] { Flags({"--a", "1", "--a", "2"}, {}, "train"); }), "train: flag --a is given twice");
  EXPECT_EQ(error_of([] {
              Flags({"--model", "gpt"}, {}, "train").choice("model", "x", {"resnet", "transformer"});
            }),
            "--model 'gpt' is not known; expected one of: resnet, transformer");
  EXPECT_EQ(error_of([] {
              Flags({"--bogus", "1"}, {}, "train").check_all_used();
            }),
            "train: unknown flag --bogus; see memtrain train --help");
}

}  // namespace
}  // namespace memtrain::cli
