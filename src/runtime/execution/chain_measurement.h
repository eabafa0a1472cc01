// From what the Executor measured to the cost model: per-stage samples for
// the predictor, and whole Chains (for --save-chain and for checking the
// Simulator against the Executor).
#pragma once

#include <vector>

#include "core/chain.h"
#include "predict/chain_predictor.h"
#include "runtime/execution/executor.h"
#include "runtime/model/staged_model.h"

namespace memtrain::runtime {

// Fields a schedule did not exercise stay empty. update_temp_bytes < 0: not
// measured. A micro-batched schedule is sampled on micro-batch 0, its largest:
// memory from it alone, times as the mean over the micro-batches of its size.
predict::ChainSample sample_execution(const ExecutionResult& result, int stages, Bytes update_temp_bytes);

// The compute seconds each copy the schedule started took to start (its
// operation's time less its waits on other copies), in schedule order.
std::vector<Seconds> copy_issue_seconds(const ExecutionResult& result);

// Two measurements of the same schedule on the same input: the memory of
// `b` and, per stage, the shorter of the two times (interference from the
// rest of the machine only ever adds time).
predict::ChainSample faster_of(const predict::ChainSample& a, const predict::ChainSample& b);

// Collection runs measure a model's operator variants in turn when the
// planner chooses variants: how many runs that takes, and per stage the
// variant run `round` measures (its last one when it has fewer).
int collection_rounds(const StagedModel& model, bool uses_variants);
std::vector<int> collection_variants(const StagedModel& model, int round);

// The model's fixed per-stage costs: weights and buffers, and gradients plus
// `optimizer_slots` optimizer tensors per weight (2 for Adam), or, given,
// `optimizer_bytes[i]` of optimizer state on stage i (a sharded optimizer's).
std::vector<predict::StageConstants> stage_constants(const StagedModel& model, int optimizer_slots,
                                                     const std::vector<Bytes>& optimizer_bytes = {});

// A complete chain from a sample that exercised every field (a collection
// step does); throws memtrain::Error naming the first missing field.
Chain chain_from_sample(const predict::ChainSample& sample, const std::vector<predict::StageConstants>& constants);
// The same from several samples: each stage's plain fields from the first
// sample that ran it as variant 0, and its variants 1.. from the first that
// ran each (stopping at the first variant none of them ran).
Chain chain_from_samples(const std::vector<predict::ChainSample>& samples,
                         const std::vector<predict::StageConstants>& constants);

}  // namespace memtrain::runtime
