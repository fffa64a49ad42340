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
Section& Section::code(std::string t) {
  Block b;
  b.kind = Block::Kind::kCode;
  b.text = std::move(t);
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
std::string md_cell(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|')
      o += "\\|";
    else if (c == '\n')
      o += ' ';
    else
      o += c;
  }
  return o.empty() ? " " : o;
}
}  // namespace

std::string render_markdown(const Document& d) {
  std::string out = "# " + d.title + "\n\n";
  for (auto& s : d.sections) {
    out += "## " + s.title + "\n\n";
    for (auto& b : s.blocks) {
      switch (b.kind) {
        case Block::Kind::kParagraph: out += b.text + "\n\n"; break;
        case Block::Kind::kList:
          for (auto& i : b.items) out += "- " + i + "\n";
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
        case Block::Kind::kCode: out += "```\n" + b.text + "\n```\n\n"; break;
        case Block::Kind::kSvg: out += "*(figure: " + (b.items.empty() ? std::string("plot") : b.items[0]) +
                                       "; see report.html)*\n\n"; break;
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
// Markdown's `code` spans in paragraph text become <code> in HTML.
std::string inline_html(const std::string& s) {
  std::string e = html_escape(s), o;
  bool in = false;
  for (char c : e) {
    if (c == '`') {
      o += in ? "</code>" : "<code>";
      in = !in;
    } else {
      o += c;
    }
  }
  if (in) o += "</code>";
  // **bold**
  std::string r;
  bool b = false;
  for (size_t i = 0; i < o.size(); ++i) {
    if (o[i] == '*' && i + 1 < o.size() && o[i + 1] == '*') {
      r += b ? "</strong>" : "<strong>";
      b = !b;
      ++i;
    } else {
      r += o[i];
    }
  }
  if (b) r += "</strong>";
  return r;
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
pre{{background:#f7f7f7;padding:.5em;overflow-x:auto}}
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
        case Block::Kind::kCode: out += "<pre>" + html_escape(b.text) + "</pre>\n"; break;
        case Block::Kind::kSvg: out += "<figure>" + b.text + "</figure>\n"; break;
      }
    }
  }
  out += "</body></html>\n";
  return out;
}

}  // namespace detaudit
