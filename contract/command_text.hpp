// A command line as the tool records it (results' "command", a baseline's source, the history) and reads it
// back: each word shell-quoted where it needs it, so that the words read back are the words given (an --out
// path with a blank stays one word, a spec's '&' and '?' stay in their word) and the line can be pasted into a
// shell.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace detaudit {

// `w` as a POSIX shell word: unchanged when it holds only letters, digits and _-./:=,+@%; else in single
// quotes (a quote inside written '\'').
std::string shell_word(const std::string& w);
// The words joined by one blank, each shell_word.
std::string command_text(const std::vector<std::string>& words);
// The words of a recorded command line: blanks separate words; single-quoted parts ('...') and double-quoted
// parts ("...", with \" and \\) are taken as they stand, without the quotes; a backslash outside quotes keeps
// the next character. The inverse of command_text, and it reads a line recorded before quoting (plain words).
std::vector<std::string> command_words(const std::string& command);
// The subcommand of a recorded command line: its first word after the program that is no option ("" if none).
std::string command_subcommand(const std::string& command);
// The values a recorded command line gives the named options ("--opt v" or "--opt=v"; the last where one is given
// twice), by option; nullopt when the command is not `subcommand`'s (its first word after the program that is
// no option).
std::optional<std::map<std::string, std::string>> command_options(const std::string& command,
                                                                  const std::string& subcommand,
                                                                  const std::vector<std::string>& options);

}  // namespace detaudit
