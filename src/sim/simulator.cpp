#include "sim/simulator.h"

#include <algorithm>
#include <string>

#include "core/error.h"
#include "core/schedule_interpreter.h"

namespace memtrain::sim {

namespace {

// When the copies a micro-batch's activations wait on end.
struct MicroBatchTimes {
  std::vector<Seconds> offload_end;        // x_i's copy to host
  std::vector<Seconds> ready;              // x_i usable on the device again (after a prefetch)
  std::vector<Seconds> saved_offload_end;  // the same for the part of x̄_i beyond its output
  std::vector<Seconds> saved_ready;
  explicit MicroBatchTimes(int n)
      : offload_end(n + 1, 0), ready(n + 1, 0), saved_offload_end(n, 0), saved_ready(n, 0) {}
};

// When the copies of a stage's weights and gradients end.
struct StageTimes {
  Seconds ready = 0;           // the weights' copy in
  Seconds grads_ready = 0;     // a FetchGrads copy
  Seconds grads_copy_end = 0;  // an OffloadGrads copy
};

// Prices each operation the interpreter hands it: bytes from the chain's
// sizes, time on a compute timeline, one copy engine per direction and
// the host's optimizer timeline.
class SimulatorBackend : public ScheduleBackend {
 public:
  SimulatorBackend(const Chain& chain, int micro_batches, bool per_op)
      : chain_(chain), per_op_(per_op), micro_(micro_batches, MicroBatchTimes(chain.size())), stages_(chain.size()),
        reduce_firsts_(chain.reduction.first_stages()), sum_end_(chain.reduction.buckets.size(), 0) {
    mem_ = chain.persistent_bytes() + micro_batches * a(0);
    result_.peak_bytes = mem_;
  }

  SimResult finish() {
    // The update needs every bucket's sum.
    wait_for_sum(network_free_);
    result_.time = std::max(t_, host_t_);
    // The device's update: with weights in host memory, of what stays on the
    // device (a model's embeddings and head); the host's updates add nothing.
    const Bytes update_peak = chain_.persistent_bytes() + chain_.update_temp_bytes;
    if (update_peak > result_.peak_bytes) {
      result_.peak_bytes = update_peak;
      result_.peak_op = -1;
    }
    return std::move(result_);
  }

  void before_op(size_t index, const Op& op) override {
    index_ = index;
    op_ = op;
    peak_ = 0;
  }
  void after_op(size_t index, const Op&) override {
    if (peak_ > result_.peak_bytes) {
      result_.peak_bytes = peak_;
      result_.peak_op = static_cast<int>(index);
    }
    if (per_op_) result_.ops.push_back({peak_, mem_, t_});
  }

  void forward_all(const Op& op, const ScheduleState& before) override {
    const StageVariant s = chain_.stages[op.stage].variant(op.variant);
    wait_for_weights(op.stage);
    wait_for_input(op, before, op.stage);
    peak_ = mem_ + s.saved_bytes + s.forward_temp_bytes;
    mem_ += s.saved_bytes;
    micro_[op.micro].saved_ready[op.stage] = 0;
    t_ += s.forward_time;
  }

  void forward_no_grad(const Op& op, const ScheduleState& before, bool frees_input) override {
    const int i = op.stage;
    const Stage& s = chain_.stages[i];
    wait_for_weights(i);
    wait_for_input(op, before, i);
    peak_ = mem_ + a(i + 1) + s.nograd_forward_temp_bytes;
    mem_ += a(i + 1);
    micro_[op.micro].ready[i + 1] = 0;
    if (frees_input) mem_ -= a(i);
    t_ += s.forward_time;
  }

  void loss(const Op&, const ScheduleState&) override {
    mem_ += a(chain_.size());
    peak_ = mem_;
  }

  void backward(const Op& op, const ScheduleState& before, bool frees_input, bool first_of_stage) override {
    const int i = op.stage;
    wait_for_weights(i);
    wait_for_input(op, before, i);
    wait_until(micro_[op.micro].saved_ready[i], false);
    const StageVariant s = chain_.stages[i].variant(before.micro[op.micro].kept[i] - 1);
    Bytes new_grads = 0;  // the weights' gradients, made by the stage's first backward
    if (chain_.weights_on_host) {
      if (first_of_stage)
        new_grads = chain_.stages[i].grad_bytes;
      else
        wait_until(stages_[i].grads_ready, false);
    }
    peak_ = mem_ + new_grads + a(i) + s.backward_temp_bytes;
    mem_ += new_grads + a(i) - s.saved_bytes - a(i + 1);
    if (frees_input) mem_ -= a(i);
    t_ += s.backward_time;
  }

  void offload(const Op& op, const ScheduleState& before) override {
    const int i = op.stage;
    need_link(chain_.device_to_host_bandwidth, "device-to-host");
    wait_for_input(op, before, i);  // a copy cannot leave before it arrived
    micro_[op.micro].offload_end[i] = queue_copy(a(i), false);
    to_host_memory(a(i));
  }

  void release(const Op& op, const ScheduleState&) override {
    wait_until(micro_[op.micro].offload_end[op.stage], true);
    peak_ = mem_;
    mem_ -= a(op.stage);
  }

  void prefetch(const Op& op, const ScheduleState&) override {
    micro_[op.micro].ready[op.stage] = copy_in(a(op.stage));
    host_ -= a(op.stage);
  }

  void offload_saved(const Op& op, const ScheduleState& before) override {
    need_link(chain_.device_to_host_bandwidth, "device-to-host");
    const Bytes bytes = kept_beyond_output(op, before);
    MicroBatchTimes& times = micro_[op.micro];
    wait_until(times.saved_ready[op.stage], false);  // a copy cannot leave before it arrived
    times.saved_offload_end[op.stage] = queue_copy(bytes, false);
    to_host_memory(bytes);
  }

  void release_saved(const Op& op, const ScheduleState& before) override {
    wait_until(micro_[op.micro].saved_offload_end[op.stage], true);
    peak_ = mem_;
    mem_ -= kept_beyond_output(op, before);
  }

  void prefetch_saved(const Op& op, const ScheduleState& before) override {
    const Bytes bytes = kept_beyond_output(op, before);
    micro_[op.micro].saved_ready[op.stage] = copy_in(bytes);
    host_ -= bytes;
  }

  void fetch_weights(const Op& op, const ScheduleState&) override {
    const Bytes bytes = chain_.stages[op.stage].param_bytes;
    stages_[op.stage].ready = copy_in(bytes);
    result_.copies.weight_bytes += bytes;
  }

  void drop_weights(const Op& op, const ScheduleState&, bool grads_leaving) override {
    peak_ = mem_;
    if (grads_leaving) {
      wait_until(stages_[op.stage].grads_copy_end, true);
      mem_ -= chain_.stages[op.stage].grad_bytes;
    }
    mem_ -= chain_.stages[op.stage].param_bytes;
  }

  void offload_grads(const Op& op, const ScheduleState&) override {
    need_link(chain_.device_to_host_bandwidth, "device-to-host");
    StageTimes& w = stages_[op.stage];
    wait_until(w.grads_ready, false);
    // The gradients that leave are the ranks' sum.
    if (!reduce_firsts_.empty()) wait_for_sum(sum_end_[bucket_holding(reduce_firsts_, op.stage)]);
    const Bytes bytes = chain_.stages[op.stage].grad_bytes;
    w.grads_copy_end = queue_copy(bytes, false);
    result_.copies.weight_bytes += bytes;
    peak_ = mem_;
  }

  void fetch_grads(const Op& op, const ScheduleState&) override {
    const Bytes bytes = chain_.stages[op.stage].grad_bytes;
    stages_[op.stage].grads_ready = copy_in(bytes);
    result_.copies.weight_bytes += bytes;
  }

  void update(const Op& op, const ScheduleState&) override {
    const Stage& s = chain_.stages[op.stage];
    const Seconds arrived = stages_[op.stage].grads_copy_end;
    if (chain_.updates_inline) {
      // On the compute thread: it waits for the gradients, then computes.
      wait_until(arrived, true);
      t_ += s.update_time;
    } else {
      // The host starts once the gradients have arrived and its last update is done.
      host_t_ = std::max({host_t_, t_, arrived}) + s.update_time;
    }
    result_.update_seconds += s.update_time;
    peak_ = mem_;
  }

  void all_reduce(const Op&, const ScheduleState&, int bucket) override {
    const GradientReduction& r = chain_.reduction;
    if (bucket >= 2) wait_for_sum(sum_end_[bucket - 2]);  // two in flight at most
    if (bucket == 0) mem_ += r.reserve_bytes;
    peak_ = mem_;
    const ReduceBucket& b = r.buckets[bucket];
    const Seconds seconds = r.network.seconds(b);
    network_free_ = std::max(t_, network_free_) + seconds;
    sum_end_[bucket] = network_free_;
    result_.reduce.buckets += 1;
    result_.reduce.bytes += b.bytes;
    result_.reduce.seconds += seconds;
  }

 private:
  Bytes a(int i) const { return chain_.activation_bytes(i); }
  // Compute waits until a sum over the ranks has ended.
  void wait_for_sum(Seconds when) {
    if (when <= t_) return;
    result_.reduce.stall_seconds += when - t_;
    t_ = when;
  }

  // Compute waits until `when`, the end of a copy to host or to the device.
  void wait_until(Seconds when, bool to_host) {
    if (when <= t_) return;
    (to_host ? result_.copies.to_host_stall_seconds : result_.copies.to_device_stall_seconds) += when - t_;
    t_ = when;
  }
  // Before compute reads x_i: an x_i held on its own that was prefetched must have arrived.
  void wait_for_input(const Op& op, const ScheduleState& before, int i) {
    const MicroBatchState& mb = before.micro[op.micro];
    if (mb.stored[i] && mb.where[i] == Residence::Device) wait_until(micro_[op.micro].ready[i], false);
  }
  void wait_for_weights(int i) {
    if (chain_.weights_on_host) wait_until(stages_[i].ready, false);
  }
  // Queues a copy of `bytes` on the engine of its direction; returns when it ends.
  Seconds queue_copy(Bytes bytes, bool to_device) {
    t_ += chain_.copy_issue_time;  // compute starts the copy, then goes on
    const double bandwidth = to_device ? chain_.host_to_device_bandwidth : chain_.device_to_host_bandwidth;
    Seconds& engine_free = to_device ? h2d_free_ : d2h_free_;
    const Seconds copy = static_cast<double>(bytes) / bandwidth;
    engine_free = std::max(t_, engine_free) + copy;
    (to_device ? result_.copies.to_device_bytes : result_.copies.to_host_bytes) += bytes;
    (to_device ? result_.copies.to_device_seconds : result_.copies.to_host_seconds) += copy;
    return engine_free;
  }
  // Allocates `bytes` on the device at once and queues their copy in;
  // returns when it ends.
  Seconds copy_in(Bytes bytes) {
    need_link(chain_.host_to_device_bandwidth, "host-to-device");
    mem_ += bytes;
    peak_ = mem_;
    return queue_copy(bytes, true);
  }
  void to_host_memory(Bytes bytes) {
    host_ += bytes;
    result_.host_peak_bytes = std::max(result_.host_peak_bytes, host_);
    peak_ = mem_;
  }
  // Pricing a copy needs the link's speed: a chain without one cannot price it.
  void need_link(double bandwidth, const char* direction) const {
    if (!(bandwidth > 0)) {
      throw Error("simulator: schedule op " + std::to_string(index_) + " (" + op_kind_name(op_.kind) + " " +
                  std::to_string(op_.stage) + ") copies, and the chain has no " + direction +
                  " bandwidth to price it with; give the chain one");
    }
  }
  // What OffloadSaved moves: the kept x̄_i beyond its output.
  Bytes kept_beyond_output(const Op& op, const ScheduleState& before) const {
    return chain_.saved_beyond_output(op.stage, before.micro[op.micro].kept[op.stage] - 1);
  }

  const Chain& chain_;
  const bool per_op_;
  std::vector<MicroBatchTimes> micro_;
  std::vector<StageTimes> stages_;
  SimResult result_;
  Bytes mem_ = 0, host_ = 0;  // device and host bytes live now
  Bytes peak_ = 0;            // the peak during the operation being priced
  Seconds t_ = 0;             // compute timeline
  Seconds host_t_ = 0;        // the host's optimizer updates
  Seconds d2h_free_ = 0;      // when each copy engine is next idle
  Seconds h2d_free_ = 0;
  Seconds network_free_ = 0;              // when the network is next idle
  const std::vector<int> reduce_firsts_;  // the gradient buckets' first stages
  std::vector<Seconds> sum_end_;          // per gradient bucket, when its sum ends
  size_t index_ = 0;                      // the operation being priced
  Op op_{OpKind::Loss, -1};
};

}  // namespace

SimResult simulate(const Chain& chain, const Schedule& schedule, bool per_op) {
  SimulatorBackend backend(chain, schedule.micro_batches(), per_op);
  interpret(schedule, ScheduleLimits::of(chain), backend);
  return backend.finish();
}

}  // namespace memtrain::sim
