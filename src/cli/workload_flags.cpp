#include "cli/workload_flags.h"

#include <filesystem>

#include "core/error.h"
#include "data/brown_corpus.h"
#include "runtime/input/brown_batches.h"
#include "runtime/input/fashion_mnist_batches.h"
#include "runtime/input/rank_slice_batches.h"

namespace memtrain::cli {

const char* const kWorkloadHelp =
    "  --model transformer|gpt|resnet|resnet50  model (default transformer): a tagger, a next-word\n"
    "                               decoder, an image classifier, ResNet-50\n"
    "  --data brown|fashion-mnist|DIR  dataset (default: brown for transformer and gpt, fashion-mnist for\n"
    "                               the resnets); DIR: image shards from `memtrain data pack`, for the resnets\n"
    "  --data-dir DIR               dataset directory (default: where scripts/install-deps.sh puts it)\n"
    "  --layers N --width N --heads N --dropout P   model size (see docs/usage.md)\n"
    "  --vocab N                    Brown: most frequent words kept (default 10000)\n"
    "  --max-length N               Brown: only sentences of at most N tokens (default: all)\n"
    "  --min-scale PX --max-scale PX  images: range of per-batch image sizes (default 28..112)\n"
    "  Image shards (--data DIR), read by the input pipeline:\n"
    "  --prep-threads N             threads reading, decoding and augmenting (default 2)\n"
    "  --prefetch N                 samples prepared ahead (default 256)\n"
    "  --cache-size SIZE|N%         in-memory cache of encoded samples (default: none)\n"
    "  --cache-policy lru|minio     (default minio)\n"
    "  --warm                       read through the page cache (default: cold, bypassing it)\n"
    "  --skip-corrupt               count and skip corrupt samples instead of stopping\n"
    "  --classes N                  labels lie in 0..N-1 (default 10)\n"
    "  --coordinate NAME --jobs N   share preparation with the other jobs of group NAME (N jobs in all,\n"
    "                               same data, batch, sides and seed): each batch is prepared once\n";

std::set<std::string> with_workload_switches(std::set<std::string> switches) {
  switches.insert({"warm", "skip-corrupt"});
  return switches;
}

WorkloadFlags read_workload_flags(Flags& flags) {
  WorkloadFlags w;
  w.model = flags.choice("model", "transformer", runtime::model_names());
  const bool token_model = w.model == "transformer" || w.model == "gpt";
  w.data = flags.text("data", token_model ? "brown" : "fashion-mnist");
  if (w.data != "brown" && w.data != "fashion-mnist") {
    std::error_code ec;
    if (!std::filesystem::is_directory(w.data, ec)) {
      throw UsageError("--data '" + w.data + "' is neither brown, fashion-mnist nor a directory of shards");
    }
    w.shards.dir = w.data;
    w.data = "shards";
  }
  if (token_model != (w.data == "brown")) {
    throw UsageError("--model " + w.model + " does not fit --data " + (w.shards.dir.empty() ? w.data : w.shards.dir) +
                     "; expected transformer or gpt with brown, resnet or resnet50 with fashion-mnist or image shards");
  }
  w.data_dir = flags.text("data-dir", "");
  w.spec.layers = flags.integer("layers", -1, 0, 256);
  w.spec.width = flags.integer("width", -1, 1, 8192);
  w.spec.heads = flags.integer("heads", -1, 1, 1024);
  w.spec.dropout = flags.real("dropout", -1, 0, 0.99);
  if (w.data == "brown") {
    w.vocab = flags.integer("vocab", 10000, 3, 10000000);
    w.max_length = flags.integer("max-length", 0, 1, 100000);
  } else {
    w.min_scale = flags.integer("min-scale", 28, 8, 1024);
    w.max_scale = flags.integer("max-scale", 112, 8, 1024);
  }
  if (w.data == "shards") {
    data::ShardBatchOptions& b = w.shards.batches;
    b.min_scale = w.min_scale;
    b.max_scale = w.max_scale;
    b.classes = flags.integer("classes", 10, 2, 1000000);
    b.prep.threads = static_cast<int>(flags.integer("prep-threads", 2, 1, 256));
    b.prep.queue_depth = static_cast<int>(flags.integer("prefetch", 256, 1, 1000000));
    b.prep.cold = !flags.has("warm");
    b.prep.skip_corrupt = flags.has("skip-corrupt");
    if (flags.has("cache-size")) w.shards.cache_size = parse_budget(flags.text("cache-size", ""), "--cache-size");
    w.shards.cache_policy = data::parse_cache_policy(flags.text("cache-policy", "minio"), "--cache-policy");
    if (flags.has("coordinate") || flags.has("jobs")) {
      if (!flags.has("coordinate") || !flags.has("jobs"))
        throw UsageError("--coordinate NAME and --jobs N go together");
      data::CoordinationOptions c;
      c.name = flags.text("coordinate", "");
      c.jobs = static_cast<int>(flags.integer("jobs", 2, 1, 64));
      w.shards.coordinate = c;
    }
  }
  return w;
}

Workload::Workload(const WorkloadFlags& flags) : flags_(flags) {
  if (flags_.data == "brown") {
    const data::BrownCorpus corpus = data::read_brown_corpus(data::find_brown_directory(flags_.data_dir));
    data::TaggingDataset d = data::make_tagging_dataset(corpus, flags_.vocab);
    if (flags_.max_length > 0) d = data::keep_sentences_up_to(std::move(d), flags_.max_length);
    tagging_ = std::make_shared<data::TaggingDataset>(std::move(d));
    shape_.vocabulary = tagging_->words.size();
    shape_.classes = tagging_->tags.size();
    shape_.max_length = tagging_->max_length;
  } else if (flags_.data == "shards") {
    shape_.classes = flags_.shards.batches.classes;
    shape_.in_channels = 1;
  } else {
    images_ = std::make_shared<data::ImageDataset>(
        data::read_fashion_mnist(data::find_fashion_mnist_directory(flags_.data_dir), "train"));
    shape_.classes = images_->classes;
    shape_.in_channels = 1;
  }
}

std::unique_ptr<runtime::BatchSource> Workload::batches(std::int64_t batch, std::uint64_t seed) const {
  if (tagging_) {
    const auto targets = flags_.model == "gpt" ? runtime::BrownTargets::NextWord : runtime::BrownTargets::Tags;
    return std::make_unique<runtime::BrownBatches>(tagging_, batch, seed, targets);
  }
  if (flags_.data == "shards") {
    runtime::ShardSourceOptions o = flags_.shards;
    o.batches.batch_size = batch;
    o.batches.seed = seed;
    return std::make_unique<runtime::ShardImageBatches>(o);
  }
  return std::make_unique<runtime::FashionMnistBatches>(images_, batch, flags_.min_scale, flags_.max_scale, seed);
}

std::unique_ptr<runtime::BatchSource> Workload::rank_batches(
    std::int64_t batch, std::uint64_t seed, int rank, int world,
    const std::optional<runtime::ShardSourceOptions::Partition>& partition) const {
  if (flags_.data == "shards" && !flags_.shards.coordinate) {
    runtime::ShardSourceOptions o = flags_.shards;
    o.batches.batch_size = batch * world;
    o.batches.seed = seed;
    o.batches.rank = rank;
    o.batches.ranks = world;
    o.partition = partition;
    return std::make_unique<runtime::ShardImageBatches>(o);
  }
  if (partition) throw UsageError("--partitioned-cache needs --data DIR (packed shards) without --coordinate");
  return std::make_unique<runtime::RankSliceBatches>(batches(batch * world, seed), rank, world);
}

runtime::Trainer::ModelFactory Workload::model_factory() const {
  const std::string model = flags_.model;
  const runtime::ModelSpec spec = flags_.spec;
  const runtime::DataShape shape = shape_;
  return [model, spec, shape] { return runtime::make_model(model, spec, shape); };
}

}  // namespace memtrain::cli
