#!/usr/bin/env bash
# The documents and the manifests' licences, checked offline:
#
#   scripts/test-docs.sh
#
# 1. every relative link in the README and the docs resolves (README.md, CHANGELOG.md,
#    docs/*.md, the READMEs of python/, ffmpeg-patches/, deploy/k8s/, rust/cuframes/ and
#    bench/runs/; not the runs' own records): the file exists, and a #fragment into a
#    Markdown file names one of its headings (scripts/lib/check_links.py);
# 2. the link checker itself finds a missing file and a missing heading;
# 3. the README stays a README: at most 200 lines, no decision ids (D1-D99: they
#    belong to docs/protocol-notes.md);
# 4. the licences: LICENSE-MIT and LICENSE-APACHE are there, and every manifest names
#    its SPDX licence (each Cargo package, the Python package, cuframes.pc, cuframes.h,
#    the Docker image's label).
# Links to files another branch adds (PENDING below) are counted as skipped until the
# file is in this tree. Prints "Docs: N passed, N failed, N skipped" last.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

# Written on other branches (issue 25 links them): remove each once it is merged.
PENDING=()
SPDX="MIT OR Apache-2.0"

passed=0
failed=0
skipped=0
ok() {
    passed=$((passed + 1))
    printf 'ok     %s\n' "$*"
}
bad() {
    failed=$((failed + 1))
    printf 'FAILED %s\n' "$*"
}
skip() {
    skipped=$((skipped + 1))
    printf 'skip   %s\n' "$*"
}
python=${PYTHON:-python3}

# ---------------------------------------------------------------- 1. links
mapfile -t docs < <(git ls-files -- README.md CHANGELOG.md 'docs/*.md' python/README.md \
    ffmpeg-patches/README.md deploy/k8s/README.md rust/cuframes/README.md bench/runs/README.md)
pending_args=()
for p in "${PENDING[@]}"; do
    [ -e "$p" ] || pending_args+=(--pending "$p")
done
out=$("$python" scripts/lib/check_links.py "${pending_args[@]}" "${docs[@]}")
rc=$?
echo "$out" | grep -v '^links:' | sed 's/^/  /'
summary=$(echo "$out" | tail -n 1)
if [ $rc -eq 0 ]; then
    ok "every relative link resolves ($summary)"
else
    bad "relative links ($summary)"
fi
for p in "${PENDING[@]}"; do
    if [ -e "$p" ]; then
        skip "links to $p: it is here now; remove it from PENDING in scripts/test-docs.sh"
    elif grep -q "^pending .*($p is added" <<<"$out"; then
        skip "links to $p (added by another branch; not in this tree yet)"
    fi
done

# ---------------------------------------------------------------- 2. the checker
t=$(mktemp -d "${TMPDIR:-/tmp}/cuframes-links.XXXXXX")
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/docs"
cat >"$t/docs/a.md" <<'EOF'
# A page

## The `cuframes` muxer

[ok](b.md) [ok](#the-cuframes-muxer) [ok](b.md#second-heading-1) [web](https://example.org/x)
`[not a link](nowhere.md)`
```
[not a link either](nowhere.md)
```
[missing file](c.md) [missing heading](b.md#third)
EOF
printf '# B\n\n## Second heading\n\n## Second heading\n' >"$t/docs/b.md"
check=$("$python" scripts/lib/check_links.py "$t/docs/a.md")
crc=$?
if [ $crc = 1 ] && grep -q "broken .*c.md (no " <<<"$check" && grep -q "broken .*b.md#third (no heading" <<<"$check" &&
    grep -q "links: 1 files, 5 links, 2 broken, 0 pending" <<<"$check"; then
    ok "the link checker finds a missing file and a missing heading, and nothing else"
else
    echo "$check" | sed 's/^/  | /'
    bad "the link checker on a page with two broken links (exit $crc)"
fi

# ---------------------------------------------------------------- 3. the README
lines=$(wc -l <README.md)
ids=$(grep -noE '\bD[0-9]{1,2}\b' README.md | head -n 5 | tr '\n' ' ')
if [ "$lines" -le 200 ] && [ -z "$ids" ]; then
    ok "README.md: $lines lines (at most 200), no decision ids"
else
    bad "README.md: $lines lines (at most 200)${ids:+; decision ids: $ids}"
fi

# ---------------------------------------------------------------- 4. licences
lic_ok=1
for f in LICENSE-MIT LICENSE-APACHE; do
    [ -s "$f" ] || { echo "  $f is missing"; lic_ok=0; }
done
grep -q 'Copyright (c) The cuframes developers' LICENSE-MIT 2>/dev/null || { echo "  LICENSE-MIT: no copyright line"; lic_ok=0; }
grep -q 'Apache License' LICENSE-APACHE 2>/dev/null && grep -q 'Version 2.0, January 2004' LICENSE-APACHE ||
    { echo "  LICENSE-APACHE is not the Apache License 2.0"; lic_ok=0; }
if command -v cargo >/dev/null; then
    packages=$(cargo metadata --no-deps --format-version 1 --locked --offline 2>/dev/null |
        "$python" -c 'import json, sys
for p in json.load(sys.stdin)["packages"]:
    print(p["name"], p.get("license"))') || packages=
    [ -n "$packages" ] || { echo "  cargo metadata failed"; lic_ok=0; }
    while read -r name license; do
        [ -z "$name" ] || [ "$license" = "$SPDX" ] || { echo "  Cargo package $name: license '$license'"; lic_ok=0; }
    done <<<"$packages"
fi
grep -qx "license = \"$SPDX\"" python/pyproject.toml || { echo "  python/pyproject.toml: no license = \"$SPDX\""; lic_ok=0; }
grep -qx "License: $SPDX" rust/cuframes-capi/cuframes.pc.in || { echo "  cuframes.pc.in: no License: $SPDX"; lic_ok=0; }
head -n 1 include/cuframes.h | grep -qF "SPDX-License-Identifier: $SPDX" || { echo "  cuframes.h: no SPDX line first"; lic_ok=0; }
grep -qF 'org.opencontainers.image.licenses="(MIT OR Apache-2.0) AND GPL-2.0-or-later"' Dockerfile ||
    { echo "  Dockerfile: no org.opencontainers.image.licenses label"; lic_ok=0; }
grep -q 'LGPL-2.1-or-later' ffmpeg-patches/README.md || { echo "  ffmpeg-patches/README.md does not say LGPL-2.1-or-later"; lic_ok=0; }
if [ $lic_ok = 1 ]; then
    ok "licences: LICENSE-MIT, LICENSE-APACHE; $SPDX in $(wc -l <<<"$packages") Cargo packages, pyproject.toml, cuframes.pc, cuframes.h; the image's label; the patches LGPL"
else
    bad "licences"
fi

echo "Docs: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
