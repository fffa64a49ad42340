#include "report/svg.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <utility>

#include "analysis/stats.hpp"

namespace detaudit {
namespace {

constexpr const char* kPalette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                    "#E69F00", "#56B4E9", "#000000", "#999999"};
constexpr double kCharWidth = 6.2;  // rough width of an 11px sans-serif glyph, for layout only

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
    return t;
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
      text(w / 2.0, 18, title, "middle", " font-size=\"13\" font-weight=\"bold\"");
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

std::string svg_line_plot(const std::vector<PlotSeries>& series, const LinePlotOptions& opt) {
  const std::vector<std::string> groups = group_order(series);
  std::size_t longest = 0;
  for (const auto& g : groups) longest = std::max(longest, g.size());
  const bool legend = groups.size() > 1 || (groups.size() == 1 && !groups[0].empty());
  const double legend_w = legend
                              ? std::min(200.0, 34.0 + kCharWidth * static_cast<double>(longest))
                              : 10.0;
  const double ml = 64, mt = opt.title.empty() ? 12 : 30, mb = 44;
  const double W = opt.width, H = opt.height;
  const double pw = std::max(50.0, W - ml - legend_w), ph = std::max(50.0, H - mt - mb);

  Axis ax, ay;
  ax.log = opt.log_x;
  ay.log = opt.log_y;
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
  ax.p0 = ml;
  ax.p1 = ml + pw;
  ay.p0 = mt + ph;
  ay.p1 = mt;

  Writer w(opt.width, opt.height, opt.title);
  draw_x_axis(w, ax, mt + ph, mt, opt.x_label, H - 8);
  draw_y_axis(w, ay, ml, ml + pw, opt.y_label);
  frame(w, ml, mt, pw, ph);
  if (!have) w.text(ml + pw / 2, mt + ph / 2, "no data", "middle", " fill=\"#888\"");

  for (std::size_t g = 0; g < groups.size(); ++g) {
    w.raw("<g fill=\"none\" stroke=\"" + std::string(svg_group_colour(g)) + "\" stroke-opacity=\"" +
          svg_number(opt.opacity) + "\" stroke-width=\"1.2\" stroke-linejoin=\"round\">");
    for (const auto& s : series) {
      if (s.group != groups[g]) continue;
      for (const auto& run : reduce_series(s, ax, ay, opt.max_points)) {
        std::string d;
        for (std::size_t i = 0; i < run.size(); ++i) {
          d += i == 0 ? "M" : (i == 1 ? "L" : " ");
          d += svg_number(run[i].x) + " " + svg_number(run[i].y);
        }
        if (run.size() == 1) d += "h0.1";  // a lone point stays visible
        w.raw("<path d=\"" + d + "\"/>");
      }
    }
    w.raw("</g>");
  }
  if (legend_w > 10.0) {
    const double lx = ml + pw + 12;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const double ly = mt + 10 + 16.0 * static_cast<double>(g);
      w.line(lx, ly, lx + 16, ly, " stroke=\"" + std::string(svg_group_colour(g)) + "\" stroke-width=\"2.5\"");
      w.text(lx + 22, ly, groups[g], "start", " dy=\"0.32em\"");
    }
  }
  return w.finish();
}

std::string svg_bar_chart(const std::vector<BarItem>& bars, const BarChartOptions& opt) {
  std::size_t longest = 0;
  for (const auto& b : bars) longest = std::max(longest, b.label.size());
  const double label_w = std::min(220.0, 12.0 + kCharWidth * static_cast<double>(longest));
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
    w.text(label_w - 6, mid, b.label, "end", " dy=\"0.32em\"");
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
  const double ml = 72, mr = 16, mt = opt.title.empty() ? 12 : 30, mb = 44;
  const double W = opt.width, H = opt.height;
  const double pw = std::max(50.0, W - ml - mr), ph = std::max(50.0, H - mt - mb);
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
  const double slot = groups.empty() ? pw : pw / static_cast<double>(groups.size());
  const double box_w = std::min(60.0, 0.5 * slot);
  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
    const double cx = ml + slot * (static_cast<double>(gi) + 0.5);
    w.text(cx, mt + ph + 14, groups[gi].label, "middle", " fill=\"#333\"");
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

}  // namespace detaudit
