// Checks that the Simulator refuses a schedule written as text, with an
// error that says why.
#pragma once

#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "sim/simulator.h"
#include "support/schedule_text.h"

namespace memtrain::testing {

inline void expect_refused(const Chain& chain, const std::string& text, const std::string& why) {
  try {
    sim::simulate(chain, parse_schedule(text));
    ADD_FAILURE() << text << " was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
  }
}

}  // namespace memtrain::testing
