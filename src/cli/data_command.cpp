// `memtrain data`: dataset tools. `data pack` writes a dataset as tar shards.
#include <cstdio>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/error.h"
#include "data/brown_corpus.h"
#include "data/fashion_mnist.h"
#include "data/shard_pack.h"

namespace memtrain::cli {

namespace {

const char* kDataHelp =
    "usage: memtrain data pack --from fashion-mnist|brown --out DIR [flags]\n"
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
    "  --data-dir DIR               dataset directory (default: where scripts/install-deps.sh puts it)\n";

}  // namespace

int run_data(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::fputs(kDataHelp, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] != "pack") throw UsageError("data: unknown subcommand '" + args[0] + "'; known: pack");
  Flags flags(std::vector<std::string>(args.begin() + 1, args.end()), {"help"}, "data pack");
  if (flags.has("help")) {
    std::fputs(kDataHelp, stdout);
    return 0;
  }
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
