// One rank's gradient sums over the ranks, beside compute: the
// GradientReducer (execution/gradient_reducer.h) a data-parallel trainer
// hands the executor for the last part of each step.
//
// The model's weights are cut into buckets by stage
// (core/gradient_reduction.h, every rank the same cut), each bucket into
// pieces of at most `piece_bytes` that travel as one flat copy each
// (comm/tensor_buckets.h; a weight as large as a piece travels alone, in
// place). AllReduce copies a bucket's gradients into its pieces on the
// compute thread (memory charged in schedule order) and hands them to a
// worker thread that runs the collectives one after the other, in the
// order every rank issues them, while compute goes on; at most two
// buckets are in flight, and a bucket's copies are freed when compute next
// waits for it.
//
// An attempt that runs out of budget after some sums have started loses
// nothing: a bucket is summed only once its gradients are final, and
// recomputation reproduces them bit for bit, so those sums stand. The
// trainer keeps those weights' gradients out of the retry and the retry
// sums only the other buckets: every rank sums every bucket once per step.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/types.h>

#include "core/gradient_reduction.h"
#include "predict/network_estimate.h"
#include "runtime/comm/rank_group.h"
#include "runtime/execution/gradient_reducer.h"

namespace memtrain::runtime {

class RankGradientSums : public GradientReducer {
 public:
  // `stage_weights[s]`: stage s's weights (their .grad() are summed).
  // `ordered`: sum in rank order (RankGroup::ordered_sum_bucket).
  // `bucket_per_stage`: every stage a bucket of its own (weights in host
  // memory: each stage's gradients leave for the host on their own).
  RankGradientSums(RankGroup& ranks, std::vector<std::vector<torch::Tensor>> stage_weights, Bytes piece_bytes,
                   bool ordered, bool bucket_per_stage);
  ~RankGradientSums() override;
  RankGradientSums(const RankGradientSums&) = delete;
  RankGradientSums& operator=(const RankGradientSums&) = delete;

  const std::vector<int>& first_stages() const override { return first_stages_; }
  Seconds start(int bucket) override;
  Seconds wait_for(int bucket) override;
  ReduceStats finish() override;

  // A new step: no bucket is summed yet.
  void begin_step();
  // After an attempt that failed: waits for every sum it started and
  // returns the stages whose gradients are now the ranks' sum; the next
  // attempt of the step leaves them alone (start() of their buckets does
  // nothing).
  std::vector<int> settle_failed_attempt();

  // The buckets as the Simulator prices them, the most bytes the sums' copies
  // hold at once, and the network as the sums so far show it.
  GradientReduction reduction() const;
  Bytes reserve_bytes() const { return reserve_; }  // reduction().reserve_bytes
  Bytes piece_bytes() const { return piece_bytes_; }

  // The most bytes the flat copies of sums cut into pieces of `piece_bytes`
  // hold at once: two buckets in flight, plus two copies the transport may
  // hold a moment after their collective completed.
  static Bytes reserve_bytes(const std::vector<std::vector<torch::Tensor>>& stage_weights, Bytes piece_bytes,
                             bool ordered, bool receives, bool bucket_per_stage);

 private:
  struct Bucket {
    int first_stage = 0;
    std::vector<torch::Tensor> weights;            // its stages' weights, in order
    std::vector<std::vector<std::size_t>> pieces;  // indices into weights, a flat copy each
    Bytes bytes = 0;
  };
  // One bucket's sum in flight: its copies, and what the worker reports.
  struct Sum {
    int bucket = 0;
    std::vector<torch::Tensor> grads, flats;  // its weights' gradients; per piece, the flat copy
    bool done = false;                        // guarded by mutex_
    std::exception_ptr error;
    Seconds seconds = 0;  // the collectives' time, on the worker
  };

  static std::vector<Bucket> cut(const std::vector<std::vector<torch::Tensor>>& stage_weights, Bytes piece_bytes,
                                 bool bucket_per_stage);
  static Bytes reserve_of(const std::vector<Bucket>& buckets, Bytes piece_bytes, bool ordered, bool receives);
  void work();               // the worker thread
  void run(Sum& sum);        // one bucket's collectives, on the worker
  Seconds land_oldest();     // compute waits for the oldest sum in flight, then frees its copies
  void land_all() noexcept;  // for the destructor

  RankGroup& ranks_;
  const bool ordered_;
  const Bytes piece_bytes_;
  const int stages_;
  std::vector<Bucket> buckets_;
  std::vector<int> first_stages_;
  Bytes reserve_ = 0;
  std::vector<char> started_;                   // this step: the bucket's sum has started (in this or a failed attempt)
  std::deque<std::shared_ptr<Sum>> in_flight_;  // started, not yet landed; oldest first
  torch::Tensor incoming_;                      // ordered sums, ranks > 0: the partial sums arriving (the worker's)
  ReduceStats stats_;                           // this run's
  predict::NetworkEstimate network_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<Sum>> queue_;  // for the worker, guarded by mutex_
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace memtrain::runtime
