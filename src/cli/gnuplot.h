// Draws plots with Debian's gnuplot: the terminal follows the output file's
// extension (.svg or .png).
#pragma once

#include <string>
#include <vector>

namespace memtrain::cli {

// "set terminal ...; set output ..." for `path`; UsageError naming the path
// for an extension other than .svg or .png.
std::string gnuplot_terminal(const std::string& path);

// `s` as a gnuplot string literal.
std::string gnuplot_quote(const std::string& s);

// "plot ...\n" drawing one line per series of the CSV at `path`, whose
// first column names each row's series: `x` and `y` are gnuplot `using`
// expressions, drawn where `shown` holds. gnuplot breaks a line at every
// row it skips, so the CSV must hold each series' rows one after another.
std::string gnuplot_series_plot(const std::string& path, const std::vector<std::string>& series, const std::string& x,
                                const std::string& y, const std::string& shown);

// Runs gnuplot on `script`. Throws Error when gnuplot is not installed
// (naming the package) or exits with an error.
void run_gnuplot(const std::string& script);

}  // namespace memtrain::cli
