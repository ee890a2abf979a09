#!/usr/bin/env bash
# run.sh - one entry point for set-up, the demo, the tests and the fuzzers.
#
#   ./run.sh demo        install what is missing, build, run the demo
#   ./run.sh test        install what is missing, build, run the whole suite:
#                        plain -Werror build, the wheel installed into a
#                        fresh venv (Python tests run against it), the C
#                        library installed and used by a C program,
#                        ASan+UBSan build, TSan build of the C tests, fuzzing
#   ./run.sh build       install what is missing and build into build/
#   ./run.sh wheel       build the wheel (pip wheel, auditwheel repair) into dist/
#   ./run.sh fuzz SECS   run every libFuzzer target SECS seconds
#   ./run.sh bench       the side-by-side benchmarks of bench/
#
# Set-up is idempotent: Debian packages are installed only when missing
# (needs root or sudo), azurite and pyright (npm) only when tests/servers
# lacks them, the Python environment .venv (requirements-dev.txt, from
# PyPI) only when missing or when requirements-dev.txt changed.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}
# The project's Python environment: every Python dependency, pinned in
# requirements-dev.txt, from PyPI (Debian gives the C side only).
VENV=${CF_VENV:-$ROOT/.venv}
PY=$VENV/bin/python

# C libraries, compilers, GDAL's command-line tools (a test oracle), nginx;
# python3-dev and python3-venv for the venv and the extension's headers;
# PostgreSQL and PostGIS for the pgstac-backed STAC API of the tests.
DEB_PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libcurl4-openssl-dev libssl-dev libdeflate-dev libzstd-dev liblerc-dev
  libjpeg62-turbo-dev libwebp-dev liblzma-dev libproj-dev python3-dev python3-venv
  gdal-bin nginx libnginx-mod-http-lua nodejs
  postgresql-15 postgresql-15-postgis-3
)

log() { printf '\n== %s\n' "$*" >&2; }

setup() {
  local missing=()
  for p in "${DEB_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing Debian packages: ${missing[*]}"
    local SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if ! command -v npm >/dev/null; then
    log "npm missing: installing Debian's npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
  fi
  if [ ! -x tests/servers/node_modules/.bin/azurite-blob ] ||
     [ ! -x tests/servers/node_modules/.bin/pyright ]; then
    log "installing azurite and pyright (npm) into tests/servers"
    npm install --silent --no-audit --no-fund --prefix tests/servers >/dev/null
  fi
  setup_venv
}

# The venv from Debian's python3 (3.11), filled from PyPI with exactly
# requirements-dev.txt; redone only when that file changes.  torch is pinned
# to its CPU build (2.13.0+cpu), which lies on this kind of machine in
# /opt/wheels: pip never falls back to PyPI's CUDA build of several GB.
setup_venv() {
  local want stamp=$VENV/.cf-requirements
  want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
  if [ -x "$PY" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return
  fi
  log "Python environment $VENV from requirements-dev.txt (PyPI)"
  [ -x "$PY" ] || /usr/bin/python3 -m venv "$VENV"
  local links=()
  [ -d /opt/wheels ] && links=(--find-links /opt/wheels)
  if ! "$PY" -m pip install -q "${links[@]}" -r requirements-dev.txt \
      > "$VENV/pip.log" 2>&1; then
    grep -v "^WARNING: Location" "$VENV/pip.log" | tail -20 >&2
    echo "run.sh: pip install -r requirements-dev.txt failed (log: $VENV/pip.log)" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
}

# pip wheel . into dist/, then auditwheel repair: the wheel carries the C
# libraries it links (libcurl, libdeflate, libzstd, ...) so it needs
# nothing but numpy.  Prints the repaired wheel's path.
wheel() {
  rm -rf dist/raw dist/repaired
  # No build isolation: scikit-build-core and numpy come from the venv
  # (pinned), and the build folder build-wheel/ is reused between runs.
  "$PY" -m pip wheel --no-build-isolation --no-deps -q -w dist/raw . >&2
  PATH=$VENV/bin:$PATH "$PY" -m auditwheel -v repair -w dist/repaired dist/raw/cogfeed-*.whl > dist/auditwheel.log 2>&1 \
    || { tail -20 dist/auditwheel.log >&2; exit 1; }
  ls dist/repaired/cogfeed-*.whl
}

# A fresh venv with the wheel installed, for the Python tests: its own
# site-packages holds cogfeed and nothing else; the test tools (pytest,
# torch, rasterio, moto, ...) are reached through a .pth file naming the
# project venv's site-packages, which never holds cogfeed itself.
test_env() {
  local whl=$1 env=$ROOT/build/testenv
  rm -rf "$env"
  /usr/bin/python3 -m venv --without-pip "$env"
  local site; site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  local tsite; tsite=$("$env/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$site" > "$tsite/cf_dev_tools.pth"
  "$PY" -m pip --python "$env/bin/python" install -q --no-deps "$whl" >&2
  echo "$env"
}

# build DIR [cmake options...]
build() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython3_EXECUTABLE="$PY" "$@" >/dev/null
  cmake --build "$dir" -j"$JOBS"
}

PASSED=0  # tests and fuzz runs that passed, for the closing line
run_tests() {
  local dir=$1; shift
  (cd "$dir" && ctest --output-on-failure -j"$JOBS" "$@")
  local n
  n=$(cd "$dir" && ctest -N "$@" | sed -n 's/^Total Tests: //p')
  PASSED=$((PASSED + ${n:-0}))
}

fuzz() {
  local secs=${1:-10}
  CC=clang build build-fuzz -DCF_FUZZ=ON -DCF_PYTHON=OFF
  local seeds
  for t in build-fuzz/fuzz/fuzz_*; do
    [ -x "$t" ] || continue
    local name; name=$(basename "$t")
    seeds="fuzz/seeds/${name#fuzz_}"
    mkdir -p "build-fuzz/corpus/$name"
    log "fuzzing $name for ${secs}s"
    "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="build-fuzz/$name-" "build-fuzz/corpus/$name" \
      $( [ -d "$seeds" ] && echo "$seeds" ) 2>&1 | tail -2
    PASSED=$((PASSED + 1))
  done
}

case "${1:-}" in
  setup) setup ;;
  build) setup; build build -DCF_WERROR=ON -DCF_TEST_ENV= ;;
  wheel) setup; wheel ;;
  demo)
    setup
    build build -DCF_WERROR=ON
    shift
    ./build/cogfeed demo "$@"
    ;;
  test)
    setup
    log "plain build (-Werror)"
    build build -DCF_WERROR=ON
    log "the wheel (pip wheel, auditwheel repair), installed into a fresh venv"
    WHL=$(wheel)
    TENV=$(test_env "$WHL")
    log "the whole suite: C tests, Python tests against the installed wheel"
    cmake build -DCF_TEST_ENV="$TENV" -DCF_TEST_WHEEL="$ROOT/$WHL" >/dev/null
    run_tests build
    # The next plain build tests its own tree again.
    cmake build -DCF_TEST_ENV= -DCF_TEST_WHEEL= >/dev/null
    log "ASan + UBSan build: C tests and the reader/remote Python tests (build tree)"
    build build-asan -DCF_SANITIZE=ON -DCF_WERROR=ON
    run_tests build-asan -LE 'slow|plain'
    log "TSan build: the C tests (threads of the io loop, pool and loader)"
    build build-tsan -DCF_TSAN=ON -DCF_PYTHON=OFF -DCF_WERROR=ON
    run_tests build-tsan
    log "short fuzzing runs"
    # 5 s a target in the suite (15 targets): a smoke run that keeps CI
    # within 20 minutes on 2 cores; ./run.sh fuzz SECS fuzzes for longer.
    fuzz "${FUZZ_SECS:-5}"
    log "all tests passed"
    echo "run.sh test: $PASSED passed, 0 failed"
    ;;
  fuzz) setup; fuzz "${2:-60}" ;;
  bench)
    setup
    build build -DCF_WERROR=ON
    shift
    for b in bench/*.py; do
      log "$b"
      PYTHONPATH=build/python COGFEED_BIN=build/cogfeed "$PY" "$b" "$@"
    done
    ;;
  *)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
