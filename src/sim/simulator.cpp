#include "sim/simulator.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace memtrain::sim {

namespace {

// Where an x_i stored on its own is.
enum class Where {
  Device,    // on the device only
  Copying,   // on the device, being copied to host (Offload, no Release yet)
  Host,      // on the host only
};

// Where a stage's gradients are (weights in host memory only).
enum class Grads {
  None,     // no backward has run yet
  Device,   // accumulated on the device only
  Copying,  // on the device, being copied to host (OffloadGrads)
  Host,     // summed in host memory only
};

// One micro-batch's activations and gradient.
struct MicroBatch {
  std::vector<char> x;     // x[i]: a_i stored on its own, i in 0..n
  std::vector<int> xbar;   // xbar[i]: 0, or 1 + the variant whose s_i is stored
  std::vector<Where> where;            // of each stored x_i
  std::vector<Seconds> offload_end;    // when x_i's copy to host ends
  std::vector<Seconds> ready;          // when x_i is usable on the device (after a prefetch)
  // The same for the part of a stored x̄_i beyond its output (OffloadSaved).
  std::vector<Where> saved_where;
  std::vector<Seconds> saved_offload_end, saved_ready;
  int grad = -1;           // index g of the gradient delta_g, -1 before Loss

  explicit MicroBatch(int n)
      : x(n + 1, 0), xbar(n, 0), where(n + 1, Where::Device), offload_end(n + 1, 0), ready(n + 1, 0),
        saved_where(n, Where::Device), saved_offload_end(n, 0), saved_ready(n, 0) {
    x[0] = 1;
  }
  bool on_device(int i) const { return x[i] && where[i] != Where::Host; }
  bool available(int i) const { return on_device(i) || (i > 0 && xbar[i - 1]); }
};

// One stage's weights and gradients when they live in host memory.
struct StageWeights {
  bool on_device = false;
  Seconds ready = 0;       // when the weights' copy in ends
  Grads grads = Grads::None;
  Seconds grads_ready = 0;      // when a FetchGrads copy ends
  Seconds grads_copy_end = 0;   // when an OffloadGrads copy ends
  bool updated = false;
};

Error bad_op(size_t index, const Op& op, const std::string& why) {
  std::string name = op_kind_name(op.kind);
  if (op.kind != OpKind::Loss) name += " " + std::to_string(op.stage);
  if (op.variant != 0) name += " variant " + std::to_string(op.variant);
  if (op.micro != 0) name += " of micro-batch " + std::to_string(op.micro);
  return Error("schedule op " + std::to_string(index) + " (" + name + "): " + why);
}

}  // namespace

SimResult simulate(const Chain& chain, const Schedule& schedule, bool per_op) {
  const int n = chain.size();
  const int micro_batches = schedule.micro_batches();
  std::vector<MicroBatch> micro(micro_batches, MicroBatch(n));
  std::vector<StageWeights> weights(n);
  Bytes mem = 0, host = 0;
  Seconds t = 0;         // compute timeline
  Seconds host_t = 0;    // the host's optimizer updates
  Seconds d2h_free = 0;  // when each copy engine is next idle
  Seconds h2d_free = 0;
  SimResult result;
  auto a = [&](int i) { return chain.activation_bytes(i); };
  // Compute waits until `when`, the end of a copy to host or to the device.
  auto wait_until = [&](Seconds when, bool to_host) {
    if (when > t) {
      result.stall_seconds += when - t;
      if (to_host) result.to_host_stall_seconds += when - t;
      t = when;
    }
  };
  // Before a compute operation reads x_i: a prefetched x_i must have arrived.
  auto wait_for_input = [&](MicroBatch& mb, int i) {
    if (mb.x[i] && mb.where[i] == Where::Device) wait_until(mb.ready[i], false);
  };
  // Queues a copy of `bytes` on the engine next idle at `engine_free`; returns when it ends.
  auto queue_copy = [&](Bytes bytes, double bandwidth, Seconds& engine_free) {
    t += chain.copy_issue_time;  // compute starts the copy, then goes on
    const Seconds copy = static_cast<double>(bytes) / bandwidth;
    engine_free = std::max(t, engine_free) + copy;
    const bool to_host = &engine_free == &d2h_free;
    result.swap_bytes += bytes;
    (to_host ? result.to_host_bytes : result.to_device_bytes) += bytes;
    result.transfer_seconds += copy;
    if (to_host) result.to_host_transfer_seconds += copy;
    return engine_free;
  };
  // An operation that frees x_i (F_n, B) may not do so under a copy.
  auto check_not_copying = [&](size_t k, const Op& op, const MicroBatch& mb, int i) {
    if (mb.x[i] && mb.where[i] == Where::Copying) {
      throw bad_op(k, op, "x_" + std::to_string(i) + " is being offloaded; release it first");
    }
  };
  auto need_link = [&](size_t k, const Op& op, double bandwidth, const char* direction) {
    if (!(bandwidth > 0)) {
      throw bad_op(k, op, std::string("the chain has no ") + direction + " bandwidth; give one (e.g. --bandwidth 25GB/s)");
    }
  };
  // Compute on stage i: with weights in host memory, they must have been fetched.
  auto need_weights = [&](size_t k, const Op& op, int i) {
    if (!chain.weights_on_host) return;
    const StageWeights& w = weights[i];
    if (w.updated) throw bad_op(k, op, "stage " + std::to_string(i) + " was already updated this step");
    if (!w.on_device) throw bad_op(k, op, "the stage's weights are in host memory; fetch them first");
    wait_until(w.ready, false);
  };
  auto need_weights_in_host = [&](size_t k, const Op& op) {
    if (!chain.weights_on_host) {
      throw bad_op(k, op, "the chain keeps its weights on the device (weights_on_host is false); "
                          "weight operations need weights in host memory (--weights-on host)");
    }
  };
  // What OffloadSaved moves: the stored x̄_i beyond its output.
  auto interior = [&](int i, const MicroBatch& mb) {
    return chain.saved_beyond_output(i, mb.xbar[i] - 1);
  };
  mem = chain.persistent_bytes() + micro_batches * a(0);
  result.peak_bytes = mem;
  if (per_op) result.ops.reserve(schedule.ops.size());

  for (size_t k = 0; k < schedule.ops.size(); ++k) {
    const Op& op = schedule.ops[k];
    if (op.kind != OpKind::Loss && (op.stage < 0 || op.stage >= n)) {
      throw bad_op(k, op, "stage is out of range; the chain has stages 0.." + std::to_string(n - 1));
    }
    if (op.micro < 0) throw bad_op(k, op, "micro-batch " + std::to_string(op.micro) + " is negative");
    if (op.micro != 0 && !is_micro_batch_op(op.kind)) {
      throw bad_op(k, op, "weight operations act on all micro-batches; expected micro-batch 0");
    }
    const int i = op.stage;
    MicroBatch& mb = micro[op.micro];
    Bytes peak = 0;
    switch (op.kind) {
      case OpKind::ForwardAll: {
        if (!mb.available(i)) throw bad_op(k, op, "its input is not stored");
        if (mb.xbar[i]) throw bad_op(k, op, "the stage already holds a forward with grad");
        if (mb.grad >= 0 && mb.grad <= i) throw bad_op(k, op, "its backward has already run");
        if (op.variant < 0 || op.variant >= chain.stages[i].variant_count()) {
          throw bad_op(k, op, "variant " + std::to_string(op.variant) + " does not exist; the stage has variants 0.." +
                                  std::to_string(chain.stages[i].variant_count() - 1));
        }
        need_weights(k, op, i);
        const StageVariant s = chain.stages[i].variant(op.variant);
        wait_for_input(mb, i);
        peak = mem + s.saved_bytes + s.forward_temp_bytes;
        mem += s.saved_bytes;
        mb.xbar[i] = 1 + op.variant;
        mb.saved_where[i] = Where::Device;
        mb.saved_ready[i] = 0;
        t += s.forward_time;
        break;
      }
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone: {
        if (!mb.available(i)) throw bad_op(k, op, "its input is not stored");
        if (mb.available(i + 1)) throw bad_op(k, op, "its output is already stored");
        if (mb.x[i + 1] && mb.where[i + 1] == Where::Host) {
          throw bad_op(k, op, "its output x_" + std::to_string(i + 1) + " is in host memory; prefetch it instead");
        }
        if (mb.grad >= 0 && mb.grad <= i) throw bad_op(k, op, "its backward has already run");
        const Stage& s = chain.stages[i];
        if (op.kind == OpKind::ForwardNone) check_not_copying(k, op, mb, i);
        need_weights(k, op, i);
        wait_for_input(mb, i);
        peak = mem + a(i + 1) + s.nograd_forward_temp_bytes;
        mem += a(i + 1);
        mb.x[i + 1] = 1;
        mb.where[i + 1] = Where::Device;
        mb.ready[i + 1] = 0;
        if (op.kind == OpKind::ForwardNone && mb.x[i]) {
          mb.x[i] = 0;
          mem -= a(i);
        }
        t += s.forward_time;
        break;
      }
      case OpKind::Loss: {
        if (mb.grad >= 0) throw bad_op(k, op, "the loss gradient was already seeded");
        if (!mb.xbar[n - 1]) throw bad_op(k, op, "the loss stage has no forward with grad");
        mem += a(n);
        peak = mem;
        mb.grad = n;
        break;
      }
      case OpKind::Backward: {
        if (!mb.xbar[i]) throw bad_op(k, op, "the stage holds no forward with grad");
        if (mb.grad != i + 1) {
          throw bad_op(k, op, mb.grad < 0 ? "the loss gradient was not seeded"
                                          : "the gradient reaching it is delta_" + std::to_string(mb.grad) +
                                                ", not delta_" + std::to_string(i + 1));
        }
        if (!mb.available(i)) throw bad_op(k, op, "its input is not stored");
        check_not_copying(k, op, mb, i);
        if (mb.saved_where[i] == Where::Copying) throw bad_op(k, op, "what its forward kept is being offloaded; release it first");
        if (mb.saved_where[i] == Where::Host) throw bad_op(k, op, "what its forward kept is in host memory; prefetch it first");
        need_weights(k, op, i);
        wait_for_input(mb, i);
        wait_until(mb.saved_ready[i], false);
        const StageVariant s = chain.stages[i].variant(mb.xbar[i] - 1);
        Bytes new_grads = 0;  // the weights' gradients, made by the stage's first backward
        if (chain.weights_on_host) {
          StageWeights& w = weights[i];
          if (w.grads == Grads::Host) {
            throw bad_op(k, op, "the stage's gradient sum is in host memory; fetch it back to accumulate into");
          }
          if (w.grads == Grads::Copying) throw bad_op(k, op, "the stage's gradients are being offloaded");
          if (w.grads == Grads::Device) wait_until(w.grads_ready, false);
          if (w.grads == Grads::None) new_grads = chain.stages[i].grad_bytes;
          w.grads = Grads::Device;
        }
        peak = mem + new_grads + a(i) + s.backward_temp_bytes;
        mem += new_grads + a(i) - s.saved_bytes - a(i + 1);
        mb.xbar[i] = 0;
        mb.grad = i;
        if (mb.x[i]) {
          mb.x[i] = 0;
          mem -= a(i);
        }
        t += s.backward_time;
        break;
      }
      case OpKind::Offload: {
        if (i == 0) throw bad_op(k, op, "x_0 is the batch; only activations x_1.. can be offloaded");
        need_link(k, op, chain.device_to_host_bandwidth, "device-to-host");
        if (!mb.x[i]) throw bad_op(k, op, "x_" + std::to_string(i) + " is not stored on its own");
        if (mb.where[i] != Where::Device) throw bad_op(k, op, "x_" + std::to_string(i) + " is already offloaded");
        wait_for_input(mb, i);  // a copy cannot leave before it arrived
        mb.offload_end[i] = queue_copy(a(i), chain.device_to_host_bandwidth, d2h_free);
        mb.where[i] = Where::Copying;
        host += a(i);
        result.host_peak_bytes = std::max(result.host_peak_bytes, host);
        peak = mem;
        break;
      }
      case OpKind::Release: {
        if (!mb.x[i] || mb.where[i] != Where::Copying) {
          throw bad_op(k, op, "x_" + std::to_string(i) + " has no offload in progress");
        }
        wait_until(mb.offload_end[i], true);
        peak = mem;
        mem -= a(i);
        mb.where[i] = Where::Host;
        break;
      }
      case OpKind::Prefetch: {
        if (!mb.x[i] || mb.where[i] != Where::Host) {
          throw bad_op(k, op, "x_" + std::to_string(i) + " is not in host memory");
        }
        need_link(k, op, chain.host_to_device_bandwidth, "host-to-device");
        mb.ready[i] = queue_copy(a(i), chain.host_to_device_bandwidth, h2d_free);
        mb.where[i] = Where::Device;
        mem += a(i);
        host -= a(i);
        peak = mem;
        break;
      }
      case OpKind::OffloadSaved: {
        need_link(k, op, chain.device_to_host_bandwidth, "device-to-host");
        if (!mb.xbar[i]) throw bad_op(k, op, "the stage holds no forward with grad");
        if (mb.saved_where[i] != Where::Device) throw bad_op(k, op, "what its forward kept is already offloaded");
        const Bytes bytes = interior(i, mb);
        wait_until(mb.saved_ready[i], false);  // a copy cannot leave before it arrived
        mb.saved_offload_end[i] = queue_copy(bytes, chain.device_to_host_bandwidth, d2h_free);
        mb.saved_where[i] = Where::Copying;
        host += bytes;
        result.host_peak_bytes = std::max(result.host_peak_bytes, host);
        peak = mem;
        break;
      }
      case OpKind::ReleaseSaved: {
        if (!mb.xbar[i] || mb.saved_where[i] != Where::Copying) {
          throw bad_op(k, op, "what its forward kept has no offload in progress");
        }
        wait_until(mb.saved_offload_end[i], true);
        peak = mem;
        mem -= interior(i, mb);
        mb.saved_where[i] = Where::Host;
        break;
      }
      case OpKind::PrefetchSaved: {
        if (!mb.xbar[i] || mb.saved_where[i] != Where::Host) {
          throw bad_op(k, op, "what its forward kept is not in host memory");
        }
        need_link(k, op, chain.host_to_device_bandwidth, "host-to-device");
        const Bytes bytes = interior(i, mb);
        mb.saved_ready[i] = queue_copy(bytes, chain.host_to_device_bandwidth, h2d_free);
        mb.saved_where[i] = Where::Device;
        mem += bytes;
        host -= bytes;
        peak = mem;
        break;
      }
      case OpKind::FetchWeights: {
        need_weights_in_host(k, op);
        need_link(k, op, chain.host_to_device_bandwidth, "host-to-device");
        StageWeights& w = weights[i];
        if (w.on_device) throw bad_op(k, op, "the stage's weights are already on the device");
        if (w.updated) throw bad_op(k, op, "stage " + std::to_string(i) + " was already updated this step");
        const Bytes bytes = chain.stages[i].param_bytes;
        mem += bytes;
        w.ready = queue_copy(bytes, chain.host_to_device_bandwidth, h2d_free);
        w.on_device = true;
        result.weight_swap_bytes += bytes;
        peak = mem;
        break;
      }
      case OpKind::DropWeights: {
        need_weights_in_host(k, op);
        StageWeights& w = weights[i];
        if (!w.on_device) throw bad_op(k, op, "the stage's weights are not on the device");
        if (w.grads == Grads::Device) {
          throw bad_op(k, op, "the stage's gradients are on the device only; offload them first");
        }
        for (const MicroBatch& m : micro) {
          if (m.xbar[i]) throw bad_op(k, op, "a forward with grad of the stage still needs its weights");
        }
        peak = mem;
        if (w.grads == Grads::Copying) {
          wait_until(w.grads_copy_end, true);
          mem -= chain.stages[i].grad_bytes;
          w.grads = Grads::Host;
        }
        mem -= chain.stages[i].param_bytes;
        w.on_device = false;
        break;
      }
      case OpKind::OffloadGrads: {
        need_weights_in_host(k, op);
        need_link(k, op, chain.device_to_host_bandwidth, "device-to-host");
        StageWeights& w = weights[i];
        if (w.grads != Grads::Device) throw bad_op(k, op, "the stage has no gradients on the device");
        wait_until(w.grads_ready, false);
        const Bytes bytes = chain.stages[i].grad_bytes;
        w.grads_copy_end = queue_copy(bytes, chain.device_to_host_bandwidth, d2h_free);
        w.grads = Grads::Copying;
        result.weight_swap_bytes += bytes;
        peak = mem;
        break;
      }
      case OpKind::FetchGrads: {
        need_weights_in_host(k, op);
        need_link(k, op, chain.host_to_device_bandwidth, "host-to-device");
        StageWeights& w = weights[i];
        if (w.grads != Grads::Host) throw bad_op(k, op, "the stage has no gradient sum in host memory alone");
        if (w.updated) throw bad_op(k, op, "stage " + std::to_string(i) + " was already updated this step");
        const Bytes bytes = chain.stages[i].grad_bytes;
        mem += bytes;
        w.grads_ready = queue_copy(bytes, chain.host_to_device_bandwidth, h2d_free);
        w.grads = Grads::Device;
        result.weight_swap_bytes += bytes;
        peak = mem;
        break;
      }
      case OpKind::Update: {
        need_weights_in_host(k, op);
        StageWeights& w = weights[i];
        if (w.updated) throw bad_op(k, op, "the stage was already updated this step");
        if (w.grads != Grads::Host && w.grads != Grads::Copying) {
          throw bad_op(k, op, "the stage's gradients are not on their way to the host; offload them first");
        }
        if (chain.updates_inline) {
          // On the compute thread: it waits for the gradients, then computes.
          wait_until(w.grads_copy_end, true);
          t += chain.stages[i].update_time;
        } else {
          // The host starts once the gradients have arrived and its last update is done.
          host_t = std::max({host_t, t, w.grads_copy_end}) + chain.stages[i].update_time;
        }
        result.update_seconds += chain.stages[i].update_time;
        w.updated = true;
        peak = mem;
        break;
      }
    }
    if (peak > result.peak_bytes) {
      result.peak_bytes = peak;
      result.peak_op = static_cast<int>(k);
    }
    if (per_op) result.ops.push_back({peak, mem, t});
  }
  result.time = std::max(t, host_t);

  for (int m = 0; m < micro_batches; ++m) {
    const MicroBatch& mb = micro[m];
    const std::string which = micro_batches > 1 ? " of micro-batch " + std::to_string(m) : "";
    if (mb.grad != 0) {
      throw Error("schedule: ends before the backward of stage 0" + which + " (" +
                  (mb.grad < 0 ? std::string("the loss gradient was never seeded")
                               : "the last gradient is delta_" + std::to_string(mb.grad)) +
                  ")");
    }
    for (int i = 0; i <= n; ++i) {
      if (mb.x[i] && mb.where[i] != Where::Device) {
        throw Error("schedule: ends with x_" + std::to_string(i) + which + " offloaded and never prefetched");
      }
    }
  }
  if (chain.weights_on_host) {
    for (int i = 0; i < n; ++i) {
      if (weights[i].on_device) {
        throw Error("schedule: ends with the weights of stage " + std::to_string(i) + " on the device; drop them");
      }
      if (!weights[i].updated) {
        throw Error("schedule: the gradients of stage " + std::to_string(i) + " never reach the optimizer (no update)");
      }
    }
    return result;  // the optimizer runs on the host: no device update peak
  }
  const Bytes update_peak = chain.persistent_bytes() + chain.update_temp_bytes;
  if (update_peak > result.peak_bytes) {
    result.peak_bytes = update_peak;
    result.peak_op = -1;
  }
  return result;
}

}  // namespace memtrain::sim
