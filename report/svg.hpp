// Small self-contained SVG charts for the reports (Block::Kind::kSvg). Pure string builders:
// same input, same bytes. Coordinates carry 3 significant digits and every curve is reduced to
// at most max_points points, so a report with hundreds of runs stays small.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace detaudit {

// Escapes & < > " ' for SVG/XML text and attribute values.
std::string svg_escape(std::string_view s);
// A coordinate with 3 significant digits, trailing zeros stripped, "-0" written as "0".
std::string svg_number(double v);
// The colour of the k-th group (colour-blind-safe Okabe–Ito order, cycling).
const char* svg_group_colour(std::size_t k);
// A "#rrggbb" colour mixed with white: t = 1 the colour itself, t = 0 white.
std::string svg_tint(std::string_view hex_colour, double t);

// Layout estimates for sans-serif text (no font metrics in a string builder): the width of s in
// pixels at font_px, counted per UTF-8 code point; the longest prefix of s (with "…") that fits
// max_width; and s wrapped at spaces into at most max_lines lines of max_width (a word longer than a
// line is cut, and the last line ends with "…" when text is left over).
double svg_text_width(std::string_view s, double font_px = 11);
std::string svg_fit(std::string_view s, double max_width, double font_px = 11);
std::vector<std::string> svg_wrap(std::string_view s, double max_width, std::size_t max_lines, double font_px = 11);

struct LegendEntry {
  std::string colour, label;
};

struct PlotSeries {
  std::string group;            // colour and legend entry; series of one group share a colour
  std::vector<double> x, y;     // x empty → 1, 2, ..., y.size() (training steps)
};
// (Line plots: svg_faceted_line_plot below, one facet for a single plot. Non-finite points, and
// non-positive points on a log axis, are left out: the line breaks there. Each curve is reduced to
// max_points points.)

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

// One column per group: a box and every value as a point, jittered deterministically. Group labels
// are wrapped to their column's width (class "group-label"), so long labels never overlap.
std::string svg_strip_plot(const std::vector<GroupValues>& groups, const StripPlotOptions& opt = {});

// Small multiples of line plots on shared axes, one panel per facet (e.g. per condition), series
// coloured by group consistently across panels, one legend (class "legend") sized from its text.
struct Facet {
  std::string title;
  std::vector<PlotSeries> series;
};
struct FacetOptions {
  std::string title, x_label, y_label;
  bool log_x = false, log_y = false;
  bool whole_x = false;  // x ticks at whole numbers only (steps)
  std::size_t columns = 2;
  int panel_width = 330, panel_height = 210;
  std::size_t max_points = 300;
  double opacity = 0.7;
};
std::string svg_faceted_line_plot(const std::vector<Facet>& facets, const FacetOptions& opt = {});

// A grid of coloured cells (rows x columns), e.g. targets x workloads coloured by verdict.
struct HeatmapCell {
  std::size_t row = 0, col = 0;
  std::string fill;     // "#rrggbb"
  std::string text;     // drawn in the cell, short ("4/10"); may be empty
  std::string tooltip;  // the cell's <title>
};
struct HeatmapOptions {
  std::string title, note;                // note: one line under the colour legend
  std::vector<std::string> row_labels;    // left of each row, cut to max_label_width (full text as <title>)
  std::vector<std::string> col_labels;    // short column headers ("w1")
  std::vector<std::string> col_legend;    // lines under the grid saying what each header stands for
  std::vector<LegendEntry> legend;        // colour swatches above the grid
  int cell_width = 40, cell_height = 18;
  double max_label_width = 330;
};
std::string svg_heatmap(const std::vector<HeatmapCell>& cells, const HeatmapOptions& opt);

// Horizontal stacked bars: one bar per item, one segment per legend entry (values[i] for segments[i]).
struct StackedBar {
  std::string label;
  std::vector<double> values;
};
struct StackedBarOptions {
  std::string title, x_label;
  std::vector<LegendEntry> segments;
  int width = 760, bar_height = 14;
  double max_label_width = 330;
};
std::string svg_stacked_bars(const std::vector<StackedBar>& bars, const StackedBarOptions& opt);

// Small multiples of histograms over the same bins: bar height is log10(1 + count), so a few elements
// far out stay visible next to millions near zero. Ticks and the marker are at bin boundaries (0 is
// the left edge of bin 0).
struct HistogramPanel {
  std::string title, subtitle;  // each one line, cut to the panel's width (whole in the tooltip)
  std::vector<double> counts;
};
struct HistogramOptions {
  std::string title, x_label;
  std::vector<std::pair<double, std::string>> x_ticks;
  std::optional<double> marker;  // e.g. where the error reaches its bound
  std::string marker_label;
  std::size_t columns = 3;
  int panel_width = 250, panel_height = 150;
};
std::string svg_histograms(const std::vector<HistogramPanel>& panels, const HistogramOptions& opt);

}  // namespace detaudit
