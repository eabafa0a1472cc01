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
};

struct Op {
  OpKind kind;
  int stage;        // the stage index; -1 for Loss
  int variant = 0;  // ForwardAll: which variant of the stage runs (Stage::variant); 0 otherwise

  bool operator==(const Op& o) const { return kind == o.kind && stage == o.stage && variant == o.variant; }
};

const char* op_kind_name(OpKind kind);  // "forward_all", ...

struct Schedule {
  std::vector<Op> ops;

  void forward_all(int i, int variant = 0) { ops.push_back({OpKind::ForwardAll, i, variant}); }
  void forward_checkpoint(int i) { ops.push_back({OpKind::ForwardCheckpoint, i}); }
  void forward_none(int i) { ops.push_back({OpKind::ForwardNone, i}); }
  void loss() { ops.push_back({OpKind::Loss, -1}); }
  void backward(int i) { ops.push_back({OpKind::Backward, i}); }
  void offload(int i) { ops.push_back({OpKind::Offload, i}); }
  void release(int i) { ops.push_back({OpKind::Release, i}); }
  void prefetch(int i) { ops.push_back({OpKind::Prefetch, i}); }

  // Number of forward operations beyond one per stage (the recompute count).
  int recomputed_forwards(int stages) const;
  // Compact text: "Fck0 Fall1 L B1 Fall0 B0"; a variant shows as "Fall1.v2";
  // Offload/Release/Prefetch of x_2 as "Off2 Rel2 Pre2".
  std::string to_string() const;
  nlohmann::json to_json() const;
  bool operator==(const Schedule& o) const { return ops == o.ops; }
};

}  // namespace memtrain
