// Fashion-MNIST's test split, read once per test program, for the tests
// that train or measure on real images.
#pragma once

#include <memory>

#include "data/fashion_mnist.h"

namespace memtrain::testing {

inline std::shared_ptr<const data::ImageDataset> fashion_mnist_test_images() {
  static const auto images = std::make_shared<const data::ImageDataset>(
      data::read_fashion_mnist(data::find_fashion_mnist_directory(""), "test"));
  return images;
}

}  // namespace memtrain::testing
