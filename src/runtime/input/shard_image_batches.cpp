#include "runtime/input/shard_image_batches.h"

#include <torch/torch.h>

#include <cstdio>

#include "core/units.h"

namespace memtrain::runtime {

ShardImageBatches::ShardImageBatches(ShardSourceOptions options)
    : options_(std::move(options)), storage_(std::make_unique<data::ShardStorage>(options_.dir)) {
  if (options_.cache_size) {
    cache_ = std::make_unique<data::SampleCache>(options_.cache_size->resolve(storage_->dataset_bytes()),
                                                 options_.cache_policy);
  }
  if (options_.coordinate) {
    coordinated_ =
        std::make_unique<data::CoordinatedBatcher>(*storage_, cache_.get(), options_.batches, *options_.coordinate);
  } else {
    batcher_ = std::make_unique<data::ShardImageBatcher>(*storage_, cache_.get(), options_.batches);
  }
}

data::AugmentedBatch ShardImageBatches::next_augmented() {
  return coordinated_ ? coordinated_->next() : batcher_->next();
}

std::int64_t ShardImageBatches::epoch() const { return coordinated_ ? coordinated_->epoch() : batcher_->epoch(); }

std::int64_t ShardImageBatches::batches_per_epoch() const {
  return coordinated_ ? coordinated_->batches_per_epoch() : batcher_->batches_per_epoch();
}

data::PrepCounters ShardImageBatches::prep_counters() const {
  return batcher_ ? batcher_->counters() : data::PrepCounters{};
}

std::optional<data::CoordinationCounters> ShardImageBatches::coordination_counters() const {
  if (!coordinated_) return std::nullopt;
  return coordinated_->counters();
}

std::optional<PipelineCounters> ShardImageBatches::pipeline_counters() const {
  PipelineCounters out;
  char line[512];
  if (coordinated_) {
    const data::CoordinationCounters c = coordinated_->counters();
    const data::CoordinationOptions& group = *options_.coordinate;
    std::snprintf(line, sizeof line,
                  "group %s: %lld batches taken, %lld prepared here (%lld reclaimed from dead jobs) in %.2f s of CPU; "
                  "%lld samples skipped as corrupt",
                  group.name.c_str(), static_cast<long long>(c.batches_taken),
                  static_cast<long long>(c.batches_prepared), static_cast<long long>(c.reclaimed), c.prep_cpu_seconds,
                  static_cast<long long>(c.skipped_corrupt));
    out.fields = {{"coordinate", group.name},
                  {"jobs", group.jobs},
                  {"batches_taken", c.batches_taken},
                  {"batches_prepared", c.batches_prepared},
                  {"reclaimed", c.reclaimed},
                  {"skipped_corrupt", c.skipped_corrupt},
                  {"prep_cpu_seconds", c.prep_cpu_seconds},
                  {"prep_wait_seconds", c.wait_seconds}};
  } else {
    const data::PrepCounters c = prep_counters();
    std::snprintf(line, sizeof line, "%lld samples delivered, %lld skipped as corrupt; %.2f s of prep CPU",
                  static_cast<long long>(c.delivered), static_cast<long long>(c.skipped_corrupt), c.prep_cpu_seconds);
    for (const std::string& why : c.skipped) out.notes.push_back("skipped " + why);
    out.fields = {{"samples_delivered", c.delivered},
                  {"skipped_corrupt", c.skipped_corrupt},
                  {"skipped", c.skipped},
                  {"prep_cpu_seconds", c.prep_cpu_seconds},
                  {"prep_wait_seconds", c.consumer_wait_seconds}};
  }
  out.summary = line;
  return out;
}

Batch ShardImageBatches::to_tensors(const data::AugmentedBatch& b, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  Batch batch;
  batch.input = torch::from_blob(const_cast<float*>(b.pixels.data()), {b.batch, 1, b.side, b.side}, torch::kFloat32)
                    .to(device, /*non_blocking=*/false, /*copy=*/true);
  batch.targets = torch::from_blob(const_cast<int64_t*>(b.labels.data()), {b.batch}, torch::kInt64)
                      .to(device, /*non_blocking=*/false, /*copy=*/true);
  batch.signature = Signature::of_shape({b.batch, 1, b.side, b.side});
  batch.examples = b.batch;
  return batch;
}

Batch ShardImageBatches::next(const torch::Device& device) { return to_tensors(next_augmented(), device); }

Batch ShardImageBatches::largest(const torch::Device& device) {
  return to_tensors(data::largest_image_batch(*storage_, options_.batches), device);
}

std::string ShardImageBatches::describe() const {
  const data::PrepOptions& p = options_.batches.prep;
  std::string text = "image shards in " + options_.dir + ": " + std::to_string(storage_->samples().size()) +
                     " samples in " + std::to_string(storage_->shards().size()) + " shards, " +
                     format_bytes(storage_->dataset_bytes()) + "; " + std::to_string(p.threads) + " prep threads, " +
                     (p.cold ? "cold" : "warm") + " reads, ";
  text += cache_ ? data::cache_policy_name(cache_->policy()) + " cache of " + format_bytes(cache_->capacity())
                 : std::string("no cache");
  if (coordinated_) {
    text += "; job " + std::to_string(coordinated_->job() + 1) + " of " + std::to_string(options_.coordinate->jobs) +
            " in group " + options_.coordinate->name;
  }
  return text;
}

}  // namespace memtrain::runtime
