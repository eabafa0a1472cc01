// Collectives move many tensors (one gradient per weight) as few buckets:
// consecutive tensors of one dtype, up to kBucketBytes together, travel as
// one flat copy, so a step pays a collective's round trips per bucket, not
// per tensor (on loopback Gloo, 32 all-reduces of 64 KiB each took 0.06 s
// where one of 2 MiB took 0.002 s). A tensor as large as a bucket travels
// alone, in place. The flat copies are memory the step uses: see
// bucket_temporary_bytes.
#pragma once

#include <cstddef>
#include <vector>

#include <torch/types.h>

#include "core/units.h"

namespace memtrain::runtime {

inline constexpr Bytes kBucketBytes = 8 * MiB;

// The tensors' indices, bucket by bucket, in order.
std::vector<std::vector<std::size_t>> tensor_buckets(const std::vector<torch::Tensor>& tensors,
                                                     Bytes bucket_bytes = kBucketBytes);

// The most bytes of flat copies alive at once: for a sum, two buckets in
// flight; for an ordered sum, one bucket and the copy coming in; either way
// plus two copies Gloo's worker threads may hold a moment after their
// collective completed.
Bytes bucket_temporary_bytes(const std::vector<torch::Tensor>& tensors, bool ordered,
                             Bytes bucket_bytes = kBucketBytes);

// One bucket's flat copy (a bucket of one tensor: that tensor itself).
torch::Tensor flatten_bucket(const std::vector<torch::Tensor>& tensors, const std::vector<std::size_t>& bucket);
// The flat copy's values back into the bucket's tensors (nothing for one tensor).
void unflatten_bucket(const torch::Tensor& flat, std::vector<torch::Tensor>& tensors,
                      const std::vector<std::size_t>& bucket);

}  // namespace memtrain::runtime
