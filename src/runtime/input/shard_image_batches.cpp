#include "runtime/input/shard_image_batches.h"

#include <torch/torch.h>

#include <cstdio>

#include "core/units.h"

namespace memtrain::runtime {

ShardImageBatches::ShardImageBatches(ShardSourceOptions options)
    : options_(std::move(options)), storage_(std::make_unique<data::ShardStorage>(options_.dir)) {
  if (options_.partition) {
    const ShardSourceOptions::Partition& p = *options_.partition;
    if (!options_.cache_size || options_.cache_policy != data::CachePolicy::minio || options_.coordinate) {
      throw UsageError(
          "a partitioned cache keeps each rank's part and never evicts: it needs a cache size, the minio policy "
          "and no coordinated preparation");
    }
    partitioned_ = std::make_unique<data::PartitionedSampleCache>(
        *storage_, options_.cache_size->resolve(storage_->dataset_bytes()), options_.batches.rank,
        options_.batches.ranks, options_.batches.seed, options_.batches.prep.cold, p.listen_host, p.timeout);
    partitioned_->connect(p.exchange("partitioned-cache", partitioned_->address()));
    options_.batches.prep.fetch = [cache = partitioned_.get()](std::int64_t index) { return cache->fetch(index); };
  } else if (options_.cache_size) {
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
  if (partitioned_) {
    const data::PartitionedCacheCounters c = partitioned_->take_counters();
    data::PartitionedCacheCounters& t = partitioned_total_;
    t.lookups += c.lookups;
    t.local_hits += c.local_hits;
    t.peer_fetches += c.peer_fetches;
    t.storage_bytes_read += c.storage_bytes_read;
    t.peer_bytes_read += c.peer_bytes_read;
    t.bytes_served += c.bytes_served;
    out.fields["partitioned_cache"] = true;
    out.fields["storage_bytes_read"] = t.storage_bytes_read;
    out.fields["peer_bytes_read"] = t.peer_bytes_read;
    out.fields["bytes_served"] = t.bytes_served;
    out.fields["local_hits"] = t.local_hits;
    out.fields["lookups"] = t.lookups;
    out.summary += "; partitioned cache: " + format_bytes(t.storage_bytes_read) + " read from storage, " +
                   format_bytes(t.peer_bytes_read) + " from peers, " + format_bytes(t.bytes_served) + " served";
  }
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
  if (partitioned_) {
    text += "minio cache of " + format_bytes(partitioned_->cache().capacity()) + " partitioned across " +
            std::to_string(options_.batches.ranks) + " ranks";
  } else {
    text += cache_ ? data::cache_policy_name(cache_->policy()) + " cache of " + format_bytes(cache_->capacity())
                   : std::string("no cache");
  }
  if (options_.batches.ranks > 1) {
    text += "; rank " + std::to_string(options_.batches.rank) + " of " + std::to_string(options_.batches.ranks) +
            " reads only its slice of each batch";
  }
  if (coordinated_) {
    text += "; job " + std::to_string(coordinated_->job() + 1) + " of " + std::to_string(options_.coordinate->jobs) +
            " in group " + options_.coordinate->name;
  }
  return text;
}

}  // namespace memtrain::runtime
