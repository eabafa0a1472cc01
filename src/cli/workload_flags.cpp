#include "cli/workload_flags.h"

#include "core/error.h"
#include "data/brown_corpus.h"
#include "runtime/brown_batches.h"
#include "runtime/fashion_mnist_batches.h"

namespace memtrain::cli {

const char* const kWorkloadHelp =
    "  --model transformer|resnet   model (default transformer)\n"
    "  --data brown|fashion-mnist   dataset (default: brown for transformer, fashion-mnist for resnet)\n"
    "  --data-dir DIR               dataset directory (default: where scripts/install-deps.sh puts it)\n"
    "  --layers N --width N --heads N --dropout P   model size (see docs/usage.md)\n"
    "  --vocab N                    Brown: most frequent words kept (default 10000)\n"
    "  --max-length N               Brown: only sentences of at most N tokens (default: all)\n"
    "  --min-scale PX --max-scale PX  Fashion-MNIST: range of per-batch image sizes (default 28..112)\n";

WorkloadFlags read_workload_flags(Flags& flags) {
  WorkloadFlags w;
  w.model = flags.choice("model", "transformer", runtime::model_names());
  w.data = flags.choice("data", w.model == "transformer" ? "brown" : "fashion-mnist", {"brown", "fashion-mnist"});
  if ((w.model == "transformer") != (w.data == "brown")) {
    throw UsageError("--model " + w.model + " does not fit --data " + w.data +
                     "; expected transformer with brown, resnet with fashion-mnist");
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
  } else {
    images_ = std::make_shared<data::ImageDataset>(
        data::read_fashion_mnist(data::find_fashion_mnist_directory(flags_.data_dir), "train"));
    shape_.classes = images_->classes;
    shape_.in_channels = 1;
  }
}

std::unique_ptr<runtime::BatchSource> Workload::batches(std::int64_t batch, std::uint64_t seed) const {
  if (tagging_) return std::make_unique<runtime::BrownBatches>(tagging_, batch, seed);
  return std::make_unique<runtime::FashionMnistBatches>(images_, batch, flags_.min_scale, flags_.max_scale, seed);
}

runtime::Trainer::ModelFactory Workload::model_factory() const {
  const std::string model = flags_.model;
  const runtime::ModelSpec spec = flags_.spec;
  const runtime::DataShape shape = shape_;
  return [model, spec, shape] { return runtime::make_model(model, spec, shape); };
}

}  // namespace memtrain::cli
