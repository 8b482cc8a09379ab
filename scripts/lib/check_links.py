#!/usr/bin/env python3
"""Checks that every relative link in Markdown files resolves.

    check_links.py [--pending PATH]... FILE.md...
    check_links.py --run-ids FILE.md...

A link resolves when its file (or directory) exists relative to the Markdown file and,
with a #fragment into a Markdown file, that file has a heading with that anchor
(GitHub's rule: lower case, punctuation dropped, spaces to hyphens, -1, -2 for
repeats). Links to http(s), mailto and other schemes are not followed (no network
here). Links inside code (fenced blocks, `inline`) are not links. A --pending path is
a file another branch adds: a link to it is reported as skipped, not as resolved.

Prints one line per broken or pending link, then "links: N files, N links, N broken,
N pending"; exits 1 when any link is broken.

With --run-ids it checks instead that the files read as what holds, not as a diary of
runs: no run id (a date such as 2026-12-07, with a letter or not) and no heading named
for a run, a session or a date, except inside a link into the run records' index
(bench/runs/README.md, e.g. [2026-12-07b](../bench/runs/README.md#2026-12-07b)).
Prints "FILE:LINE: ..." for each, then "run ids: N files, N found"; exits 1 when any.
"""

import os
import re
import sys

INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def strip_code(lines, inline=True):
    """The lines with fenced blocks blanked and (with `inline`) inline code removed."""
    out, fence = [], None
    for line in lines:
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            out.append("")
            continue
        m = re.match(r"(`{3,}|~{3,})", stripped)
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line) if inline else line)
    return out


def slug(text):
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        found, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for line in strip_code(lines, inline=False):
            m = HEADING.match(line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else "%s-%d" % (base, n))
        for line in lines:
            found.update(HTML_ANCHOR.findall(line))
        cache[path] = found
    return cache[path]


RUN_ID = re.compile(r"(?<![0-9A-Za-z])20[0-9]{2}-[0-9]{2}-[0-9]{2}[a-z]?(?![0-9A-Za-z])")
DIARY = re.compile(r"(?i)\b(session\s+\d+|run\s+\d+|re-runs?|later the same day)\b")
INDEX = os.path.join("bench", "runs", "README.md")


def run_ids(files):
    """Run ids and diary headings outside links into the records' index."""
    found = 0
    for md in files:
        with open(md, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for number, line in enumerate(lines, 1):
            def outside(m):
                path = m.group(1).partition("#")[0]
                resolved = os.path.normpath(os.path.join(os.path.dirname(md), path))
                return " " if resolved == INDEX or resolved.endswith(os.sep + INDEX) else m.group(0)
            rest = INLINE.sub(outside, line)
            heading = HEADING.match(line)
            if heading and DIARY.search(heading.group(2)):
                found += 1
                print("%s:%d: a heading named for a run or session: %s" % (md, number, line.strip()))
            for m in RUN_ID.finditer(rest):
                found += 1
                print("%s:%d: run id %s outside a link into bench/runs/README.md" % (md, number, m.group(0)))
    print("run ids: %d files, %d found" % (len(files), found))
    return 1 if found else 0


def main(argv):
    if argv[:1] == ["--run-ids"]:
        return run_ids(argv[1:])
    pending, files = set(), []
    args = iter(argv)
    for a in args:
        if a == "--pending":
            pending.add(os.path.normpath(next(args)))
        else:
            files.append(a)
    total = broken = waiting = 0
    for md in files:
        with open(md, encoding="utf-8") as f:
            lines = strip_code(f.read().split("\n"))
        for number, line in enumerate(lines, 1):
            targets = INLINE.findall(line)
            m = REFERENCE.match(line)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:, ...
                total += 1
                path, _, fragment = target.partition("#")
                where = "%s:%d: %s" % (md, number, target)
                resolved = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
                if path and resolved in pending:
                    waiting += 1
                    print("pending %s (%s is added by another branch)" % (where, resolved))
                    continue
                if not os.path.exists(resolved):
                    broken += 1
                    print("broken  %s (no %s)" % (where, resolved))
                    continue
                if fragment and resolved.endswith(".md") and os.path.isfile(resolved):
                    if fragment not in anchors(resolved):
                        broken += 1
                        print("broken  %s (no heading #%s in %s)" % (where, fragment, resolved))
    print("links: %d files, %d links, %d broken, %d pending" % (len(files), total, broken, waiting))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
