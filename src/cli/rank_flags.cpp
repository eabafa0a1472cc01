#include "cli/rank_flags.h"

#include "core/error.h"

namespace memtrain::cli {

RankFlags read_rank_flags(Flags& flags, const std::string& command) {
  RankFlags r;
  r.launch = static_cast<int>(flags.integer("ranks", 0, 1, 256));
  r.by_hand = flags.has("rank") || flags.has("world") || flags.has("master");
  if (r.launch > 0 && r.by_hand) {
    throw UsageError(command +
                     ": --ranks N starts the ranks itself; --rank, --world and --master start one rank of a job "
                     "launched by hand or by a cluster's launcher");
  }
  if (r.by_hand) {
    if (!flags.has("rank") || !flags.has("world") || !flags.has("master"))
      throw UsageError(command + ": one rank of a job needs all of --rank R, --world N and --master HOST:PORT");
    r.address.world = static_cast<int>(flags.integer("world", 1, 1, 4096));
    r.address.rank = static_cast<int>(flags.integer("rank", 0, 0, r.address.world - 1));
    runtime::parse_master(flags.text("master", ""), "--master", r.address);
    r.address.launcher_serves_store = flags.has("launched");
  }
  r.address.timeout = flags.real("timeout", 60, 0.1, 86400);
  return r;
}

std::vector<std::string> args_without_ranks(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--ranks") {
      ++i;
      continue;
    }
    if (args[i].rfind("--ranks=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

}  // namespace memtrain::cli
