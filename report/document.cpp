#include "report/document.hpp"

#include <fmt/format.h>

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

std::string inline_code(const std::string& s) { return "`" + inline_text(s) + "`"; }

std::string markdown_escape(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '&': o += "&amp;"; break;
      case '\\': case '`': case '*': case '_': case '[': case ']': case '#': case '|': case '~': case '$': case '!':
        o += '\\';
        o += c;
        break;
      default: o += is_control(c) ? ' ' : c;
    }
  }
  return o;
}

std::string render_markdown(const Document& d) {
  std::string out = "# " + markdown_escape(d.title) + "\n\n";
  for (auto& s : d.sections) {
    out += "## " + markdown_escape(s.title) + "\n\n";
    for (auto& b : s.blocks) {
      switch (b.kind) {
        case Block::Kind::kParagraph: out += inline_markdown(b.text) + "\n\n"; break;
        case Block::Kind::kList:
          for (auto& i : b.items) out += "- " + inline_markdown(i) + "\n";
          out += "\n";
          break;
        case Block::Kind::kTable: {
          out += "|";
          for (auto& h : b.header) out += " " + md_cell(h) + " |";
          out += "\n|";
          for (size_t i = 0; i < b.header.size(); ++i) out += "---|";
          out += "\n";
          for (auto& r : b.rows) {
            out += "|";
            for (auto& c : r) out += " " + md_cell(c.text) + " |";
            out += "\n";
          }
          out += "\n";
          break;
        }
        case Block::Kind::kSvg:
          out += "*(figure: " + markdown_escape(b.items.empty() ? std::string("plot") : b.items[0]) +
                 "; see report.html)*\n\n";
          break;
      }
    }
  }
  return out;
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
}  // namespace
std::string render_html(const Document& d) {
  std::string out = fmt::format(R"(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{0}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:2em;max-width:110em;color:#222}}
table{{border-collapse:collapse;margin:.5em 0 1.5em}} th,td{{border:1px solid #ccc;padding:.25em .5em;font-size:90%;vertical-align:top}}
th{{background:#f3f3f3;text-align:left}} code{{background:#f5f5f5;padding:0 .2em}}
td.ok{{background:#e6f4e6}} td.bad{{background:#fbe3e3}} td.warn{{background:#fff4d6}} td.skip{{background:#eee;color:#666}} td.muted{{color:#888}}
p.ok{{color:#185c18;font-weight:600}} p.bad{{color:#9b1c1c;font-weight:600}} p.warn{{color:#8a5a00;font-weight:600}}
</style></head><body>
<h1>{0}</h1>
)",
                                html_escape(d.title));
  for (auto& s : d.sections) {
    out += "<h2>" + html_escape(s.title) + "</h2>\n";
    for (auto& b : s.blocks) {
      switch (b.kind) {
        case Block::Kind::kParagraph:
          out += (b.cls.empty() ? std::string("<p>") : "<p class=\"" + b.cls + "\">") + inline_html(b.text) + "</p>\n";
          break;
        case Block::Kind::kList:
          out += "<ul>\n";
          for (auto& i : b.items) out += "<li>" + inline_html(i) + "</li>\n";
          out += "</ul>\n";
          break;
        case Block::Kind::kTable:
          out += "<table><thead><tr>";
          for (auto& h : b.header) out += "<th>" + inline_html(h) + "</th>";
          out += "</tr></thead><tbody>\n";
          for (auto& r : b.rows) {
            out += "<tr>";
            for (auto& c : r)
              out += (c.cls.empty() ? std::string("<td>") : "<td class=\"" + c.cls + "\">") + inline_html(c.text) + "</td>";
            out += "</tr>\n";
          }
          out += "</tbody></table>\n";
          break;
        case Block::Kind::kSvg: out += "<figure>" + b.text + "</figure>\n"; break;
      }
    }
  }
  out += "</body></html>\n";
  return out;
}

}  // namespace detaudit
