#include "cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <string>

namespace memtrain::cli {

ProgressBar::ProgressBar(std::FILE* out, std::int64_t total_steps)
    : out_(out), total_(total_steps), terminal_(::isatty(::fileno(out)) == 1) {}

void ProgressBar::update(const runtime::StepRecord& r) {
  const bool last = r.step == total_;
  const std::int64_t every = total_ >= 10 ? total_ / 10 : 1;
  if (!terminal_ && !last && r.step % every != 0 && r.step != 1) return;
  constexpr int kWidth = 20;
  const int filled =
      total_ > 0 ? static_cast<int>(std::clamp<std::int64_t>(kWidth * r.step / total_, 0, kWidth)) : kWidth;
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '-');
  const std::string predicted = r.predicted_peak_bytes >= 0 ? format_bytes(r.predicted_peak_bytes) : "-";
  std::fprintf(
      out_, "%sstep %lld/%lld [%s] loss %.3f acc %5.1f%% size %-8s plan %-7s peak %s (pred %s) / budget %s%s %.2fs%s",
      terminal_ ? "\r\033[K" : "", static_cast<long long>(r.step), static_cast<long long>(total_), bar.c_str(), r.loss,
      100.0 * r.accuracy, r.signature.describe().c_str(), runtime::plan_kind_name(r.plan),
      format_bytes(r.peak_bytes).c_str(), predicted.c_str(), format_bytes(r.budget_bytes).c_str(),
      r.violation ? " OVER" : "", r.seconds, terminal_ ? "" : "\n");
  std::fflush(out_);
  drawn_ = true;
}

void ProgressBar::finish() {
  if (terminal_ && drawn_) std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace memtrain::cli
