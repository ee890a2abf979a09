#!/bin/bash
# bench/gpu/run.sh - on a CUDA machine, with .devkit/ from make_kit.sh:
# build cogfeed against the carried libraries, run the CUDA and loader
# tests, a local-vs-remote loader measurement (nginx at 164 ms on the same
# machine), a short cogfeed-only training experiment on the GPU, and, when
# the peers were carried (.devkit/peers-site.tar.xz, make_kit.sh --peers),
# the peers' training comparison: bench/peers.py's training patches (TorchGeo, the
# paper-style loader and cogfeed on the same scenes) and the paper's
# UNet-ResNet18 trained from the paper-style loader and from cogfeed.
# Installs nginx's files under /usr (root); logs and JSON go to $OUT
# (default /tmp/cogfeed-gpu).  Numbers: docs/performance.md.
#
#   bench/gpu/run.sh          on the GPU machine (one prepared call)
#   bench/gpu/run.sh --cpu    the same steps here, to check the script:
#                             Debian's libraries instead of the kit, the
#                             peers' venv (bench/peers.py --setup) as the
#                             Python, --device cpu, short runs
export PYTHONUNBUFFERED=1
cd "$(dirname "$0")/../.."
R=$PWD; K=/tmp/kit
CPU=0; [ "${1:-}" = "--cpu" ] && CPU=1
OUT=${OUT:-/tmp/cogfeed-gpu}; mkdir -p $OUT; L=$OUT/log.txt; exec > >(tee -a $L) 2>&1
step() { echo; echo "=== $(date +%T) $*"; }
D=$R/.devkit/data
if [ $CPU = 1 ]; then
  # Here: the venv of bench/peers.py holds torch, rasterio and the peers.
  PY=${PY:-$R/bench/.venv-peers/bin/python}; DEV=cpu; B=/tmp/b-cpu-check
  SECS=4; BUDGET=6; PEERS_TMO=900; X18="--snapshots 1 --patch-size 128 --batch-size 8"
  [ -x "$PY" ] || { echo "no $PY: run bench/peers.py --setup first"; exit 2; }
  if [ ! -d "$D/masks" ]; then
    D=$OUT/data
    [ -d "$D/masks" ] || { PYTHONPATH=$R/build/python $R/.venv/bin/python -m cogfeed.cli synth $OUT/raw --scenes 3 --size 512 --quiet &&
      PYTHONPATH=$R/build/python $R/.venv/bin/python -m cogfeed.cli convert $OUT/raw $D --compress lerc_zstd --tile 512 --quiet; }
  fi
else
  PY=$(command -v python3); DEV=cuda; B=/tmp/b; SECS=10; BUDGET=30; PEERS_TMO=420; X18="--patch-size 256 --batch-size 16"
  mkdir -p $K; tar -C $K -xJf .devkit/kit.tar.xz
fi
step env
[ $CPU = 1 ] || nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
echo "$PY"; nproc
$PY -c "import sys,sysconfig,torch,numpy;print(sys.version);print(torch.__version__,numpy.__version__,torch.cuda.is_available());print(sysconfig.get_paths()['include'])"
ls $($PY -c "import sysconfig;print(sysconfig.get_paths()['include'])")/Python.h
step build
if [ $CPU = 1 ]; then
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$PY > $OUT/cmake.txt 2>&1 || tail -30 $OUT/cmake.txt
else
  cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$PY \
    -DCMAKE_PREFIX_PATH=$K -DCMAKE_C_FLAGS="-I$K/include" \
    -DCURL_INCLUDE_DIR=$K/include -DCURL_LIBRARY=$K/lib/libcurl.so \
    -DOPENSSL_ROOT_DIR=$K -DOPENSSL_CRYPTO_LIBRARY=$K/lib/libcrypto.so -DOPENSSL_INCLUDE_DIR=$K/include \
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$K/lib" \
    -DCMAKE_MODULE_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$K/lib" \
    -DCMAKE_EXE_LINKER_FLAGS="-Wl,--disable-new-dtags,-rpath,$K/lib" > $OUT/cmake.txt 2>&1 || tail -30 $OUT/cmake.txt
fi
cmake --build $B -j$(nproc) --target _cogfeed cogfeed_c 2>&1 | grep -E "error|Error|Built target" | head -20
export PYTHONPATH=$B/python
$PY -c "import cogfeed; print('cogfeed', cogfeed.__version__)" || exit 1
if [ $CPU = 0 ]; then
  step nginx
  mkdir -p /usr/lib/nginx/modules /var/log/nginx /var/lib/nginx /usr/share/lua/5.1
  cp $K/nginx/modules/*.so /usr/lib/nginx/modules/; cp -r $K/lua/* /usr/share/lua/5.1/
  [ -e /usr/sbin/nginx ] && echo "nginx already there" || { cp $K/nginx/nginx /usr/sbin/nginx.real
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec /usr/sbin/nginx.real "$@"\n' $K/lib > /usr/sbin/nginx; chmod +x /usr/sbin/nginx; }
  /usr/sbin/nginx -V 2>&1 | head -1
  step pytest CUDA; nproc
  timeout 240 $PY -m pytest -q -p no:cacheprovider tests/python/test_torch.py tests/python/test_loader.py -rs 2>&1 | tail -15
fi
step loader local vs remote, $(nproc) cores
for lat in "" "--serve-latency-ms 164"; do
  f=$OUT/bench$([ -n "$lat" ] && echo _remote || echo _local).json
  timeout 60 $PY -m cogfeed.cli bench --images $D --patch-size 512 --batch-size 16 --sampler blocked --seconds $SECS --warmup 24 $lat --json > $f
  $PY -c "import json,sys;r=json.load(open(sys.argv[1]));print({k:r[k] for k in ('mb_per_s','patches_per_s','cpu_s_per_gb','cpu_s_per_gb_by_thread','peak_rss_mb','latency_ms') if k in r}, {k:v for k,v in (r.get('loader_stats') or {}).items() if k in ('concurrency','io_inflight','wait_s')})" $f
done
step experiment on $DEV
timeout 300 $PY -m cogfeed.cli experiment --data $D --out /tmp/exp --budget $BUDGET --loaders cogfeed --samplers none --device $DEV --sampler blocked --patch-size 256 --batch-size 16 2>&1 | tail -25
cp /tmp/exp/*.md /tmp/exp/*.json $OUT/ 2>/dev/null; ls /tmp/exp
# The peers: carried in .devkit/peers-site.tar.xz (make_kit.sh --peers) on
# the GPU machine, the venv's packages here.
if [ $CPU = 0 ] && [ -e .devkit/peers-site.tar.xz ]; then
  step peers: unpacking the carried packages
  mkdir -p /tmp/site && tar -C /tmp/site -xJf .devkit/peers-site.tar.xz || exit 1
  export PYTHONPATH=$B/python:/tmp/site
fi
if $PY -c "import torchgeo, rasterio, segmentation_models_pytorch" 2>/dev/null; then
  step "peers: training patches (TorchGeo, paper-style, cogfeed), $(nproc) cores"
  timeout $PEERS_TMO $PY bench/peers.py --here --images-dir $D --workloads patches \
    $([ $CPU = 1 ] && echo --quick) --json $OUT/peers.json 2>&1 | grep -v "Warning\|warn(\|rationality"
  step "peers: the paper's UNet-ResNet18 on $DEV, paper-style loader and cogfeed"
  timeout 480 $PY -m cogfeed.cli experiment --data $D --out /tmp/exp18 --budget $BUDGET --model unet-resnet18 \
    --loaders baseline,cogfeed --baseline-workers $(( $(nproc) > 8 ? 16 : 4 )) --samplers none --device $DEV \
    --sampler random $X18 2>&1 | grep -v "Warning\|warn(\|rationality" | tail -25
  mkdir -p $OUT/resnet18; cp /tmp/exp18/*.md /tmp/exp18/*.json $OUT/resnet18/ 2>/dev/null
else
  step "peers: skipped (torchgeo, rasterio or segmentation-models-pytorch missing: make_kit.sh --peers)"
fi
step done
