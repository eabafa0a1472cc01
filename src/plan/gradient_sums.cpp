#include "plan/gradient_sums.h"

#include <map>

#include "core/error.h"

namespace memtrain::plan {

Schedule with_gradient_sums(const Schedule& schedule, const std::vector<int>& first_stages) {
  // The last backward of each stage (over all micro-batches).
  std::map<int, std::size_t> last_backward;
  for (std::size_t k = 0; k < schedule.ops.size(); ++k) {
    if (schedule.ops[k].kind == OpKind::Backward) last_backward[schedule.ops[k].stage] = k;
  }
  std::map<std::size_t, int> sum_after;  // op index -> bucket first stage summed right after it
  for (int first : first_stages) {
    const auto found = last_backward.find(first);
    if (found == last_backward.end()) {
      throw Error("gradient sums: the schedule never runs the backward of stage " + std::to_string(first) +
                  ", whose gradients a bucket sums; expected a schedule that runs every backward");
    }
    sum_after[found->second] = first;
  }
  Schedule out;
  out.ops.reserve(schedule.ops.size() + first_stages.size());
  for (std::size_t k = 0; k < schedule.ops.size(); ++k) {
    out.ops.push_back(schedule.ops[k]);
    if (const auto s = sum_after.find(k); s != sum_after.end()) out.all_reduce(s->second);
  }
  return out;
}

Schedule with_gradient_sums_at_end(const Schedule& schedule, const std::vector<int>& first_stages) {
  Schedule out = schedule;
  for (int first : first_stages) out.all_reduce(first);
  return out;
}

}  // namespace memtrain::plan
