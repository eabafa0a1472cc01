// Writes the report read from standard input as the section NAME of the
// Markdown file OUT: the one writer of docs/BENCHMARKS.md's sections, which
// the Python benches call as the C++ benches call bench::publish.
//
//   build/bench/publish_section NAME OUT < report.md
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "bench/lockstep.h"
#include "core/error.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "publish_section: expected NAME OUT (the report on standard input)\n");
    return 2;
  }
  const std::string report(std::istreambuf_iterator<char>(std::cin), {});
  try {
    memtrain::bench::publish(argv[1], report, argv[2]);
  } catch (const memtrain::Error& e) {
    std::fprintf(stderr, "publish_section: %s\n", e.what());
    return 1;
  }
  return 0;
}
