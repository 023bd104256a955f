#pragma once
// Strict checks of the samples' numeric flags. CLI11 2.1 converts with
// strtoull/strtod semantics: "-1" becomes 2^64-1, 1e30 saturates, "" is 0,
// "nan" passes PositiveNumber and Range. These look at the text first, and
// describe the values in --help as a person would: "INT >= 1", "FLOAT in 0..1".

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

/// A whole decimal number in [lo, hi], digits only. Help: "INT in 1..64".
inline CLI::Validator whole_number(std::uint64_t lo, std::uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* last = text.data() + text.size();
        const auto [end, ec] = std::from_chars(text.data(), last, v);
        if (text.empty() || ec != std::errc() || end != last || v < lo || v > hi) {
          return fmt::format("'{}' is not a whole number from {} to {}", text, lo, hi);
        }
        return {};
      },
      fmt::format("INT in {}..{}", lo, hi));
}

/// A whole decimal number of `lo` or more, digits only, that T holds (its
/// largest value is no limit a user means). Help: "INT >= 1".
template <class T>
CLI::Validator whole_number_from(std::uint64_t lo) {
  static_assert(std::is_integral_v<T>);
  const auto hi = static_cast<std::uint64_t>(std::numeric_limits<T>::max());
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* last = text.data() + text.size();
        const auto [end, ec] = std::from_chars(text.data(), last, v);
        if (text.empty() || end != last || (ec == std::errc() && v < lo)) {
          return fmt::format("'{}' is not a whole number of {} or more", text, lo);
        }
        if (ec != std::errc() || v > hi) {
          return fmt::format("'{}' is too large (the largest is {})", text, hi);
        }
        return {};
      },
      fmt::format("INT >= {}", lo));
}

/// The finite number in `text`, or NaN when there is none (nothing else after it).
inline double finite_number(const std::string& text) {
  double v = 0;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(text.data(), last, v);
  return text.empty() || ec != std::errc() || end != last || !std::isfinite(v) ? NAN : v;
}

/// A finite number above 0 (a learning rate).
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return finite_number(text) > 0 ? std::string()
                                       : fmt::format("'{}' is not a finite number above 0", text);
      },
      "FLOAT > 0");
}

/// A finite number in [lo, hi]. Help: "FLOAT in 0..1".
inline CLI::Validator real_number(double lo, double hi) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const double v = finite_number(text);
        return v >= lo && v <= hi ? std::string()
                                  : fmt::format("'{}' is not a number from {} to {}", text, lo, hi);
      },
      fmt::format("FLOAT in {}..{}", lo, hi));
}

/// The --accumulate flag (RunConfig::accumulate_steps), also for a sample
/// without the shared flags.
inline void add_accumulate_flag(CLI::App& app, int& accumulate) {
  app.add_option("--accumulate", accumulate,
                 "micro-batches per step (gradient accumulation): each step sums the gradients "
                 "of K batches and applies them once, as one batch K times as large")
      ->capture_default_str()
      ->check(whole_number_from<int>(1));
}

/// --help with each value's kind as its validator says it, "(default 400)"
/// after it: "--steps INT >= 1 (default 400)" where CLI11 writes
/// "--steps UINT:INT >= 1=400". parse_flags (sample_errors.h) installs it.
class SampleHelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_opts(const CLI::Option* opt) const override {
    if (opt->get_type_size() == 0 || !opt->get_option_text().empty()) {
      return CLI::Formatter::make_option_opts(opt);
    }
    // CLI11's type name, then ":" and each validator's description: a
    // validator that describes the value replaces the type name.
    std::string kind = opt->get_type_name();
    if (const std::size_t colon = kind.find(':'); colon != std::string::npos) {
      kind.erase(0, colon + 1);
    }
    std::string out = kind.empty() ? std::string() : " " + get_label(kind);
    if (opt->get_expected_max() == CLI::detail::expected_max_vector_size) {
      out += " ...";
    } else if (opt->get_expected_min() > 1) {
      out += fmt::format(" x {}", opt->get_expected());
    }
    std::string value = opt->get_default_str();
    if (value.size() >= 2 && value.front() == '[' && value.back() == ']') {
      value = value.substr(1, value.size() - 2);  // a list, as it is typed: 16,32
    }
    if (!value.empty()) out += fmt::format(" (default {})", value);
    if (opt->get_required()) out += " " + get_label("REQUIRED");
    if (!opt->get_envname().empty())
      out += fmt::format(" ({}:{})", get_label("Env"), opt->get_envname());
    if (!opt->get_needs().empty()) {
      out += " " + get_label("Needs") + ":";
      for (const CLI::Option* other : opt->get_needs()) out += " " + other->get_name();
    }
    if (!opt->get_excludes().empty()) {
      out += " " + get_label("Excludes") + ":";
      for (const CLI::Option* other : opt->get_excludes()) out += " " + other->get_name();
    }
    return out;
  }
};
