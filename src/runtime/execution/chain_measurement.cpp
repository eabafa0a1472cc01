#include "runtime/execution/chain_measurement.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace memtrain::runtime {

namespace {

// The micro-batches as large as micro-batch 0, by the bytes of stage 0's input.
std::vector<bool> micro_batches_like_the_first(const ExecutionResult& result) {
  std::vector<Bytes> input;
  for (const OpRecord& r : result.ops) {
    if (!is_forward(r.op.kind) || r.op.stage != 0) continue;
    if (static_cast<int>(input.size()) <= r.op.micro) input.resize(r.op.micro + 1, -1);
    input[r.op.micro] = r.input_bytes;
  }
  std::vector<bool> like(std::max<size_t>(input.size(), 1), true);
  for (size_t m = 1; m < input.size(); ++m) like[m] = input[m] == input[0];
  return like;
}

struct Mean {
  Seconds sum = 0;
  int count = 0;
  void add(Seconds s) { sum += s, ++count; }
  std::optional<Seconds> value() const { return count ? std::optional<Seconds>(sum / count) : std::nullopt; }
};

}  // namespace

predict::ChainSample sample_execution(const ExecutionResult& result, int stages, Bytes update_temp_bytes) {
  predict::ChainSample sample;
  sample.stages.resize(stages);
  // Memory comes from micro-batch 0, the largest (split_batch gives the
  // spare rows to the first ones): the chain planned for a micro-batched
  // step is its. Times are the mean over every micro-batch of its size: a
  // grouped schedule runs micro-batch 0 of a stage first, on weights just
  // fetched, and the others faster (on this CPU, some stages' later
  // micro-batches took half the first one's time).
  const std::vector<bool> timed = micro_batches_like_the_first(result);
  // The variant whose forward with grad micro-batch 0 ran last: only its runs are timed.
  std::vector<int> variant(stages, 0);
  for (const OpRecord& r : result.ops) {
    if (r.op.kind == OpKind::ForwardAll && r.op.micro == 0) variant[r.op.stage] = r.op.variant;
  }
  std::vector<Mean> with_grad(stages), without_grad(stages), backward(stages);
  for (const OpRecord& r : result.ops) {
    if (!is_forward(r.op.kind) && r.op.kind != OpKind::Backward) continue;  // the loss, copies, weights
    const Seconds compute_seconds = r.seconds - r.wait_seconds;             // without waits on copies
    predict::StageSample& s = sample.stages[r.op.stage];
    const bool first = r.op.micro == 0;
    const bool times = r.op.micro < static_cast<int>(timed.size()) && timed[r.op.micro];
    switch (r.op.kind) {
      case OpKind::ForwardAll:
        if (first) {
          s.variant = r.op.variant;
          s.input_bytes = r.input_bytes;
          s.saved_bytes = r.live_after - r.live_before;
          s.forward_temp_bytes = r.peak - r.live_after;
          if (r.op.stage == stages - 1) sample.output_bytes = r.output_bytes;
        }
        if (times && r.op.variant == variant[r.op.stage]) with_grad[r.op.stage].add(compute_seconds);
        break;
      case OpKind::ForwardCheckpoint:
      case OpKind::ForwardNone:
        if (first) {
          s.input_bytes = r.input_bytes;
          s.nograd_forward_temp_bytes = std::max<Bytes>(0, r.peak - r.live_before - r.output_bytes);
        }
        if (times) without_grad[r.op.stage].add(compute_seconds);
        break;
      default:  // Backward
        // The model adds a_i for the input gradient; the rest is temporary.
        // A stage's first backward with its weights in host memory also
        // makes their gradients: counted here as temporary, they stand for
        // what every later backward needs to add its gradients to the sum.
        if (first) s.backward_temp_bytes = std::max<Bytes>(0, r.peak - r.live_before - s.input_bytes.value_or(0));
        if (times) backward[r.op.stage].add(compute_seconds);
        break;
    }
  }
  for (int i = 0; i < stages; ++i) {
    predict::StageSample& s = sample.stages[i];
    // A recomputation is a forward with grad: prefer its time.
    s.forward_time = with_grad[i].count ? with_grad[i].value() : without_grad[i].value();
    s.backward_time = backward[i].value();
  }
  if (update_temp_bytes >= 0) sample.update_temp_bytes = update_temp_bytes;
  return sample;
}

std::vector<Seconds> copy_issue_seconds(const ExecutionResult& result) {
  std::vector<Seconds> seconds;
  for (const OpRecord& r : result.ops) {
    if (starts_copy(r.op.kind)) seconds.push_back(std::max(0.0, r.seconds - r.wait_seconds));
  }
  return seconds;
}

predict::ChainSample faster_of(const predict::ChainSample& a, const predict::ChainSample& b) {
  predict::ChainSample out = b;
  for (size_t i = 0; i < out.stages.size() && i < a.stages.size(); ++i) {
    auto shorter = [](std::optional<Seconds>& mine, const std::optional<Seconds>& other) {
      if (mine && other) mine = std::min(*mine, *other);
    };
    shorter(out.stages[i].forward_time, a.stages[i].forward_time);
    shorter(out.stages[i].backward_time, a.stages[i].backward_time);
  }
  return out;
}

int collection_rounds(const StagedModel& model, bool uses_variants) {
  return uses_variants ? model.max_variant_count() : 1;
}

std::vector<int> collection_variants(const StagedModel& model, int round) {
  std::vector<int> variants(model.size(), 0);
  for (int i = 0; i < model.size(); ++i) {
    variants[i] = std::min(round, static_cast<int>(model.stage_variant_names(i).size()));
  }
  return variants;
}

std::vector<predict::StageConstants> stage_constants(const StagedModel& model, int optimizer_slots,
                                                     const std::vector<Bytes>& optimizer_bytes) {
  MEMTRAIN_ASSERT(optimizer_bytes.empty() || optimizer_bytes.size() == static_cast<size_t>(model.size()),
                  "optimizer bytes for every stage");
  std::vector<predict::StageConstants> constants;
  for (int i = 0; i < model.size(); ++i) {
    const Bytes optimizer =
        optimizer_bytes.empty() ? model.stage_weight_bytes(i) * optimizer_slots : optimizer_bytes.at(i);
    constants.push_back({model.stage_name(i), model.stage_param_bytes(i), model.stage_weight_bytes(i) + optimizer,
                         model.stage_variant_names(i),
                         /*variants_recompute=*/true, model.stage_weight_bytes(i)});
  }
  return constants;
}

Chain chain_from_sample(const predict::ChainSample& sample, const std::vector<predict::StageConstants>& constants) {
  if (sample.stages.size() != constants.size()) throw Error("measured chain: stage count does not match the model");
  Chain chain;
  for (size_t i = 0; i < constants.size(); ++i) {
    const predict::StageSample& s = sample.stages[i];
    auto need = [&](const auto& field, const char* name) {
      if (!field) {
        throw Error("measured chain: stage " + std::to_string(i) + " ('" + constants[i].name + "') has no " + name +
                    " measurement; measure with a collection step");
      }
      return *field;
    };
    Stage st;
    st.name = constants[i].name;
    st.param_bytes = constants[i].param_bytes;
    st.state_bytes = constants[i].state_bytes;
    st.grad_bytes = constants[i].grad_bytes;
    st.update_time = constants[i].update_time;
    st.input_bytes = need(s.input_bytes, "input_bytes");
    st.saved_bytes = need(s.saved_bytes, "saved_bytes");
    st.forward_temp_bytes = need(s.forward_temp_bytes, "forward_temp_bytes");
    st.nograd_forward_temp_bytes = need(s.nograd_forward_temp_bytes, "nograd_forward_temp_bytes");
    st.backward_temp_bytes = need(s.backward_temp_bytes, "backward_temp_bytes");
    st.forward_time = need(s.forward_time, "forward_time");
    st.backward_time = need(s.backward_time, "backward_time");
    chain.stages.push_back(st);
  }
  chain.output_bytes = sample.output_bytes.value_or(0);
  chain.update_temp_bytes = sample.update_temp_bytes.value_or(0);
  return chain;
}

Chain chain_from_samples(const std::vector<predict::ChainSample>& samples,
                         const std::vector<predict::StageConstants>& constants) {
  if (samples.empty()) throw Error("measured chain: no samples");
  // Plain fields: per stage, from the first sample that ran it as variant 0.
  predict::ChainSample plain = samples.front();
  for (size_t i = 0; i < constants.size(); ++i) {
    for (const predict::ChainSample& s : samples) {
      if (s.stages.at(i).variant == 0) {
        plain.stages[i] = s.stages[i];
        break;
      }
    }
  }
  Chain chain = chain_from_sample(plain, constants);
  for (size_t i = 0; i < constants.size(); ++i) {
    for (int v = 1; v <= static_cast<int>(constants[i].variants.size()); ++v) {
      const predict::StageSample* found = nullptr;
      for (const predict::ChainSample& s : samples) {
        const predict::StageSample& st = s.stages.at(i);
        if (st.variant == v && st.saved_bytes && st.forward_temp_bytes && st.backward_temp_bytes && st.forward_time &&
            st.backward_time) {
          found = &st;
          break;
        }
      }
      if (!found) break;
      StageVariant x{constants[i].variants[v - 1], *found->forward_time,       *found->backward_time,
                     *found->saved_bytes,          *found->forward_temp_bytes, *found->backward_temp_bytes};
      const Stage& plain_stage = chain.stages[i];
      if (constants[i].variants_recompute) {  // see StageConstants::variants_recompute
        x.backward_time =
            std::max(x.backward_time, plain_stage.forward_time + plain_stage.backward_time - x.forward_time);
      }
      chain.stages[i].variants.push_back(x);
    }
  }
  return chain;
}

}  // namespace memtrain::runtime
