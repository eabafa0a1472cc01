// A checkpoint on disk: a list of tensors (LibTorch's archive format),
// written beside its final name and then renamed into place, so a crash
// while writing leaves the previous checkpoint whole.
#pragma once

#include <string>
#include <vector>

#include <torch/types.h>

namespace memtrain::runtime {

// Writes `tensors` (copied to the CPU) to `path` + ".partial" and flushes
// it to disk; publish_checkpoint_file() then puts it in place. Ranks write
// theirs, agree that all have, and only then publish. Throws memtrain::Error
// naming the path.
void write_checkpoint_file(const std::string& path, const std::vector<torch::Tensor>& tensors);
void publish_checkpoint_file(const std::string& path);
std::vector<torch::Tensor> read_checkpoint_file(const std::string& path);

}  // namespace memtrain::runtime
