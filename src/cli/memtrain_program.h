// The memtrain executable this process runs, for commands that start more
// memtrain processes (`jobs`, `train --ranks`).
#pragma once

#include <string>

namespace memtrain::cli {

std::string memtrain_program();

}  // namespace memtrain::cli
