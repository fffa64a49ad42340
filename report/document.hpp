// A report is built once as a document (sections of paragraphs, lists, tables) and rendered to
// markdown and to HTML, so the two formats always say the same thing.
#pragma once
#include <string>
#include <vector>

namespace detaudit {

struct Cell {
  std::string text;
  std::string cls;  // HTML class: ok, bad, warn, skip, muted ("" = none)
};

struct Block {
  enum class Kind { kParagraph, kList, kTable, kCode, kSvg };
  Kind kind = Kind::kParagraph;
  std::string text;                     // paragraph, code, or SVG markup
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
  Section& code(std::string t);
  Section& svg(std::string markup, std::string alt);
};

struct Document {
  std::string title;
  std::vector<Section> sections;
  Section& add(std::string title);
};

std::string render_markdown(const Document& d);
std::string render_html(const Document& d);
std::string html_escape(const std::string& s);

}  // namespace detaudit
