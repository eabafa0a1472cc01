// `memtrain train --ranks N` and `memtrain data bench --ranks N`: the
// launcher of a data-parallel job on this machine. It serves the ranks'
// store on a free loopback port, starts N processes of the command (the
// same flags, plus --rank r --world N --master 127.0.0.1:PORT --launched),
// and waits for them. Rank 0 speaks for the job.
#pragma once

#include <string>
#include <vector>

#include "core/units.h"

namespace memtrain::cli {

// `command`: the words after `memtrain` ({"train"}, {"data", "bench"});
// `args`: its flags without --ranks. Returns the exit status: 0 when every
// rank completed; otherwise the first failing rank's status (a rank killed
// by a signal counts as 1), after every rank has ended.
int launch_ranks(const std::vector<std::string>& command, const std::vector<std::string>& args, int ranks,
                 Seconds timeout);

}  // namespace memtrain::cli
