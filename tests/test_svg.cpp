// The SVG writers: well-formed, deterministic, compact; labels and legends laid out inside the figure.
#include <gtest/gtest.h>

#include <cctype>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "report/svg.hpp"

using namespace detaudit;

namespace {

// Minimal XML well-formedness check for what the writers emit: balanced start/end tags,
// self-closing tags, quoted attributes, and no raw '<' or stray '&' in text or attributes.
testing::AssertionResult well_formed(const std::string& s) {
  if (s.rfind("<svg", 0) != 0) return testing::AssertionFailure() << "does not start with <svg";
  std::vector<std::string> stack;
  std::size_t i = 0;
  std::size_t elements = 0;
  auto check_entities = [&](std::size_t from, std::size_t to) -> bool {
    for (std::size_t k = from; k < to; ++k) {
      if (s[k] == '<') return false;
      if (s[k] == '&') {
        const std::size_t semi = s.find(';', k);
        if (semi == std::string::npos || semi > to) return false;
        const std::string ent = s.substr(k, semi - k + 1);
        if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&#39;") return false;
      }
    }
    return true;
  };
  while (i < s.size()) {
    if (s[i] != '<') {
      const std::size_t next = s.find('<', i);
      const std::size_t end = next == std::string::npos ? s.size() : next;
      if (!check_entities(i, end)) return testing::AssertionFailure() << "bad text at " << i;
      if (stack.empty()) return testing::AssertionFailure() << "text outside the root at " << i;
      i = end;
      continue;
    }
    // Find the tag end, skipping quoted attribute values.
    std::size_t j = i + 1;
    bool in_quote = false;
    while (j < s.size() && (in_quote || s[j] != '>')) {
      if (s[j] == '"') in_quote = !in_quote;
      else if (in_quote && s[j] == '<') return testing::AssertionFailure() << "raw < in attribute at " << j;
      ++j;
    }
    if (j >= s.size()) return testing::AssertionFailure() << "unterminated tag at " << i;
    const std::string tag = s.substr(i + 1, j - i - 1);
    if (!check_entities(i + 1, j) && tag.find('&') != std::string::npos)
      return testing::AssertionFailure() << "bad entity in tag at " << i;
    if (tag.empty()) return testing::AssertionFailure() << "empty tag at " << i;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name)
        return testing::AssertionFailure() << "unbalanced </" << name << "> at " << i;
      stack.pop_back();
    } else {
      if (stack.empty() && elements > 0) return testing::AssertionFailure() << "second root at " << i;
      const std::string name = tag.substr(0, tag.find_first_of(" /"));
      ++elements;
      if (tag.back() != '/') stack.push_back(name);
    }
    i = j + 1;
  }
  if (!stack.empty()) return testing::AssertionFailure() << "unclosed <" << stack.back() << ">";
  return testing::AssertionSuccess();
}

std::size_t count(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

std::vector<PlotSeries> some_curves() {
  std::vector<PlotSeries> out;
  const char* groups[] = {"a", "b", "c", "d"};
  for (int g = 0; g < 4; ++g)
    for (int r = 0; r < 3; ++r) {
      PlotSeries s;
      s.group = groups[g];
      for (int t = 1; t <= 5000; ++t)
        s.y.push_back(0.1 * std::pow(t, -0.3 - 0.05 * g) * (1.0 + 0.01 * std::sin(t * 0.37 + r)));
      out.push_back(std::move(s));
    }
  return out;
}

}  // namespace

TEST(Svg, EscapeAndNumbers) {
  EXPECT_EQ(svg_escape("a<b & \"c\" > 'd'"), "a&lt;b &amp; &quot;c&quot; &gt; &#39;d&#39;");
  EXPECT_EQ(svg_number(123.456), "123");
  EXPECT_EQ(svg_number(45.678), "45.7");
  EXPECT_EQ(svg_number(5.0), "5");
  EXPECT_EQ(svg_number(0.012345), "0.0123");
  EXPECT_EQ(svg_number(-0.0001), "-0.0001");
  EXPECT_EQ(svg_number(-1e-9), "0");
  EXPECT_EQ(svg_number(NAN), "0");
  EXPECT_EQ(svg_number(99.96), "100");
}

TEST(Svg, LinePlotIsWellFormedCompactAndDeterministic) {
  FacetOptions opt;
  opt.title = "loss <&> \"runs\"";
  opt.x_label = "step";
  opt.y_label = "loss";
  opt.log_x = opt.log_y = true;
  const std::vector<Facet> one = {{"", some_curves()}};
  const std::string a = svg_faceted_line_plot(one, opt), b = svg_faceted_line_plot(one, opt);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(well_formed(a));
  EXPECT_NE(a.find("loss &lt;&amp;&gt; &quot;runs&quot;"), std::string::npos);
  EXPECT_EQ(a.find("<&"), std::string::npos);
  EXPECT_EQ(count(a, "<path "), 12u);
  EXPECT_EQ(count(a, "<g fill=\"none\" stroke="), 4u);  // one colour per group
  for (const char* g : {">a<", ">b<", ">c<", ">d<"}) EXPECT_NE(a.find(g), std::string::npos) << g;
  // 12 curves × 5000 points, each at most max_points points of ≤ ~8 characters per coordinate pair.
  EXPECT_LT(a.size(), 12u * opt.max_points * 10u + 20000u);
  // Every path has ≤ max_points points (coordinate pairs), and the reduction kept the shape.
  std::size_t paths = 0;
  for (std::size_t p = a.find("<path d=\""); p != std::string::npos; p = a.find("<path d=\"", p + 1)) {
    const std::size_t q = a.find('"', p + 9);
    std::size_t numbers = 0;
    bool in_number = false;
    for (std::size_t k = p + 9; k < q; ++k) {
      const bool digit = std::isdigit(static_cast<unsigned char>(a[k])) || a[k] == '.' || a[k] == '-';
      if (digit && !in_number) ++numbers;
      in_number = digit;
    }
    EXPECT_EQ(numbers % 2, 0u);
    EXPECT_LE(numbers / 2, opt.max_points);
    EXPECT_GT(numbers / 2, 100u);
    ++paths;
  }
  EXPECT_EQ(paths, 12u);
  opt.log_x = opt.log_y = false;
  const std::string lin = svg_faceted_line_plot(one, opt);
  EXPECT_TRUE(well_formed(lin));
  EXPECT_LT(lin.size(), 12u * opt.max_points * 10u + 20000u);
}

TEST(Svg, LinePlotHandlesBadValuesAndEmptyInput) {
  PlotSeries s;
  s.group = "x";
  s.y = {1.0, 0.0, -1.0, NAN, 2.0, 3.0};  // log-y: the first three non-positive/NaN are dropped
  FacetOptions opt;
  opt.log_y = true;
  const std::string a = svg_faceted_line_plot({{"", {s}}}, opt);
  EXPECT_TRUE(well_formed(a));
  EXPECT_EQ(a.find("nan"), std::string::npos);
  EXPECT_EQ(a.find("inf"), std::string::npos);
  EXPECT_EQ(count(a, "<path "), 2u);  // the line breaks at the dropped values
  for (const std::string& e : {svg_faceted_line_plot({}, {}), svg_faceted_line_plot({{"empty", {}}}, {})}) {
    EXPECT_TRUE(well_formed(e));
    EXPECT_NE(e.find("no data"), std::string::npos);
  }
}

TEST(Svg, BarChartWithErrorBars) {
  BarChartOptions opt;
  opt.title = "variance shares (95% CI)";
  opt.x_label = "share of variance";
  const std::vector<BarItem> bars{{"target", 0.69, 0.6, 0.87},
                                  {"seed", 0.28, 0.1, 0.37},
                                  {"target × seed", 0.02, 0.0, 0.05},
                                  {"run-to-run <E>", 0.01, std::nullopt, std::nullopt}};
  const std::string a = svg_bar_chart(bars, opt);
  EXPECT_TRUE(well_formed(a));
  EXPECT_EQ(a, svg_bar_chart(bars, opt));
  EXPECT_NE(a.find("run-to-run &lt;E&gt;"), std::string::npos);
  EXPECT_EQ(count(a, "stroke=\"#222\""), 9u);  // three error bars, three lines each
  EXPECT_EQ(a.find("nan"), std::string::npos);
  EXPECT_TRUE(well_formed(svg_bar_chart({}, {})));
  EXPECT_TRUE(well_formed(svg_bar_chart({{"nan", NAN, std::nullopt, std::nullopt}}, {})));
}

TEST(Svg, StripPlotPerGroup) {
  StripPlotOptions opt;
  opt.title = "final loss per condition";
  opt.y_label = "loss";
  std::vector<GroupValues> groups{{"a", {}}, {"b", {}}, {"c", {}}, {"d", std::vector<double>(12, 0.0073)}};
  for (int i = 0; i < 12; ++i) {
    groups[0].values.push_back(0.0074 + 0.0007 * std::sin(i));
    groups[1].values.push_back(0.0079 + 0.0012 * std::cos(i));
    groups[2].values.push_back(0.0076 + 0.00035 * std::sin(2 * i));
  }
  const std::string a = svg_strip_plot(groups, opt);
  EXPECT_TRUE(well_formed(a));
  EXPECT_EQ(a, svg_strip_plot(groups, opt));
  EXPECT_EQ(count(a, "<circle "), 48u);
  EXPECT_EQ(count(a, "<g stroke=\"#444\""), 4u);  // one box per group
  opt.log_y = true;
  EXPECT_TRUE(well_formed(svg_strip_plot(groups, opt)));
  EXPECT_TRUE(well_formed(svg_strip_plot({{"empty", {}}}, opt)));
}

namespace {

std::string unescape(std::string s) {
  for (auto [ent, c] : {std::pair{"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}})
    for (std::size_t p; (p = s.find(ent)) != std::string::npos;) s.replace(p, std::string(ent).size(), c);
  return s;
}

// The <text> elements of an SVG with a given class: position, anchor and lines (one per <tspan>, or
// the text itself), as text (entities resolved).
struct TextEl {
  double x = 0, y = 0;
  std::string anchor;
  std::vector<std::string> lines;
};

std::string attr(const std::string& tag, const std::string& name) {
  const std::size_t p = tag.find(" " + name + "=\"");
  if (p == std::string::npos) return "";
  const std::size_t b = p + name.size() + 3;
  return tag.substr(b, tag.find('"', b) - b);
}

std::vector<TextEl> texts_of_class(const std::string& svg, const std::string& cls) {
  std::vector<TextEl> out;
  for (std::size_t p = svg.find("<text "); p != std::string::npos; p = svg.find("<text ", p + 1)) {
    const std::size_t open_end = svg.find('>', p);
    const std::string tag = svg.substr(p, open_end - p);
    if (attr(tag, "class") != cls) continue;
    const std::size_t close = svg.find("</text>", open_end);
    std::string body = svg.substr(open_end + 1, close - open_end - 1);
    TextEl t;
    t.x = std::stod(attr(tag, "x"));
    t.y = std::stod(attr(tag, "y"));
    t.anchor = attr(tag, "text-anchor");
    if (const std::size_t tt = body.find("</title>"); tt != std::string::npos) body = body.substr(tt + 8);
    if (body.find("<tspan") == std::string::npos) {
      t.lines.push_back(unescape(body));
    } else {
      for (std::size_t q = body.find("<tspan"); q != std::string::npos; q = body.find("<tspan", q + 1)) {
        const std::size_t b = body.find('>', q) + 1;
        t.lines.push_back(unescape(body.substr(b, body.find("</tspan>", b) - b)));
      }
    }
    out.push_back(t);
  }
  return out;
}

// The horizontal extent of a text element, from the same width estimate the layout uses.
std::pair<double, double> extent(const TextEl& t) {
  double w = 0;
  for (auto& l : t.lines) w = std::max(w, svg_text_width(l));
  if (t.anchor == "middle") return {t.x - w / 2, t.x + w / 2};
  if (t.anchor == "end") return {t.x - w, t.x};
  return {t.x, t.x + w};
}

std::pair<double, double> view_box(const std::string& svg) {
  const std::string vb = attr(svg.substr(0, svg.find('>')), "viewBox");
  double x0, y0, w, h;
  EXPECT_EQ(std::sscanf(vb.c_str(), "%lf %lf %lf %lf", &x0, &y0, &w, &h), 4) << vb;
  return {w, h};
}

const std::vector<std::string> kConditions = {"(a) random init, nondeterminism on", "(b) random init, nondeterminism off",
                                              "(c) fixed init, nondeterminism on", "(d) fixed init, nondeterminism off"};

}  // namespace

TEST(Svg, TextFitAndWrap) {
  EXPECT_EQ(svg_fit("short", 100), "short");
  const std::string cut = svg_fit("a rather long label that cannot fit", 60);
  EXPECT_LE(svg_text_width(cut), 60.0);
  EXPECT_EQ(cut.substr(cut.size() - 3), "…");
  EXPECT_EQ(svg_text_width("×"), svg_text_width("x")) << "widths count code points, not bytes";
  const std::string greek = svg_fit("ααααααααααααααααααααα", 30);  // 2 bytes per letter, 3 for "…"
  EXPECT_EQ((greek.size() - 3) % 2, 0u) << "never cuts inside a code point";
  auto lines = svg_wrap("(a) random init, nondeterminism on", 130, 3);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0] + " " + lines[1], "(a) random init, nondeterminism on");
  for (auto& l : lines) EXPECT_LE(svg_text_width(l), 130.0);
  // A word longer than a line is cut; text beyond the last line ends in "…".
  lines = svg_wrap("cpu?order=atomic&threads=2&isa=auto and more words here", 60, 2);
  ASSERT_EQ(lines.size(), 2u);
  for (auto& l : lines) EXPECT_LE(svg_text_width(l), 60.0) << l;
  EXPECT_EQ(lines[1].substr(lines[1].size() - 3), "…");
  EXPECT_TRUE(svg_wrap("", 50, 2).empty());
  EXPECT_EQ(svg_tint("#d73027", 1.0), "#d73027");
  EXPECT_EQ(svg_tint("#d73027", 0.0), "#ffffff");
}

// The final-loss plot of the training report: four long condition names under four columns.
TEST(Svg, StripPlotLabelsDoNotOverlap) {
  std::vector<GroupValues> groups;
  for (auto& c : kConditions) groups.push_back({c, {0.0074, 0.0075, 0.0073}});
  groups.push_back({"a_label_with_no_spaces_that_is_much_longer_than_its_column", {0.007}});
  StripPlotOptions opt;
  opt.title = "Final loss per condition";
  const std::string a = svg_strip_plot(groups, opt);
  EXPECT_TRUE(well_formed(a));
  const auto labels = texts_of_class(a, "group-label");
  ASSERT_EQ(labels.size(), groups.size());
  const auto [W, H] = view_box(a);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const auto [l, r] = extent(labels[i]);
    EXPECT_GE(l, 0.0);
    EXPECT_LE(r, W);
    EXPECT_LE(labels[i].y + 13.0 * static_cast<double>(labels[i].lines.size() - 1), H);
    if (i > 0) {
      EXPECT_LT(extent(labels[i - 1]).second, l) << "label " << i << " overlaps its left neighbour";
    }
  }
  EXPECT_GE(labels[0].lines.size(), 2u) << "a long label wraps instead of running into its neighbour";
}

TEST(Svg, LegendsStayInsideTheViewBox) {
  std::vector<PlotSeries> series;
  for (auto& c : kConditions) series.push_back({c + " on cpu?order=atomic&threads=2&isa=auto", {}, {1.0, 0.5, 0.25}});
  const std::string a = svg_faceted_line_plot({{"", series}}, {});
  EXPECT_TRUE(well_formed(a));
  const auto [W, H] = view_box(a);
  const auto legend = texts_of_class(a, "legend");
  ASSERT_EQ(legend.size(), 4u);
  for (auto& t : legend) {
    EXPECT_LE(extent(t).second, W) << t.lines[0];
    EXPECT_LE(t.y, H);
  }
  // Bar labels longer than the label column are cut, never drawn past the left edge.
  const std::string b = svg_bar_chart({{std::string(200, 'x'), 0.5, std::nullopt, std::nullopt}}, {});
  EXPECT_TRUE(well_formed(b));
  EXPECT_NE(b.find("<title>" + std::string(200, 'x') + "</title>"), std::string::npos) << "the whole label as tooltip";
}

TEST(Svg, FacetedLinePlotOnePanelPerFacet) {
  std::vector<Facet> facets;
  const std::vector<std::string> targets = {"cpu?order=atomic&threads=2&isa=auto", "cpu?order=blocked&threads=2&isa=auto"};
  for (std::size_t c = 0; c < kConditions.size(); ++c) {
    Facet f{kConditions[c], {}};
    for (std::size_t t = 0; t < (c % 2 == 0 ? 2u : 1u); ++t)
      for (int r = 0; r < 3; ++r) {
        PlotSeries s{targets[t], {}, {}};
        for (int i = 1; i <= 400; ++i) s.y.push_back(0.1 * std::pow(i, -0.3) * (1 + 0.01 * r));
        f.series.push_back(s);
      }
    facets.push_back(f);
  }
  FacetOptions opt;
  opt.title = "loss";
  opt.x_label = "batch";
  opt.y_label = "loss";
  opt.log_x = opt.log_y = true;
  const std::string a = svg_faceted_line_plot(facets, opt);
  EXPECT_EQ(a, svg_faceted_line_plot(facets, opt));
  EXPECT_TRUE(well_formed(a));
  EXPECT_EQ(texts_of_class(a, "facet-title").size(), 4u);
  EXPECT_EQ(count(a, "<path "), 18u);
  // Each target keeps its colour in every panel: 6 groups of paths, in two colours.
  EXPECT_EQ(count(a, std::string("stroke=\"") + svg_group_colour(0) + "\" stroke-opacity"), 4u);
  EXPECT_EQ(count(a, std::string("stroke=\"") + svg_group_colour(1) + "\" stroke-opacity"), 2u);
  const auto [W, H] = view_box(a);
  const auto legend = texts_of_class(a, "legend");
  ASSERT_EQ(legend.size(), 2u);
  for (auto& t : legend) {
    EXPECT_LE(extent(t).second, W);
    EXPECT_LE(t.y, H);
  }
  for (auto& t : texts_of_class(a, "facet-title")) EXPECT_LE(extent(t).second, W);
  EXPECT_TRUE(well_formed(svg_faceted_line_plot({}, {})));
}

TEST(Svg, HeatmapStackedBarsAndHistograms) {
  HeatmapOptions ho;
  ho.title = "verdicts";
  ho.row_labels = {"t<1>", std::string(300, 'y')};
  ho.col_labels = {"w1", "w2", "w3"};
  ho.col_legend = {"w1  matmul?m=1&n=2", "w2  x", "w3  y"};
  ho.legend = {{"#1a9850", "PASS"}, {"#d73027", "FAIL"}};
  std::vector<HeatmapCell> cells = {{0, 0, "#1a9850", "", "a & b"}, {0, 2, "#d73027", "4/10", "c"}, {1, 1, "#eeeeee", "", ""}};
  const std::string h = svg_heatmap(cells, ho);
  EXPECT_TRUE(well_formed(h));
  EXPECT_EQ(h, svg_heatmap(cells, ho));
  EXPECT_NE(h.find("t&lt;1&gt;"), std::string::npos);
  EXPECT_NE(h.find("<title>a &amp; b</title>"), std::string::npos);
  EXPECT_NE(h.find(">4/10<"), std::string::npos);
  EXPECT_NE(h.find(">w3<"), std::string::npos);
  EXPECT_NE(h.find("<title>" + std::string(300, 'y') + "</title>"), std::string::npos) << "long row label cut";
  const auto [W, H] = view_box(h);
  for (auto& t : texts_of_class(h, "legend")) EXPECT_LE(extent(t).second, W);

  StackedBarOptions so;
  so.segments = {{"#1a9850", "PASS"}, {"#d73027", "FAIL"}};
  const std::string s = svg_stacked_bars({{"t1", {3, 1}}, {"t2", {0, 4}}}, so);
  EXPECT_TRUE(well_formed(s));
  EXPECT_EQ(count(s, "<title>t1: "), 2u);
  EXPECT_EQ(count(s, "<title>t2: "), 1u) << "empty segments are not drawn";
  EXPECT_TRUE(well_formed(svg_stacked_bars({}, so)));

  HistogramOptions o;
  o.x_ticks = {{0.5, "="}, {13, "1"}};
  o.marker = 13;
  o.marker_label = "bound";
  std::vector<HistogramPanel> panels(4, HistogramPanel{"cpu?order=atomic", "matmul?m=1", std::vector<double>(15, 0)});
  panels[0].counts[13] = 3;
  panels[0].counts[2] = 1e6;
  const std::string g = svg_histograms(panels, o);
  EXPECT_TRUE(well_formed(g));
  EXPECT_EQ(count(g, "<g class=\"panel\">"), 4u);
  EXPECT_EQ(count(g, "stroke-dasharray"), 4u);
  EXPECT_TRUE(well_formed(svg_histograms({}, o)));
}
