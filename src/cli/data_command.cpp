// `memtrain data`: dataset tools. `data pack` writes a dataset as tar shards.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/json_file.h"
#include "cli/rank_flags.h"
#include "cli/rank_launcher.h"
#include "core/error.h"
#include "core/fnv1a.h"
#include "data/brown_corpus.h"
#include "data/cache_epochs.h"
#include "data/fashion_mnist.h"
#include "data/partitioned_cache.h"
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
    "  --json FILE                  write the epochs as JSON\n"
    "\n"
    "Ranks: with --ranks N (or --rank R --world N --master HOST:PORT, one process per node) each\n"
    "rank takes every N-th sample of each epoch's order and has its own cache of --cache-size.\n"
    "\n"
    "  --ranks N                    start N ranks on this machine, meeting over loopback\n"
    "  --rank R --world N --master HOST:PORT\n"
    "                               be rank R of N; rank 0 serves the store at HOST:PORT\n"
    "  --partitioned-cache          CoorDL: each rank caches only its own seeded 1/N of the dataset\n"
    "                               (--cache-policy minio) and fetches the rest from the rank that owns\n"
    "                               it, over TCP, before storage; the owner reads a miss from storage\n"
    "                               once and keeps it. Without it the ranks' caches are independent.\n"
    "  --timeout S                  a rank that does not answer within S seconds is named (default 60)\n"
    "Rank 0 reports each epoch's totals over the ranks: storage_bytes_read, peer_bytes_read and a\n"
    "digest of every sample delivered (the same as one process's when every byte arrived intact).\n";

nlohmann::json epoch_json(const data::EpochReport& r) {
  return {{"epoch", r.epoch},
          {"samples", r.samples},
          {"storage_bytes_read", r.storage_bytes_read},
          {"peer_bytes_read", r.peer_bytes_read},
          {"bytes_served", r.bytes_served},
          {"device_bytes_read", r.device_bytes_read},
          {"hit_rate", r.hit_rate},
          {"seconds", r.seconds},
          {"digest", hex_digest(r.digest)}};
}

// One epoch summed over the ranks' reports (each a JSON array of epochs).
nlohmann::json epoch_totals(const std::vector<nlohmann::json>& ranks, std::size_t e, Bytes dataset_bytes) {
  nlohmann::json t = {{"epoch", static_cast<std::int64_t>(e)}};
  std::int64_t samples = 0;
  Bytes storage = 0, peers = 0, device = 0;
  bool device_known = true;
  double hits = 0, seconds = 0;
  std::uint64_t digest = 0;
  nlohmann::json per_rank = nlohmann::json::array();
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    nlohmann::json one = ranks[r].at(e);
    const auto n = one.at("samples").get<std::int64_t>();
    samples += n;
    storage += one.at("storage_bytes_read").get<Bytes>();
    peers += one.at("peer_bytes_read").get<Bytes>();
    const auto d = one.at("device_bytes_read").get<Bytes>();
    device_known = device_known && d >= 0;
    device += d;
    hits += one.at("hit_rate").get<double>() * static_cast<double>(n);
    seconds = std::max(seconds, one.at("seconds").get<double>());
    digest += std::stoull(one.at("digest").get<std::string>(), nullptr, 16);
    one["rank"] = static_cast<int>(r);
    per_rank.push_back(one);
  }
  t["samples"] = samples;
  t["storage_bytes_read"] = storage;
  t["storage_fraction"] = dataset_bytes > 0 ? static_cast<double>(storage) / static_cast<double>(dataset_bytes) : 0.0;
  t["peer_bytes_read"] = peers;
  t["device_bytes_read"] = device_known ? device : Bytes{-1};
  t["hit_rate"] = samples > 0 ? hits / static_cast<double>(samples) : 0.0;
  t["seconds"] = seconds;
  t["digest"] = hex_digest(digest);
  t["ranks"] = per_rank;
  return t;
}

// The flags that need ranks, and the partitioned cache's policy.
void check_rank_flags(const RankFlags& ranks, bool timeout, bool partitioned, data::CachePolicy policy) {
  if (!ranks.ranked() && timeout)
    throw UsageError("data bench: --timeout is for ranks; give --ranks N or --rank/--world/--master");
  if (partitioned && !ranks.ranked())
    throw UsageError(
        "data bench: --partitioned-cache divides the dataset between ranks; give --ranks N (or --rank "
        "R --world N --master HOST:PORT)");
  if (partitioned && policy != data::CachePolicy::minio)
    throw UsageError(
        "data bench: --partitioned-cache keeps each rank's part and never evicts; give --cache-policy "
        "minio, not " +
        data::cache_policy_name(policy));
}

// The epochs with the dataset cache partitioned across the ranks (CoorDL).
std::vector<data::EpochReport> partitioned_epochs(const data::ShardStorage& storage, Bytes capacity,
                                                  const data::CacheEpochOptions& options,
                                                  const runtime::RankAddress& address, runtime::RankGroup& group) {
  // Where the peers reach this rank: the address it reaches the store from.
  const std::string listen = data::local_address_towards(address.host);
  data::PartitionedSampleCache cache(storage, capacity, options.rank, options.world, options.seed, options.cold, listen,
                                     address.timeout);
  cache.connect(group.exchange("partitioned-cache", cache.address()));
  // Past the last epoch's barrier no peer asks this cache for more.
  return data::run_partitioned_epochs(storage, cache, options);
}

// Rank 0's line per epoch, over every rank's reports (`all`, one per rank); the epochs' totals.
nlohmann::json print_epochs(const std::vector<nlohmann::json>& all, std::size_t count, Bytes dataset_bytes,
                            bool partitioned) {
  const std::size_t world = all.size();
  nlohmann::json epochs = nlohmann::json::array();
  for (std::size_t e = 0; e < count; ++e) {
    nlohmann::json t = world > 1 ? epoch_totals(all, e, dataset_bytes) : all[0][e];
    if (world == 1)
      t["storage_fraction"] = static_cast<double>(t["storage_bytes_read"].get<Bytes>()) /
                              static_cast<double>(std::max<Bytes>(1, dataset_bytes));
    const Bytes device = t["device_bytes_read"].get<Bytes>();
    std::printf("epoch %lld: %s read from storage (%.1f%% of the dataset; device: %s)", static_cast<long long>(e),
                format_bytes(t["storage_bytes_read"].get<Bytes>()).c_str(), 100 * t["storage_fraction"].get<double>(),
                device < 0 ? "not reported" : format_bytes(device).c_str());
    if (partitioned) std::printf(", %s from peers", format_bytes(t["peer_bytes_read"].get<Bytes>()).c_str());
    std::printf(", hit rate %.1f%%, %.2f s\n", 100 * t["hit_rate"].get<double>(), t["seconds"].get<double>());
    epochs.push_back(t);
  }
  return epochs;
}

int run_data_bench(Flags& flags, const std::vector<std::string>& args) {
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
  const RankFlags ranks = read_rank_flags(flags, "data bench");
  const bool partitioned = flags.has("partitioned-cache");
  check_rank_flags(ranks, flags.has("timeout"), partitioned, policy);
  flags.check_all_used();
  if (ranks.launch > 0)
    return launch_ranks({"data", "bench"}, args_without_ranks(args), ranks.launch, ranks.address.timeout);

  const data::ShardStorage storage(dir);
  const BudgetSpec size = parse_budget(size_text, "--cache-size");
  const Bytes capacity = size.resolve(storage.dataset_bytes());
  std::unique_ptr<runtime::RankGroup> group;
  if (ranks.by_hand) group = std::make_unique<runtime::RankGroup>(ranks.address);
  const int rank = group ? group->rank() : 0, world = group ? group->world() : 1;
  try {
    options.rank = rank;
    options.world = world;
    if (group) options.barrier = [&] { group->gather({0.0}); };
    if (rank == 0) {
      std::printf("%zu samples in %zu shards, %s; cache %s (%s)%s%s, %s reads\n", storage.samples().size(),
                  storage.shards().size(), format_bytes(storage.dataset_bytes()).c_str(),
                  format_bytes(capacity).c_str(), data::cache_policy_name(policy).c_str(),
                  world > 1 ? (" on each of " + std::to_string(world) + " ranks").c_str() : "",
                  partitioned ? ", partitioned" : "", options.cold ? "cold" : "warm");
    }
    std::vector<data::EpochReport> reports;
    if (partitioned) {
      reports = partitioned_epochs(storage, capacity, options, ranks.address, *group);
    } else {
      data::SampleCache cache(capacity, policy);
      reports = data::run_cache_epochs(storage, cache, options);
    }
    nlohmann::json mine = nlohmann::json::array();
    for (const data::EpochReport& r : reports) mine.push_back(epoch_json(r));
    std::vector<nlohmann::json> all;
    if (group) {
      for (const std::string& text : group->exchange("data-bench-report", mine.dump()))
        all.push_back(nlohmann::json::parse(text));
    } else {
      all.push_back(mine);
    }
    if (rank > 0) return 0;
    const nlohmann::json epochs = print_epochs(all, reports.size(), storage.dataset_bytes(), partitioned);
    if (!json_path.empty()) {
      write_json_file({{"data", dir},
                       {"dataset_bytes", storage.dataset_bytes()},
                       {"cache_bytes", capacity},
                       {"cache_policy", data::cache_policy_name(policy)},
                       {"cold", options.cold},
                       {"ranks", world},
                       {"partitioned_cache", partitioned},
                       {"epochs", epochs}},
                      json_path);
    }
    return 0;
  } catch (const runtime::RankFailure&) {
    throw;
  } catch (const std::exception& e) {
    if (!group) throw;
    const std::string why = "rank " + std::to_string(rank) + ": " + e.what();
    group->fail(why);
    throw Error(why);
  }
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
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  Flags flags(rest, {"help", "warm", "no-decode", "partitioned-cache", "launched"}, "data " + args[0]);
  if (flags.has("help")) {
    std::fputs(kDataHelp, stdout);
    return 0;
  }
  if (args[0] == "bench") return run_data_bench(flags, rest);
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
