#include "sim/simulator.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace memtrain::sim {

namespace {

struct State {
  const Chain& chain;
  std::vector<char> x;     // x[i]: a_i stored on its own, i in 0..n
  std::vector<int> xbar;   // xbar[i]: 0, or 1 + the variant whose s_i is stored
  int grad = -1;           // index g of the gradient delta_g, -1 before Loss
  Bytes mem = 0;

  explicit State(const Chain& c) : chain(c), x(c.size() + 1, 0), xbar(c.size(), 0) {}

  bool available(int i) const { return x[i] || (i > 0 && xbar[i - 1]); }
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
        peak = st.mem + s.saved_bytes + s.forward_temp_bytes;
        st.mem += s.saved_bytes;
        st.xbar[i] = 1 + op.variant;
        result.time += s.forward_time;
        break;
      }
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone: {
        if (!st.available(i)) throw bad_op(k, op, "its input is not stored");
        if (st.available(i + 1)) throw bad_op(k, op, "its output is already stored");
        if (st.grad >= 0 && st.grad <= i) throw bad_op(k, op, "its backward has already run");
        const Stage& s = chain.stages[i];
        peak = st.mem + st.a(i + 1) + s.nograd_forward_temp_bytes;
        st.mem += st.a(i + 1);
        st.x[i + 1] = 1;
        if (op.kind == OpKind::ForwardNone && st.x[i]) {
          st.x[i] = 0;
          st.mem -= st.a(i);
        }
        result.time += s.forward_time;
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
        const StageVariant s = chain.stages[i].variant(st.xbar[i] - 1);
        peak = st.mem + st.a(i) + s.backward_temp_bytes;
        st.mem += st.a(i) - s.saved_bytes - st.a(i + 1);
        st.xbar[i] = 0;
        st.grad = i;
        if (st.x[i]) {
          st.x[i] = 0;
          st.mem -= st.a(i);
        }
        result.time += s.backward_time;
        break;
      }
    }
    if (peak > result.peak_bytes) {
      result.peak_bytes = peak;
      result.peak_op = static_cast<int>(k);
    }
    if (per_op) result.ops.push_back({peak, st.mem, result.time});
  }

  if (st.grad != 0) {
    throw Error("schedule: ends before the backward of stage 0 (" +
                (st.grad < 0 ? std::string("the loss gradient was never seeded")
                             : "the last gradient is delta_" + std::to_string(st.grad)) +
                ")");
  }
  const Bytes update_peak = chain.persistent_bytes() + chain.update_temp_bytes;
  if (update_peak > result.peak_bytes) {
    result.peak_bytes = update_peak;
    result.peak_op = -1;
  }
  return result;
}

}  // namespace memtrain::sim
