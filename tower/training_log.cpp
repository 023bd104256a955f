#include "training_log.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "../runtime/io/atomic_file.h"
#include "../runtime/vulkan/detail/log.h"
#include "../runtime/vulkan/error.h"

namespace vkt {
namespace {

namespace fs = std::filesystem;

std::optional<fs::path> find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::string dirs = path;
  std::size_t begin = 0;
  while (begin <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', begin), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(begin, end - begin)) / program;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return std::nullopt;
}

// The inside of a gnuplot single-quoted string: a quote is written twice.
std::string quoted(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out;
}

std::string duration(double seconds) {
  const auto s = static_cast<long long>(seconds + 0.5);
  return s >= 3600 ? fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
                   : fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

TrainingLog::TrainingLog(std::string model_dir, bool progress, bool plot)
    : dir_(std::move(model_dir)),
      progress_(progress),
      plot_(plot),
      terminal_(isatty(STDERR_FILENO) == 1) {}

TrainingLog::~TrainingLog() {
  if (bar_open_) std::fputc('\n', stderr);
}

std::string TrainingLog::metrics_path() const {
  return (fs::path(dir_) / "metrics.csv").string();
}

std::string TrainingLog::plot_path() const {
  return (fs::path(dir_) / "loss.png").string();
}

void TrainingLog::forget_after(std::uint64_t global_step) {
  const std::string path = metrics_path();
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  std::size_t dropped = 0;
  for (bool header = true; std::getline(in, line); header = false) {
    std::uint64_t step = 0;
    const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), step);
    if (!header && ec == std::errc() && *end == ',' && step > global_step) {
      ++dropped;
      continue;
    }
    kept += line + "\n";
  }
  in.close();
  if (dropped == 0) return;
  // A crash leaves the old file or the new one, never a mix.
  write_file_atomically(path, kept);
  detail::log().info("metrics.csv: dropped {} rows past global step {}, where training resumes",
                     dropped, global_step);
}

void TrainingLog::start(std::uint64_t first_step, std::optional<std::uint64_t> last_step,
                        std::int64_t batch_size, std::uint64_t summary_steps) {
  first_step_ = first_step;
  last_step_ = last_step;
  batch_size_ = batch_size;
  summary_steps_ = summary_steps;
  last_loss_row_.reset();
  started_ = std::chrono::steady_clock::now();
  last_draw_ = {};
}

std::string progress_line(const Progress& p, int columns) {
  const std::size_t width = static_cast<std::size_t>(std::max(columns, 2) - 1);
  const std::string of = p.last_step ? fmt::format("/{}", *p.last_step) : "";
  const std::string core = fmt::format("step {}{} loss {:.4f}", p.step, of, p.loss);
  const std::string rate = fmt::format(" {:.0f} examples/s", p.examples_per_s);
  const std::string eta = p.eta_s ? fmt::format(" ETA {}", duration(*p.eta_s)) : "";
  const std::string text = core + rate + eta;
  if (p.last_step && text.size() + 8 <= width) {  // "[", 5 or more, "] "
    const std::size_t bar = std::min<std::size_t>(30, width - text.size() - 3);
    const auto filled =
        static_cast<std::size_t>(std::clamp(p.fraction, 0.0, 1.0) * static_cast<double>(bar));
    return fmt::format("[{}{}] {}", std::string(filled, '#'), std::string(bar - filled, '.'), text);
  }
  for (const std::string& shorter : {text, core + rate}) {
    if (shorter.size() <= width) return shorter;
  }
  return core.substr(0, width);
}

int terminal_columns() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS")) {
    int n = 0;
    const char* end = columns + std::strlen(columns);
    const auto [last, ec] = std::from_chars(columns, end, n);
    if (ec == std::errc() && last == end && n > 0) return n;
  }
  return 80;
}

void TrainingLog::draw_bar(std::uint64_t global_step, float loss, bool final) {
  const auto now = std::chrono::steady_clock::now();
  if (!final && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double seconds = std::chrono::duration<double>(now - started_).count();
  const double done = static_cast<double>(global_step - first_step_);
  const double steps_per_s = seconds > 0 ? done / seconds : 0.0;
  Progress p{.step = global_step,
             .last_step = last_step_,
             .loss = loss,
             .examples_per_s = steps_per_s * static_cast<double>(batch_size_),
             .eta_s = std::nullopt};
  if (last_step_ && *last_step_ > first_step_) {
    p.fraction = done / static_cast<double>(*last_step_ - first_step_);
    if (steps_per_s > 0 && *last_step_ >= global_step) {
      p.eta_s = static_cast<double>(*last_step_ - global_step) / steps_per_s;
    }
  }
  // The width is read at every redraw: the window may have been resized.
  fmt::print(stderr, "\r{}\x1b[K", progress_line(p, terminal_columns()));
  std::fflush(stderr);
  bar_open_ = true;
}

void TrainingLog::step(std::uint64_t global_step, float loss) {
  if (summary_steps_ > 0 && global_step % summary_steps_ == 0) {
    append(global_step, "train", "loss", loss);
    last_loss_row_ = global_step;
  }
  if (progress_ && terminal_) draw_bar(global_step, loss, false);
}

void TrainingLog::rate(const StepRate& rate) {
  append(rate.step, "train", "examples_per_s", rate.examples_per_s);
  append(rate.step, "train", "steps_per_s", rate.steps_per_s);
  if (progress_ && !terminal_) {
    detail::log().info("step {}: loss {:.6g}, {:.1f} examples/s, {:.2f} steps/s", rate.step,
                       rate.loss, rate.examples_per_s, rate.steps_per_s);
  }
}

void TrainingLog::loss_scale(std::uint64_t global_step, double scale, double skipped_steps) {
  if (last_scale_row_ == global_step) return;
  last_scale_row_ = global_step;
  append(global_step, "train", "loss_scale", scale);
  append(global_step, "train", "skipped_steps", skipped_steps);
  if (skipped_steps > logged_skips_) {
    detail::log().info(
        "step {}: loss scale {:.9g}; {:.9g} steps skipped so far (inf or NaN gradients: the scale "
        "halves each time)",
        global_step, scale, skipped_steps);
  }
  logged_skips_ = skipped_steps;
}

void TrainingLog::finish(std::uint64_t global_step, float loss) {
  // The curve ends at the last step even when it fell between two summaries.
  if (last_loss_row_ != global_step) append(global_step, "train", "loss", loss);
  last_loss_row_ = global_step;
  if (progress_ && terminal_) {
    draw_bar(global_step, loss, true);
    std::fputc('\n', stderr);
    bar_open_ = false;
  }
  if (plot_) plot();
}

void TrainingLog::evaluated(std::uint64_t global_step,
                            const std::map<std::string, double>& results) {
  std::string line;
  for (const auto& [name, value] : results) {
    if (name == "global_step") continue;
    append(global_step, "eval", name, value);
    line += fmt::format("{}{} {:.6g}", line.empty() ? "" : ", ", name, value);
  }
  if (progress_) detail::log().info("evaluation at step {}: {}", global_step, line);
  if (plot_) plot();
}

void TrainingLog::append(std::uint64_t step, const char* phase, const std::string& name,
                         double value) {
  const std::string path = metrics_path();
  const bool fresh = !fs::exists(path);
  std::ofstream out(path, std::ios::app);
  if (out) {
    if (fresh) out << "step,phase,name,value\n";
    out << fmt::format("{},{},{},{:.9g}\n", step, phase, name, value);
    out.flush();
  }
  // A full disk (the model directory was checked writable at the start): the
  // log is not the model's state, so training goes on, said once; the next
  // checkpoint save stops it if the disk stays full.
  if (!out && !write_failed_) {
    write_failed_ = true;
    detail::log().warn(
        "metrics.csv: writing '{}' failed (is the disk full?); its rows from step "
        "{} on may be missing",
        path, step);
  }
}

bool TrainingLog::plot() const {
  const std::optional<fs::path> gnuplot = find_on_path("gnuplot");
  if (!gnuplot || !fs::exists(metrics_path())) return false;
  // Each curve as a data block of its own: a curve read from the long-form file
  // would be broken into single points by the rows of other names between them.
  std::string train, eval;
  std::ifstream in(metrics_path());
  for (std::string line; std::getline(in, line);) {
    const std::size_t a = line.find(','), b = line.find(',', a + 1), c = line.find(',', b + 1);
    if (c == std::string::npos || line.compare(b + 1, c - b - 1, "loss") != 0) continue;
    const std::string phase = line.substr(a + 1, b - a - 1);
    const std::string point = line.substr(0, a) + " " + line.substr(c + 1) + "\n";
    if (phase == "train") train += point;
    if (phase == "eval") eval += point;
  }
  if (train.empty() && eval.empty()) return false;
  // Drawn beside the old picture and renamed over it: a viewer never sees half a file.
  const std::string partial = plot_path() + ".partial";
  std::string script = fmt::format(
      "$train << EOD\n{}EOD\n$eval << EOD\n{}EOD\n"
      "set terminal pngcairo size 960,540\n"
      "set output '{}'\n"
      "set title 'vktower training'\n"
      "set xlabel 'global step'\n"
      "set ylabel 'loss'\n"
      "set grid\n"
      "set key top right\n",
      train, eval, quoted(partial));
  std::vector<std::string> curves;
  if (!train.empty()) curves.emplace_back("$train using 1:2 with lines lw 2 title 'training loss'");
  if (!eval.empty()) {
    curves.emplace_back("$eval using 1:2 with linespoints pt 7 lw 2 title 'evaluation loss'");
  }
  script += fmt::format("plot {}\n", fmt::join(curves, ", "));
  FILE* pipe = popen(fmt::format("'{}' 2>/dev/null", gnuplot->string()).c_str(), "w");
  if (pipe == nullptr) return false;
  std::fputs(script.c_str(), pipe);
  const int status = pclose(pipe);
  std::error_code ec;
  if (status != 0 || !fs::exists(partial)) {
    detail::log().warn("gnuplot could not draw {} (exit status {})", plot_path(), status);
    fs::remove(partial, ec);
    return false;
  }
  fs::rename(partial, plot_path(), ec);
  return !ec;
}

}  // namespace vkt
