// The `memtrain` command's subcommands. Each returns the process exit
// status: 0 success, 1 a failure while running, 2 bad flags or values.
#pragma once

#include <string>
#include <vector>

namespace memtrain::cli {

int run_memtrain(const std::vector<std::string>& args);  // args exclude the program name
int run_train(const std::vector<std::string>& args);
class Flags;
// `train --model unet`: the graph path of run_train, on its already parsed flags.
int run_graph_train(Flags& flags);
int run_plan(const std::vector<std::string>& args);
int run_profile(const std::vector<std::string>& args);
int run_advise(const std::vector<std::string>& args);
int run_data(const std::vector<std::string>& args);
int run_stalls(const std::vector<std::string>& args);
int run_simulate(const std::vector<std::string>& args);
int run_simulate_jobs(const std::vector<std::string>& args);  // simulate --jobs: several jobs on one device
int run_calibrate(const std::vector<std::string>& args);
int run_jobs(const std::vector<std::string>& args);
int run_comm(const std::vector<std::string>& args);

}  // namespace memtrain::cli
