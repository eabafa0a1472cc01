// Draws plots with Debian's gnuplot: the terminal follows the output file's
// extension (.svg or .png).
#pragma once

#include <string>

namespace memtrain::cli {

// "set terminal ...; set output ..." for `path`; UsageError naming the path
// for an extension other than .svg or .png.
std::string gnuplot_terminal(const std::string& path);

// `s` as a gnuplot string literal.
std::string gnuplot_quote(const std::string& s);

// Runs gnuplot on `script`. Throws Error when gnuplot is not installed
// (naming the package) or exits with an error.
void run_gnuplot(const std::string& script);

}  // namespace memtrain::cli
