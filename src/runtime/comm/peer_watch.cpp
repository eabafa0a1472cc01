#include "runtime/comm/peer_watch.h"

#include <optional>
#include <thread>
#include <vector>

namespace memtrain::runtime {

namespace {

std::string alive_key(int rank) { return "memtrain/alive/" + std::to_string(rank); }
std::string progress_key(int rank) { return "memtrain/at/" + std::to_string(rank); }
std::string failed_key(int rank) { return "memtrain/failed/" + std::to_string(rank); }
// What a rank's diagnosis found: "BLAMED\nCAUSE" (BLAMED -1: no one).
std::string verdict_key(int rank) { return "memtrain/verdict/" + std::to_string(rank); }

}  // namespace

void PeerWatch::arrive(PeerBoard& board) const { board.write(alive_key(rank_), "0"); }

void PeerWatch::beat(PeerBoard& board, std::int64_t progress) const {
  board.add(alive_key(rank_), 1);
  board.write(progress_key(rank_), std::to_string(progress));
}

void PeerWatch::give_up(PeerBoard& board, const std::string& why) const { board.write(failed_key(rank_), why); }

std::string PeerWatch::reason_of(PeerBoard& board, int rank) {
  return board.has(failed_key(rank)) ? board.read(failed_key(rank)) : "";
}

bool PeerWatch::others_accounted_for(PeerBoard& board) const {
  for (int r = 0; r < world_; ++r) {
    if (r == rank_ || r == blamed_) continue;
    if (!board.has(failed_key(r)) && !board.has(verdict_key(r))) return false;
  }
  return true;
}

RankFailure PeerWatch::blame(PeerBoard& board, const std::string& failed, const std::string& transport,
                             std::int64_t progress, Seconds timeout) {
  // Blames rank r for `cause` and tells the others, whose own diagnosis may
  // come too late to see it (a dead rank's heartbeat goes stale for all).
  const auto blame_for = [&](int r, const std::string& cause) {
    blamed_ = r;
    board.write(verdict_key(rank_), std::to_string(r) + "\n" + cause);
    return RankFailure(r, failed + ": " + cause);
  };
  const auto reported = [&]() -> std::optional<RankFailure> {
    for (int r = 0; r < world_; ++r) {
      if (r != rank_ && board.has(failed_key(r))) {
        blamed_ = r;
        board.write(verdict_key(rank_), std::to_string(r) + "\nrank " + std::to_string(r) + " gave up");
        return RankFailure(r, failed + " because rank " + std::to_string(r) + " gave up: " + board.read(failed_key(r)));
      }
    }
    // Another rank's finding, unless it blames no one.
    for (int q = 0; q < world_; ++q) {
      if (q == rank_ || !board.has(verdict_key(q))) continue;
      const std::string v = board.read(verdict_key(q));
      const auto newline = v.find('\n');
      const int r = std::stoi(v.substr(0, newline));
      const std::string cause = v.substr(newline + 1);
      if (r < 0) continue;
      if (r == rank_) return blame_for(r, "rank " + std::to_string(q) + " found this rank at fault: " + cause);
      return blame_for(r, cause + " (as rank " + std::to_string(q) + " found)");
    }
    return std::nullopt;
  };
  if (auto f = reported()) return *f;
  for (int r = 0; r < world_; ++r) {
    if (r != rank_ && !board.has(alive_key(r)))
      return blame_for(
          r, "rank " + std::to_string(r) + " never arrived (it did not start, or died before reaching the store)");
  }
  // Read, never created: another rank diagnosing at once must still see who never arrived.
  const auto beats = [&](int r) -> std::int64_t {
    return board.has(alive_key(r)) ? std::stoll(board.read(alive_key(r))) : -1;
  };
  std::vector<std::int64_t> before(world_);
  for (int r = 0; r < world_; ++r) before[r] = r == rank_ ? 0 : beats(r);
  std::this_thread::sleep_for(kStaleAfter);
  if (auto f = reported()) return *f;
  for (int r = 0; r < world_; ++r) {
    if (r != rank_ && beats(r) == before[r]) {
      return blame_for(r, "rank " + std::to_string(r) + " died or stopped (no heartbeat for " +
                              format_number("%.1f", kStaleAfter.count() / 1000.0) + " s; transport: " + transport +
                              ")");
    }
  }
  for (int r = 0; r < world_; ++r) {
    if (r == rank_ || !board.has(progress_key(r))) continue;
    const std::int64_t theirs = std::stoll(board.read(progress_key(r)));
    if (theirs < progress) {
      return blame_for(r, "rank " + std::to_string(r) + " is alive but did not reach it within the timeout (" +
                              format_number("%g", timeout) + " s; it is at " + progress_ + " " +
                              std::to_string(theirs) + ", this rank at " + std::to_string(progress) +
                              "); transport: " + transport);
    }
  }
  board.write(verdict_key(rank_), "-1\nno one");
  return RankFailure(-1, failed + "; every other rank is alive and as far along (transport: " + transport + ")");
}

}  // namespace memtrain::runtime
