#include <string>
#include <vector>

#include "cli/commands.h"

int main(int argc, char** argv) { return memtrain::cli::run_memtrain(std::vector<std::string>(argv + 1, argv + argc)); }
