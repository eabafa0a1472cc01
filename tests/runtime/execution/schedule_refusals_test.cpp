// The Simulator and the executor interpret schedules through one
// interpreter: any schedule one refuses, the other refuses in the same words.
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/schedule_builders.h"
#include "sim/simulator.h"
#include "support/rig.h"
#include "support/schedule_text.h"

namespace memtrain::runtime {
namespace {

// A chain shaped like the model the limits describe (stages, variants,
// where the weights live), with sizes and a host link so every operation
// can be priced.
Chain chain_like(const ScheduleLimits& limits) {
  Chain c;
  for (int i = 0; i < limits.stages(); ++i) {
    Stage s;
    s.name = "stage " + std::to_string(i);
    s.input_bytes = 100;
    s.saved_bytes = 300;
    s.forward_time = 1;
    s.backward_time = 2;
    s.param_bytes = s.grad_bytes = 10;
    for (int v = 1; v < limits.variants[i]; ++v) s.variants.push_back({"variant", 1, 2, 200, 0, 0});
    c.stages.push_back(s);
  }
  c.output_bytes = 4;
  c.device_to_host_bandwidth = c.host_to_device_bandwidth = 1e9;
  c.weights_on_host = limits.weights_on_host;
  return c;
}

std::string refusal(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ScheduleRefusals, TheSimulatorAndTheExecutorRefuseTheSameSchedulesInTheSameWords) {
  testing::Rig rig;
  const ScheduleLimits limits = Executor(*rig.model, rig.memory).limits();
  const int n = limits.stages();
  ASSERT_GE(n, 4);
  const Chain chain = chain_like(limits);
  const std::string keep_all = plan::schedule_keeping_everything(n).to_string();
  const std::vector<std::string> bad = {
      "B0",                                     // no forward with grad to go back through
      "Fall1",                                  // its input was never made
      "Fall0 L",                                // the loss stage has not run with grad
      "Fall0 Fall0",                            // one forward with grad per stage at a time
      "Fck0 Fck0",                              // its output is already there
      "Fck0 Off1 Fn1",                          // frees x_1 while it is being copied out
      "Fck0 Off1 Rel1 Fck1",                    // its input is in host memory
      "Fck0 Off1 Rel1 Fck0",                    // its output is in host memory
      "Off0",                                   // the batch does not move
      "Rel1",                                   // nothing is being copied out
      "Fck0 Pre1",                              // nothing in host memory to bring back
      "OffS0",                                  // nothing kept to move
      "Fall0 OffS0 OffS0",                      // already on its way out
      "Fall0 RelS0",                            // no copy of it in flight
      "Fall0 PreS0",                            // not in host memory
      "Fall0.v9",                               // no such variant
      "Fall" + std::to_string(n),               // no such stage
      "Win0",                                   // the weights are on the device
      "U0@1",                                   // weight operations name no micro-batch
      keep_all.substr(0, keep_all.rfind(' ')),  // ends before the backward of stage 0
      "Fck0 Off1 Rel1 " + keep_all,             // ends with x_1 in host memory
  };
  for (const std::string& text : bad) {
    const Schedule s = testing::parse_schedule(text);
    const std::string simulated = refusal([&] { sim::simulate(chain, s); });
    const std::string executed = refusal([&] { rig.run(s, rig.batch()); });
    EXPECT_NE(simulated, "(accepted)") << text;
    EXPECT_EQ(simulated, executed) << text;
  }
  // And a good schedule runs through both.
  EXPECT_EQ(refusal([&] { sim::simulate(chain, testing::parse_schedule(keep_all)); }), "(accepted)");
  EXPECT_EQ(refusal([&] { rig.run(testing::parse_schedule(keep_all), rig.batch()); }), "(accepted)");
}

}  // namespace
}  // namespace memtrain::runtime
