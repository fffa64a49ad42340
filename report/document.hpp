// A report is built once as a document (sections of paragraphs, lists, tables, figures and collapsible
// details) and rendered to markdown and to HTML, so the two formats always say the same thing.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace detaudit {

// Text in paragraphs, list items, table cells and headers is a small markup: `code`, **bold**, and
// `\c` for a literal c. Text that comes from results (names, specs, reasons, hostnames, versions)
// enters only through inline_text() or inline_code(); each renderer escapes for its own format, so no
// name can break a table, open a tag or inject markup in either report.
struct Cell {
  std::string text;
  std::string cls = "";  // HTML class: ok, bad, expected, warn, skip, muted ("" = none)
};

struct Block {
  enum class Kind { kParagraph, kList, kTable, kSvg, kDetails };
  // Where the block appears: report.md is read in a PR comment and has a size limit; report.html has
  // the figures and the full tables.
  enum class Shown { kBoth, kHtmlOnly, kMarkdownOnly };
  Kind kind = Kind::kParagraph;
  std::string text;                     // paragraph, SVG markup, or the summary line of details
  std::vector<std::string> items;       // list items; for kSvg, items[0] is the figure's alt text
  std::vector<std::string> header;      // table
  std::vector<std::vector<Cell>> rows;  // table
  std::string cls;                      // paragraph or details class (verdict colouring)
  std::vector<Block> children;          // details: collapsed content
  bool open = false;                    // details: shown expanded
  Shown shown = Shown::kBoth;
  // Lists and tables: at most this many characters of markdown (0: no limit). Items or rows past it
  // are left out of report.md and counted in one line that points to report.html, where all are shown.
  std::size_t md_budget = 0;
  // Lists: at most this many items in either format (0: no limit); the rest are counted in one line
  // that says where to find them (cap_where, e.g. "results.json").
  std::size_t cap = 0;
  std::string cap_where;
};

struct Section {
  std::string title;  // empty: no heading (the lines under the document's title)
  std::vector<Block> blocks;
  Section& para(std::string t, std::string cls = "");
  Section& list(std::vector<std::string> items);
  Section& table(std::vector<std::string> header, std::vector<std::vector<Cell>> rows);
  Section& svg(std::string markup, std::string alt);
  // A collapsible block: <details><summary>summary</summary> ... </details> in both formats (GitHub
  // renders the HTML element in markdown). The blocks of `inner` are its content.
  Section& details(std::string summary, Section inner, bool open = false, std::string cls = "");
  // Modifiers of the block added last.
  Section& html_only();
  Section& markdown_only();
  Section& md_budget(std::size_t chars);
  Section& cap(std::size_t items, std::string where);
};

struct Document {
  std::string title;
  std::vector<Section> sections;
  Section& add(std::string title);
};

// Untrusted text as literal text of the markup (line breaks become spaces), and as a code span.
std::string inline_text(const std::string& s);
std::string inline_code(const std::string& s);

// The formats the gates' commands print (check, compare): text for a terminal, markdown for a pull
// request comment, JSON for tools. parse_output_format takes "text", "md" or "json".
enum class OutputFormat { kText, kMarkdown, kJson };
bool parse_output_format(const std::string& s, OutputFormat* out);

std::string render_markdown(const Document& d);
std::string render_html(const Document& d);
std::string html_escape(const std::string& s);
// Literal text for markdown (GitHub flavour): markdown punctuation backslash-escaped, < > & as
// entities (no raw tag survives), line breaks as spaces; safe inside a table cell.
std::string markdown_escape(const std::string& s);

}  // namespace detaudit
