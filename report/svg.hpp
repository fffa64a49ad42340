// Small self-contained SVG charts for the reports (Block::Kind::kSvg). Pure string builders:
// same input, same bytes. Coordinates carry 3 significant digits and every curve is reduced to
// at most max_points points, so a report with hundreds of runs stays small.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace detaudit {

// Escapes & < > " ' for SVG/XML text and attribute values.
std::string svg_escape(std::string_view s);
// A coordinate with 3 significant digits, trailing zeros stripped, "-0" written as "0".
std::string svg_number(double v);
// The colour of the k-th group (colour-blind-safe Okabe–Ito order, cycling).
const char* svg_group_colour(std::size_t k);

struct PlotSeries {
  std::string group;            // colour and legend entry; series of one group share a colour
  std::vector<double> x, y;     // x empty → 1, 2, ..., y.size() (training steps)
};

struct LinePlotOptions {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  int width = 720, height = 400;
  std::size_t max_points = 500;  // per series, after downsampling
  double opacity = 0.6;          // many overlapping runs stay readable
};

// Non-finite points, and non-positive points on a log axis, are left out (the line breaks there).
std::string svg_line_plot(const std::vector<PlotSeries>& series, const LinePlotOptions& opt = {});

struct BarItem {
  std::string label;
  double value = 0.0;
  std::optional<double> lo, hi;  // error bar (e.g. bootstrap CI)
};

struct BarChartOptions {
  std::string title, x_label;
  std::optional<double> x_max;  // default: a nice value ≥ every value and hi
  int width = 640;
  int bar_height = 22;
};

// Horizontal bars from 0 (or from the smallest negative value) with optional error bars.
std::string svg_bar_chart(const std::vector<BarItem>& bars, const BarChartOptions& opt = {});

struct GroupValues {
  std::string label;
  std::vector<double> values;
};

struct StripPlotOptions {
  std::string title, y_label;
  bool log_y = false;
  bool box = true;  // Tukey box: quartiles, median, whiskers to the furthest point within 1.5 IQR
  int width = 640, height = 400;
};

// One column per group: a box and every value as a point, jittered deterministically.
std::string svg_strip_plot(const std::vector<GroupValues>& groups, const StripPlotOptions& opt = {});

}  // namespace detaudit
