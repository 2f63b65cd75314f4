#!/usr/bin/env bash
# Build the release artifacts of the deltalite binary:
#   target/debian/deltalite_<version>-1_<arch>.deb   (cargo-deb; [package.metadata.deb]
#       in crates/cli/Cargo.toml: binary, systemd unit, default config, postinst user)
#   target/dist/deltalite-<version>-<arch>-linux.tar.gz   (binary, unit, sample config,
#       the server README)
# Usage: scripts/package.sh            release build (~26 min from clean on 2 cores)
#        PROFILE=dev scripts/package.sh a debug binary, for scripts/test-deb.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
PROFILE="${PROFILE:-release}"
CARGO_DEB_VERSION=3.8.0

if ! cargo deb --version 2>/dev/null | grep -q "$CARGO_DEB_VERSION"; then
    cargo install cargo-deb --locked --version "$CARGO_DEB_VERSION"
fi
cargo build -p deltalite-cli --profile "$PROFILE"
case "$PROFILE" in dev) BIN_DIR=debug ;; *) BIN_DIR="$PROFILE" ;; esac
BIN="$CARGO_TARGET_DIR/$BIN_DIR/deltalite"

# cargo-deb names `target/release/deltalite` in the assets and maps it to the profile.
mkdir -p "$CARGO_TARGET_DIR/debian"
DEB="$(cargo deb -p deltalite-cli --profile "$PROFILE" --no-build --fast \
    -o "$CARGO_TARGET_DIR/debian/" 2>/dev/null | tail -n1)"
[ -f "$DEB" ] || { echo "cargo deb made no package" >&2; exit 1; }

VERSION="$("$BIN" --version | awk '{print $2}')"
NAME="deltalite-$VERSION-$(uname -m)-linux"
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
mkdir -p "$STAGE/$NAME"
cp "$BIN" "$STAGE/$NAME/deltalite"
cp packaging/deltalite.service packaging/deltalite.toml "$STAGE/$NAME/"
cp crates/server/README.md "$STAGE/$NAME/README.md"
mkdir -p "$CARGO_TARGET_DIR/dist"
TARBALL="$CARGO_TARGET_DIR/dist/$NAME.tar.gz"
tar -C "$STAGE" -czf "$TARBALL" "$NAME"
echo "$DEB"
echo "$TARBALL"
