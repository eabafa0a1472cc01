// The flags that make a command a data-parallel job: --ranks N (start N
// local ranks), or --rank R --world N --master HOST:PORT (be one rank of a
// job launched by hand or by a cluster's launcher), and --timeout S.
#pragma once

#include <string>
#include <vector>

#include "cli/flags.h"
#include "runtime/comm/rank_group.h"

namespace memtrain::cli {

struct RankFlags {
  int launch = 0;        // --ranks N: ranks to start here; 0: none
  bool by_hand = false;  // this process is one rank (--rank/--world/--master)
  runtime::RankAddress address;
  bool ranked() const { return launch > 0 || by_hand; }
};

// Reads the rank flags of `command` ("train", "data bench"); UsageError
// naming what is missing or conflicting. The Flags need "launched" as a
// switch (the launcher marks the ranks it starts).
RankFlags read_rank_flags(Flags& flags, const std::string& command);

// `args` without --ranks N: what each started rank is given.
std::vector<std::string> args_without_ranks(const std::vector<std::string>& args);

}  // namespace memtrain::cli
