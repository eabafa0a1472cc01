// Which BLAS LibTorch computes with. The torch wheel carries MKL inside
// LibTorch; a LibTorch built against the generic libblas.so.3 (Debian's)
// computes with whatever build that resolves to, which decides how matrix
// products share the cores with LibTorch's own OpenMP threads. A libblas
// loaded beside a LibTorch with MKL serves other libraries (COIN-OR's CBC).
#pragma once

#include <string>

namespace memtrain::cli {

struct BlasLibrary {
  std::string path;  // the loaded libblas/libopenblas with links resolved; "" when none is loaded
  // Debian's OpenBLAS builds live in folders named after their threading:
  // "openblas-openmp", "openblas-pthread", "openblas-serial"; "" for others.
  std::string build;
  bool mkl_in_torch = false;  // LibTorch computes with the MKL it carries, not with `path`
};

BlasLibrary loaded_blas_library();

// What LibTorch computes with, for reports: "MKL inside LibTorch", the
// OpenBLAS build, the library's path, or "no BLAS".
std::string blas_name(const BlasLibrary& blas);

// A line for the user when the loaded BLAS and `threads` compete for the
// cores (OpenBLAS's pthreads build beside more than one OpenMP thread); ""
// when they do not.
std::string blas_threading_warning(const BlasLibrary& blas, int threads);

}  // namespace memtrain::cli
