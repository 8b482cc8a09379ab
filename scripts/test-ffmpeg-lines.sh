#!/usr/bin/env bash
# The patched FFmpeg on every line it supports (9.0, 8.1, 7.1): each built with
# scripts/build-ffmpeg.sh --ffmpeg LINE and tested with tests/ffmpeg/run.sh, and a
# record kept of the run.
#
#   scripts/test-ffmpeg-lines.sh [LINE...]      default: 9.0 8.1 7.1
#
# scripts/test.sh (CI) tests 9.0 and 7.1; this adds 8.1, which CI does not build, and
# keeps its result with the commit it ran at: a record DATE-ffmpeg-lines (UTC date;
# -2, -3... when the day has one already) with README.md (the commit, whether the tree
# had changes, each line's build time, how much of it came from build/ccache, and its
# summary line) and ffmpeg-8.1.txt (the 8.1 run's output), archived by
# bench/runs/add-run.sh; add the row it prints to the index in bench/runs/README.md and
# commit the day's archive with it. Build logs: build/build-ffmpeg-LINE.log. Exits non-zero when a build or
# a test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
LINES=("$@")
[ ${#LINES[@]} -gt 0 ] || LINES=(9.0 8.1 7.1)

day=$(date -u +%Y-%m-%d)
out=bench/runs/$day-ffmpeg-lines
n=1
# An id already in the index (its record archived) counts as taken too.
while [ -e "$out" ] || grep -q "id=\"$(basename "$out")\"" bench/runs/README.md; do
    n=$((n + 1))
    out=bench/runs/$day-ffmpeg-lines-$n
done
logs=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-lines.XXXXXX")
trap 'rm -rf "$logs"' EXIT

commit=$(git rev-parse --short=7 HEAD)
dirty=
[ -z "$(git status --porcelain --untracked-files=no)" ] || dirty=" (with uncommitted changes)"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
status=0
rows=()
for line in "${LINES[@]}"; do
    label="ffmpeg $line tests"
    echo "== FFmpeg $line: scripts/build-ffmpeg.sh --ffmpeg $line"
    t=$SECONDS
    if scripts/build-ffmpeg.sh --ffmpeg "$line" 2>&1 | tee "$logs/build-$line.txt"; then
        build="built in $((SECONDS - t)) s ($(sed -n 's/^build-ffmpeg: ccache: //p' "$logs/build-$line.txt" | tail -n1))"
        grep -q 'up to date' "$logs/build-$line.txt" && build="up to date (built before)"
        echo "== FFmpeg $line: tests/ffmpeg/run.sh"
        FFMPEG=build/ffmpeg-$line/bin/ffmpeg FFMPEG_SUITE_LABEL=$label tests/ffmpeg/run.sh 2>&1 |
            tee "$logs/test-$line.txt"
        [ "${PIPESTATUS[0]}" = 0 ] || status=1
        summary=$(grep -E "^ffmpeg $line tests: [0-9]+ passed" "$logs/test-$line.txt" | tail -n1)
        [ -n "$summary" ] || { summary="$label: no summary line"; status=1; }
        version=$(build/ffmpeg-$line/bin/ffmpeg -hide_banner -version | head -n1)
    else
        build="build failed (build/build-ffmpeg-$line.log)"
        summary="$label: 0 passed, 1 failed, 0 skipped (scripts/build-ffmpeg.sh --ffmpeg $line failed)"
        version=
        status=1
        cp "$logs/build-$line.txt" "$logs/test-$line.txt"
    fi
    rows+=("| $line | ${version:-none} | $build | \`$summary\` |")
done

mkdir -p "$out"
{
    echo "# FFmpeg lines: build and host tests"
    echo
    echo "\`scripts/test-ffmpeg-lines.sh ${LINES[*]}\` at commit $commit$dirty, started $started,"
    echo "on $(nproc) cores ($(uname -m), $(. /etc/os-release && echo "$PRETTY_NAME")); load average at the"
    echo "end: $(cut -d' ' -f1-3 /proc/loadavg). Each line built with \`scripts/build-ffmpeg.sh --ffmpeg LINE\`"
    echo "(through \`build/ccache\`) and tested with \`tests/ffmpeg/run.sh\`."
    echo
    echo "| Line | ffmpeg -version | Build | Summary |"
    echo "|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    if [ -f "$logs/test-8.1.txt" ]; then
        echo
        echo "The 8.1 run's output, as printed: [\`ffmpeg-8.1.txt\`](ffmpeg-8.1.txt) (CI does not build 8.1)."
    fi
} >"$out/README.md"
[ -f "$logs/test-8.1.txt" ] && cp "$logs/test-8.1.txt" "$out/ffmpeg-8.1.txt"

echo "== Record: $(basename "$out")"
cat "$out/README.md"
echo
bench/runs/add-run.sh "$out" || status=1
exit $status
