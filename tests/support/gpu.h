// For the tests of the CUDA path: they compile in every build and are
// skipped, not failed, without a CUDA build or a GPU.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef MEMTRAIN_WITH_CUDA
#define MEMTRAIN_REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU"
#else
#define MEMTRAIN_REQUIRE_GPU() GTEST_SKIP() << "built without CUDA"
#endif
