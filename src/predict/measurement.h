// One profiling measurement — a method run at one batch size — and the CSV
// format `memtrain profile` writes and `memtrain advise --from-csv` reads:
//
//   method,batch,peak_bytes,step_seconds
//   none,16,73400320,0.412
//
// A header line naming those four columns (in any order; further columns are
// ignored), then one row per measurement. Method names are free text without
// commas.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "core/units.h"

namespace memtrain::predict {

struct Measurement {
  std::string method;
  std::int64_t batch = 0;    // examples per step, >= 1
  Bytes peak_bytes = 0;      // peak device memory of a step, > 0
  Seconds step_seconds = 0;  // median step time, > 0
};

// Throws DataError naming `source`, the line and the column for anything
// that does not parse or is out of range.
std::vector<Measurement> read_measurements_csv(std::istream& in, const std::string& source);
std::vector<Measurement> read_measurements_csv_file(const std::string& path);

void write_measurements_csv(std::ostream& out, const std::vector<Measurement>& rows);

// The methods in order of first appearance.
std::vector<std::string> method_names(const std::vector<Measurement>& rows);
std::vector<Measurement> rows_of(const std::vector<Measurement>& rows, const std::string& method);

}  // namespace memtrain::predict
