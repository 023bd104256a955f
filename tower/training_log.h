#pragma once
// What the Estimator shows and keeps while it trains: progress on stderr, and
// model_dir/metrics.csv with a loss curve (loss.png) drawn by gnuplot.

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "hooks.h"

namespace vkt {

/// What the progress line shows (see progress_line).
struct Progress {
  std::uint64_t step = 0;
  std::optional<std::uint64_t> last_step;  ///< unknown: no bar, no ETA
  double fraction = 0;                     ///< of the run's steps done, 0 to 1
  float loss = 0;
  double examples_per_s = 0;
  std::optional<double> eta_s;
};

/// The progress line for a terminal `columns` wide, never wider than
/// columns - 1 (a full line would wrap on some terminals): the bar shrinks
/// first (30 characters down to 5, then none), then the ETA goes, then the
/// rate, then the line is cut.
std::string progress_line(const Progress& progress, int columns);

/// The width of the terminal on stderr (TIOCGWINSZ), else COLUMNS, else 80.
int terminal_columns();

/// Progress is a bar redrawn in place when stderr is a terminal (steps, loss,
/// examples/s, ETA) and plain log lines (spdlog) otherwise, so a log file holds
/// no carriage returns. metrics.csv is long-form, appended across runs:
/// `step,phase,name,value` with phase "train" (loss, examples_per_s,
/// steps_per_s; loss_scale and skipped_steps under loss scaling) or "eval"
/// (loss and every metric); loss.png plots the train
/// and eval losses from it.
class TrainingLog {
 public:
  /// `progress` false: nothing on stderr but warnings; `plot` false: no loss.png.
  TrainingLog(std::string model_dir, bool progress, bool plot);
  ~TrainingLog();

  /// Drops the rows of metrics.csv past `global_step`: a run stopped between
  /// two checkpoints logged steps that its resumed run trains again, and the
  /// file (and loss.png) keeps one row per step and name, in step order.
  void forget_after(std::uint64_t global_step);
  /// A training run from `first_step` towards `last_step` (unknown: no ETA),
  /// the loss kept in metrics.csv every `summary_steps` (0: at the end only).
  void start(std::uint64_t first_step, std::optional<std::uint64_t> last_step,
             std::int64_t batch_size, std::uint64_t summary_steps);
  /// After every step: redraws the bar (at most ten times a second), and the
  /// loss row on summary steps.
  void step(std::uint64_t global_step, float loss);
  /// The logging hook's report: a log line unless the bar shows it, and the
  /// examples/s and steps/s rows of metrics.csv.
  void rate(const StepRate& rate);
  /// A loss-scaled run's scale and its count of skipped steps at
  /// `global_step` (read with each rate report and at the end): metrics.csv
  /// rows "loss_scale" and "skipped_steps" (once per step), and a log line
  /// when steps were skipped since the last report.
  void loss_scale(std::uint64_t global_step, double scale, double skipped_steps);
  /// The end of a training run: closes the bar, redraws loss.png.
  void finish(std::uint64_t global_step, float loss);
  /// An evaluation's results: a log line, metrics.csv rows, loss.png.
  void evaluated(std::uint64_t global_step, const std::map<std::string, double>& results);

  std::string metrics_path() const;
  std::string plot_path() const;
  /// Draws loss.png from metrics.csv when gnuplot is on the PATH; false when it
  /// is not (or fails: a warning says why).
  bool plot() const;

 private:
  void append(std::uint64_t step, const char* phase, const std::string& name, double value);
  void draw_bar(std::uint64_t global_step, float loss, bool final);

  std::string dir_;
  bool progress_;
  bool plot_;
  bool terminal_;
  std::uint64_t first_step_ = 0;
  std::optional<std::uint64_t> last_step_;
  std::int64_t batch_size_ = 0;
  std::uint64_t summary_steps_ = 0;
  std::chrono::steady_clock::time_point started_, last_draw_;
  bool bar_open_ = false;
  std::optional<std::uint64_t> last_loss_row_;
  double logged_skips_ = 0;  // skipped steps at the last loss_scale() report
  std::optional<std::uint64_t> last_scale_row_;
  bool write_failed_ = false;  // metrics.csv could not be written: warned once
};

}  // namespace vkt
