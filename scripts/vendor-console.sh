#!/usr/bin/env bash
# The web console's third-party files (crates/server/console/vendor/), from npm at pinned
# versions and hashes: CodeMirror 5 (the SQL editor, its SQL mode and completion popup)
# and Chart.js 4 (the result chart). Both ship ready-to-use UMD builds, so nothing is
# compiled and `cargo build` needs no JavaScript toolchain; the files are checked in and
# embedded in the binary.
#
#   scripts/vendor-console.sh          fetch and (re)write the files
#   scripts/vendor-console.sh --check  fetch and fail if the checked-in files differ (CI)
set -euo pipefail
cd "$(dirname "$0")/.."
VENDOR=crates/server/console/vendor
CHECK=0
[ "${1:-}" = "--check" ] && CHECK=1

# package@version  sha256 of the npm tarball
PACKAGES=(
  "codemirror@5.65.21 b26d9d7ae0f42e34b44a8f7667d29a3ab0d3df88d0e79c0dad39dc03ba43f6dc"
  "chart.js@4.5.1 f540d98468457ac7a0aabb32006dfb066297e096c5ea063a5d80aa973d1c337a"
)
# package  file in the tarball  name under vendor/
FILES=(
  "codemirror package/lib/codemirror.js codemirror.js"
  "codemirror package/lib/codemirror.css codemirror.css"
  "codemirror package/mode/sql/sql.js sql.js"
  "codemirror package/addon/hint/show-hint.js show-hint.js"
  "codemirror package/addon/hint/show-hint.css show-hint.css"
  "codemirror package/LICENSE LICENSE-codemirror"
  "chart.js package/dist/chart.umd.min.js chart.umd.js"
  "chart.js package/LICENSE.md LICENSE-chart.js"
)

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for entry in "${PACKAGES[@]}"; do
  read -r spec sha <<<"$entry"
  name="${spec%@*}"
  (cd "$work" && npm pack --silent "$spec" >/dev/null)
  tarball="$(ls "$work"/"$name"-*.tgz)"
  echo "$sha  $tarball" | sha256sum --check --quiet
  mkdir -p "$work/$name"
  tar xzf "$tarball" -C "$work/$name"
done

mkdir -p "$VENDOR"
differ=0
for entry in "${FILES[@]}"; do
  read -r name from to <<<"$entry"
  if [ "$CHECK" = 1 ]; then
    if ! cmp -s "$work/$name/$from" "$VENDOR/$to"; then
      echo "vendor-console: $VENDOR/$to differs from $name's $from" >&2
      differ=1
    fi
  else
    cp "$work/$name/$from" "$VENDOR/$to"
  fi
done
extra="$(cd "$VENDOR" && ls | sort | comm -23 - <(for e in "${FILES[@]}"; do read -r _ _ to <<<"$e"; echo "$to"; done | sort))"
if [ -n "$extra" ]; then
  echo "vendor-console: files not from a pinned package: $extra" >&2
  differ=1
fi
[ "$differ" = 0 ] && echo "vendor-console: $VENDOR matches the pinned packages"
exit "$differ"
