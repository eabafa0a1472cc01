#include "predict/measurement.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <istream>
#include <iterator>
#include <ostream>
#include <sstream>

#include "core/error.h"

namespace memtrain::predict {

namespace {

const char* const kColumns[] = {"method", "batch", "peak_bytes", "step_seconds"};

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::istringstream in(line);
  while (std::getline(in, cell, ',')) cells.push_back(trim(cell));
  if (!line.empty() && line.back() == ',') cells.push_back("");
  return cells;
}

double number(const std::string& cell, const std::string& where) {
  if (cell.empty()) throw DataError(where + " is empty; expected a number");
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(cell.c_str(), &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(v)) {
    throw DataError(where + " is '" + cell + "'; expected a number");
  }
  return v;
}

}  // namespace

std::vector<Measurement> read_measurements_csv(std::istream& in, const std::string& source) {
  std::string line;
  long line_no = 0;
  // The header: where each needed column is.
  int at[4] = {-1, -1, -1, -1};
  size_t width = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::vector<std::string> header = split(line);
    width = header.size();
    for (int c = 0; c < 4; ++c) {
      const auto it = std::find(header.begin(), header.end(), kColumns[c]);
      if (it == header.end()) {
        throw DataError(source + ": line " + std::to_string(line_no) + ": the header has no column '" + kColumns[c] +
                        "'; expected a header with method,batch,peak_bytes,step_seconds");
      }
      at[c] = static_cast<int>(it - header.begin());
    }
    break;
  }
  if (at[0] < 0) throw DataError(source + ": no header; expected a first line method,batch,peak_bytes,step_seconds");

  std::vector<Measurement> rows;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::vector<std::string> cells = split(line);
    const std::string where = source + ": line " + std::to_string(line_no);
    if (cells.size() != width) {
      throw DataError(where + " has " + std::to_string(cells.size()) + " columns; the header has " +
                      std::to_string(width));
    }
    Measurement m;
    m.method = cells[at[0]];
    if (m.method.empty()) throw DataError(where + ": column method is empty; expected a method name");
    const double batch = number(cells[at[1]], where + ": column batch");
    if (batch < 1 || batch != std::floor(batch) || batch > 1e12) {
      throw DataError(where + ": column batch is '" + cells[at[1]] + "'; expected a whole number >= 1");
    }
    m.batch = static_cast<std::int64_t>(batch);
    const double peak = number(cells[at[2]], where + ": column peak_bytes");
    if (!(peak > 0) || peak > 9e18) {
      throw DataError(where + ": column peak_bytes is '" + cells[at[2]] + "'; expected bytes > 0");
    }
    m.peak_bytes = static_cast<Bytes>(std::llround(peak));
    m.step_seconds = number(cells[at[3]], where + ": column step_seconds");
    if (!(m.step_seconds > 0)) {
      throw DataError(where + ": column step_seconds is '" + cells[at[3]] + "'; expected seconds > 0");
    }
    rows.push_back(m);
  }
  if (rows.empty()) throw DataError(source + ": no measurements after the header");
  return rows;
}

std::vector<Measurement> read_measurements_csv_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError("cannot read measurements file '" + path + "'");
  return read_measurements_csv(in, path);
}

void write_measurements_csv(std::ostream& out, const std::vector<Measurement>& rows) {
  out << "method,batch,peak_bytes,step_seconds\n";
  char seconds[64];
  for (const Measurement& m : rows) {
    if (m.method.empty() || m.method.find_first_of(",\n") != std::string::npos) {
      throw Error("measurement method '" + m.method +
                  "' cannot be written as CSV; expected a non-empty name without commas");
    }
    std::snprintf(seconds, sizeof seconds, "%.9g", m.step_seconds);
    out << m.method << ',' << m.batch << ',' << m.peak_bytes << ',' << seconds << '\n';
  }
}

std::vector<std::string> method_names(const std::vector<Measurement>& rows) {
  std::vector<std::string> names;
  for (const Measurement& m : rows) {
    if (std::find(names.begin(), names.end(), m.method) == names.end()) names.push_back(m.method);
  }
  return names;
}

std::vector<Measurement> rows_of(const std::vector<Measurement>& rows, const std::string& method) {
  std::vector<Measurement> out;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(out),
               [&](const Measurement& m) { return m.method == method; });
  return out;
}

}  // namespace memtrain::predict
