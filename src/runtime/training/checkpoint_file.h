// A checkpoint on disk: named fields (tensors and integers) in LibTorch's
// archive format, with a checksum over all of them, written beside its
// final name and then renamed into place, so a crash while writing leaves
// the previous checkpoint whole.
//
// The checksum (FNV-1a, 64 bits, over every field's name, and a tensor's
// type, shape and bytes, in name order) is what makes a damaged file a
// refusal rather than a silent resume: LibTorch's archives check their
// structure, not the bytes of their tensors.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <torch/types.h>

namespace memtrain::runtime {

struct CheckpointFields {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::int64_t> integers;
};

// Writes `fields` (tensors copied to the CPU) and their checksum to `path` +
// ".partial" and flushes it to disk; publish_checkpoint_file() then puts it
// in place. Ranks write theirs, agree that all have, and only then publish.
// Throws memtrain::Error naming the path.
void write_checkpoint_file(const std::string& path, const CheckpointFields& fields);
void publish_checkpoint_file(const std::string& path);
// Throws memtrain::Error, in one line naming `path`, when the file cannot be
// read, is not a checkpoint, or its fields do not match its checksum.
CheckpointFields read_checkpoint_file(const std::string& path);

}  // namespace memtrain::runtime
