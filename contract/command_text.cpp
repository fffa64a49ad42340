#include "contract/command_text.hpp"

namespace detaudit {

std::string shell_word(const std::string& w) {
  const bool plain = !w.empty() && w.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                                       "_-./:=,+@%") == std::string::npos;
  if (plain) return w;
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string command_text(const std::vector<std::string>& words) {
  std::string s;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i) s += ' ';
    s += shell_word(words[i]);
  }
  return s;
}

std::vector<std::string> command_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(word), word.clear(), in_word = false;
    } else if (c == '\'') {
      in_word = true;
      const size_t end = command.find('\'', i + 1);
      word += command.substr(i + 1, (end == std::string::npos ? command.size() : end) - i - 1);
      i = end == std::string::npos ? command.size() : end;
    } else if (c == '"') {
      in_word = true;
      for (++i; i < command.size() && command[i] != '"'; ++i) {
        if (command[i] == '\\' && i + 1 < command.size() && (command[i + 1] == '"' || command[i + 1] == '\\')) ++i;
        word += command[i];
      }
    } else if (c == '\\' && i + 1 < command.size()) {
      in_word = true;
      word += command[++i];
    } else {
      in_word = true;
      word += c;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

namespace {
size_t subcommand_at(const std::vector<std::string>& words) {
  size_t at = 1;
  while (at < words.size() && words[at].starts_with("-")) ++at;
  return at;
}
}  // namespace

std::string command_subcommand(const std::string& command) {
  const std::vector<std::string> words = command_words(command);
  const size_t at = subcommand_at(words);
  return at < words.size() ? words[at] : "";
}

std::optional<std::map<std::string, std::string>> command_options(const std::string& command,
                                                                  const std::string& subcommand,
                                                                  const std::vector<std::string>& options) {
  const std::vector<std::string> words = command_words(command);
  const size_t at = subcommand_at(words);
  if (at >= words.size() || words[at] != subcommand) return std::nullopt;
  std::map<std::string, std::string> given;
  for (size_t i = at + 1; i < words.size(); ++i)
    for (const std::string& o : options)
      if (words[i] == o && i + 1 < words.size()) given[o] = words[i + 1];
      else if (words[i].starts_with(o + "=")) given[o] = words[i].substr(o.size() + 1);
  return given;
}

}  // namespace detaudit
