# shellcheck shell=bash
# Sourced by the test scripts: a Debian trixie root (CPython 3.13) to run the real
# Altertable client packages, which need CPython >= 3.12 (the host has 3.11).
#
#   source scripts/lib/py313.sh
#   py313_root /work/py313                          # build once, mount the binds
#   py313_venv /work/py313 /opt/clients requirements-clients.txt
#   py313_run /work/py313 /opt/clients/bin/python -m pytest ...
#   py313_umount /work/py313
#
# The shared folder (PY313_SHARE, default: this repository's root) is bind-mounted
# at the same path inside the root, so host paths under it work on both sides;
# commands run there. The chroot shares the host's network, so a server that
# listens on 127.0.0.1 on the host is reachable from inside.

_py313_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PY313_SHARE="${PY313_SHARE:-$_py313_repo}"
PY313_SUITE="${PY313_SUITE:-trixie}"
PY313_PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# The Debian mirror the host's apt uses (first non-security deb/URIs entry).
_py313_mirror() {
    local f uri
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri="$(grep -hE '^[[:space:]]*(deb[[:space:]]|URIs:)' "$f" \
            | grep -oE 'https?://[^[:space:]]+' \
            | grep -vE 'security|updates' \
            | grep -E '/debian/?$' | head -n1 || true)"
        if [ -n "$uri" ]; then
            echo "${uri%/}"
            return 0
        fi
    done
    echo "http://deb.debian.org/debian"
}

_py313_need_debootstrap() {
    command -v debootstrap >/dev/null 2>&1 && return 0
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null
}

# The mount points of DIR's binds, innermost (shared folder) first.
_py313_mounts() {
    local dir="$1"
    printf '%s\n' "$dir$PY313_SHARE" "$dir/dev" "$dir/proc"
}

_py313_mount() {
    local dir="$1"
    mountpoint -q "$dir/proc" || mount -t proc proc "$dir/proc"
    if ! mountpoint -q "$dir/dev"; then
        mount --rbind /dev "$dir/dev"
        mount --make-rslave "$dir/dev"
    fi
    mkdir -p "$dir$PY313_SHARE"
    mountpoint -q "$dir$PY313_SHARE" || mount --bind "$PY313_SHARE" "$dir$PY313_SHARE"
}

# py313_root DIR: build (once) a trixie root in DIR, mount /proc, /dev and the
# shared folder into it, and install the host's extra CA certificates there.
py313_root() {
    local dir mirror
    dir="$(realpath -m "${1:?usage: py313_root DIR}")"
    if [ ! -x "$dir/usr/bin/python3.13" ]; then
        _py313_need_debootstrap
        py313_umount "$dir"
        mirror="$(_py313_mirror)"
        mkdir -p "$dir"
        debootstrap --variant=minbase \
            --include=python3,python3-venv,python3-pip,ca-certificates \
            "$PY313_SUITE" "$dir" "$mirror"
    fi
    _py313_mount "$dir"
    # DNS and the CA certificates that the registries' TLS goes through.
    cp -L /etc/resolv.conf "$dir/etc/resolv.conf"
    cp -L /etc/hosts "$dir/etc/hosts"
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        mkdir -p "$dir/usr/local/share/ca-certificates"
        cp -L /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
    fi
    if ! py313_run "$dir" update-ca-certificates >/dev/null 2>&1; then
        echo "py313: update-ca-certificates failed in $dir" >&2
        return 1
    fi
}

# py313_venv DIR VENV REQFILE [PIP_ARGS...]: create the venv VENV (a path inside
# the root) if missing and pip-install the host file REQFILE into it.
py313_venv() {
    local dir
    dir="$(realpath -m "${1:?usage: py313_venv DIR VENV REQFILE}")"
    local venv="${2:?usage: py313_venv DIR VENV REQFILE}"
    local req="${3:?usage: py313_venv DIR VENV REQFILE}"
    shift 3
    local name
    name="/tmp/py313-req-$(basename "$venv").txt"
    cp "$req" "$dir$name"
    if [ ! -x "$dir$venv/bin/python" ]; then
        py313_run "$dir" python3.13 -m venv "$venv"
    fi
    py313_run "$dir" "$venv/bin/pip" install --disable-pip-version-check -q -r "$name" "$@"
}

# py313_run DIR CMD...: run CMD in the root with a clean environment (HOME, PATH,
# LANG and any proxy variables), in the shared folder.
py313_run() {
    local dir
    dir="$(realpath -m "${1:?usage: py313_run DIR CMD...}")"
    shift
    local -a vars=("HOME=/root" "PATH=$PY313_PATH" "LANG=C.UTF-8")
    local v
    for v in http_proxy https_proxy no_proxy all_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY ALL_PROXY; do
        if [ -n "${!v:-}" ]; then
            vars+=("$v=${!v}")
        fi
    done
    # shellcheck disable=SC2016 # $0/$@ expand in the inner shell
    env -i "${vars[@]}" "$(command -v chroot)" "$dir" /bin/sh -c 'cd "$0" && exec "$@"' "$PY313_SHARE" "$@"
}

# py313_umount DIR: unmount the binds that py313_root made (if mounted).
py313_umount() {
    local dir
    dir="$(realpath -m "${1:?usage: py313_umount DIR}")"
    local m
    while read -r m; do
        if mountpoint -q "$m" 2>/dev/null; then
            umount -R "$m" || umount -l "$m"
        fi
    done < <(_py313_mounts "$dir")
}
