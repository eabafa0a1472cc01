// How many CPU threads LibTorch computes with, set once per command, with a
// warning when the BLAS library loaded would fight them for the cores, or
// when there are more of them than cores.
#pragma once

namespace memtrain::cli {

void use_compute_threads(int threads);

}  // namespace memtrain::cli
