#!/usr/bin/env bash
# run.sh - one entry point for set-up, the demo, the tests and the fuzzers.
#
#   ./run.sh demo        install what is missing, build, run the demo
#   ./run.sh test        install what is missing, build, run the whole suite:
#                        plain -Werror build, ASan+UBSan build, TSan build
#                        of the C tests, short fuzzing
#   ./run.sh build       install what is missing and build into build/
#   ./run.sh fuzz SECS   run every libFuzzer target SECS seconds
#   ./run.sh bench       the side-by-side benchmarks of bench/
#
# Set-up is idempotent: Debian packages are installed only when missing
# (needs root or sudo), azurite (npm) only when tests/servers lacks it.
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
JOBS=${JOBS:-$(nproc)}

DEB_PACKAGES=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libcurl4-openssl-dev libssl-dev libdeflate-dev libzstd-dev liblerc-dev
  libjpeg62-turbo-dev libwebp-dev libproj-dev python3-dev python3-numpy
  gdal-bin python3-gdal python3-rasterio python3-pytest python3-torch
  python3-optuna python3-matplotlib nginx libnginx-mod-http-lua nodejs
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
  if [ ! -x tests/servers/node_modules/.bin/azurite-blob ]; then
    log "installing azurite (npm) into tests/servers"
    npm install --silent --no-audit --no-fund --prefix tests/servers >/dev/null
  fi
}

# build DIR [cmake options...]
build() {
  local dir=$1; shift
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
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
  build) setup; build build -DCF_WERROR=ON ;;
  demo)
    setup
    build build -DCF_WERROR=ON
    shift
    ./build/cogfeed demo "$@"
    ;;
  test)
    setup
    log "plain build (-Werror) and the whole suite"
    build build -DCF_WERROR=ON
    run_tests build
    log "ASan + UBSan build: C tests and the reader/remote Python tests"
    build build-asan -DCF_SANITIZE=ON -DCF_WERROR=ON
    run_tests build-asan -LE 'slow|plain'
    log "TSan build: the C tests (threads of the io loop, pool and loader)"
    build build-tsan -DCF_TSAN=ON -DCF_PYTHON=OFF -DCF_WERROR=ON
    run_tests build-tsan
    log "short fuzzing runs"
    fuzz "${FUZZ_SECS:-10}"
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
      PYTHONPATH=build/python COGFEED_BIN=build/cogfeed /usr/bin/python3 "$b" "$@"
    done
    ;;
  *)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
