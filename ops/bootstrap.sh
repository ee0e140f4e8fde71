#!/usr/bin/env bash
# Set up what is missing for Squall, and nothing else: Java 17 (the embedded
# ZooKeeper and the Spark Connect server run on it), bubblewrap (the sandbox
# nimbus imports submitted code in) and Chromium with its driver (the web UI's
# browser tests) from Debian's packages, and the virtualenv in .venv with
# Squall and its test tools.  Idempotent and quick when everything is there:
# the venv is reinstalled only when pyproject.toml changed since the last
# install.  ``--tests``: also what only the tests need (Chromium,
# redis-server, libfaketime), so that running the word count does not download a browser.
# ``--redis``: redis-server only (the Redis examples).
set -euo pipefail
tests=0
redis=0
for arg in "$@"; do
    case "$arg" in
        --tests) tests=1; redis=1 ;;
        --redis) redis=1 ;;
        *) echo "bootstrap: unknown option $arg (--tests, --redis)" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."

java_ok() {
    command -v java >/dev/null 2>&1 && java -version 2>&1 | grep -qE 'version "(1[7-9]|[2-9][0-9])'
}
if ! java_ok; then
    echo "bootstrap: installing Java 17 (openjdk-17-jre-headless)" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

# Nimbus imports submitted code only in bubblewrap's sandbox (squall.runtime.sandbox; util-linux's
# setpriv, which it also uses, is in every Debian): a dev cluster and the tests alike want it.
if ! command -v bwrap >/dev/null 2>&1; then
    echo "bootstrap: installing bubblewrap" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap >/dev/null
fi

# The web UI's browser tests (tests/ui) drive Debian's Chromium through its chromedriver.
chromium_ok() {
    [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]  # the paths tests/ui use
}
if [ "$tests" = 1 ] && ! chromium_ok; then
    echo "bootstrap: installing Chromium and its driver (chromium, chromium-driver)" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi

# Redis Streams sources and Redis state (squall.contrib.redis): tests start their own
# redis-server on a free loopback port; the Debian package's service is not used.
if [ "$redis" = 1 ] && ! command -v redis-server >/dev/null 2>&1; then
    echo "bootstrap: installing redis-server" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

# The partition tests (tests/partitions) skew a node's clock with Debian's libfaketime (and
# a small mend of their own, built with the C compiler), and build their network with
# iproute2 (ip netns, tc) as root.
if [ "$tests" = 1 ] && { [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] \
        || ! command -v cc >/dev/null || ! command -v tc >/dev/null; }; then
    echo "bootstrap: installing libfaketime, a C compiler and iproute2 (faketime gcc libc6-dev iproute2)" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq faketime gcc libc6-dev iproute2 >/dev/null
fi

stamp=.venv/.squall-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "bootstrap: installing the virtualenv in .venv (Squall, PySpark, Cython and the test tools:" \
         "a few minutes the first time)" >&2
    started=$SECONDS
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e '.[test]'
    echo "$want" > "$stamp"
    echo "bootstrap: virtualenv installed in $((SECONDS - started)) s" >&2
fi

# The hot path compiled with Cython (squall/compiled): up to date in a second when
# nothing changed.  Without a C compiler Squall runs as pure Python, only slower.
# Said before it starts: the first build is the longest quiet step of a fresh machine's setup.
stale=$(.venv/bin/python -c "from squall.compiled.build import stale; print(len(stale()))" 2>/dev/null || echo 0)
if [ "$stale" != 0 ]; then
    echo "bootstrap: compiling $stale hot-path modules with Cython (about 40 s for all of them;" \
         "log in .venv/squall-compile.log)" >&2
fi
started=$SECONDS
if .venv/bin/python -m squall.compiled build > .venv/squall-compile.log 2>&1; then
    [ "$stale" = 0 ] || echo "bootstrap: hot path compiled in $((SECONDS - started)) s" >&2
else
    echo "bootstrap: the hot path was not compiled (see .venv/squall-compile.log); running as pure Python" >&2
fi
