#include "report/svg.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

#include "analysis/stats.hpp"

namespace detaudit {
namespace {

constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#999999"};
// Average advance of a sans-serif glyph as a fraction of the font size, for layout only (a little
// wide on purpose: estimated text that fits leaves a margin for real fonts).
constexpr double kGlyphEm = 0.64;

std::string fixed(double v, int decimals) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, decimals);
  std::string s(buf, res.ptr);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

// Tick labels: nice numbers, shortest general form ("0.0074", "1000", "1e+06").
std::string tick_label(double v) {
  if (std::fabs(v) < 1e-300) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 6);
  return std::string(buf, res.ptr);
}

std::string value_label(double v) {
  if (!std::isfinite(v)) return "n/a";
  if (v == 0.0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 3);
  return std::string(buf, res.ptr);
}

struct Axis {
  double lo = 0.0, hi = 1.0;  // data domain
  bool log = false;
  bool whole = false;         // ticks only at whole numbers (training steps)
  double p0 = 0.0, p1 = 1.0;  // pixel range (p1 < p0 for a y axis)
  double map(double v) const {
    const double t = log ? (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo))
                         : (v - lo) / (hi - lo);
    return p0 + t * (p1 - p0);
  }
  bool usable(double v) const { return std::isfinite(v) && (!log || v > 0.0); }
};

// Fix a degenerate domain and add a relative margin (in log space for log axes).
void finish_domain(Axis& ax, bool have_data, double pad) {
  if (!have_data) {
    ax.lo = ax.log ? 1.0 : 0.0;
    ax.hi = ax.log ? 10.0 : 1.0;
    return;
  }
  if (ax.log) {
    double l0 = std::log10(ax.lo), l1 = std::log10(ax.hi);
    if (l1 - l0 < 1e-12) {
      l0 -= 0.5;
      l1 += 0.5;
    }
    const double d = (l1 - l0) * pad;
    ax.lo = std::pow(10.0, l0 - d);
    ax.hi = std::pow(10.0, l1 + d);
  } else {
    if (ax.hi - ax.lo <= 1e-300 * std::max(1.0, std::fabs(ax.lo))) {
      const double w = ax.lo == 0.0 ? 1.0 : 0.1 * std::fabs(ax.lo);
      ax.lo -= w;
      ax.hi += w;
    }
    const double d = (ax.hi - ax.lo) * pad;
    ax.lo -= d;
    ax.hi += d;
  }
}

std::vector<double> linear_ticks(double lo, double hi, int target = 6) {
  const double raw = (hi - lo) / target;
  if (!(raw > 0.0) || !std::isfinite(raw)) return {lo};
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = 10.0 * mag;
  for (double m : {1.0, 2.0, 5.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  std::vector<double> t;
  const auto k0 = static_cast<long long>(std::ceil(lo / step - 1e-9));
  const auto k1 = static_cast<long long>(std::floor(hi / step + 1e-9));
  for (long long k = k0; k <= k1; ++k) t.push_back(static_cast<double>(k) * step);
  return t;
}

std::vector<double> ticks(const Axis& ax) {
  if (!ax.log && ax.whole) {
    // Whole numbers only: a step below 1 would label steps that do not exist ("2.5").
    std::vector<double> t;
    for (double v : linear_ticks(ax.lo, ax.hi))
      if (v == std::round(v)) t.push_back(v);
    if (t.size() < 2)
      for (double v = std::ceil(ax.lo); v <= ax.hi; v += 1.0) t.push_back(v);
    return t;
  }
  if (!ax.log) return linear_ticks(ax.lo, ax.hi);
  const int d0 = static_cast<int>(std::ceil(std::log10(ax.lo) - 1e-9));
  const int d1 = static_cast<int>(std::floor(std::log10(ax.hi) + 1e-9));
  std::vector<double> t;
  if (d1 - d0 >= 3) {
    const int stride = (d1 - d0) / 8 + 1;
    for (int d = d0; d <= d1; d += stride) t.push_back(std::pow(10.0, d));
    return t;
  }
  if (d1 >= d0) {  // fewer than 4 decade ticks: add 2× and 5× ticks
    for (int d = d0 - 1; d <= d1; ++d)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, d);
        if (v >= ax.lo && v <= ax.hi) t.push_back(v);
      }
    if (t.size() >= 3) return t;  // else less than a decade: plain ticks read better
  }
  return linear_ticks(ax.lo, ax.hi, 4);
}

class Writer {
 public:
  Writer(int w, int h, const std::string& title) {
    s_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(w) + "\" height=\"" +
          std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " + std::to_string(h) +
          "\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">";
    s_ += "<title>" + svg_escape(title) + "</title>";
    s_ += "<rect width=\"" + std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" fill=\"#fff\"/>";
    if (!title.empty())
      fitted_text(w / 2.0, 18, title, w - 8.0, "middle", " font-size=\"13\" font-weight=\"bold\"", 13);
  }
  void raw(const std::string& s) { s_ += s; }
  void line(double x1, double y1, double x2, double y2, const std::string& extra = "") {
    s_ += "<line x1=\"" + svg_number(x1) + "\" y1=\"" + svg_number(y1) + "\" x2=\"" + svg_number(x2) +
          "\" y2=\"" + svg_number(y2) + "\"" + extra + "/>";
  }
  void text(double x, double y, const std::string& t, const char* anchor, const std::string& extra = "") {
    s_ += "<text x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" text-anchor=\"" + anchor + "\"" +
          extra + ">" + svg_escape(t) + "</text>";
  }
  void rect(double x, double y, double w, double h, const std::string& extra) {
    s_ += "<rect x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" width=\"" + svg_number(w) +
          "\" height=\"" + svg_number(h) + "\"" + extra + "/>";
  }
  // Lines of text, one <tspan> each, the first at y and each next line_h below.
  void text_lines(double x, double y, const std::vector<std::string>& lines, const char* anchor,
                  const std::string& extra = "", double line_h = 13) {
    s_ += "<text x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">";
    for (std::size_t i = 0; i < lines.size(); ++i)
      s_ += "<tspan x=\"" + svg_number(x) + "\" dy=\"" + (i == 0 ? std::string("0") : svg_number(line_h)) + "\">" +
            svg_escape(lines[i]) + "</tspan>";
    s_ += "</text>";
  }
  // Text cut to max_width; when it was cut, the whole text is its tooltip.
  void fitted_text(double x, double y, const std::string& t, double max_width, const char* anchor,
                   const std::string& extra = "", double font_px = 11) {
    const std::string shown = svg_fit(t, max_width, font_px);
    s_ += "<text x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" text-anchor=\"" + anchor + "\"" + extra + ">";
    if (shown != t) s_ += "<title>" + svg_escape(t) + "</title>";
    s_ += svg_escape(shown) + "</text>";
  }
  void circle(double x, double y, double r) {
    s_ += "<circle cx=\"" + svg_number(x) + "\" cy=\"" + svg_number(y) + "\" r=\"" + svg_number(r) + "\"/>";
  }
  std::string finish() {
    s_ += "</svg>";
    return std::move(s_);
  }

 private:
  std::string s_;
};

// Frame, grid ticks and axis labels for a plot area.
void draw_x_axis(Writer& w, const Axis& ax, double y_bottom, double y_top, const std::string& label,
                 double label_y) {
  w.raw("<g stroke=\"#ddd\">");
  const auto ts = ticks(ax);
  for (double t : ts) w.line(ax.map(t), y_top, ax.map(t), y_bottom);
  w.raw("</g><g fill=\"#333\">");
  for (double t : ts) w.text(ax.map(t), y_bottom + 14, tick_label(t), "middle");
  if (!label.empty()) w.text((ax.p0 + ax.p1) / 2, label_y, label, "middle");
  w.raw("</g>");
}

void draw_y_axis(Writer& w, const Axis& ay, double x_left, double x_right, const std::string& label) {
  w.raw("<g stroke=\"#ddd\">");
  const auto ts = ticks(ay);
  for (double t : ts) w.line(x_left, ay.map(t), x_right, ay.map(t));
  w.raw("</g><g fill=\"#333\">");
  for (double t : ts) w.text(x_left - 5, ay.map(t), tick_label(t), "end", " dy=\"0.32em\"");
  if (!label.empty())
    w.text(-(ay.p0 + ay.p1) / 2, 14, label, "middle", " transform=\"rotate(-90)\"");
  w.raw("</g>");
}

void frame(Writer& w, double x, double y, double wd, double ht) {
  w.rect(x, y, wd, ht, " fill=\"none\" stroke=\"#888\"");
}

struct Pt {
  double x, y;
};

// Pixel points of one series, split at unusable values, then reduced to ≤ max_points: consecutive
// points in the same horizontal pixel bucket are averaged, then a stride thins what remains.
std::vector<std::vector<Pt>> reduce_series(const PlotSeries& s, const Axis& ax, const Axis& ay,
                                           std::size_t max_points) {
  std::vector<std::vector<Pt>> runs(1);
  std::size_t total = 0;
  for (std::size_t i = 0; i < s.y.size(); ++i) {
    const double xv = s.x.empty() ? static_cast<double>(i + 1) : (i < s.x.size() ? s.x[i] : NAN);
    const double yv = s.y[i];
    if (!ax.usable(xv) || !ay.usable(yv)) {
      if (!runs.back().empty()) runs.emplace_back();
      continue;
    }
    runs.back().push_back({ax.map(xv), ay.map(yv)});
    ++total;
  }
  if (runs.back().empty()) runs.pop_back();
  max_points = std::max<std::size_t>(max_points, 2);
  if (total > max_points) {
    const double span = ax.p1 - ax.p0;
    total = 0;
    for (auto& run : runs) {
      std::vector<Pt> out;
      long long bucket = -1;
      double sx = 0, sy = 0;
      std::size_t cnt = 0;
      auto flush = [&] {
        if (cnt) out.push_back({sx / cnt, sy / cnt});
        sx = sy = 0;
        cnt = 0;
      };
      for (const Pt& p : run) {
        auto b = static_cast<long long>(std::floor((p.x - ax.p0) / span * static_cast<double>(max_points - 1)));
        b = std::clamp<long long>(b, 0, static_cast<long long>(max_points) - 1);
        if (b != bucket) flush();
        bucket = b;
        sx += p.x;
        sy += p.y;
        ++cnt;
      }
      flush();
      run = std::move(out);
      total += run.size();
    }
  }
  if (total > max_points) {
    const std::size_t stride = (total + max_points - 1) / max_points;
    std::size_t idx = 0;
    for (auto& run : runs) {
      std::vector<Pt> out;
      for (const Pt& p : run)
        if (idx++ % stride == 0) out.push_back(p);
      run = std::move(out);
    }
  }
  return runs;
}

std::vector<std::string> group_order(const std::vector<PlotSeries>& series) {
  std::vector<std::string> g;
  for (const auto& s : series)
    if (std::find(g.begin(), g.end(), s.group) == g.end()) g.push_back(s.group);
  return g;
}

// The axes' domains from every usable point (x: 1, 2, ... where a series has none), with the
// margins of finish_domain; false when there is no usable point.
bool fit_domain(const std::vector<PlotSeries>& series, Axis& ax, Axis& ay) {
  bool have = false;
  ax.lo = ay.lo = std::numeric_limits<double>::infinity();
  ax.hi = ay.hi = -std::numeric_limits<double>::infinity();
  for (const auto& s : series)
    for (std::size_t i = 0; i < s.y.size(); ++i) {
      const double xv = s.x.empty() ? static_cast<double>(i + 1) : (i < s.x.size() ? s.x[i] : NAN);
      if (!ax.usable(xv) || !ay.usable(s.y[i])) continue;
      have = true;
      ax.lo = std::min(ax.lo, xv);
      ax.hi = std::max(ax.hi, xv);
      ay.lo = std::min(ay.lo, s.y[i]);
      ay.hi = std::max(ay.hi, s.y[i]);
    }
  finish_domain(ax, have, 0.0);
  finish_domain(ay, have, 0.04);
  return have;
}

// The paths of the series of one group, one <g> in the group's colour (nothing when it has none).
void draw_group_paths(Writer& w, const std::vector<PlotSeries>& series, const std::string& group, std::size_t colour,
                      const Axis& ax, const Axis& ay, std::size_t max_points, double opacity) {
  std::string paths;
  for (const auto& s : series) {
    if (s.group != group) continue;
    for (const auto& run : reduce_series(s, ax, ay, max_points)) {
      std::string d;
      for (std::size_t i = 0; i < run.size(); ++i) {
        d += i == 0 ? "M" : (i == 1 ? "L" : " ");
        d += svg_number(run[i].x) + " " + svg_number(run[i].y);
      }
      if (run.size() == 1) d += "h0.1";  // a lone point stays visible
      paths += "<path d=\"" + d + "\"/>";
    }
  }
  if (paths.empty()) return;
  w.raw("<g fill=\"none\" stroke=\"" + std::string(svg_group_colour(colour)) + "\" stroke-opacity=\"" +
        svg_number(opacity) + "\" stroke-width=\"1.2\" stroke-linejoin=\"round\">" + paths + "</g>");
}

double widest(const std::vector<std::string>& texts, double font_px = 11) {
  double w = 0;
  for (const auto& t : texts) w = std::max(w, svg_text_width(t, font_px));
  return w;
}

// One line swatch and name per group, from (x, y) down, names cut to text_w (class "legend").
void draw_legend(Writer& w, const std::vector<std::string>& groups, double x, double y, double text_w) {
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double ly = y + 16.0 * static_cast<double>(g);
    w.line(x, ly, x + 16, ly, " stroke=\"" + std::string(svg_group_colour(g)) + "\" stroke-width=\"2.5\"");
    w.fitted_text(x + 22, ly, groups[g], text_w, "start", " dy=\"0.32em\" class=\"legend\"");
  }
}

}  // namespace

std::string svg_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string svg_number(double v) {
  if (!std::isfinite(v)) return "0";
  const double a = std::fabs(v);
  if (a < 5e-7) return "0";
  const int decimals = std::clamp(2 - static_cast<int>(std::floor(std::log10(a))), 0, 6);
  return fixed(v, decimals);
}

const char* svg_group_colour(std::size_t k) { return kPalette[k % (sizeof kPalette / sizeof kPalette[0])]; }

std::string svg_tint(std::string_view hex, double t) {
  t = std::isfinite(t) ? std::clamp(t, 0.0, 1.0) : 1.0;
  auto channel = [&](std::size_t i) {
    int v = 0;
    if (hex.size() >= i + 2) std::from_chars(hex.data() + i, hex.data() + i + 2, v, 16);
    return static_cast<int>(std::lround(255.0 + (v - 255.0) * t));
  };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", channel(1), channel(3), channel(5));
  return buf;
}

double svg_text_width(std::string_view s, double font_px) {
  std::size_t points = 0;
  for (char c : s)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++points;
  return static_cast<double>(points) * kGlyphEm * font_px;
}

namespace {
// The longest prefix of s (whole code points) no wider than max_width, in bytes.
std::size_t fitting_prefix(std::string_view s, double max_width, double font_px) {
  std::size_t end = 0;
  for (std::size_t i = 0; i <= s.size(); ++i) {
    if (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // inside a code point
    if (svg_text_width(s.substr(0, i), font_px) > max_width) break;
    end = i;
  }
  return end;
}
}  // namespace

std::string svg_fit(std::string_view s, double max_width, double font_px) {
  if (svg_text_width(s, font_px) <= max_width) return std::string(s);
  return std::string(s.substr(0, fitting_prefix(s, max_width - svg_text_width("…", font_px), font_px))) + "…";
}

std::vector<std::string> svg_wrap(std::string_view s, double max_width, std::size_t max_lines, double font_px) {
  std::vector<std::string> lines;
  if (max_lines == 0) return lines;
  std::vector<std::string> words;  // in reverse: the next word is words.back()
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t j = std::min(s.find(' ', i), s.size());
    if (j > i) words.emplace_back(s.substr(i, j - i));
    i = j + 1;
  }
  std::reverse(words.begin(), words.end());
  std::string cur;
  while (!words.empty()) {
    const std::string next = cur.empty() ? words.back() : cur + " " + words.back();
    if (svg_text_width(next, font_px) <= max_width) {
      cur = next;
      words.pop_back();
      continue;
    }
    if (!cur.empty()) {
      lines.push_back(std::move(cur));
      cur.clear();
    } else {  // a word wider than a line: cut where it stops fitting; the rest starts the next line
      std::size_t n = std::max<std::size_t>(1, fitting_prefix(words.back(), max_width, font_px));
      while (n < words.back().size() && (static_cast<unsigned char>(words.back()[n]) & 0xC0) == 0x80) ++n;
      lines.push_back(words.back().substr(0, n));
      words.back() = words.back().substr(n);
      if (words.back().empty()) words.pop_back();
    }
    if (lines.size() == max_lines) break;
  }
  if (!cur.empty()) lines.push_back(std::move(cur));  // the loop ended with room for it
  if (!words.empty()) {  // text left over: the last line ends with "…"
    std::string rest = lines.back();
    for (auto it = words.rbegin(); it != words.rend(); ++it) rest += " " + *it;
    lines.back() = svg_fit(rest, max_width, font_px);
  }
  return lines;
}

std::string svg_bar_chart(const std::vector<BarItem>& bars, const BarChartOptions& opt) {
  // Labels as wide as the longest (up to 40% of the width: longer ones are cut, whole in a tooltip).
  double longest = 0;
  for (const auto& b : bars) longest = std::max(longest, svg_text_width(b.label));
  const double label_text = std::min(longest, 0.4 * opt.width), label_w = 12.0 + label_text;
  const double mt = opt.title.empty() ? 12 : 30, mb = 40, mr = 64;
  const double row = opt.bar_height + 6.0;
  const double ph = std::max(row, row * static_cast<double>(bars.size()));
  const int H = static_cast<int>(std::ceil(mt + ph + mb));
  const double pw = std::max(50.0, opt.width - label_w - mr);

  Axis ax;
  ax.lo = 0.0;
  ax.hi = 0.0;
  for (const auto& b : bars)
    for (double v : {b.value, b.lo.value_or(b.value), b.hi.value_or(b.value)})
      if (std::isfinite(v)) {
        ax.lo = std::min(ax.lo, v);
        ax.hi = std::max(ax.hi, v);
      }
  if (opt.x_max) ax.hi = *opt.x_max;
  if (!(ax.hi > ax.lo)) ax.hi = ax.lo + 1.0;
  if (!opt.x_max) {  // round the end up to the next tick
    const auto t = linear_ticks(ax.lo, ax.hi);
    const double step = t.size() >= 2 ? t[1] - t[0] : 0.0;
    if (step > 0.0 && t.back() < ax.hi - 1e-12 * step) ax.hi = t.back() + step;
  }
  ax.p0 = label_w;
  ax.p1 = label_w + pw;

  Writer w(opt.width, H, opt.title);
  draw_x_axis(w, ax, mt + ph, mt, opt.x_label, H - 8);
  frame(w, label_w, mt, pw, ph);
  const double zero = ax.map(std::clamp(0.0, ax.lo, ax.hi));
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const BarItem& b = bars[i];
    const double top = mt + row * static_cast<double>(i) + 3.0, mid = top + opt.bar_height / 2.0;
    w.fitted_text(label_w - 6, mid, b.label, label_text, "end", " dy=\"0.32em\"");
    if (!std::isfinite(b.value)) {
      w.text(zero + 4, mid, "n/a", "start", " dy=\"0.32em\" fill=\"#888\"");
      continue;
    }
    const double v = ax.map(std::clamp(b.value, ax.lo, ax.hi));
    w.rect(std::min(zero, v), top, std::fabs(v - zero), opt.bar_height, " fill=\"" + std::string(kPalette[0]) + "\"");
    double end = std::max(zero, v);
    if (b.lo && b.hi && std::isfinite(*b.lo) && std::isfinite(*b.hi)) {
      const double l = ax.map(std::clamp(*b.lo, ax.lo, ax.hi)), h = ax.map(std::clamp(*b.hi, ax.lo, ax.hi));
      const std::string st = " stroke=\"#222\" stroke-width=\"1.2\"";
      w.line(l, mid, h, mid, st);
      w.line(l, mid - 5, l, mid + 5, st);
      w.line(h, mid - 5, h, mid + 5, st);
      end = std::max(end, h);
    }
    w.text(end + 4, mid, value_label(b.value), "start", " dy=\"0.32em\" fill=\"#333\"");
  }
  return w.finish();
}

std::string svg_strip_plot(const std::vector<GroupValues>& groups, const StripPlotOptions& opt) {
  const double ml = 72, mr = 16, mt = opt.title.empty() ? 12 : 30;
  const double W = opt.width, H = opt.height;
  const double pw = std::max(50.0, W - ml - mr);
  // Each group's label wrapped to its column (up to 3 lines), so neighbours never overlap.
  const double slot = groups.empty() ? pw : pw / static_cast<double>(groups.size());
  std::vector<std::vector<std::string>> labels;
  std::size_t label_lines = 1;
  for (const auto& g : groups) {
    labels.push_back(svg_wrap(g.label, slot - 8.0, 3));
    label_lines = std::max(label_lines, labels.back().size());
  }
  const double mb = 18.0 + 13.0 * static_cast<double>(label_lines);
  const double ph = std::max(50.0, H - mt - mb);
  Axis ay;
  ay.log = opt.log_y;
  ay.lo = std::numeric_limits<double>::infinity();
  ay.hi = -ay.lo;
  bool have = false;
  for (const auto& g : groups)
    for (double v : g.values)
      if (ay.usable(v)) {
        have = true;
        ay.lo = std::min(ay.lo, v);
        ay.hi = std::max(ay.hi, v);
      }
  finish_domain(ay, have, 0.06);
  ay.p0 = mt + ph;
  ay.p1 = mt;

  Writer w(opt.width, opt.height, opt.title);
  draw_y_axis(w, ay, ml, ml + pw, opt.y_label);
  frame(w, ml, mt, pw, ph);
  if (!have) w.text(ml + pw / 2, mt + ph / 2, "no data", "middle", " fill=\"#888\"");
  const double box_w = std::min(60.0, 0.5 * slot);
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const double cx = ml + slot * (static_cast<double>(gi) + 0.5);
    w.text_lines(cx, mt + ph + 15, labels[gi], "middle", " fill=\"#333\" class=\"group-label\"");
    std::vector<double> v;
    for (double x : groups[gi].values)
      if (ay.usable(x)) v.push_back(x);
    if (v.empty()) continue;
    if (opt.box && v.size() >= 2) {
      const double q1 = quantile(v, 0.25), q2 = quantile(v, 0.5), q3 = quantile(v, 0.75);
      const double iqr = q3 - q1;
      double wlo = q1, whi = q3;
      for (double x : v) {
        if (x >= q1 - 1.5 * iqr) wlo = std::min(wlo, x);
        if (x <= q3 + 1.5 * iqr) whi = std::max(whi, x);
      }
      w.raw("<g stroke=\"#444\" fill=\"none\">");
      w.rect(cx - box_w / 2, ay.map(q3), box_w, std::max(0.5, ay.map(q1) - ay.map(q3)), "");
      w.line(cx - box_w / 2, ay.map(q2), cx + box_w / 2, ay.map(q2), " stroke-width=\"2\"");
      w.line(cx, ay.map(q3), cx, ay.map(whi));
      w.line(cx, ay.map(q1), cx, ay.map(wlo));
      w.line(cx - box_w / 4, ay.map(whi), cx + box_w / 4, ay.map(whi));
      w.line(cx - box_w / 4, ay.map(wlo), cx + box_w / 4, ay.map(wlo));
      w.raw("</g>");
    }
    w.raw("<g fill=\"" + std::string(svg_group_colour(gi)) + "\" fill-opacity=\"0.7\">");
    for (std::size_t i = 0; i < v.size(); ++i) {
      // Deterministic jitter from the golden-ratio sequence: evenly spread, no RNG.
      const double u = std::fmod(0.5 + 0.6180339887498949 * static_cast<double>(i), 1.0) - 0.5;
      w.circle(cx + u * 0.8 * box_w, ay.map(v[i]), 2.5);
    }
    w.raw("</g>");
  }
  return w.finish();
}

std::string svg_faceted_line_plot(const std::vector<Facet>& facets, const FacetOptions& opt) {
  std::vector<PlotSeries> all;
  for (const auto& f : facets) all.insert(all.end(), f.series.begin(), f.series.end());
  const std::vector<std::string> groups = group_order(all);
  const bool legend = groups.size() > 1 || (groups.size() == 1 && !groups[0].empty());
  const double legend_text = legend ? std::min(widest(groups), 420.0) : 0.0;
  const double legend_w = legend ? 34.0 + legend_text + 12.0 : 0.0;
  const std::size_t cols = std::max<std::size_t>(1, std::min(opt.columns, facets.size()));
  const std::size_t rows = std::max<std::size_t>(1, (facets.size() + cols - 1) / cols);
  const double top = opt.title.empty() ? 8 : 30, bottom = opt.x_label.empty() ? 8 : 26;
  const double pml = 58, pmr = 12, pmt = 22, pmb = 24;  // margins inside one panel
  const double grid_w = static_cast<double>(cols * opt.panel_width);
  const double W = std::ceil(grid_w + legend_w + 8.0);
  const double legend_h = legend ? 20.0 + 16.0 * static_cast<double>(groups.size()) : 0.0;
  const double H = std::ceil(std::max(top + static_cast<double>(rows * opt.panel_height) + bottom, top + legend_h));

  // One domain for every panel, so panels compare at a glance.
  Axis ax, ay;
  ax.log = opt.log_x;
  ax.whole = opt.whole_x;
  ay.log = opt.log_y;
  const bool have = fit_domain(all, ax, ay);

  Writer w(static_cast<int>(W), static_cast<int>(H), opt.title);
  const double pw = std::max(40.0, opt.panel_width - pml - pmr), ph = std::max(40.0, opt.panel_height - pmt - pmb);
  for (std::size_t f = 0; f < facets.size(); ++f) {
    const double x0 = static_cast<double>((f % cols) * opt.panel_width) + pml;
    const double y0 = top + static_cast<double>((f / cols) * opt.panel_height) + pmt;
    Axis px = ax, py = ay;
    px.p0 = x0;
    px.p1 = x0 + pw;
    py.p0 = y0 + ph;
    py.p1 = y0;
    draw_x_axis(w, px, y0 + ph, y0, "", 0);
    draw_y_axis(w, py, x0, x0 + pw, f % cols == 0 ? opt.y_label : "");
    frame(w, x0, y0, pw, ph);
    if (!facets[f].title.empty())
      w.fitted_text(x0 + pw / 2, y0 - 7, facets[f].title, pw, "middle", " font-weight=\"bold\" class=\"facet-title\"");
    if (!have || facets[f].series.empty()) w.text(x0 + pw / 2, y0 + ph / 2, "no data", "middle", " fill=\"#888\"");
    for (std::size_t g = 0; g < groups.size(); ++g)
      draw_group_paths(w, facets[f].series, groups[g], g, px, py, opt.max_points, opt.opacity);
  }
  if (facets.empty()) w.text(W / 2, H / 2, "no data", "middle", " fill=\"#888\"");
  if (!opt.x_label.empty()) w.text(grid_w / 2, H - 8, opt.x_label, "middle", " fill=\"#333\"");
  if (legend) draw_legend(w, groups, grid_w + 12, top + 14, legend_text);
  return w.finish();
}

namespace {
// Black or white text, whichever reads better on the fill.
const char* ink_on(const std::string& fill) {
  int r = 255, g = 255, b = 255;
  if (fill.size() == 7 && fill[0] == '#') {
    std::from_chars(fill.data() + 1, fill.data() + 3, r, 16);
    std::from_chars(fill.data() + 3, fill.data() + 5, g, 16);
    std::from_chars(fill.data() + 5, fill.data() + 7, b, 16);
  }
  return 0.299 * r + 0.587 * g + 0.114 * b < 140 ? "#fff" : "#222";
}

// Colour swatches in rows that fit max_width, from (x, y): where each goes, and the height used.
std::vector<Pt> layout_swatches(const std::vector<LegendEntry>& entries, double x, double y, double max_width,
                                double* height) {
  std::vector<Pt> at;
  double cx = x, cy = y;
  for (const auto& e : entries) {
    const double ew = 18.0 + svg_text_width(e.label) + 14.0;
    if (cx > x && cx + ew > x + max_width) {
      cx = x;
      cy += 17;
    }
    at.push_back({cx, cy});
    cx += ew;
  }
  *height = entries.empty() ? 0.0 : cy - y + 17.0;
  return at;
}

void draw_swatches(Writer& w, const std::vector<LegendEntry>& entries, const std::vector<Pt>& at) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    w.rect(at[i].x, at[i].y, 12, 12, " fill=\"" + svg_escape(entries[i].colour) + "\" stroke=\"#999\"");
    w.text(at[i].x + 17, at[i].y + 6, entries[i].label, "start", " dy=\"0.32em\" class=\"legend\"");
  }
}
}  // namespace

std::string svg_heatmap(const std::vector<HeatmapCell>& cells, const HeatmapOptions& opt) {
  const double cw = opt.cell_width, ch = opt.cell_height;
  std::size_t nrows = opt.row_labels.size(), ncols = opt.col_labels.size();
  for (const auto& c : cells) {
    nrows = std::max(nrows, c.row + 1);
    ncols = std::max(ncols, c.col + 1);
  }
  const double label_text = std::min(widest(opt.row_labels), opt.max_label_width);
  const double ml = label_text + 14.0, grid_w = static_cast<double>(ncols) * cw;
  double W = std::max({ml + grid_w + 12.0, 20.0 + widest(opt.col_legend), 20.0 + svg_text_width(opt.note), 420.0});
  double swatch_w = 0;
  for (const auto& e : opt.legend) swatch_w += 18.0 + svg_text_width(e.label) + 14.0;
  W = std::ceil(std::max(W, std::min(swatch_w + 20.0, 900.0)));
  // Heights: title, swatches (wrapped to the width), note, column headers, grid, header legend.
  const double y_legend = opt.title.empty() ? 8 : 30;
  double swatch_h = 0;
  const auto swatches = layout_swatches(opt.legend, 10, y_legend, W - 20, &swatch_h);
  const double y_note = y_legend + swatch_h + (opt.note.empty() ? 0 : 12);
  const double y_grid = y_note + 22;
  const double y_cols = y_grid + static_cast<double>(nrows) * ch + 18;
  const double H = std::ceil(y_cols + 15.0 * static_cast<double>(opt.col_legend.size()) + 4);

  Writer w(static_cast<int>(W), static_cast<int>(H), opt.title);
  draw_swatches(w, opt.legend, swatches);
  if (!opt.note.empty()) w.text(10, y_note, opt.note, "start", " fill=\"#555\"");
  w.raw("<g fill=\"#333\" font-size=\"10\">");
  for (std::size_t c = 0; c < ncols && c < opt.col_labels.size(); ++c)
    w.fitted_text(ml + cw * (static_cast<double>(c) + 0.5), y_grid - 5, opt.col_labels[c], cw - 2, "middle", "", 10);
  w.raw("</g><g fill=\"#222\">");
  for (std::size_t r = 0; r < opt.row_labels.size(); ++r)
    w.fitted_text(ml - 6, y_grid + ch * (static_cast<double>(r) + 0.5), opt.row_labels[r], label_text, "end",
                  " dy=\"0.32em\"");
  w.raw("</g>");
  w.rect(ml, y_grid, grid_w, static_cast<double>(nrows) * ch, " fill=\"#f6f6f6\"");
  w.raw("<g stroke=\"#fff\" font-size=\"9\">");
  for (const auto& c : cells) {
    const double x = ml + cw * static_cast<double>(c.col), y = y_grid + ch * static_cast<double>(c.row);
    w.raw("<rect x=\"" + svg_number(x) + "\" y=\"" + svg_number(y) + "\" width=\"" + svg_number(cw) + "\" height=\"" +
          svg_number(ch) + "\" fill=\"" + svg_escape(c.fill) + "\">" +
          (c.tooltip.empty() ? "" : "<title>" + svg_escape(c.tooltip) + "</title>") + "</rect>");
    if (!c.text.empty())
      w.fitted_text(x + cw / 2, y + ch / 2, c.text, cw - 3, "middle",
                    std::string(" dy=\"0.32em\" stroke=\"none\" fill=\"") + ink_on(c.fill) + "\"", 9);
  }
  w.raw("</g><g fill=\"#333\">");
  for (std::size_t i = 0; i < opt.col_legend.size(); ++i)
    w.fitted_text(10, y_cols + 15.0 * static_cast<double>(i), opt.col_legend[i], W - 20, "start");
  w.raw("</g>");
  return w.finish();
}

std::string svg_stacked_bars(const std::vector<StackedBar>& bars, const StackedBarOptions& opt) {
  std::vector<std::string> labels;
  for (const auto& b : bars) labels.push_back(b.label);
  const double label_text = std::min(widest(labels), opt.max_label_width);
  const double ml = label_text + 14.0, mr = 48.0, row = opt.bar_height + 4.0;
  const double W = std::max<double>(opt.width, ml + 200.0 + mr);
  const double pw = W - ml - mr;
  const double y_legend = opt.title.empty() ? 8 : 30;
  double swatch_h = 0;
  const auto swatches = layout_swatches(opt.segments, 10, y_legend, W - 20, &swatch_h);
  const double y_bars = y_legend + swatch_h + 6;
  const double ph = std::max(row, row * static_cast<double>(bars.size()));
  const double H = std::ceil(y_bars + ph + 40);
  double total_max = 0;
  for (const auto& b : bars) {
    double t = 0;
    for (double v : b.values) t += std::isfinite(v) && v > 0 ? v : 0;
    total_max = std::max(total_max, t);
  }
  Axis ax;
  ax.lo = 0;
  ax.hi = total_max > 0 ? total_max : 1;
  const auto t = linear_ticks(ax.lo, ax.hi);
  const double step = t.size() >= 2 ? t[1] - t[0] : 0.0;
  if (step > 0.0 && t.back() < ax.hi - 1e-12 * step) ax.hi = t.back() + step;
  ax.p0 = ml;
  ax.p1 = ml + pw;

  Writer w(static_cast<int>(std::ceil(W)), static_cast<int>(H), opt.title);
  draw_swatches(w, opt.segments, swatches);
  draw_x_axis(w, ax, y_bars + ph, y_bars, opt.x_label, H - 8);
  frame(w, ml, y_bars, pw, ph);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double top = y_bars + row * static_cast<double>(i) + 2.0, mid = top + opt.bar_height / 2.0;
    w.fitted_text(ml - 6, mid, bars[i].label, label_text, "end", " dy=\"0.32em\"");
    double acc = 0;
    for (std::size_t k = 0; k < bars[i].values.size() && k < opt.segments.size(); ++k) {
      const double v = bars[i].values[k];
      if (!(std::isfinite(v) && v > 0)) continue;
      const double x = ax.map(acc), x1 = ax.map(acc + v);
      w.raw("<rect x=\"" + svg_number(x) + "\" y=\"" + svg_number(top) + "\" width=\"" + svg_number(x1 - x) +
            "\" height=\"" + svg_number(opt.bar_height) + "\" fill=\"" + svg_escape(opt.segments[k].colour) +
            "\"><title>" + svg_escape(bars[i].label + ": " + opt.segments[k].label + " " + value_label(v)) +
            "</title></rect>");
      acc += v;
    }
    w.text(ax.map(acc) + 4, mid, value_label(acc), "start", " dy=\"0.32em\" fill=\"#333\"");
  }
  return w.finish();
}

std::string svg_histograms(const std::vector<HistogramPanel>& panels, const HistogramOptions& opt) {
  const std::size_t cols = std::max<std::size_t>(1, std::min(opt.columns, panels.size()));
  const std::size_t rows = std::max<std::size_t>(1, (panels.size() + cols - 1) / cols);
  const double top = opt.title.empty() ? 8 : 30, bottom = opt.x_label.empty() ? 8 : 24;
  const double pml = 40, pmr = 10, pmt = 34, pmb = 22;
  const double W = std::max(static_cast<double>(cols * opt.panel_width), 320.0);
  const double H = std::ceil(top + static_cast<double>(rows * opt.panel_height) + bottom);
  Writer w(static_cast<int>(std::ceil(W)), static_cast<int>(H), opt.title);
  const double pw = opt.panel_width - pml - pmr, ph = opt.panel_height - pmt - pmb;
  for (std::size_t p = 0; p < panels.size(); ++p) {
    const auto& panel = panels[p];
    const double x0 = static_cast<double>((p % cols) * opt.panel_width) + pml;
    const double y0 = top + static_cast<double>((p / cols) * opt.panel_height) + pmt;
    const std::size_t nb = std::max<std::size_t>(1, panel.counts.size());
    const double bw = pw / static_cast<double>(nb);
    double cmax = 0;
    for (double c : panel.counts) cmax = std::max(cmax, std::isfinite(c) ? c : 0.0);
    const double lmax = std::log10(1.0 + std::max(cmax, 1.0));
    auto ymap = [&](double c) { return y0 + ph - ph * std::log10(1.0 + std::max(c, 0.0)) / lmax; };
    w.raw("<g class=\"panel\"><title>" + svg_escape(panel.title + "\n" + panel.subtitle) + "</title>");
    w.text_lines(x0 - pml + 4, y0 - 20,
                 {svg_fit(panel.title, pw + pml - 4, 10), svg_fit(panel.subtitle, pw + pml - 4, 10)}, "start",
                 " font-size=\"10\" fill=\"#222\"", 12);
    w.raw("<g stroke=\"#ddd\">");
    for (double d = 1; d <= cmax; d *= 10) w.line(x0, ymap(d), x0 + pw, ymap(d));
    w.raw("</g><g fill=\"#555\" font-size=\"9\">");
    for (double d = 1; d <= cmax; d *= 10) w.text(x0 - 4, ymap(d), tick_label(d), "end", " dy=\"0.32em\"");
    for (const auto& [at, label] : opt.x_ticks) w.text(x0 + bw * at, y0 + ph + 11, label, "middle");
    w.raw("</g><g fill=\"#0072B2\">");
    for (std::size_t b = 0; b < panel.counts.size(); ++b) {
      const double c = std::isfinite(panel.counts[b]) ? panel.counts[b] : 0.0;
      if (c <= 0) continue;
      const double y = ymap(c);
      w.raw("<rect x=\"" + svg_number(x0 + bw * static_cast<double>(b) + 0.5) + "\" y=\"" + svg_number(y) +
            "\" width=\"" + svg_number(std::max(0.5, bw - 1.0)) + "\" height=\"" + svg_number(y0 + ph - y) + "\"><title>" +
            value_label(c) + "</title></rect>");
    }
    w.raw("</g>");
    if (opt.marker) {
      const double mx = x0 + bw * *opt.marker;
      w.line(mx, y0 - 2, mx, y0 + ph, " stroke=\"#D55E00\" stroke-width=\"1.5\" stroke-dasharray=\"4 2\"");
      if (!opt.marker_label.empty()) w.text(mx - 3, y0 + 8, opt.marker_label, "end", " font-size=\"9\" fill=\"#D55E00\"");
    }
    frame(w, x0, y0, pw, ph);
    w.raw("</g>");
  }
  if (!opt.x_label.empty()) w.text(W / 2, H - 8, opt.x_label, "middle", " fill=\"#333\"");
  return w.finish();
}

}  // namespace detaudit
