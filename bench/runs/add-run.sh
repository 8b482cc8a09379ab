#!/usr/bin/env bash
# Puts one run's record into the archive of its day (bench/runs/README.md, "Adding a run").
#
#   bench/runs/add-run.sh DIR
#
# DIR is named for the run's id: its UTC date and a letter (2026-12-08a) or a name
# (2026-12-08-ffmpeg-lines), and holds README.md, which names the commit that ran. DIR
# goes into bench/runs/DATE.tar.xz (made if new) as ID/, less empty files and files with
# the same bytes as one already archived, each named in ID/REMOVED.txt. A DIR inside
# bench/runs/ is removed once archived. Then add the run's row to the index and
# `git add bench/runs/DATE.tar.xz bench/runs/README.md`.
set -euo pipefail
export LC_ALL=C
die() { echo "add-run: $*" >&2; exit 1; }
[ $# -eq 1 ] && [ -d "$1" ] || die "usage: bench/runs/add-run.sh DIR"
dir=$(cd "$1" && pwd)
id=$(basename "$dir")
[[ $id =~ ^(20[0-9]{2}-[0-9]{2}-[0-9]{2})([a-z](-[a-z0-9-]+)?|-[a-z0-9-]+)$ ]] || die "$id: not a run id (DATE and a letter, or DATE-name)"
day=${BASH_REMATCH[1]}
[ -s "$dir/README.md" ] || die "$id: no README.md (what ran, at which commit, on which machine, the figures)"
grep -qE '\b[0-9a-f]{7,40}\b' "$dir/README.md" || die "$id/README.md names no commit"
runs=$(cd "$(dirname "$0")" && pwd)
archive=$runs/$day.tar.xz

tmp=$(mktemp -d "${TMPDIR:-/tmp}/add-run.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/all" "$tmp/day"
for a in "$runs"/*.tar.xz; do
    [ -e "$a" ] && tar -xmJf "$a" -C "$tmp/all"
done
[ ! -e "$tmp/all/$id" ] || die "$id is archived already"
[ ! -e "$archive" ] || tar -xmJf "$archive" -C "$tmp/day"
(cd "$tmp/all" && find . -type f ! -name REMOVED.txt -print0 | sort -z | xargs -0 -r sha256sum) >"$tmp/sums"

cp -r "$dir" "$tmp/day/$id"
removed=$tmp/day/$id/REMOVED.txt
cd "$tmp/day/$id"
while IFS= read -r -d '' f; do
    f=${f#./}
    if [ ! -s "$f" ]; then
        echo "$f: empty" >>"$removed"
        rm "$f"
        continue
    fi
    sum=$(sha256sum "$f" | cut -d' ' -f1)
    first=$(grep -m1 "^$sum " "$tmp/sums" | cut -d' ' -f3- || true)
    if [ -n "$first" ]; then
        echo "$f: the same bytes as ${first#./} (${first:2:10}.tar.xz)" >>"$removed"
        rm "$f"
    else
        echo "$sum  ./$id/$f" >>"$tmp/sums"
    fi
done < <(find . -type f ! -name REMOVED.txt -print0 | sort -z)
find . -type d -empty -delete

cd "$tmp/day"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="$day 00:00Z" -cf - -- * |
    xz -9e -T1 >"$tmp/new.tar.xz"
mv "$tmp/new.tar.xz" "$archive"
case $dir in "$runs"/*) rm -rf "$dir" ;; esac
echo "add-run: $id is in bench/runs/$day.tar.xz$([ -e "$removed" ] && echo ", less $(wc -l <"$removed") file(s) named in $id/REMOVED.txt")"
grep -q "id=\"$id\"" "$runs/README.md" ||
    echo "add-run: now add its row to bench/runs/README.md:
| <a id=\"$id\"></a>$id | ${day:5} | COMMIT | MACHINE | what ran | the figures | [$day]($day.tar.xz) |"
