#include "report/document.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace detaudit {

Section& Section::para(std::string t, std::string cls) {
  Block b;
  b.kind = Block::Kind::kParagraph;
  b.text = std::move(t);
  b.cls = std::move(cls);
  blocks.push_back(std::move(b));
  return *this;
}
Section& Section::list(std::vector<std::string> items) {
  Block b;
  b.kind = Block::Kind::kList;
  b.items = std::move(items);
  blocks.push_back(std::move(b));
  return *this;
}
Section& Section::table(std::vector<std::string> header, std::vector<std::vector<Cell>> rows) {
  Block b;
  b.kind = Block::Kind::kTable;
  b.header = std::move(header);
  b.rows = std::move(rows);
  blocks.push_back(std::move(b));
  return *this;
}
Section& Section::svg(std::string markup, std::string alt) {
  Block b;
  b.kind = Block::Kind::kSvg;
  b.text = std::move(markup);
  b.items = {std::move(alt)};
  blocks.push_back(std::move(b));
  return *this;
}
Section& Section::details(std::string summary, Section inner, bool open, std::string cls) {
  Block b;
  b.kind = Block::Kind::kDetails;
  b.text = std::move(summary);
  b.children = std::move(inner.blocks);
  b.open = open;
  b.cls = std::move(cls);
  blocks.push_back(std::move(b));
  return *this;
}
Section& Section::html_only() {
  if (!blocks.empty()) blocks.back().shown = Block::Shown::kHtmlOnly;
  return *this;
}
Section& Section::markdown_only() {
  if (!blocks.empty()) blocks.back().shown = Block::Shown::kMarkdownOnly;
  return *this;
}
Section& Section::md_budget(std::size_t chars) {
  if (!blocks.empty()) blocks.back().md_budget = chars;
  return *this;
}
Section& Section::cap(std::size_t items, std::string where) {
  if (!blocks.empty()) {
    blocks.back().cap = items;
    blocks.back().cap_where = std::move(where);
  }
  return *this;
}
Section& Document::add(std::string t) {
  sections.push_back({std::move(t), {}});
  return sections.back();
}

namespace {

// The markup of one paragraph, list item or cell, parsed into literal text, code and bold.
struct Span {
  enum class Kind { kText, kCode, kBold };
  Kind kind;
  std::string text;  // literal (kText, kCode); kBold toggles
};

std::vector<Span> parse_inline(const std::string& s) {
  std::vector<Span> out;
  std::string cur;
  bool code = false;
  auto flush = [&] {
    if (!cur.empty() || code) out.push_back({code ? Span::Kind::kCode : Span::Kind::kText, cur});
    cur.clear();
  };
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i];
    } else if (c == '`') {
      flush();
      code = !code;
    } else if (!code && c == '*' && i + 1 < s.size() && s[i + 1] == '*') {
      flush();
      out.push_back({Span::Kind::kBold, ""});
      ++i;
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back({code ? Span::Kind::kCode : Span::Kind::kText, cur});
  return out;
}

bool is_control(char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }

// A backtick code span shows its content literally: it cannot hold a backtick, and < > | would be a
// raw tag or a table border, so such content is written as <code> with escaped text instead.
bool fits_code_span(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.back() == ' ') return false;
  for (char c : s)
    if (c == '`' || c == '<' || c == '>' || c == '|' || is_control(c)) return false;
  return true;
}

std::string inline_markdown(const std::string& markup) {
  std::string o;
  for (auto& sp : parse_inline(markup)) switch (sp.kind) {
      case Span::Kind::kText: o += markdown_escape(sp.text); break;
      case Span::Kind::kBold: o += "**"; break;
      case Span::Kind::kCode:
        o += fits_code_span(sp.text) ? "`" + sp.text + "`" : "<code>" + markdown_escape(sp.text) + "</code>";
        break;
    }
  return o;
}

std::string md_cell(const std::string& markup) {
  std::string o = inline_markdown(markup);
  return o.empty() ? " " : o;
}

}  // namespace

std::string inline_text(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    if (c == '\\' || c == '`' || c == '*') o += '\\';
    o += is_control(c) ? ' ' : c;
  }
  return o;
}

std::string inline_code(const std::string& s) {
  std::string code = "`";
  code += inline_text(s);
  code += '`';
  return code;
}

namespace {
// Whether s[at] (an '&') begins what markdown reads as a character reference: &name; &#123; &#x1f;.
bool starts_reference(const std::string& s, size_t at) {
  size_t i = at + 1;
  if (i < s.size() && s[i] == '#') ++i;
  const size_t first = i;
  while (i < s.size() && std::isalnum(static_cast<unsigned char>(s[i]))) ++i;
  return i > first && i < s.size() && s[i] == ';';
}
}  // namespace

std::string markdown_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    const char c = s[k];
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      // A bare '&' is literal in markdown ("a&b", a spec's "&threads=2"): escaped only where it would
      // begin a character reference.
      case '&':
        o += starts_reference(s, k) ? "&amp;" : "&";
        break;
      case '\\': case '`': case '*': case '_': case '[': case ']': case '#': case '|': case '~': case '$': case '!':
        o += '\\';
        o += c;
        break;
      default: o += is_control(c) ? ' ' : c;
    }
  }
  return o;
}

std::string html_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

namespace {

std::string inline_html(const std::string& markup) {
  std::string o;
  bool bold = false;
  for (auto& sp : parse_inline(markup)) switch (sp.kind) {
      case Span::Kind::kText: o += html_escape(sp.text); break;
      case Span::Kind::kCode: o += "<code>" + html_escape(sp.text) + "</code>"; break;
      case Span::Kind::kBold:
        o += bold ? "</strong>" : "<strong>";
        bold = !bold;
        break;
    }
  if (bold) o += "</strong>";
  return o;
}

std::string class_attr(const std::string& cls) { return cls.empty() ? "" : " class=\"" + html_escape(cls) + "\""; }

// The line that replaces what a markdown budget left out.
std::string more_in_html(size_t n, const char* what) {
  return fmt::format("… and {} more{} (see report.html)", n, what);
}

void markdown_table(const Block& b, std::string& out) {
  std::string head = "|";
  for (auto& h : b.header) head.append(" ").append(md_cell(h)).append(" |");
  head += "\n|";
  for (size_t i = 0; i < b.header.size(); ++i) head += "---|";
  head += "\n";
  std::string body;
  size_t shown = 0;
  for (auto& r : b.rows) {
    std::string line = "|";
    for (auto& c : r) line.append(" ").append(md_cell(c.text)).append(" |");
    line += "\n";
    if (b.md_budget && head.size() + body.size() + line.size() > b.md_budget) break;
    body += line;
    ++shown;
  }
  if (shown > 0 || b.rows.empty()) out += head + body + "\n";
  if (shown < b.rows.size()) out += inline_markdown(more_in_html(b.rows.size() - shown, " rows")) + "\n\n";
}

void markdown_blocks(const std::vector<Block>& blocks, std::string& out) {
  for (auto& b : blocks) {
    if (b.shown == Block::Shown::kHtmlOnly) continue;
    switch (b.kind) {
      case Block::Kind::kParagraph: out += inline_markdown(b.text) + "\n\n"; break;
      case Block::Kind::kList: {
        const size_t n = b.items.size(), capped = b.cap ? std::min(b.cap, n) : n;
        size_t used = 0, shown = 0;
        for (; shown < capped; ++shown) {
          std::string line = "- " + inline_markdown(b.items[shown]) + "\n";
          if (b.md_budget && used + line.size() > b.md_budget) break;
          out += line;
          used += line.size();
        }
        if (shown < n) {
          // Left out by the budget: report.html has them (up to the cap); by the cap: cap_where.
          std::string where = shown < capped ? (capped < n ? "report.html and " + b.cap_where : "report.html") : b.cap_where;
          out += "- " + inline_markdown(fmt::format("… and {} more (see {})", n - shown, where)) + "\n";
        }
        out += "\n";
        break;
      }
      case Block::Kind::kTable: markdown_table(b, out); break;
      case Block::Kind::kSvg:
        break;  // figures are report.html's; the markdown says so once, at its end
      case Block::Kind::kDetails:
        // An HTML block in GitHub markdown: the summary is HTML (escaped by inline_html), the content
        // between the blank lines is markdown again.
        out += std::string(b.open ? "<details open>" : "<details>") + "<summary>" + inline_html(b.text) +
               "</summary>\n\n";
        markdown_blocks(b.children, out);
        out += "</details>\n\n";
        break;
    }
  }
}

void html_blocks(const std::vector<Block>& blocks, std::string& out) {
  for (auto& b : blocks) {
    if (b.shown == Block::Shown::kMarkdownOnly) continue;
    switch (b.kind) {
      case Block::Kind::kParagraph: out += "<p" + class_attr(b.cls) + ">" + inline_html(b.text) + "</p>\n"; break;
      case Block::Kind::kList: {
        const size_t n = b.items.size(), capped = b.cap ? std::min(b.cap, n) : n;
        out += "<ul>\n";
        for (size_t i = 0; i < capped; ++i) out += "<li>" + inline_html(b.items[i]) + "</li>\n";
        if (capped < n) out += "<li>" + inline_html(fmt::format("… and {} more (see {})", n - capped, b.cap_where)) + "</li>\n";
        out += "</ul>\n";
        break;
      }
      case Block::Kind::kTable:
        // A wide table (the determinism matrix of many targets) scrolls in its own box: the page keeps
        // the window's width.
        out += "<div class=\"wide\"><table><thead><tr>";
        for (auto& h : b.header) out += "<th>" + inline_html(h) + "</th>";
        out += "</tr></thead><tbody>\n";
        for (auto& r : b.rows) {
          out += "<tr>";
          for (auto& c : r) out += "<td" + class_attr(c.cls) + ">" + inline_html(c.text) + "</td>";
          out += "</tr>\n";
        }
        out += "</tbody></table></div>\n";
        break;
      case Block::Kind::kSvg: out += "<figure>" + b.text + "</figure>\n"; break;
      case Block::Kind::kDetails:
        out += "<details" + class_attr(b.cls) + (b.open ? " open" : "") + "><summary>" + inline_html(b.text) +
               "</summary>\n";
        html_blocks(b.children, out);
        out += "</details>\n";
        break;
    }
  }
}

}  // namespace

bool parse_output_format(const std::string& s, OutputFormat* out) {
  if (s == "text") *out = OutputFormat::kText;
  else if (s == "md") *out = OutputFormat::kMarkdown;
  else if (s == "json") *out = OutputFormat::kJson;
  else return false;
  return true;
}

namespace {
size_t count_figures(const std::vector<Block>& blocks) {
  size_t n = 0;
  for (auto& b : blocks) n += b.kind == Block::Kind::kSvg ? 1 : count_figures(b.children);
  return n;
}
}  // namespace

std::string render_markdown(const Document& d) {
  std::string out = "# " + markdown_escape(d.title) + "\n\n";
  size_t figures = 0;
  for (auto& s : d.sections) {
    if (!s.title.empty()) out += "## " + markdown_escape(s.title) + "\n\n";
    markdown_blocks(s.blocks, out);
    figures += count_figures(s.blocks);
  }
  if (figures == 1) out += "The figure of this report is in report.html.\n";
  if (figures > 1) out += fmt::format("The {} figures of this report are in report.html.\n", figures);
  return out;
}

std::string render_html(const Document& d) {
  std::string out = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{0}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:110em;color:#222}}
table{{border-collapse:collapse;margin:.5em 0 1.5em}} th,td{{border:1px solid #ccc;padding:.25em .5em;font-size:90%;vertical-align:top}}
th{{background:#f3f3f3;text-align:left}} code{{background:#f5f5f5;padding:0 .2em}}
td.ok{{background:#e6f4e6}} td.bad{{background:#fbe3e3}} td.expected{{background:#e3ecf9}} td.warn{{background:#fff4d6}} td.skip{{background:#eee;color:#666}} td.muted{{color:#888}}
p.ok{{color:#185c18;font-weight:600}} p.bad{{color:#9b1c1c;font-weight:600}} p.expected{{color:#1d4f91;font-weight:600}} p.warn{{color:#8a5a00;font-weight:600}}
details{{margin:.4em 0 1em}} summary{{cursor:pointer;font-weight:600}} details.bad>summary{{color:#9b1c1c}} details.expected>summary{{color:#1d4f91}} details.warn>summary{{color:#8a5a00}}
figure{{margin:1em 0;overflow-x:auto}} div.wide{{max-width:100%;overflow-x:auto}} td code,th code{{overflow-wrap:anywhere}}
</style></head><body>
<h1>{0}</h1>
)",
                                html_escape(d.title));
  for (auto& s : d.sections) {
    if (!s.title.empty()) out += "<h2>" + html_escape(s.title) + "</h2>\n";
    html_blocks(s.blocks, out);
  }
  out += "</body></html>\n";
  return out;
}

}  // namespace detaudit
