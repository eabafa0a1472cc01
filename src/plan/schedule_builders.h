// The schedule shapes the simple planners emit, and the common last step of
// every planner: price the schedule and decide feasibility.
#pragma once

#include <string>
#include <vector>

#include "core/chain.h"
#include "core/plan.h"

namespace memtrain::plan {

// recompute[i]: stage i runs F_ck in the forward pass and F_all again just
// before its backward; otherwise F_all once. The loss stage (n-1) is always
// kept: recomputing it right before its own backward saves nothing.
Schedule schedule_with_recompute(const std::vector<char>& recompute);

// `local` (a schedule that recomputes locally, Schedule::recomputes_locally)
// with stage `stage` recomputed too: its forward with grad runs without
// grad, and again (the same variant) right before its backward. Its
// operations before that forward are unchanged, so a step that has run
// them can go on with the result. `stage` must run once, with grad, and not
// be the last stage.
Schedule recomputing_stage(const Schedule& local, int stage);

// Keep everything: one F_all per stage (the `none` planner's schedule).
Schedule schedule_keeping_everything(int stages);
// The same step split into micro-batches, each forward and backward in turn.
Schedule schedule_keeping_everything(int stages, int micro_batches);
// The simulated peak of one step of `chain` keeping everything, every
// weight, gradient and optimizer state on the device (where the chain's
// weights live in host memory too): what a budget of N% is a share of,
// where no step of it can be measured (runtime::StepBudget says where it
// is measured), and the most any plan of the chain needs.
Bytes keep_everything_peak(const Chain& chain);
// Checkpoint every stage but the loss (the `all` planner's schedule).
Schedule schedule_checkpointing_everything(int stages);

// The predictor's collection schedule: every stage, the loss stage too, runs
// once without grad and again with grad before its backward, so one step
// measures every field of every stage, and any input that fits one stage's
// recomputation fits.
// With `variants`, stage i's forward with grad runs as variants[i], so a
// collection step also measures operator variants.
Schedule schedule_for_collection(int stages, const std::vector<int>& variants = {});

// Chen et al.'s segments: `starts` are the first stages of consecutive
// segments (starts[0] == 0). Every segment but the last keeps only its input
// in the forward pass and is recomputed whole before its backward.
Schedule schedule_with_segments(int stages, const std::vector<int>& starts);

// Simulates `schedule`; feasible when its peak fits `budget`. When it does
// not, min_budget_bytes is `least_budget` (the peak of the planner's most
// frugal choice), or the schedule's own peak when that is -1.
Plan priced_plan(const std::string& planner, const Chain& chain, Schedule schedule, Bytes budget,
                 Bytes least_budget = -1);

}  // namespace memtrain::plan
