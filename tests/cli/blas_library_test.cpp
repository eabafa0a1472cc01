#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "cli/blas_library.h"

namespace memtrain::cli {
namespace {

// The torch wheel computes with the MKL inside LibTorch; a LibTorch without
// MKL with the libblas it loaded, a file that exists, whose build is named
// after its folder where Debian keeps one.
TEST(BlasLibrary, NamesWhatLibTorchComputesWith) {
  const torch::Tensor product = torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));
  ASSERT_EQ(product[0][0].item<float>(), 8.0f);
  const BlasLibrary blas = loaded_blas_library();
  EXPECT_EQ(blas.mkl_in_torch, at::globalContext().hasMKL());
  if (blas.mkl_in_torch) {
    EXPECT_EQ(blas_name(blas), "MKL inside LibTorch");
    return;
  }
  ASSERT_FALSE(blas.path.empty()) << "no BLAS library among the loaded objects";
  EXPECT_TRUE(std::filesystem::exists(blas.path)) << blas.path;
  EXPECT_NE(std::filesystem::path(blas.path).filename().string().find("blas"), std::string::npos) << blas.path;
  const std::string folder = std::filesystem::path(blas.path).parent_path().filename().string();
  EXPECT_EQ(blas.build, folder.rfind("openblas-", 0) == 0 ? folder : std::string()) << blas.path;
  EXPECT_EQ(blas_name(blas), blas.build.empty() ? blas.path : blas.build);
}

TEST(BlasLibrary, WarnsOnlyWhenOpenBlasPthreadsMeetsSeveralOpenMpThreads) {
  const BlasLibrary pthreads{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0", "openblas-pthread"};
  const BlasLibrary openmp{"/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0", "openblas-openmp"};
  const std::string warning = blas_threading_warning(pthreads, 2);
  EXPECT_NE(warning.find(pthreads.path), std::string::npos) << warning;
  EXPECT_NE(warning.find("libopenblas0-openmp"), std::string::npos) << warning;
  EXPECT_NE(warning.find("--threads 1"), std::string::npos) << warning;
  EXPECT_EQ(blas_threading_warning(pthreads, 1), "");
  EXPECT_EQ(blas_threading_warning(openmp, 2), "");
  EXPECT_EQ(blas_threading_warning(BlasLibrary{}, 2), "");
  // Beside a LibTorch with MKL the pthreads build only serves other libraries.
  EXPECT_EQ(blas_threading_warning({pthreads.path, pthreads.build, true}, 2), "");
}

}  // namespace
}  // namespace memtrain::cli
