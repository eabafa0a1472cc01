#include "cli/gnuplot.h"

#include <sys/wait.h>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace memtrain::cli {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

// gnuplot's single-quoted strings end at a quote; double any inside.
std::string gnuplot_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string gnuplot_terminal(const std::string& path) {
  std::string terminal;
  if (ends_with(path, ".svg"))
    terminal = "svg size 900,560 dynamic background rgb 'white'";
  else if (ends_with(path, ".png"))
    terminal = "pngcairo size 900,560";
  else
    throw UsageError("plot file '" + path + "': expected a name ending in .svg or .png");
  return "set terminal " + terminal + "\nset output " + gnuplot_quote(path) + "\n";
}

std::string gnuplot_series_plot(const std::string& path, const std::vector<std::string>& series, const std::string& x,
                                const std::string& y, const std::string& shown) {
  std::string plot = "plot ";
  for (size_t k = 0; k < series.size(); ++k) {
    plot += (k ? ", " : "") + gnuplot_quote(path) + " using (" + x + "):(strcol(1) eq " + gnuplot_quote(series[k]) +
            " && " + shown + " ? " + y + " : 1/0) with linespoints title " + gnuplot_quote(series[k]);
  }
  return plot + "\n";
}

void run_gnuplot(const std::string& script) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    throw Error("gnuplot is not installed; scripts/install-deps.sh installs it (Debian package gnuplot-nox)");
  }
  FILE* pipe = popen("gnuplot", "w");
  if (!pipe) throw Error("cannot start gnuplot");
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);
  if (status != 0) {
    throw Error("gnuplot failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                "); its message is above");
  }
}

}  // namespace memtrain::cli
