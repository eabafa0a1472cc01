// A Schedule is the one language every planner speaks: an ordered list of
// operations over the stages of a chain. The Simulator prices it, the
// Executor runs it. Memory semantics of each operation: src/plan/MEMORY_MODEL.md.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace memtrain {

enum class OpKind {
  ForwardAll,         // F_all: forward with grad, keep everything backward needs
  ForwardCheckpoint,  // F_ck: forward without grad, keep its input, emit its output
  ForwardNone,        // F_n: forward without grad, drop its input, emit its output
  Loss,               // turn: seed the gradient of the loss
  Backward,           // B: backward of one stage, consumes what F_all kept
  // Moving a stored activation x_i (held on its own, i >= 1) to host memory
  // and back, on copy engines that run beside compute:
  Offload,   // start copying x_i to host; its device bytes stay until Release
  Release,   // wait for that copy to end, then free x_i's device bytes
  Prefetch,  // allocate x_i on the device and start copying it back; the
             // first operation that reads x_i waits for the copy
  // The same for what a forward with grad of stage i kept besides its output
  // (x̄_i without x_{i+1}: s_i - a_{i+1} bytes), held until B(i):
  OffloadSaved,   // start copying it to host; its device bytes stay until ReleaseSaved
  ReleaseSaved,   // wait for that copy to end, then free its device bytes
  PrefetchSaved,  // allocate it on the device and start copying it back; B(i) waits for the copy
  // Weights kept in host memory (Chain::weights_on_host), stage by stage:
  FetchWeights,  // allocate stage i's weights on the device and start copying them in
  DropWeights,   // free stage i's device weights, and its gradients once their copy has ended
  OffloadGrads,  // start copying stage i's accumulated gradients to the host
  FetchGrads,    // bring the host's gradient sum back to accumulate into (per-micro-batch swapping)
  Update,        // the optimizer step for stage i, on the host, once its gradients are there
  // Data parallelism (core/gradient_reduction.h): start summing over the
  // ranks the gradient bucket whose lowest stage is i, once every backward
  // of its stages has run; compute goes on, and the step ends when the sum has.
  AllReduce,
};

struct Op {
  OpKind kind;
  int stage;        // the stage index; -1 for Loss
  int variant = 0;  // ForwardAll: which variant of the stage runs (Stage::variant); 0 otherwise
  // Which micro-batch a forward, loss, backward or activation copy is of:
  // a step may split its batch into micro-batches whose gradients add up.
  int micro = 0;

  bool operator==(const Op& o) const {
    return kind == o.kind && stage == o.stage && variant == o.variant && micro == o.micro;
  }
};

// Whether `kind` acts on one micro-batch's activations (the weight and
// gradient operations act on a stage's weights, shared by all).
bool is_micro_batch_op(OpKind kind);

// Whether `kind` runs a stage forward (F_all, F_ck or F_n).
bool is_forward(OpKind kind);

// Whether `kind` starts a copy between device and host memory.
bool starts_copy(OpKind kind);

const char* op_kind_name(OpKind kind);  // "forward_all", ...

struct Schedule {
  std::vector<Op> ops;

  void forward_all(int i, int variant = 0, int micro = 0) { ops.push_back({OpKind::ForwardAll, i, variant, micro}); }
  void forward_checkpoint(int i, int micro = 0) { ops.push_back({OpKind::ForwardCheckpoint, i, 0, micro}); }
  void forward_none(int i, int micro = 0) { ops.push_back({OpKind::ForwardNone, i, 0, micro}); }
  void loss(int micro = 0) { ops.push_back({OpKind::Loss, -1, 0, micro}); }
  void backward(int i, int micro = 0) { ops.push_back({OpKind::Backward, i, 0, micro}); }
  void offload(int i, int micro = 0) { ops.push_back({OpKind::Offload, i, 0, micro}); }
  void release(int i, int micro = 0) { ops.push_back({OpKind::Release, i, 0, micro}); }
  void prefetch(int i, int micro = 0) { ops.push_back({OpKind::Prefetch, i, 0, micro}); }
  void offload_saved(int i, int micro = 0) { ops.push_back({OpKind::OffloadSaved, i, 0, micro}); }
  void release_saved(int i, int micro = 0) { ops.push_back({OpKind::ReleaseSaved, i, 0, micro}); }
  void prefetch_saved(int i, int micro = 0) { ops.push_back({OpKind::PrefetchSaved, i, 0, micro}); }
  void fetch_weights(int i) { ops.push_back({OpKind::FetchWeights, i}); }
  void drop_weights(int i) { ops.push_back({OpKind::DropWeights, i}); }
  void offload_grads(int i) { ops.push_back({OpKind::OffloadGrads, i}); }
  void fetch_grads(int i) { ops.push_back({OpKind::FetchGrads, i}); }
  void update(int i) { ops.push_back({OpKind::Update, i}); }
  void all_reduce(int i) { ops.push_back({OpKind::AllReduce, i}); }

  // 1 + the highest micro-batch any operation names.
  int micro_batches() const;
  // Number of forward operations beyond one per stage and micro-batch (the recompute count).
  int recomputed_forwards(int stages) const;
  // Whether every forward of a stage after its first runs right before
  // that stage's backward: the next backward after it is the stage's own
  // (PlannerOptions::local_recompute).
  bool recomputes_locally() const;
  // Compact text: "Fck0 Fall1 L B1 Fall0 B0"; a variant shows as "Fall1.v2";
  // Offload/Release/Prefetch of x_2 as "Off2 Rel2 Pre2", of what F_all(2)
  // saved as "OffS2 RelS2 PreS2"; weight operations
  // of stage 3 as "Win3 Wout3 Gout3 Gin3 U3"; the sum of the bucket down
  // to stage 3 as "AR3"; micro-batch 2 as "Fck0@2", "L@2".
  std::string to_string() const;
  nlohmann::json to_json() const;
  bool operator==(const Schedule& o) const { return ops == o.ops; }
};

}  // namespace memtrain
