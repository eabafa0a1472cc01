// `memtrain data`: dataset tools. `data pack` writes a dataset as tar shards.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/json_file.h"
#include "core/error.h"
#include "data/brown_corpus.h"
#include "data/cache_epochs.h"
#include "data/fashion_mnist.h"
#include "data/shard_pack.h"

namespace memtrain::cli {

namespace {

const char* kDataHelp =
    "usage: memtrain data pack --from fashion-mnist|brown --out DIR [flags]\n"
    "       memtrain data bench --data DIR --cache-size SIZE|N% --cache-policy lru|minio [flags]\n"
    "\n"
    "Writes a dataset as tar shards in the WebDataset convention (files sharing a base\n"
    "name form one sample): Fashion-MNIST images as grey JPEGs at --resolution with\n"
    "their label (.jpg + .cls), Brown sentences as words and tags (.txt + .tags).\n"
    "\n"
    "  --from fashion-mnist|brown   the dataset\n"
    "  --out DIR                    where the shards go (<dataset>-000000.tar, ...)\n"
    "  --resolution PX              image side in pixels (default 224)\n"
    "  --quality Q                  JPEG quality 1..100 (default 90)\n"
    "  --shard-size BYTES           shard size limit (default 64MiB)\n"
    "  --limit N                    pack only the first N samples (default: all)\n"
    "  --split train|test           Fashion-MNIST split (default train)\n"
    "  --data-dir DIR               dataset directory (default: where scripts/install-deps.sh puts it)\n"
    "\n"
    "`data bench` runs epochs over the shards in DIR in a new random order each, through an\n"
    "in-memory cache of encoded samples, reading misses cold from storage (their pages dropped\n"
    "first) and decoding every JPEG, and reports per epoch the bytes read from storage, the\n"
    "hit rate and the time.\n"
    "\n"
    "  --data DIR                   shards written by `data pack`\n"
    "  --cache-size SIZE|N%         cache capacity: bytes or a percentage of the dataset\n"
    "  --cache-policy lru|minio     lru evicts the least recently used; minio never evicts\n"
    "  --epochs N                   epochs (default 3)\n"
    "  --seed N                     seed of the epochs' orders (default 1)\n"
    "  --warm                       read through the page cache instead of cold\n"
    "  --no-decode                  skip decoding\n"
    "  --json FILE                  write the epochs as JSON\n";

int run_data_bench(Flags& flags) {
  if (!flags.has("data")) throw UsageError("data bench: --data DIR is required");
  const std::string dir = flags.text("data", "");
  if (!flags.has("cache-size")) throw UsageError("data bench: --cache-size is required, e.g. 50% or 200MiB");
  const std::string size_text = flags.text("cache-size", "");
  if (!flags.has("cache-policy")) throw UsageError("data bench: --cache-policy is required; expected lru or minio");
  const data::CachePolicy policy = data::parse_cache_policy(flags.text("cache-policy", ""), "--cache-policy");
  data::CacheEpochOptions options;
  options.epochs = static_cast<int>(flags.integer("epochs", 3, 1, 1000));
  options.seed = static_cast<std::uint64_t>(flags.integer("seed", 1, 0, INT64_MAX));
  options.cold = !flags.has("warm");
  options.decode = !flags.has("no-decode");
  const std::string json_path = flags.text("json", "");
  flags.check_all_used();

  const data::ShardStorage storage(dir);
  const BudgetSpec size = parse_budget(size_text, "--cache-size");
  const Bytes capacity = size.resolve(storage.dataset_bytes());
  data::SampleCache cache(capacity, policy);
  std::printf("%zu samples in %zu shards, %s; cache %s (%s), %s reads\n", storage.samples().size(),
              storage.shards().size(), format_bytes(storage.dataset_bytes()).c_str(), format_bytes(capacity).c_str(),
              data::cache_policy_name(policy).c_str(), options.cold ? "cold" : "warm");
  nlohmann::json epochs = nlohmann::json::array();
  for (const data::EpochReport& r : data::run_cache_epochs(storage, cache, options)) {
    std::printf("epoch %lld: %s read from storage (device: %s), hit rate %.1f%%, %.2f s\n",
                static_cast<long long>(r.epoch), format_bytes(r.storage_bytes_read).c_str(),
                r.device_bytes_read < 0 ? "not reported" : format_bytes(r.device_bytes_read).c_str(), 100 * r.hit_rate,
                r.seconds);
    epochs.push_back({{"epoch", r.epoch},
                      {"samples", r.samples},
                      {"storage_bytes_read", r.storage_bytes_read},
                      {"device_bytes_read", r.device_bytes_read},
                      {"hit_rate", r.hit_rate},
                      {"seconds", r.seconds}});
  }
  if (!json_path.empty()) {
    nlohmann::json j = {{"data", dir},
                        {"dataset_bytes", storage.dataset_bytes()},
                        {"cache_bytes", capacity},
                        {"cache_policy", data::cache_policy_name(policy)},
                        {"cold", options.cold},
                        {"epochs", epochs}};
    write_json_file(j, json_path);
  }
  return 0;
}

}  // namespace

int run_data(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kDataHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "pack" && args[0] != "bench") {
    throw UsageError("data: unknown subcommand '" + args[0] + "'; known: bench, pack");
  }
  Flags flags(std::vector<std::string>(args.begin() + 1, args.end()), {"help", "warm", "no-decode"}, "data " + args[0]);
  if (flags.has("help")) {
    std::fputs(kDataHelp, stdout);
    return 0;
  }
  if (args[0] == "bench") return run_data_bench(flags);
  if (!flags.has("from")) throw UsageError("data pack: --from is required; expected fashion-mnist or brown");
  const std::string from = flags.choice("from", "", {"fashion-mnist", "brown"});
  if (!flags.has("out")) throw UsageError("data pack: --out DIR is required");
  const std::string out = flags.text("out", "");
  data::PackOptions options;
  options.resolution = flags.integer("resolution", options.resolution, 8, 4096);
  options.quality = static_cast<int>(flags.integer("quality", options.quality, 1, 100));
  options.shard_size = parse_bytes(flags.text("shard-size", "64MiB"), "--shard-size");
  options.limit = flags.integer("limit", 0, 0, INT64_MAX);
  const std::string split = from == "fashion-mnist" ? flags.choice("split", "train", {"train", "test"}) : "";
  const std::string dir = flags.text("data-dir", "");
  flags.check_all_used();

  data::PackResult r;
  if (from == "fashion-mnist") {
    const data::ImageDataset images = data::read_fashion_mnist(data::find_fashion_mnist_directory(dir), split);
    r = data::pack_images(images, out, "fashion-mnist-" + split, options);
  } else {
    r = data::pack_sentences(data::read_brown_corpus(data::find_brown_directory(dir)), out, "brown", options);
  }
  std::printf("packed %lld samples into %zu shards (%s) in %s\n", static_cast<long long>(r.samples), r.shards.size(),
              format_bytes(r.bytes).c_str(), out.c_str());
  return 0;
}

}  // namespace memtrain::cli
