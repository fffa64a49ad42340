#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <string>
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
  LinePlotOptions opt;
  opt.title = "loss <&> \"runs\"";
  opt.x_label = "step";
  opt.y_label = "loss";
  opt.log_x = opt.log_y = true;
  const auto curves = some_curves();
  const std::string a = svg_line_plot(curves, opt), b = svg_line_plot(curves, opt);
  EXPECT_EQ(a, b);
  EXPECT_TRUE(well_formed(a));
  EXPECT_NE(a.find("loss &lt;&amp;&gt; &quot;runs&quot;"), std::string::npos);
  EXPECT_EQ(a.find("<&"), std::string::npos);
  EXPECT_EQ(count(a, "<path "), 12u);
  EXPECT_EQ(count(a, "<g fill=\"none\" stroke="), 4u);  // one colour per group
  for (const char* g : {">a<", ">b<", ">c<", ">d<"}) EXPECT_NE(a.find(g), std::string::npos) << g;
  // 12 curves × 5000 points, each at most 500 points of ≤ ~8 characters per coordinate pair.
  EXPECT_LT(a.size(), 12u * 500u * 10u + 20000u);
  // Every path has ≤ 500 points (coordinate pairs), and the reduction kept the shape.
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
    EXPECT_LE(numbers / 2, 500u);
    EXPECT_GT(numbers / 2, 100u);
    ++paths;
  }
  EXPECT_EQ(paths, 12u);
  opt.log_x = opt.log_y = false;
  const std::string lin = svg_line_plot(curves, opt);
  EXPECT_TRUE(well_formed(lin));
  EXPECT_LT(lin.size(), 12u * 500u * 10u + 20000u);
}

TEST(Svg, LinePlotHandlesBadValuesAndEmptyInput) {
  PlotSeries s;
  s.group = "x";
  s.y = {1.0, 0.0, -1.0, NAN, 2.0, 3.0};  // log-y: the first three non-positive/NaN are dropped
  LinePlotOptions opt;
  opt.log_y = true;
  const std::string a = svg_line_plot({s}, opt);
  EXPECT_TRUE(well_formed(a));
  EXPECT_EQ(a.find("nan"), std::string::npos);
  EXPECT_EQ(a.find("inf"), std::string::npos);
  EXPECT_EQ(count(a, "<path "), 2u);  // the line breaks at the dropped values
  const std::string e = svg_line_plot({}, {});
  EXPECT_TRUE(well_formed(e));
  EXPECT_NE(e.find("no data"), std::string::npos);
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
