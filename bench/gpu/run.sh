#!/bin/bash
# bench/gpu/run.sh - on a CUDA machine, with .devkit/ from make_kit.sh:
# build cogfeed against the carried libraries, run the CUDA and loader
# tests, a local-vs-remote loader measurement (nginx at 164 ms on the same
# machine) and a short cogfeed-only training experiment on the GPU.
# Installs nginx's files under /usr (root); logs and JSON go to $OUT
# (default /tmp/cogfeed-gpu).  Numbers: docs/performance.md.
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
R=$PWD; K=/tmp/kit; mkdir -p $K; tar -C $K -xJf .devkit/kit.tar.xz
OUT=${OUT:-/tmp/cogfeed-gpu}; mkdir -p $OUT; L=$OUT/log.txt; exec > >(tee -a $L) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
step env
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
PY=$(command -v python3); echo "$PY"; nproc
$PY -c "import sys,sysconfig,torch,numpy;print(sys.version);print(torch.__version__,numpy.__version__,torch.cuda.is_available());print(sysconfig.get_paths()['include'])"
ls $($PY -c "import sysconfig;print(sysconfig.get_paths()['include'])")/Python.h
step build
cmake -S . -B /tmp/b -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$PY \
  -DCMAKE_PREFIX_PATH=$K -DCMAKE_C_FLAGS="-I$K/include" \
  -DCURL_INCLUDE_DIR=$K/include -DCURL_LIBRARY=$K/lib/libcurl.so \
  -DOPENSSL_ROOT_DIR=$K -DOPENSSL_CRYPTO_LIBRARY=$K/lib/libcrypto.so -DOPENSSL_INCLUDE_DIR=$K/include \
  -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$K/lib" \
  -DCMAKE_MODULE_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$K/lib" \
  -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$K/lib" > $OUT/cmake.txt 2>&1 || tail -30 $OUT/cmake.txt
cmake --build /tmp/b -j16 --target _cogfeed cogfeed_cli 2>&1 | grep -E "error|Error|Built target" | head -20
export PYTHONPATH=/tmp/b/python
$PY -c "import cogfeed; print('cogfeed', cogfeed.__version__)" || exit 1
step nginx
mkdir -p /usr/lib/nginx/modules /var/log/nginx /var/lib/nginx /usr/share/lua/5.1
cp $K/nginx/modules/*.so /usr/lib/nginx/modules/; cp -r $K/lua/* /usr/share/lua/5.1/
[ -e /usr/sbin/nginx ] && echo "nginx already there" || { cp $K/nginx/nginx /usr/sbin/nginx.real
printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec /usr/sbin/nginx.real "$@"\n' $K/lib > /usr/sbin/nginx; chmod +x /usr/sbin/nginx; }
/usr/sbin/nginx -V 2>&1 | head -1
step pytest CUDA; nproc
timeout 240 $PY -m pytest -q -p no:cacheprovider tests/python/test_torch.py tests/python/test_loader.py -rs 2>&1 | tail -15
D=$R/.devkit/data
step loader local vs remote, 16 cores
for lat in "" "--serve-latency-ms 164"; do
  f=$OUT/bench$([ -n "$lat" ] && echo _remote || echo _local).json
  timeout 60 $PY -m cogfeed.cli bench --images $D --patch-size 512 --batch-size 16 --sampler blocked --seconds 10 --warmup 24 $lat --json > $f
  $PY -c "import json,sys;r=json.load(open(sys.argv[1]));print({k:r[k] for k in ('mb_per_s','patches_per_s','cpu_s_per_gb','cpu_s_per_gb_by_thread','peak_rss_mb','latency_ms') if k in r}, {k:v for k,v in (r.get('loader_stats') or {}).items() if k in ('concurrency','io_inflight','wait_s')})" $f
done
step experiment on CUDA
timeout 300 $PY -m cogfeed.cli experiment --data $D --out /tmp/exp --budget 30 --loaders cogfeed --samplers none --device cuda --sampler blocked --patch-size 256 --batch-size 16 2>&1 | tail -25
cp /tmp/exp/*.md /tmp/exp/*.json $OUT/ 2>/dev/null; ls /tmp/exp
step done
