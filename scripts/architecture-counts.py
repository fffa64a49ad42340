#!/usr/bin/env python3
"""The counts that say how typed the upper half of detaudit is, measured on the sources.

Usage: scripts/architecture-counts.py [REPO_ROOT]   (default: the folder above this script)

Prints one line per count, and exits 0. The counts, each over the layer folders' C++ and CUDA sources
(kernels, contract, models, probes, analysis, report, suites, gates, store, cli; tests and benchmarks left out):

  json_outside_contract  mentions of "json" (any case) outside contract/: how far JSON reaches past the border
  nlohmann_includes      files outside contract/ that include nlohmann/json (the goal is none above contract/)
  report_field_reads     fields report/ reads by name from JSON: ["name"], .at("name"), .value("name", ...),
                         .contains("name"), .find("name")
  spec_parses_outside    calls of parse_target / parse_workload / parse_spec_syntax outside probes/ and contract/
  results_paths_by_hand  "/results.json" written in a string outside contract/ (results_file(dir) names it)
  functions_over_80      function bodies longer than 80 lines (a brace matcher over definitions that start a
                         line; lambdas count inside the function that holds them)
  backend_files          files other than a backend's own that name it, for the backends named below: what
                         adding one more touches (the registry list, CMake, the kernels it shares)

The function count is a heuristic (no compiler front end is needed to run it): a definition is a line that
starts at column 0 or after namespace-level indentation, ends in `{` and holds `(`, and is not a control
statement, class or namespace; its length runs to the matching brace.
"""
import os
import re
import sys

LAYERS = ["kernels", "contract", "models", "probes", "analysis", "report", "suites", "gates", "store", "cli"]
EXTS = (".cpp", ".hpp", ".cu", ".cuh", ".cc", ".h")


def sources(root):
    for layer in LAYERS:
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for f in sorted(files):
                if f.endswith(EXTS):
                    path = os.path.join(dirpath, f)
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        yield layer, os.path.relpath(path, root), fh.read()


def strip_comments_and_strings(text, keep_strings=False):
    """Comments removed and (unless keep_strings) string literals emptied, so braces and words in them do not count."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append("\n" * text.count("\n", i, n if j < 0 else j))
            i = n if j < 0 else j + 2
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            end = n if end < 0 else end + len(m.group(1)) + 2
            out.append(text[i:end] if keep_strings else '""' + "\n" * text.count("\n", i, end))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1] if keep_strings else c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


DEF_START = re.compile(r"^(?:[A-Za-z_~][\w:<>,*&\s\[\]]*\s)?[~\w:<>]+\s*\(.*\)[^;{}]*\{\s*$")
NOT_DEF = re.compile(r"^\s*(if|for|while|switch|catch|do|else|return|namespace|class|struct|enum|union)\b")


def long_functions(code, limit=80):
    lines = code.split("\n")
    found = []
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        head = line.strip()
        # a definition may span lines: join up to 4 lines back to the one with '('
        if head.endswith("{") and indent <= 2 and not NOT_DEF.match(line) and "=" not in head.split("(")[0]:
            start = i
            text = head
            while "(" not in text and start > 0 and i - start < 4:
                start -= 1
                text = lines[start].strip() + " " + text
            if "(" in text and not NOT_DEF.match(lines[start]):
                depth = 0
                for j in range(i, len(lines)):
                    depth += lines[j].count("{") - lines[j].count("}")
                    if depth <= 0:
                        break
                length = j - start + 1
                if length > limit:
                    found.append((start + 1, length))
                i = j + 1
                continue
        i += 1
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    json_outside = nlohmann = report_reads = spec_parses = result_paths = 0
    long_fns = []
    field = re.compile(r'(\[\s*"[A-Za-z_][\w.]*"\s*\]|\.(?:at|value|contains|find|count)\(\s*"[A-Za-z_][\w.]*")')
    parse = re.compile(r"\b(parse_target|parse_workload|parse_spec_syntax)\s*\(")
    backends = {"onednn": [], "cublaslt": []}
    for layer, rel, text in sources(root):
        code = strip_comments_and_strings(text)
        named = strip_comments_and_strings(text, keep_strings=True)  # comments may name a backend
        if layer != "contract":
            json_outside += len(re.findall(r"json", code, re.I))
            nlohmann += 1 if re.search(r'#\s*include\s*[<"]nlohmann/', text) else 0
            result_paths += text.count('/results.json"')
        if layer == "report":
            report_reads += len(field.findall(text))
        if layer not in ("probes", "contract"):
            spec_parses += len(parse.findall(code))
        for start, length in long_functions(code):
            long_fns.append((length, f"{rel}:{start}"))
        for name in backends:
            own = re.search(rf"(^|/){name}(_backend)?\.(cpp|hpp|cu)$", rel)
            if not own and re.search(rf"(?<![A-Za-z0-9]){name}(?![A-Za-z0-9])", named, re.I):
                backends[name].append(rel)
    for extra in ("CMakeLists.txt", "cmake/deps.cmake"):
        path = os.path.join(root, extra)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                t = "\n".join(l.split("#")[0] for l in fh.read().split("\n"))
            for name in backends:
                if re.search(rf"(?<![A-Za-z0-9]){name}(?![A-Za-z0-9])", t, re.I):
                    backends[name].append(extra)
    print(f"json_outside_contract  {json_outside}")
    print(f"nlohmann_includes      {nlohmann}")
    print(f"report_field_reads     {report_reads}")
    print(f"spec_parses_outside    {spec_parses}")
    print(f"results_paths_by_hand  {result_paths}")
    print(f"functions_over_80      {len(long_fns)}")
    for length, where in sorted(long_fns, reverse=True)[:10]:
        print(f"  {length:5d} lines  {where}")
    for name, files in backends.items():
        print(f"backend_files {name:<9}{len(files)}: {' '.join(sorted(files))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
