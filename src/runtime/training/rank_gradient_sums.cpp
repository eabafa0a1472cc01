#include "runtime/training/rank_gradient_sums.h"

#include <algorithm>
#include <chrono>

#include <torch/torch.h>

#include "core/error.h"
#include "core/seconds_since.h"
#include "runtime/comm/tensor_buckets.h"
#include "runtime/memory/tensor_bytes.h"

namespace memtrain::runtime {

namespace {

using Clock = std::chrono::steady_clock;

// An ordered sum's partial sums arrive in chunks, into one buffer the worker
// reuses for every piece: as large as a piece between 64 KiB (tight budgets,
// small pieces) and 1 MiB (fewer round trips); the ranks agree on the
// pieces, so on the chunks too.
Bytes incoming_bytes(Bytes piece_bytes) { return std::clamp<Bytes>(piece_bytes, 64 * KiB, 1 * MiB); }

}  // namespace

std::vector<RankGradientSums::Bucket> RankGradientSums::cut(
    const std::vector<std::vector<torch::Tensor>>& stage_weights, Bytes piece_bytes, bool bucket_per_stage) {
  std::vector<Bytes> stage_bytes;
  for (const auto& weights : stage_weights) {
    Bytes b = 0;
    for (const torch::Tensor& w : weights) b += tensor_bytes(w);
    stage_bytes.push_back(b);
  }
  std::vector<int> firsts;
  if (bucket_per_stage) {
    for (int s = static_cast<int>(stage_weights.size()) - 1; s >= 0; --s) firsts.push_back(s);
  } else {
    firsts = bucket_first_stages(stage_bytes, piece_bytes);
  }
  std::vector<Bucket> buckets;
  int above = static_cast<int>(stage_weights.size());
  for (int first : firsts) {
    Bucket b;
    b.first_stage = first;
    for (int s = first; s < above; ++s) {
      for (const torch::Tensor& w : stage_weights[s]) {
        b.weights.push_back(w);
        b.bytes += tensor_bytes(w);
      }
    }
    b.pieces = tensor_buckets(b.weights, piece_bytes);
    buckets.push_back(std::move(b));
    above = first;
  }
  return buckets;
}

Bytes RankGradientSums::reserve_bytes(const std::vector<std::vector<torch::Tensor>>& stage_weights, Bytes piece_bytes,
                                      bool ordered, bool receives, bool bucket_per_stage) {
  return reserve_of(cut(stage_weights, piece_bytes, bucket_per_stage), piece_bytes, ordered, receives);
}

Bytes RankGradientSums::reserve_of(const std::vector<Bucket>& buckets, Bytes piece_bytes, bool ordered, bool receives) {
  Bytes previous = 0, most_in_flight = 0, largest_copy = 0;
  for (const Bucket& b : buckets) {
    Bytes held = 0;  // the bucket's copies
    for (const auto& piece : b.pieces) {
      Bytes bytes = 0;
      for (std::size_t i : piece) bytes += tensor_bytes(b.weights[i]);
      const Bytes copy = piece.size() > 1 ? bytes : 0;  // one weight travels in place
      largest_copy = std::max(largest_copy, copy);
      held += copy;
    }
    most_in_flight = std::max(most_in_flight, previous + held);
    previous = held;
  }
  return most_in_flight + 2 * largest_copy + (ordered && receives ? incoming_bytes(piece_bytes) : 0);
}

RankGradientSums::RankGradientSums(RankGroup& ranks, std::vector<std::vector<torch::Tensor>> stage_weights,
                                   Bytes piece_bytes, bool ordered, bool bucket_per_stage)
    : ranks_(ranks), ordered_(ordered), piece_bytes_(piece_bytes), stages_(static_cast<int>(stage_weights.size())),
      buckets_(cut(stage_weights, piece_bytes, bucket_per_stage)),
      reserve_(reserve_of(buckets_, piece_bytes, ordered, ranks.rank() > 0)) {
  for (const Bucket& b : buckets_) first_stages_.push_back(b.first_stage);
  started_.assign(buckets_.size(), 0);
  // The flat copies and the ordered sum's one buffer hold one type.
  const torch::Tensor* first = nullptr;
  for (std::size_t s = 0; s < stage_weights.size(); ++s) {
    for (const torch::Tensor& w : stage_weights[s]) {
      if (!first) first = &w;
      if (w.scalar_type() != first->scalar_type()) {
        throw UsageError("ranks sum gradients of one type; stage " + std::to_string(s) + " has " +
                         std::string(c10::toString(w.scalar_type())) + " weights beside " +
                         c10::toString(first->scalar_type()) + " ones");
      }
    }
  }
}

RankGradientSums::~RankGradientSums() {
  land_all();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void RankGradientSums::begin_step() {
  MEMTRAIN_ASSERT(in_flight_.empty(), "a step's sums have all landed before the next step");
  std::fill(started_.begin(), started_.end(), 0);
  stats_ = {};
}

Seconds RankGradientSums::start(int bucket) {
  MEMTRAIN_ASSERT(bucket >= 0 && bucket < static_cast<int>(buckets_.size()), "a bucket of this model");
  // Summed by an earlier attempt of this step: its gradients were final then and stand.
  if (started_[bucket]) return 0;
  Seconds waited = 0;
  while (in_flight_.size() >= 2) waited += land_oldest();
  const Bucket& b = buckets_[bucket];
  auto sum = std::make_shared<Sum>();
  sum->bucket = bucket;
  for (torch::Tensor w : b.weights) {
    // A weight no backward of this rank reached sums zeros.
    if (!w.grad().defined()) w.mutable_grad() = torch::zeros_like(w);
    sum->grads.push_back(w.grad());
  }
  // The copies are made here, on the compute thread, in schedule order.
  for (const auto& piece : b.pieces) sum->flats.push_back(flatten_bucket(sum->grads, piece));
  if (ordered_ && ranks_.rank() > 0 && !incoming_.defined() && !sum->flats.empty()) {
    const torch::Tensor& any = sum->flats.front();
    incoming_ = torch::empty({incoming_bytes(piece_bytes_) / any.element_size()}, any.options());
  }
  started_[bucket] = 1;
  if (!worker_.joinable()) worker_ = std::thread([this] { work(); });
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(sum);
  }
  changed_.notify_all();
  in_flight_.push_back(std::move(sum));
  stats_.buckets += 1;
  stats_.bytes += b.bytes;
  stats_.stall_seconds += waited;
  return waited;
}

Seconds RankGradientSums::wait_for(int bucket) {
  Seconds waited = 0;
  const auto pending = [&] {
    return std::any_of(in_flight_.begin(), in_flight_.end(), [&](const auto& s) { return s->bucket == bucket; });
  };
  while (pending()) waited += land_oldest();
  stats_.stall_seconds += waited;
  return waited;
}

ReduceStats RankGradientSums::finish() {
  Seconds waited = 0;
  while (!in_flight_.empty()) waited += land_oldest();
  stats_.stall_seconds += waited;
  incoming_ = torch::Tensor();
  const ReduceStats out = stats_;
  stats_ = {};
  return out;
}

std::vector<int> RankGradientSums::settle_failed_attempt() {
  while (!in_flight_.empty()) land_oldest();
  stats_ = {};
  incoming_ = torch::Tensor();
  std::vector<int> stages;
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    const int above = k == 0 ? stages_ : buckets_[k - 1].first_stage;
    if (started_[k]) {
      for (int s = buckets_[k].first_stage; s < above; ++s) stages.push_back(s);
    }
  }
  return stages;
}

GradientReduction RankGradientSums::reduction() const {
  GradientReduction r;
  for (const Bucket& b : buckets_) r.buckets.push_back({b.first_stage, b.bytes, static_cast<int>(b.pieces.size())});
  r.reserve_bytes = reserve_;
  r.network = network_.model();
  return r;
}

Seconds RankGradientSums::land_oldest() {
  MEMTRAIN_ASSERT(!in_flight_.empty(), "a sum in flight to land");
  const std::shared_ptr<Sum> sum = in_flight_.front();
  const Clock::time_point t0 = Clock::now();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return sum->done; });
  }
  const Seconds waited = seconds_since(t0);
  in_flight_.pop_front();
  if (sum->error) std::rethrow_exception(sum->error);
  stats_.seconds += sum->seconds;
  network_.observe(buckets_[sum->bucket].bytes, static_cast<int>(sum->flats.size()), sum->seconds);
  // Its copies go now: compute waited for the sum, so memory is freed in schedule order.
  sum->flats.clear();
  sum->grads.clear();
  return waited;
}

void RankGradientSums::land_all() noexcept {
  while (!in_flight_.empty()) {
    try {
      land_oldest();
    } catch (...) {
      // Being torn down after a failure: the failure is already on its way.
    }
  }
}

void RankGradientSums::work() {
  while (true) {
    std::shared_ptr<Sum> sum;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      sum = queue_.front();
      queue_.pop_front();
    }
    run(*sum);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      sum->done = true;
    }
    changed_.notify_all();
  }
}

void RankGradientSums::run(Sum& sum) {
  const Bucket& b = buckets_[sum.bucket];
  const Clock::time_point t0 = Clock::now();
  try {
    // Every rank issues the pieces in the same order; the tags tell an
    // ordered sum's messages apart within the step.
    int tag = 0;
    for (int k = 0; k < sum.bucket; ++k) tag += static_cast<int>(buckets_[k].pieces.size());
    for (std::size_t p = 0; p < b.pieces.size(); ++p, ++tag) {
      if (ordered_) {
        ranks_.ordered_sum_bucket(sum.flats[p], incoming_, incoming_bytes(piece_bytes_) / sum.flats[p].element_size(),
                                  tag);
      } else {
        ranks_.sum_bucket(sum.flats[p]);
      }
      unflatten_bucket(sum.flats[p], sum.grads, b.pieces[p]);
    }
  } catch (...) {
    sum.error = std::current_exception();
  }
  sum.seconds = seconds_since(t0);
}

}  // namespace memtrain::runtime
