// A report is built once as a document (sections of paragraphs, lists, tables) and rendered to
// markdown and to HTML, so the two formats always say the same thing.
#pragma once
#include <string>
#include <vector>

namespace detaudit {

// Text in paragraphs, list items, table cells and headers is a small markup: `code`, **bold**, and
// `\c` for a literal c. Text that comes from results (names, specs, reasons, hostnames, versions)
// enters only through inline_text() or inline_code(); each renderer escapes for its own format, so no
// name can break a table, open a tag or inject markup in either report.
struct Cell {
  std::string text;
  std::string cls;  // HTML class: ok, bad, warn, skip, muted ("" = none)
};

struct Block {
  enum class Kind { kParagraph, kList, kTable, kSvg };
  Kind kind = Kind::kParagraph;
  std::string text;                     // paragraph, or SVG markup
  std::vector<std::string> items;       // list items
  std::vector<std::string> header;      // table
  std::vector<std::vector<Cell>> rows;  // table
  std::string cls;                      // paragraph class (verdict colouring)
};

struct Section {
  std::string title;
  std::vector<Block> blocks;
  Section& para(std::string t, std::string cls = "");
  Section& list(std::vector<std::string> items);
  Section& table(std::vector<std::string> header, std::vector<std::vector<Cell>> rows);
  Section& svg(std::string markup, std::string alt);
};

struct Document {
  std::string title;
  std::vector<Section> sections;
  Section& add(std::string title);
};

// Untrusted text as literal text of the markup (line breaks become spaces), and as a code span.
std::string inline_text(const std::string& s);
std::string inline_code(const std::string& s);

std::string render_markdown(const Document& d);
std::string render_html(const Document& d);
std::string html_escape(const std::string& s);
// Literal text for markdown (GitHub flavour): markdown punctuation backslash-escaped, < > & as
// entities (no raw tag survives), line breaks as spaces; safe inside a table cell.
std::string markdown_escape(const std::string& s);

}  // namespace detaudit
