#include "core/schedule_interpreter.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace memtrain {

MicroBatchState::MicroBatchState(int stages)
    : stored(stages + 1, 0), where(stages + 1, Residence::Device), kept(stages, 0),
      kept_where(stages, Residence::Device) {
  stored[0] = 1;
}

ScheduleLimits ScheduleLimits::of(const Chain& chain) {
  ScheduleLimits limits;
  for (const Stage& s : chain.stages) limits.variants.push_back(s.variant_count());
  limits.weights_on_host = chain.weights_on_host;
  limits.reduce_buckets = chain.reduction.first_stages();
  return limits;
}

// Named, not anonymous: ScheduleRun holds an Interpreter.
namespace interpretation {

Error bad_op(size_t index, const Op& op, const std::string& why) {
  std::string name = op_kind_name(op.kind);
  if (op.kind != OpKind::Loss) name += " " + std::to_string(op.stage);
  if (op.variant != 0) name += " variant " + std::to_string(op.variant);
  if (op.micro != 0) name += " of micro-batch " + std::to_string(op.micro);
  return Error("schedule op " + std::to_string(index) + " (" + name + "): " + why);
}

std::string x_name(int i) { return "x_" + std::to_string(i); }

// Checks one operation against the state and advances the state; calls the
// backend (when there is one) in between, with the state before.
class Interpreter {
 public:
  Interpreter(const Schedule& schedule, const ScheduleLimits& limits, ScheduleBackend* backend)
      : schedule_(schedule), limits_(limits), backend_(backend), n_(limits.stages()) {
    state_.micro.assign(schedule.micro_batches(), MicroBatchState(n_));
    state_.weights.assign(n_, StageWeightsState{});
  }

  ScheduleState run() {
    while (!done()) step_next();
    check_end();
    return state_;
  }

  bool done() const { return next_ >= schedule_.ops.size(); }
  size_t position() const { return next_; }
  const Op& next() const { return schedule_.ops.at(next_); }
  void step_next() {
    k_ = next_++;
    step(schedule_.ops[k_]);
  }

 private:
  [[noreturn]] void refuse(const Op& op, const std::string& why) const { throw bad_op(k_, op, why); }

  void step(const Op& op) {
    if (op.kind != OpKind::Loss && (op.stage < 0 || op.stage >= n_)) {
      refuse(op, "stage is out of range; the chain has stages 0.." + std::to_string(n_ - 1));
    }
    if (op.micro < 0) refuse(op, "micro-batch " + std::to_string(op.micro) + " is negative");
    if (op.micro != 0 && !is_micro_batch_op(op.kind)) {
      refuse(op, "weight operations act on all micro-batches; expected micro-batch 0");
    }
    switch (op.kind) {
      case OpKind::ForwardAll: forward_all(op); break;
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone: forward_no_grad(op); break;
      case OpKind::Loss: loss(op); break;
      case OpKind::Backward: backward(op); break;
      case OpKind::Offload: offload(op); break;
      case OpKind::Release: release(op); break;
      case OpKind::Prefetch: prefetch(op); break;
      case OpKind::OffloadSaved: offload_saved(op); break;
      case OpKind::ReleaseSaved: release_saved(op); break;
      case OpKind::PrefetchSaved: prefetch_saved(op); break;
      case OpKind::FetchWeights: fetch_weights(op); break;
      case OpKind::DropWeights: drop_weights(op); break;
      case OpKind::OffloadGrads: offload_grads(op); break;
      case OpKind::FetchGrads: fetch_grads(op); break;
      case OpKind::Update: update(op); break;
      case OpKind::AllReduce: all_reduce(op); break;
    }
  }

  // Hands an accepted operation to the backend, between its hooks.
  template <typename Call>
  void hand(const Op& op, Call call) {
    if (!backend_) return;
    backend_->before_op(k_, op);
    call(*backend_);
    backend_->after_op(k_, op);
  }

  MicroBatchState& micro(const Op& op) { return state_.micro[op.micro]; }

  // Compute on stage i: with weights in host memory, they must be on the device.
  void need_weights(const Op& op) const {
    if (!limits_.weights_on_host) return;
    const StageWeightsState& w = state_.weights[op.stage];
    if (w.updated) refuse(op, "stage " + std::to_string(op.stage) + " was already updated this step");
    if (!w.on_device) refuse(op, "the stage's weights are in host memory; fetch them first");
  }
  void need_weights_in_host(const Op& op) const {
    if (!limits_.weights_on_host) {
      refuse(op,
             "the weights are on the device (the chain's weights_on_host is false); "
             "weight operations need the weights in host memory");
    }
  }
  // An operation that frees x_i (F_n, B) may not do so under a copy.
  void need_not_leaving(const Op& op, const MicroBatchState& mb, int i) const {
    if (mb.stored[i] && mb.where[i] == Residence::ToHost)
      refuse(op, x_name(i) + " is being offloaded; release it first");
  }
  void need_not_finished(const Op& op, const MicroBatchState& mb) const {
    if (mb.grad >= 0 && mb.grad <= op.stage) refuse(op, "its backward has already run");
  }

  void forward_all(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.available(i)) refuse(op, "its input is not stored");
    if (mb.kept[i]) refuse(op, "the stage already holds a forward with grad");
    need_not_finished(op, mb);
    const int variants = limits_.variants[i];
    if (op.variant < 0 || op.variant >= variants) {
      refuse(op, "variant " + std::to_string(op.variant) + " does not exist; the stage has variants 0.." +
                     std::to_string(variants - 1));
    }
    need_weights(op);
    hand(op, [&](ScheduleBackend& b) { b.forward_all(op, state_); });
    mb.kept[i] = 1 + op.variant;
    mb.kept_where[i] = Residence::Device;
  }

  void forward_no_grad(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.available(i)) refuse(op, "its input is not stored");
    if (mb.available(i + 1)) refuse(op, "its output is already stored");
    if (mb.stored[i + 1] && mb.where[i + 1] == Residence::Host) {
      refuse(op, "its output " + x_name(i + 1) + " is in host memory; prefetch it instead");
    }
    need_not_finished(op, mb);
    const bool none = op.kind == OpKind::ForwardNone;
    if (none) need_not_leaving(op, mb, i);
    need_weights(op);
    const bool frees_input = none && mb.stored[i] && mb.where[i] == Residence::Device;
    hand(op, [&](ScheduleBackend& b) { b.forward_no_grad(op, state_, frees_input); });
    mb.stored[i + 1] = 1;
    mb.where[i + 1] = Residence::Device;
    if (frees_input) mb.stored[i] = 0;
  }

  void loss(const Op& op) {
    MicroBatchState& mb = micro(op);
    if (mb.grad >= 0) refuse(op, "the loss gradient was already seeded");
    if (!mb.kept[n_ - 1]) refuse(op, "the loss stage has no forward with grad");
    hand(op, [&](ScheduleBackend& b) { b.loss(op, state_); });
    mb.grad = n_;
  }

  void backward(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.kept[i]) refuse(op, "the stage holds no forward with grad");
    if (mb.grad != i + 1) {
      refuse(op, mb.grad < 0 ? "the loss gradient was not seeded"
                             : "the gradient reaching it is delta_" + std::to_string(mb.grad) + ", not delta_" +
                                   std::to_string(i + 1));
    }
    if (!mb.available(i)) refuse(op, "its input is not stored");
    need_not_leaving(op, mb, i);
    if (mb.kept_where[i] == Residence::ToHost) refuse(op, "what its forward kept is being offloaded; release it first");
    if (mb.kept_where[i] == Residence::Host) refuse(op, "what its forward kept is in host memory; prefetch it first");
    need_weights(op);
    bool first_of_stage = false;
    if (limits_.weights_on_host) {
      const GradPlace grads = state_.weights[i].grads;
      if (grads == GradPlace::Host)
        refuse(op, "the stage's gradient sum is in host memory; fetch it back to accumulate into");
      if (grads == GradPlace::ToHost) refuse(op, "the stage's gradients are being offloaded");
      first_of_stage = grads == GradPlace::None;
    }
    const bool frees_input = mb.stored[i] && mb.where[i] == Residence::Device;
    hand(op, [&](ScheduleBackend& b) { b.backward(op, state_, frees_input, first_of_stage); });
    if (limits_.weights_on_host) state_.weights[i].grads = GradPlace::Device;
    mb.kept[i] = 0;
    mb.grad = i;
    if (frees_input) mb.stored[i] = 0;
  }

  void offload(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (i == 0) refuse(op, "x_0 is the batch; only activations x_1.. can be offloaded");
    if (!mb.stored[i]) refuse(op, x_name(i) + " is not stored on its own");
    if (mb.where[i] != Residence::Device) refuse(op, x_name(i) + " is already offloaded");
    hand(op, [&](ScheduleBackend& b) { b.offload(op, state_); });
    mb.where[i] = Residence::ToHost;
  }

  void release(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.stored[i] || mb.where[i] != Residence::ToHost) refuse(op, x_name(i) + " has no offload in progress");
    hand(op, [&](ScheduleBackend& b) { b.release(op, state_); });
    mb.where[i] = Residence::Host;
  }

  void prefetch(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.stored[i] || mb.where[i] != Residence::Host) refuse(op, x_name(i) + " is not in host memory");
    hand(op, [&](ScheduleBackend& b) { b.prefetch(op, state_); });
    mb.where[i] = Residence::Device;
  }

  void offload_saved(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.kept[i]) refuse(op, "the stage holds no forward with grad");
    if (mb.kept_where[i] != Residence::Device) refuse(op, "what its forward kept is already offloaded");
    hand(op, [&](ScheduleBackend& b) { b.offload_saved(op, state_); });
    mb.kept_where[i] = Residence::ToHost;
  }

  void release_saved(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.kept[i] || mb.kept_where[i] != Residence::ToHost)
      refuse(op, "what its forward kept has no offload in progress");
    hand(op, [&](ScheduleBackend& b) { b.release_saved(op, state_); });
    mb.kept_where[i] = Residence::Host;
  }

  void prefetch_saved(const Op& op) {
    MicroBatchState& mb = micro(op);
    const int i = op.stage;
    if (!mb.kept[i] || mb.kept_where[i] != Residence::Host) refuse(op, "what its forward kept is not in host memory");
    hand(op, [&](ScheduleBackend& b) { b.prefetch_saved(op, state_); });
    mb.kept_where[i] = Residence::Device;
  }

  void fetch_weights(const Op& op) {
    need_weights_in_host(op);
    StageWeightsState& w = state_.weights[op.stage];
    if (w.on_device) refuse(op, "the stage's weights are already on the device");
    if (w.updated) refuse(op, "stage " + std::to_string(op.stage) + " was already updated this step");
    hand(op, [&](ScheduleBackend& b) { b.fetch_weights(op, state_); });
    w.on_device = true;
  }

  void drop_weights(const Op& op) {
    need_weights_in_host(op);
    StageWeightsState& w = state_.weights[op.stage];
    if (!w.on_device) refuse(op, "the stage's weights are not on the device");
    if (w.grads == GradPlace::Device) refuse(op, "the stage's gradients are on the device only; offload them first");
    for (const MicroBatchState& m : state_.micro) {
      if (m.kept[op.stage]) refuse(op, "a forward with grad of the stage still needs its weights");
    }
    const bool grads_leaving = w.grads == GradPlace::ToHost;
    hand(op, [&](ScheduleBackend& b) { b.drop_weights(op, state_, grads_leaving); });
    if (grads_leaving) w.grads = GradPlace::Host;
    w.on_device = false;
  }

  void offload_grads(const Op& op) {
    need_weights_in_host(op);
    StageWeightsState& w = state_.weights[op.stage];
    if (w.grads != GradPlace::Device) refuse(op, "the stage has no gradients on the device");
    hand(op, [&](ScheduleBackend& b) { b.offload_grads(op, state_); });
    w.grads = GradPlace::ToHost;
  }

  void fetch_grads(const Op& op) {
    need_weights_in_host(op);
    StageWeightsState& w = state_.weights[op.stage];
    if (w.grads != GradPlace::Host) refuse(op, "the stage has no gradient sum in host memory alone");
    if (w.updated) refuse(op, "stage " + std::to_string(op.stage) + " was already updated this step");
    if (!w.on_device) refuse(op, "the stage's weights are not on the device to accumulate beside; fetch them first");
    hand(op, [&](ScheduleBackend& b) { b.fetch_grads(op, state_); });
    w.grads = GradPlace::Device;
  }

  void update(const Op& op) {
    need_weights_in_host(op);
    StageWeightsState& w = state_.weights[op.stage];
    if (w.updated) refuse(op, "the stage was already updated this step");
    if (w.grads != GradPlace::Host && w.grads != GradPlace::ToHost) {
      refuse(op, "the stage's gradients are not on their way to the host; offload them first");
    }
    // The optimizer steps with the ranks' sum: summed on the device, then offloaded.
    if (!limits_.reduce_buckets.empty()) {
      const int bucket = bucket_holding(limits_.reduce_buckets, op.stage);
      if (bucket >= state_.reduced) {
        refuse(op, "the stage's gradients are not summed over the ranks; all_reduce " +
                       std::to_string(limits_.reduce_buckets[bucket]) + " before offloading them");
      }
    }
    hand(op, [&](ScheduleBackend& b) { b.update(op, state_); });
    w.updated = true;
  }

  void all_reduce(const Op& op) {
    const std::vector<int>& buckets = limits_.reduce_buckets;
    if (buckets.empty()) {
      refuse(op, "there are no ranks to sum gradients over (the chain has no reduction buckets)");
    }
    if (state_.reduced >= static_cast<int>(buckets.size()))
      refuse(op, "every gradient bucket's sum has already started");
    const int first = buckets[state_.reduced];
    if (op.stage != first) {
      refuse(op, "the next bucket to sum starts at stage " + std::to_string(first) +
                     "; buckets are summed in order, from the last stage down");
    }
    const int last = state_.reduced == 0 ? n_ - 1 : buckets[state_.reduced - 1] - 1;
    const int micro_batches = static_cast<int>(state_.micro.size());
    for (int m = 0; m < micro_batches; ++m) {
      const int g = state_.micro[m].grad;
      if (g < 0 || g > first) {
        refuse(op, "the backward of stage " + std::to_string(first) +
                       (micro_batches > 1 ? " of micro-batch " + std::to_string(m) : std::string()) +
                       " has not run; a bucket is summed once its gradients are final");
      }
    }
    if (limits_.weights_on_host) {
      for (int s = first; s <= last; ++s) {
        if (state_.weights[s].grads != GradPlace::Device)
          refuse(op, "the gradients of stage " + std::to_string(s) + " are not on the device to sum");
      }
    }
    hand(op, [&](ScheduleBackend& b) { b.all_reduce(op, state_, state_.reduced); });
    ++state_.reduced;
  }

  void check_end() const {
    const int micro_batches = static_cast<int>(state_.micro.size());
    for (int m = 0; m < micro_batches; ++m) {
      const MicroBatchState& mb = state_.micro[m];
      const std::string which = micro_batches > 1 ? " of micro-batch " + std::to_string(m) : "";
      if (mb.grad != 0) {
        throw Error("schedule: ends before the backward of stage 0" + which + " (" +
                    (mb.grad < 0 ? std::string("the loss gradient was never seeded")
                                 : "the last gradient is delta_" + std::to_string(mb.grad)) +
                    ")");
      }
      for (int i = 0; i <= n_; ++i) {
        if (mb.stored[i] && mb.where[i] != Residence::Device) {
          throw Error("schedule: ends with " + x_name(i) + which + " offloaded and never prefetched");
        }
      }
    }
    const int buckets = static_cast<int>(limits_.reduce_buckets.size());
    if (state_.reduced < buckets) {
      const int first = limits_.reduce_buckets[state_.reduced];
      const int last = state_.reduced == 0 ? n_ - 1 : limits_.reduce_buckets[state_.reduced - 1] - 1;
      throw Error("schedule: ends with the gradients of stages " + std::to_string(first) + ".." + std::to_string(last) +
                  " never summed over the ranks (no all_reduce " + std::to_string(first) + ")");
    }
    if (!limits_.weights_on_host) return;
    for (int i = 0; i < n_; ++i) {
      if (state_.weights[i].on_device) {
        throw Error("schedule: ends with the weights of stage " + std::to_string(i) + " on the device; drop them");
      }
      if (!state_.weights[i].updated) {
        throw Error("schedule: the gradients of stage " + std::to_string(i) + " never reach the optimizer (no update)");
      }
    }
  }

  const Schedule& schedule_;
  const ScheduleLimits& limits_;
  ScheduleBackend* backend_;
  const int n_;
  ScheduleState state_;
  size_t k_ = 0;     // the operation being interpreted
  size_t next_ = 0;  // the operation to interpret next
};

}  // namespace interpretation

using interpretation::Interpreter;

ScheduleState interpret(const Schedule& schedule, const ScheduleLimits& limits, ScheduleBackend& backend) {
  return Interpreter(schedule, limits, &backend).run();
}

void check_schedule(const Schedule& schedule, const ScheduleLimits& limits) {
  Interpreter(schedule, limits, nullptr).run();
}

struct ScheduleRun::Parts {
  Schedule schedule;
  ScheduleLimits limits;
  Interpreter interpreter;
  Parts(Schedule s, ScheduleLimits l, ScheduleBackend* backend)
      : schedule(std::move(s)), limits(std::move(l)), interpreter(schedule, limits, backend) {}
};

ScheduleRun::ScheduleRun(Schedule schedule, ScheduleLimits limits, ScheduleBackend& backend)
    : parts_(std::make_unique<Parts>(std::move(schedule), std::move(limits), &backend)) {}

ScheduleRun::~ScheduleRun() = default;

bool ScheduleRun::done() const { return parts_->interpreter.done(); }

size_t ScheduleRun::position() const { return parts_->interpreter.position(); }

const Op& ScheduleRun::next() const {
  MEMTRAIN_ASSERT(!done(), "a finished schedule has no next operation");
  return parts_->interpreter.next();
}

void ScheduleRun::step() {
  MEMTRAIN_ASSERT(!done(), "a finished schedule has no next operation");
  parts_->interpreter.step_next();
}

void ScheduleRun::continue_with(Schedule schedule) {
  const size_t ran = position();
  const std::vector<Op>& before = parts_->schedule.ops;
  if (schedule.ops.size() < ran ||
      !std::equal(before.begin(), before.begin() + static_cast<std::ptrdiff_t>(ran), schedule.ops.begin())) {
    throw Error("a running schedule goes on only with a schedule whose first " + std::to_string(ran) +
                " operations are those it ran");
  }
  // The interpreter reads the operations from parts_->schedule by position.
  parts_->schedule.ops = std::move(schedule.ops);
}

ScheduleState ScheduleRun::finish() { return parts_->interpreter.run(); }

const Schedule& ScheduleRun::schedule() const { return parts_->schedule; }

}  // namespace memtrain
