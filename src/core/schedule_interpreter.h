// The one place that says what a Schedule means. It walks the operations in
// order, checks each against the state (core/schedule_state.h): what it needs
// (its input available, the gradient that reaches it, weights fetched, no
// copy in flight of what it frees), then hands it to a backend
// (core/schedule_backend.h) and advances the state as src/plan/MEMORY_MODEL.md
// says. The Simulator prices a schedule through it and the LibTorch executor
// runs one through it, so the two accept and refuse the same schedules with
// the same messages; they can differ only in what an operation costs.
#pragma once

#include <memory>
#include <vector>

#include "core/chain.h"
#include "core/schedule.h"
#include "core/schedule_backend.h"
#include "core/schedule_state.h"

namespace memtrain {

// What of the model a schedule is checked against.
struct ScheduleLimits {
  std::vector<int> variants;     // per stage: how many variants its forward with grad has (>= 1)
  bool weights_on_host = false;  // weights live in host memory; the weight operations move them
  // One rank of a data-parallel step: the first stages of the gradient
  // buckets (core/gradient_reduction.h) the schedule must sum, in order;
  // empty: one process, and AllReduce is refused.
  std::vector<int> reduce_buckets;
  int stages() const { return static_cast<int>(variants.size()); }
  static ScheduleLimits of(const Chain& chain);
};

// Runs `schedule` through `backend`. Throws memtrain::Error
// "schedule op K (kind stage ...): why" for the first operation that cannot
// run (before the backend sees it), and "schedule: ..." for a schedule that
// ends before the step is done: a micro-batch's backward unfinished,
// anything left in host memory, weights left on the device, a stage never
// updated (weights in host memory) or a gradient bucket never summed over
// the ranks. Returns the state at the end.
ScheduleState interpret(const Schedule& schedule, const ScheduleLimits& limits, ScheduleBackend& backend);

// The same checks, with no backend: whether `schedule` can run at all.
void check_schedule(const Schedule& schedule, const ScheduleLimits& limits);

// interpret(), an operation at a time, for a caller that runs code of its
// own between operations (the Python module runs the user's forward between
// its blocks' operations). Each operation is checked and handed to the
// backend as interpret() would; the same errors, at the same operation.
class ScheduleRun {
 public:
  // `backend` outlives this.
  ScheduleRun(Schedule schedule, ScheduleLimits limits, ScheduleBackend& backend);
  ~ScheduleRun();
  ScheduleRun(const ScheduleRun&) = delete;
  ScheduleRun& operator=(const ScheduleRun&) = delete;

  bool done() const;        // every operation was interpreted
  size_t position() const;  // the index of the next operation
  const Op& next() const;   // the next operation; not when done()
  void step();              // interprets the next operation; not when done()
  // Goes on with `schedule` instead: its operations before position() must
  // be those interpreted (Error otherwise); the rest runs in their place.
  void continue_with(Schedule schedule);
  // Interprets what is left, then the end checks interpret() makes.
  ScheduleState finish();
  const Schedule& schedule() const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace memtrain
