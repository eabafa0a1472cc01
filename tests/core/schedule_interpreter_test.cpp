// The interpreter decides what each operation means and hands it to a
// backend; these tests record what a backend hears.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/error.h"
#include "core/schedule_interpreter.h"
#include "support/schedule_text.h"

namespace memtrain {
namespace {

// Writes down each call as "kind stage[@micro] [flags]".
class RecordingBackend : public ScheduleBackend {
 public:
  std::vector<std::string> calls;
  int hooks = 0;  // before_op and after_op calls

  void before_op(size_t, const Op&) override { ++hooks; }
  void after_op(size_t, const Op&) override { ++hooks; }
  void forward_all(const Op& op, const ScheduleState&) override { add("Fall", op); }
  void forward_no_grad(const Op& op, const ScheduleState&, bool frees_input) override {
    add(op.kind == OpKind::ForwardNone ? "Fn" : "Fck", op, frees_input ? " frees" : "");
  }
  void loss(const Op& op, const ScheduleState&) override { add("L", op); }
  void backward(const Op& op, const ScheduleState&, bool frees_input, bool first) override {
    add("B", op, std::string(frees_input ? " frees" : "") + (first ? " first" : ""));
  }
  void offload(const Op& op, const ScheduleState&) override { add("Off", op); }
  void release(const Op& op, const ScheduleState&) override { add("Rel", op); }
  void prefetch(const Op& op, const ScheduleState&) override { add("Pre", op); }
  void offload_saved(const Op& op, const ScheduleState&) override { add("OffS", op); }
  void release_saved(const Op& op, const ScheduleState&) override { add("RelS", op); }
  void prefetch_saved(const Op& op, const ScheduleState&) override { add("PreS", op); }
  void fetch_weights(const Op& op, const ScheduleState&) override { add("Win", op); }
  void drop_weights(const Op& op, const ScheduleState&, bool grads_leaving) override {
    add("Wout", op, grads_leaving ? " grads" : "");
  }
  void offload_grads(const Op& op, const ScheduleState&) override { add("Gout", op); }
  void fetch_grads(const Op& op, const ScheduleState&) override { add("Gin", op); }
  void update(const Op& op, const ScheduleState&) override { add("U", op); }
  void all_reduce(const Op& op, const ScheduleState&, int bucket) override {
    add("AR", op, " bucket " + std::to_string(bucket));
  }

 private:
  void add(const std::string& kind, const Op& op, const std::string& flags = "") {
    std::string s = kind;
    if (op.kind != OpKind::Loss) s += std::to_string(op.stage);
    if (op.micro) s += "@" + std::to_string(op.micro);
    calls.push_back(s + flags);
  }
};

ScheduleLimits limits(int stages, bool weights_on_host = false, std::vector<int> reduce_buckets = {}) {
  ScheduleLimits l;
  l.variants.assign(stages, 1);
  l.weights_on_host = weights_on_host;
  l.reduce_buckets = std::move(reduce_buckets);
  return l;
}

std::string refusal(const std::string& text, const ScheduleLimits& l) {
  try {
    check_schedule(testing::parse_schedule(text), l);
  } catch (const Error& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ScheduleInterpreter, HandsEveryOperationToTheBackendInOrderWithWhatItFrees) {
  // x_1 stored on its own by F_ck(0) is freed by F_n(1); x_2, stored by F_n(1),
  // is freed by the backward of stage 2; x_1 inside x̄_0 is not stored on its own.
  RecordingBackend b;
  const Schedule s = testing::parse_schedule("Fck0 Fn1 Fall2 L B2 Fall0 Fall1 B1 B0");
  const ScheduleState end = interpret(s, limits(3), b);
  EXPECT_EQ(b.calls, (std::vector<std::string>{"Fck0", "Fn1 frees", "Fall2", "L", "B2 frees", "Fall0", "Fall1", "B1",
                                               "B0 frees"}));
  EXPECT_EQ(b.hooks, 2 * static_cast<int>(s.ops.size()));
  EXPECT_EQ(end.micro[0].grad, 0);
  for (int i = 0; i <= 3; ++i) EXPECT_FALSE(end.micro[0].stored[i]) << i;
}

TEST(ScheduleRun, StepsThroughWhatInterpretRunsAndMakesTheSameEndChecks) {
  const Schedule s = testing::parse_schedule("Fck0 Fn1 Fall2 L B2 Fall0 Fall1 B1 B0");
  RecordingBackend whole, stepped;
  interpret(s, limits(3), whole);
  ScheduleRun run(s, limits(3), stepped);
  // The caller stops before stage 2's forward, then before B(1), as the
  // Python module stops between a model's blocks.
  while (!(run.next().kind == OpKind::ForwardAll && run.next().stage == 2)) run.step();
  EXPECT_EQ(stepped.calls, (std::vector<std::string>{"Fck0", "Fn1 frees"}));
  EXPECT_EQ(run.position(), 2u);
  while (!(run.next().kind == OpKind::Backward && run.next().stage == 1)) run.step();
  const ScheduleState end = run.finish();
  EXPECT_TRUE(run.done());
  EXPECT_EQ(stepped.calls, whole.calls);
  EXPECT_EQ(end.micro[0].grad, 0);

  RecordingBackend unfinished;
  ScheduleRun short_run(testing::parse_schedule("Fall0 Fall1 L B1"), limits(2), unfinished);
  while (!short_run.done()) short_run.step();
  try {
    short_run.finish();
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "schedule: ends before the backward of stage 0 (the last gradient is delta_1)");
  }
  RecordingBackend refused;
  ScheduleRun bad(testing::parse_schedule("Fck0 Fall2"), limits(3), refused);
  bad.step();
  EXPECT_THROW(bad.step(), Error);
  EXPECT_EQ(refused.calls, std::vector<std::string>{"Fck0"});
}

TEST(ScheduleRun, GoesOnWithAScheduleThatBeginsWithWhatRan) {
  RecordingBackend b;
  ScheduleRun run(testing::parse_schedule("Fall0 Fall1 Fall2 Fall3 L B3 B2 B1 B0"), limits(4), b);
  run.step();
  run.step();
  // Stage 2 is recomputed for its own backward from here on.
  run.continue_with(testing::parse_schedule("Fall0 Fall1 Fck2 Fall3 L B3 Fall2 B2 B1 B0"));
  EXPECT_EQ(run.next().kind, OpKind::ForwardCheckpoint);
  run.finish();
  EXPECT_EQ(b.calls, (std::vector<std::string>{"Fall0", "Fall1", "Fck2", "Fall3", "L", "B3 frees", "Fall2", "B2", "B1",
                                               "B0 frees"}));

  RecordingBackend other;
  ScheduleRun refusing(testing::parse_schedule("Fall0 Fall1 L B1 B0"), limits(2), other);
  refusing.step();
  try {
    refusing.continue_with(testing::parse_schedule("Fck0 Fall1 L B1 Fall0 B0"));
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "a running schedule goes on only with a schedule whose first 1 operations are those it ran");
  }
  EXPECT_EQ(refusing.next().kind, OpKind::ForwardAll);  // unchanged
}

TEST(ScheduleInterpreter, TellsTheFirstBackwardOfAStageAndAGradientCopyInFlight) {
  RecordingBackend b;
  const Schedule s = testing::parse_schedule("Win0 Fall0 L B0 Gout0 Wout0 Win0 Fall0@1 L@1 Gin0 B0@1 Gout0 Wout0 U0");
  interpret(s, limits(1, true), b);
  EXPECT_EQ(b.calls, (std::vector<std::string>{"Win0", "Fall0", "L", "B0 frees first", "Gout0", "Wout0 grads", "Win0",
                                               "Fall0@1", "L@1", "Gin0", "B0@1 frees", "Gout0", "Wout0 grads", "U0"}));
}

TEST(ScheduleInterpreter, AnActivationInHostMemoryIsNotFreedByABackwardThatReadsItElsewhere) {
  // x_1 leaves for host memory; F_all(0) then keeps a copy inside x̄_0, which
  // B(1) reads. x_1 in host memory must still come back before the end.
  const std::string text = "Fck0 Off1 Rel1 Fall0 Fall1 L B1 B0";
  RecordingBackend b;
  try {
    interpret(testing::parse_schedule(text), limits(2), b);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "schedule: ends with x_1 offloaded and never prefetched");
  }
  EXPECT_EQ(b.calls.at(6), "B1") << "B(1) frees nothing: x_1 is in host memory";
}

TEST(ScheduleInterpreter, RefusesAnOperationBeforeTheBackendSeesIt) {
  RecordingBackend b;
  EXPECT_THROW(interpret(testing::parse_schedule("Fck0 Fall2"), limits(3), b), Error);
  EXPECT_EQ(b.calls, std::vector<std::string>{"Fck0"});
  EXPECT_EQ(b.hooks, 2);
}

TEST(ScheduleInterpreter, NamesTheOperationAndWhatItLacks) {
  EXPECT_EQ(refusal("B0", limits(2)), "schedule op 0 (backward 0): the stage holds no forward with grad");
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 Fall1 B0", limits(2)),
            "schedule op 4 (forward_all 1): its backward has already run");
  EXPECT_EQ(refusal("Fall0.v1", limits(2)),
            "schedule op 0 (forward_all 0 variant 1): variant 1 does not exist; the stage has variants 0..0");
  EXPECT_EQ(refusal("Fck0 Off1 Fn1", limits(3)),
            "schedule op 2 (forward_none 1): x_1 is being offloaded; release it first");
  EXPECT_EQ(refusal("Win0", limits(2)),
            "schedule op 0 (fetch_weights 0): the weights are on the device (the chain's weights_on_host is false); "
            "weight operations need the weights in host memory");
  EXPECT_EQ(refusal("U0@1", limits(2, true)),
            "schedule op 0 (update 0 of micro-batch 1): weight operations act on all micro-batches; expected "
            "micro-batch 0");
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 B0", limits(2, true)),
            "schedule op 0 (forward_all 0): the stage's weights are in host memory; fetch them first");
  EXPECT_EQ(refusal("Win0 Win1 Fall0 Fall1 L B1 B0 Gout0 Gout1 Wout0 Wout1 U1", limits(2, true)),
            "schedule: the gradients of stage 0 never reach the optimizer (no update)");
  EXPECT_EQ(refusal("Fall0 Fall1 L B1", limits(2)),
            "schedule: ends before the backward of stage 0 (the last gradient is delta_1)");
}

TEST(ScheduleInterpreter, SumsEachGradientBucketOnceItsBackwardsAreDone) {
  // Buckets {2, 3} and {0, 1}: the first may go once B(2) of every micro-batch has run.
  RecordingBackend b;
  const Schedule s = testing::parse_schedule("Fall0 Fall1 Fall2 Fall3 L B3 B2 AR2 B1 B0 AR0");
  const ScheduleState end = interpret(s, limits(4, false, {2, 0}), b);
  EXPECT_EQ(b.calls.at(7), "AR2 bucket 0");
  EXPECT_EQ(b.calls.back(), "AR0 bucket 1");
  EXPECT_EQ(end.reduced, 2);
  const ScheduleLimits two = limits(2, false, {1, 0});
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 AR1 B0 AR0", two), "(accepted)");
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 AR1 B0", two),
            "schedule: ends with the gradients of stages 0..0 never summed over the ranks (no all_reduce 0)");
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 B0 AR0", two),
            "schedule op 5 (all_reduce 0): the next bucket to sum starts at stage 1; buckets are summed in order, "
            "from the last stage down");
  EXPECT_EQ(refusal("Fall0 Fall1 L AR1", two),
            "schedule op 3 (all_reduce 1): the backward of stage 1 has not run; a bucket is summed once its "
            "gradients are final");
  // Micro-batch 1's backward of stage 1 is still to come.
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 Fall0@1 Fall1@1 L@1 AR1", two),
            "schedule op 7 (all_reduce 1): the backward of stage 1 of micro-batch 1 has not run; a bucket is summed "
            "once its gradients are final");
  // A backward after its gradients were sent would change what was summed.
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 AR1 B0 AR0 AR0", two),
            "schedule op 7 (all_reduce 0): every gradient bucket's sum has already started");
  EXPECT_EQ(refusal("Fall0 Fall1 L B1 B0 AR0", limits(2)),
            "schedule op 5 (all_reduce 0): there are no ranks to sum gradients over (the chain has no reduction "
            "buckets)");
  // Weights in host memory: summed on the device, then offloaded for the update.
  EXPECT_EQ(refusal("Win0 Fall0 L B0 AR0 Gout0 Wout0 U0", limits(1, true, {0})), "(accepted)");
  EXPECT_EQ(refusal("Win0 Fall0 L B0 Gout0 AR0 Wout0 U0", limits(1, true, {0})),
            "schedule op 5 (all_reduce 0): the gradients of stage 0 are not on the device to sum");
  EXPECT_EQ(refusal("Win0 Fall0 L B0 Gout0 Wout0 U0", limits(1, true, {0})),
            "schedule op 6 (update 0): the stage's gradients are not summed over the ranks; all_reduce 0 before "
            "offloading them");
  // Per micro-batch, a stage's partial sum may visit the host; the ranks sum the whole step's.
  EXPECT_EQ(refusal("Win0 Fall0 L B0 Gout0 Wout0 Win0 Fall0@1 L@1 Gin0 B0@1 AR0 Gout0 Wout0 U0", limits(1, true, {0})),
            "(accepted)");
}

}  // namespace
}  // namespace memtrain
