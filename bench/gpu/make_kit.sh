#!/usr/bin/env bash
# bench/gpu/make_kit.sh - pack what a CUDA machine without Debian's packages
# needs to build and benchmark cogfeed, into .devkit/ (git-ignored):
#   kit.tar.xz  headers and shared libraries of libcurl, OpenSSL, libdeflate,
#               zstd, LERC, libjpeg, libwebp and their dependencies, plus
#               nginx with its lua module (the test server), from this
#               Debian machine (run ./run.sh build first);
#   data/       a small dataset (cogfeed synth + convert, LERC_ZSTD 512 px);
# with --peers also
#   peers-site.tar.xz  the peers bench/gpu/run.sh's training comparison
#               needs beyond that machine's image (torch, torchvision,
#               timm, pandas, lightning are there): torchgeo, rasterio,
#               segmentation-models-pytorch and what they import, the
#               versions of bench/peers-requirements.txt, wheels for
#               CPython 3.12 unpacked and packed with xz (the wheels are
#               83 MB, over what one device call carries).
# Then copy .devkit/ and the checkout to the GPU machine and run
# bench/gpu/run.sh there (docs/performance.md, "On a GPU machine").
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
EXT=build/python/cogfeed/_cogfeed.so
[ -e "$EXT" ] || { echo "build first: ./run.sh build" >&2; exit 2; }
KIT=$(mktemp -d)
trap 'rm -rf "$KIT"' EXIT
mkdir -p "$KIT"/{lib,include,nginx/modules,lua} .devkit
# Shared libraries the extension and nginx load, glibc's own excepted.
for l in $(ldd "$EXT" /usr/sbin/nginx /usr/lib/nginx/modules/*.so | awk '/=>/{print $3}' | sort -u); do
  case $(basename "$l") in
    libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|libresolv*|libstdc++*|libgcc_s*) continue ;;
  esac
  cp -L "$l" "$KIT/lib/"
done
# Link-time names (copies: links would not survive every transfer).
for f in libcurl libcrypto libssl libdeflate libzstd libLerc libjpeg libwebp; do
  so=$(cd "$KIT/lib" && ls $f.so.* | head -1)
  cp "$KIT/lib/$so" "$KIT/lib/$f.so"
done
inc=/usr/include
cp -r $inc/x86_64-linux-gnu/curl $inc/openssl $inc/webp "$KIT/include/"
cp $inc/x86_64-linux-gnu/openssl/*.h "$KIT/include/openssl/"
cp $inc/libdeflate.h $inc/zstd*.h $inc/zdict.h $inc/Lerc_*.h $inc/jpeglib.h \
   $inc/jmorecfg.h $inc/jerror.h $inc/x86_64-linux-gnu/jconfig.h "$KIT/include/"
cp /usr/sbin/nginx "$KIT/nginx/"
cp /usr/lib/nginx/modules/*.so "$KIT/nginx/modules/"
cp -r /usr/share/lua/5.1/* "$KIT/lua/"
[ -e .devkit/kit.tar.xz ] || tar -C "$KIT" -cJf .devkit/kit.tar.xz .
if [ ! -d .devkit/data ]; then
  export PYTHONPATH=$ROOT/build/python
  "$ROOT/.venv/bin/python" -m cogfeed.cli synth "$KIT/raw" --scenes 6 --size 1024
  "$ROOT/.venv/bin/python" -m cogfeed.cli convert "$KIT/raw" .devkit/data --compress lerc_zstd --tile 512
fi
if [ "${1:-}" = "--peers" ] && [ ! -e .devkit/peers-site.tar.xz ]; then
  W=$(mktemp -d)
  pins=$(grep -iE '^(torchgeo|rasterio|segmentation-models-pytorch|geopandas|pyogrio|pyproj|shapely|affine)==' bench/peers-requirements.txt)
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$W/whl" $pins
  mkdir -p "$W/site"
  for w in "$W"/whl/*.whl; do unzip -q -o "$w" -d "$W/site"; done
  tar -C "$W/site" -cJf .devkit/peers-site.tar.xz .
  rm -rf "$W"
fi
du -sh .devkit/*
