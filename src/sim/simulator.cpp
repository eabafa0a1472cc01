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

struct State {
  const Chain& chain;
  std::vector<char> x;     // x[i]: a_i stored on its own, i in 0..n
  std::vector<int> xbar;   // xbar[i]: 0, or 1 + the variant whose s_i is stored
  std::vector<Where> where;            // of each stored x_i
  std::vector<Seconds> offload_end;    // when x_i's copy to host ends
  std::vector<Seconds> ready;          // when x_i is usable on the device (after a prefetch)
  int grad = -1;           // index g of the gradient delta_g, -1 before Loss
  Bytes mem = 0;
  Bytes host = 0;
  Seconds t = 0;           // compute timeline
  Seconds d2h_free = 0;    // when each copy engine is next idle
  Seconds h2d_free = 0;

  explicit State(const Chain& c)
      : chain(c), x(c.size() + 1, 0), xbar(c.size(), 0), where(c.size() + 1, Where::Device),
        offload_end(c.size() + 1, 0), ready(c.size() + 1, 0) {}

  bool on_device(int i) const { return x[i] && where[i] != Where::Host; }
  bool available(int i) const { return on_device(i) || (i > 0 && xbar[i - 1]); }
  Bytes a(int i) const { return chain.activation_bytes(i); }
};

Error bad_op(size_t index, const Op& op, const std::string& why) {
  std::string name = op_kind_name(op.kind);
  if (op.kind != OpKind::Loss) name += " " + std::to_string(op.stage);
  if (op.variant != 0) name += " variant " + std::to_string(op.variant);
  return Error("schedule op " + std::to_string(index) + " (" + name + "): " + why);
}

}  // namespace

SimResult simulate(const Chain& chain, const Schedule& schedule, bool per_op) {
  const int n = chain.size();
  State st(chain);
  SimResult result;
  // Compute waits until `when` (a copy's end).
  auto wait_until = [&](Seconds when) {
    if (when > st.t) {
      result.stall_seconds += when - st.t;
      st.t = when;
    }
  };
  // Before a compute operation reads x_i: a prefetched x_i must have arrived.
  auto wait_for_input = [&](int i) {
    if (st.x[i] && st.where[i] == Where::Device) wait_until(st.ready[i]);
  };
  // Queues a copy of x_i on the engine that is next idle at `engine_free`;
  // returns when the copy ends.
  auto queue_copy = [&](int i, double bandwidth, Seconds& engine_free) {
    const Seconds copy = static_cast<double>(st.a(i)) / bandwidth;
    engine_free = std::max(st.t, engine_free) + copy;
    result.swap_bytes += st.a(i);
    result.transfer_seconds += copy;
    return engine_free;
  };
  // An operation that frees x_i (F_n, B) may not do so under a copy.
  auto check_not_copying = [&](size_t k, const Op& op, int i) {
    if (st.x[i] && st.where[i] == Where::Copying) {
      throw bad_op(k, op, "x_" + std::to_string(i) + " is being offloaded; release it first");
    }
  };
  st.x[0] = 1;
  st.mem = chain.persistent_bytes() + st.a(0);
  result.peak_bytes = st.mem;
  if (per_op) result.ops.reserve(schedule.ops.size());

  for (size_t k = 0; k < schedule.ops.size(); ++k) {
    const Op& op = schedule.ops[k];
    if (op.kind != OpKind::Loss && (op.stage < 0 || op.stage >= n)) {
      throw bad_op(k, op, "stage is out of range; the chain has stages 0.." + std::to_string(n - 1));
    }
    const int i = op.stage;
    Bytes peak = 0;
    switch (op.kind) {
      case OpKind::ForwardAll: {
        if (!st.available(i)) throw bad_op(k, op, "its input is not stored");
        if (st.xbar[i]) throw bad_op(k, op, "the stage already holds a forward with grad");
        if (st.grad >= 0 && st.grad <= i) throw bad_op(k, op, "its backward has already run");
        if (op.variant < 0 || op.variant >= chain.stages[i].variant_count()) {
          throw bad_op(k, op, "variant " + std::to_string(op.variant) + " does not exist; the stage has variants 0.." +
                                  std::to_string(chain.stages[i].variant_count() - 1));
        }
        const StageVariant s = chain.stages[i].variant(op.variant);
        wait_for_input(i);
        peak = st.mem + s.saved_bytes + s.forward_temp_bytes;
        st.mem += s.saved_bytes;
        st.xbar[i] = 1 + op.variant;
        st.t += s.forward_time;
        break;
      }
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone: {
        if (!st.available(i)) throw bad_op(k, op, "its input is not stored");
        if (st.available(i + 1)) throw bad_op(k, op, "its output is already stored");
        if (st.x[i + 1] && st.where[i + 1] == Where::Host) {
          throw bad_op(k, op, "its output x_" + std::to_string(i + 1) + " is in host memory; prefetch it instead");
        }
        if (st.grad >= 0 && st.grad <= i) throw bad_op(k, op, "its backward has already run");
        const Stage& s = chain.stages[i];
        if (op.kind == OpKind::ForwardNone) check_not_copying(k, op, i);
        wait_for_input(i);
        peak = st.mem + st.a(i + 1) + s.nograd_forward_temp_bytes;
        st.mem += st.a(i + 1);
        st.x[i + 1] = 1;
        st.where[i + 1] = Where::Device;
        st.ready[i + 1] = 0;
        if (op.kind == OpKind::ForwardNone && st.x[i]) {
          st.x[i] = 0;
          st.mem -= st.a(i);
        }
        st.t += s.forward_time;
        break;
      }
      case OpKind::Loss: {
        if (st.grad >= 0) throw bad_op(k, op, "the loss gradient was already seeded");
        if (!st.xbar[n - 1]) throw bad_op(k, op, "the loss stage has no forward with grad");
        st.mem += st.a(n);
        peak = st.mem;
        st.grad = n;
        break;
      }
      case OpKind::Backward: {
        if (!st.xbar[i]) throw bad_op(k, op, "the stage holds no forward with grad");
        if (st.grad != i + 1) {
          throw bad_op(k, op, st.grad < 0 ? "the loss gradient was not seeded"
                                          : "the gradient reaching it is delta_" + std::to_string(st.grad) +
                                                ", not delta_" + std::to_string(i + 1));
        }
        if (!st.available(i)) throw bad_op(k, op, "its input is not stored");
        check_not_copying(k, op, i);
        wait_for_input(i);
        const StageVariant s = chain.stages[i].variant(st.xbar[i] - 1);
        peak = st.mem + st.a(i) + s.backward_temp_bytes;
        st.mem += st.a(i) - s.saved_bytes - st.a(i + 1);
        st.xbar[i] = 0;
        st.grad = i;
        if (st.x[i]) {
          st.x[i] = 0;
          st.mem -= st.a(i);
        }
        st.t += s.backward_time;
        break;
      }
      case OpKind::Offload: {
        if (i == 0) throw bad_op(k, op, "x_0 is the batch; only activations x_1.. can be offloaded");
        if (!(chain.device_to_host_bandwidth > 0)) {
          throw bad_op(k, op, "the chain has no device-to-host bandwidth; give one (e.g. --bandwidth 25GB/s)");
        }
        if (!st.x[i]) throw bad_op(k, op, "x_" + std::to_string(i) + " is not stored on its own");
        if (st.where[i] != Where::Device) throw bad_op(k, op, "x_" + std::to_string(i) + " is already offloaded");
        wait_for_input(i);  // a copy cannot leave before it arrived
        st.offload_end[i] = queue_copy(i, chain.device_to_host_bandwidth, st.d2h_free);
        st.where[i] = Where::Copying;
        st.host += st.a(i);
        result.host_peak_bytes = std::max(result.host_peak_bytes, st.host);
        peak = st.mem;
        break;
      }
      case OpKind::Release: {
        if (!st.x[i] || st.where[i] != Where::Copying) {
          throw bad_op(k, op, "x_" + std::to_string(i) + " has no offload in progress");
        }
        wait_until(st.offload_end[i]);
        peak = st.mem;
        st.mem -= st.a(i);
        st.where[i] = Where::Host;
        break;
      }
      case OpKind::Prefetch: {
        if (!st.x[i] || st.where[i] != Where::Host) {
          throw bad_op(k, op, "x_" + std::to_string(i) + " is not in host memory");
        }
        if (!(chain.host_to_device_bandwidth > 0)) {
          throw bad_op(k, op, "the chain has no host-to-device bandwidth; give one (e.g. --bandwidth 25GB/s)");
        }
        st.ready[i] = queue_copy(i, chain.host_to_device_bandwidth, st.h2d_free);
        st.where[i] = Where::Device;
        st.mem += st.a(i);
        st.host -= st.a(i);
        peak = st.mem;
        break;
      }
    }
    if (peak > result.peak_bytes) {
      result.peak_bytes = peak;
      result.peak_op = static_cast<int>(k);
    }
    if (per_op) result.ops.push_back({peak, st.mem, st.t});
  }
  result.time = st.t;

  if (st.grad != 0) {
    throw Error("schedule: ends before the backward of stage 0 (" +
                (st.grad < 0 ? std::string("the loss gradient was never seeded")
                             : "the last gradient is delta_" + std::to_string(st.grad)) +
                ")");
  }
  for (int i = 0; i <= n; ++i) {
    if (st.x[i] && st.where[i] != Where::Device) {
      throw Error("schedule: ends with x_" + std::to_string(i) + " offloaded and never prefetched");
    }
  }
  const Bytes update_peak = chain.persistent_bytes() + chain.update_temp_bytes;
  if (update_peak > result.peak_bytes) {
    result.peak_bytes = update_peak;
    result.peak_op = -1;
  }
  return result;
}

}  // namespace memtrain::sim
