#!/usr/bin/env bash
# The packages as an operator gets them: build the .deb and the tarball
# (scripts/package.sh), install the .deb with dpkg in a clean Debian root (debootstrap
# minbase), check what it put where (user, modes, unit, config), start the installed
# binary there as the unit does (as the `deltalite` user, with the installed config plus a
# hashed user), and talk to it from the host over loopback; then purge it.
#
# Run by scripts/test.sh (CI): ~1 minute with a fresh root, plus building cargo-deb the
# first time (scripts/package.sh pins it). Needs root.
#   PROFILE   cargo profile of the packaged binary (default dev)
#   DEB_ROOT  where the clean root is built (default: a temporary directory, removed)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
export PROFILE="${PROFILE:-dev}"
# shellcheck source=lib/py313.sh
source scripts/lib/py313.sh

mapfile -t built < <(scripts/package.sh | tail -n2)
DEB="${built[0]}"
TARBALL="${built[1]}"
echo "== built $DEB and $TARBALL"
# Printed through the open stderr, never by reopening /dev/stderr: `tee /dev/stderr`
# truncated a log file that stderr was redirected to (the whole CI log, every run).
listing="$(tar -tzf "$TARBALL" | sort)"
echo "$listing" >&2
grep -q '/deltalite$' <<<"$listing"

DIR="${DEB_ROOT:-$(mktemp -d /tmp/deltalite-deb-XXXXXX)}"
# mktemp's 0700 would be the root's `/`: the service user could not reach its binary.
chmod 755 "$DIR"
SERVER_PID=""
# The server runs under env, chroot and runuser: `$!` is the shell that started them, and
# a signal to it does not reach the server. It is found by its command line instead.
SERVER_MATCH=""
cleanup() {
    [ -n "$SERVER_MATCH" ] && pkill -KILL -f -- "$SERVER_MATCH" 2>/dev/null || true
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    mountpoint -q "$DIR/proc" && umount "$DIR/proc"
    [ -z "${DEB_ROOT:-}" ] && rm -rf "$DIR"
}
trap cleanup EXIT
if [ ! -x "$DIR/usr/bin/dpkg" ]; then
    _py313_need_debootstrap
    debootstrap --variant=minbase trixie "$DIR" "$(_py313_mirror)" >/dev/null
fi
mountpoint -q "$DIR/proc" || mount -t proc proc "$DIR/proc"
in_root() { env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 chroot "$DIR" "$@"; }

echo "== dpkg -i"
cp "$DEB" "$DIR/tmp/deltalite.deb"
in_root dpkg -i /tmp/deltalite.deb
in_root deltalite --version
check() { if ! "$@"; then echo "FAILED: $*" >&2; exit 1; fi; }
check in_root getent passwd deltalite
check test "$(in_root stat -c '%U:%G %a' /var/lib/deltalite)" = "deltalite:deltalite 750"
check test "$(in_root stat -c '%U:%G %a' /etc/deltalite/deltalite.toml)" = "root:deltalite 640"
check test -f "$DIR/usr/lib/systemd/system/deltalite.service"
check grep -q '^ExecStart=/usr/bin/deltalite serve --config /etc/deltalite/deltalite.toml$' \
    "$DIR/usr/lib/systemd/system/deltalite.service"
check grep -q '^User=deltalite$' "$DIR/usr/lib/systemd/system/deltalite.service"
if command -v systemd-analyze >/dev/null 2>&1; then
    systemd-analyze verify "$DIR/usr/lib/systemd/system/deltalite.service" 2>&1 \
        | grep -v 'not executable\|No such file' || true
fi

echo "== the installed default config refuses to start without a user"
if out="$(in_root runuser -u deltalite -- deltalite serve --config /etc/deltalite/deltalite.toml 2>&1)"; then
    echo "FAILED: started without users" >&2; exit 1
fi
grep -q 'no users configured' <<<"$out" || { echo "FAILED: unexpected error: $out" >&2; exit 1; }

echo "== a hashed user added, the binary started as the unit starts it"
hash="$(printf 'pa55word\n' | in_root deltalite hash-password)"
printf '\n[[user]]\nname = "ops"\npassword_hash = "%s"\n' "$hash" >> "$DIR/etc/deltalite/deltalite.toml"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
in_root runuser -u deltalite -- deltalite serve --config /etc/deltalite/deltalite.toml \
    --listen "127.0.0.1:$port" --flight-listen "" > "$DIR/tmp/serve.out" 2> "$DIR/tmp/serve.log" &
SERVER_PID=$!
SERVER_MATCH="deltalite serve --config /etc/deltalite/deltalite.toml --listen 127.0.0.1:$port"
for _ in $(seq 100); do
    grep -q '^listening on' "$DIR/tmp/serve.out" 2>/dev/null && break
    sleep 0.1
done
check grep -q "^listening on http://127.0.0.1:$port" "$DIR/tmp/serve.out"
check test "$(curl -sS "http://127.0.0.1:$port/livez")" = '{"status":"ok"}'
check test "$(curl -sS -o /dev/null -w '%{http_code}' -u ops:wrong "http://127.0.0.1:$port/healthz")" = 401
curl -sS --fail -u ops:pa55word "http://127.0.0.1:$port/query" \
    -d '{"statement":"CREATE TABLE lakehouse.main.t AS SELECT 42 AS answer"}' >/dev/null
check test "$(curl -sS --fail -u ops:pa55word "http://127.0.0.1:$port/query" \
    -d '{"statement":"SELECT answer FROM lakehouse.main.t"}' | tail -n1)" = '[42]'
check test "$(in_root stat -c '%U' /var/lib/deltalite/lakehouse/main/t/_delta_log)" = deltalite
# JSON logs, as the default config asks.
check head -c1 "$DIR/tmp/serve.log" | grep -q '{'
# A clean stop on SIGTERM, as systemd sends it: the process is gone within its deadline.
pkill -TERM -f -- "$SERVER_MATCH"
for _ in $(seq 100); do
    pgrep -f -- "$SERVER_MATCH" >/dev/null || break
    sleep 0.1
done
check test -z "$(pgrep -f -- "$SERVER_MATCH")"
wait "$SERVER_PID" || true
SERVER_PID=""
SERVER_MATCH=""

echo "== dpkg --purge"
in_root dpkg --purge deltalite
check test ! -e "$DIR/usr/bin/deltalite"
check test ! -e "$DIR/etc/deltalite/deltalite.toml"
echo "== the .deb installs, serves and purges"
