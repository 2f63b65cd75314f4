# Sourced by the test scripts: install the object-store emulators of tests/emulators
# (Azurite) from npm, at the versions package-lock.json pins. The suites start them
# themselves (harness/azurite.py).
install_emulators() {
    if ! command -v npm >/dev/null 2>&1; then
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >/dev/null
    fi
    if [ ! -x tests/emulators/node_modules/.bin/azurite-blob ]; then
        npm ci --prefix tests/emulators --no-audit --no-fund --loglevel=error >/dev/null
    fi
}
