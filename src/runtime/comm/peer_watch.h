// How a rank tells a dead or stuck peer from a live one. Every rank writes a
// heartbeat and its progress on a board every rank reaches (a c10d store's
// keys), and says why before it gives up. A rank whose collective failed
// reads the board to name the rank to blame, and writes what it found, so
// the others blame the same rank. memtrain's own ranks (RankGroup) and the
// Python module's ranks under FSDP2 (on torch.distributed's store) both
// watch their peers through it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/units.h"

namespace memtrain::runtime {

// A peer failed: which one, and how it was seen.
class RankFailure : public Error {
 public:
  RankFailure(int blamed_rank, const std::string& what) : Error(what), blamed_rank_(blamed_rank) {}
  int blamed_rank() const { return blamed_rank_; }  // -1: could not tell

 private:
  int blamed_rank_;
};

// Keys and values every rank reads and writes; what the board cannot reach
// (its store died) it throws.
class PeerBoard {
 public:
  virtual ~PeerBoard() = default;
  virtual bool has(const std::string& key) = 0;
  virtual std::string read(const std::string& key) = 0;
  virtual void write(const std::string& key, const std::string& value) = 0;
  virtual void add(const std::string& key, std::int64_t amount) = 0;
};

class PeerWatch {
 public:
  // How often a rank beats; how long a peer's heartbeat may stand still
  // before it counts as gone (several periods, so a busy machine does not
  // blame a live rank).
  static constexpr std::chrono::milliseconds kBeatPeriod{200};
  static constexpr std::chrono::milliseconds kStaleAfter{2000};

  // `progress`: what beat()'s progress counts, for the messages (a
  // "collective", or memtrain's "block call" where others issue the collectives).
  PeerWatch(int rank, int world, std::string progress = "collective")
      : rank_(rank), world_(world), progress_(std::move(progress)) {}

  // The first heartbeat, before this rank meets the others.
  void arrive(PeerBoard& board) const;
  // One heartbeat, with how many collectives this rank has begun.
  void beat(PeerBoard& board, std::int64_t progress) const;
  // This rank gives up, and why: the others' failures name it.
  void give_up(PeerBoard& board, const std::string& why) const;
  // What rank `rank` said when it gave up, or "".
  static std::string reason_of(PeerBoard& board, int rank);

  // A collective this rank is in failed (`failed`: "rank R of W: X failed";
  // `transport`: the transport's first line): the rank to blame, from a
  // rank that gave up, another's finding, a rank that never arrived, a
  // heartbeat that stood still, or a rank behind this one's `progress`
  // (`timeout`: how long collectives wait, for the message). Blames no one
  // (-1) when every other rank is alive and as far along. Waits kStaleAfter
  // to see heartbeats stand still.
  RankFailure blame(PeerBoard& board, const std::string& failed, const std::string& transport, std::int64_t progress,
                    Seconds timeout);
  int blamed() const { return blamed_; }  // what blame() found; -1 before
  // Whether every other rank but the blamed one has given up or found whom to blame.
  bool others_accounted_for(PeerBoard& board) const;

 private:
  int rank_, world_;
  std::string progress_;
  int blamed_ = -1;
};

}  // namespace memtrain::runtime
