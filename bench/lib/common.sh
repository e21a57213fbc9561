# shellcheck shell=bash
# bench/lib/common.sh -- sourced by bench/ab, bench/codecs.sh and
# bench/results.sh: messages, the tools they need, the build, the data sets.
# The including script sets PROG (its name for messages) and cds to the
# repository root first.

log() { printf '[%s] %s\n' "$PROG" "$*" >&2; }
die() {
  printf '[%s] error: %s\n' "$PROG" "$*" >&2
  exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# need_tools "cmd:debian-package" ...: installs the missing ones with apt-get
# when running as root (as bench/data/build.sh does), else names them.
need_tools() {
  local spec missing=() pkgs=()
  for spec in "$@"; do
    have "${spec%%:*}" || {
      missing+=("${spec%%:*}")
      pkgs+=("${spec##*:}")
    }
  done
  [[ ${#pkgs[@]} -eq 0 ]] && return 0
  if [[ $(id -u) -ne 0 ]] || ! have apt-get; then
    die "missing ${missing[*]}: install the Debian packages ${pkgs[*]}"
  fi
  log "installing ${pkgs[*]} (for ${missing[*]})"
  apt-get update -qq || die "apt-get update failed"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${pkgs[@]}" >/dev/null || die "could not install ${pkgs[*]}"
}

# gpu_present: true when nvidia-smi lists a GPU (the same test as
# scripts/demo.sh).
gpu_present() { have nvidia-smi && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; }

# ensure_build DIR RUNTIME TARGET...: builds the targets into DIR unless
# every file they make is there (REBUILD=1 builds anyway).  DIR
# build/release uses the release preset; another DIR a Release build of
# this tree.  RUNTIME (sim|toolkit) is what the samples link; - when no
# sample is needed (the build directory's setting is kept).
ensure_build() {
  local dir=$1 runtime=$2 t stale=0
  shift 2
  if [[ $runtime != - && -f $dir/CMakeCache.txt ]]; then # sim: the default
    local linked
    linked=$(sed -n 's/^IBP_SAMPLES_RUNTIME:[A-Z]*=//p' "$dir/CMakeCache.txt")
    [[ ${linked:-sim} == "$runtime" ]] || stale=1
  fi
  for t in "$@"; do
    case $t in
      ibp) [[ -x $dir/tools/ibp ]] || stale=1 ;;
      ibp_preload) [[ -f $dir/preload/libibp.so ]] || stale=1 ;;
      simcuda) [[ -e $dir/sim/lib/libcuda.so.1 ]] || stale=1 ;;
      simcudart) [[ -e $dir/sim/lib/libcudart.so.13 ]] || stale=1 ;;
      *) [[ -x $dir/samples/$t ]] || stale=1 ;;
    esac
  done
  [[ $stale -eq 0 && ${REBUILD:-0} != 1 ]] && return 0
  need_tools cmake:cmake cc:gcc c++:g++ make:make
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  local opt=()
  [[ $runtime == - ]] || opt=(-DIBP_SAMPLES_RUNTIME="$runtime")
  log "building $* in $dir"
  if [[ $dir == build/release ]]; then
    cmake --preset release "${opt[@]}" >/dev/null
  else
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${opt[@]}" >/dev/null
  fi || die "cmake could not configure $dir"
  cmake --build "$dir" -j "$jobs" --target "$@" >/dev/null ||
    die "the build of $* in $dir failed"
}

# manifest_row DATA_DIR NAME: the data set's MANIFEST.tsv line (tab
# separated: name file tensor_bytes dtype rows package version source
# licence description); empty when absent.
manifest_row() { awk -F '\t' -v n="$2" 'NR > 1 && $1 == n' "$1/MANIFEST.tsv"; }

# ensure_data DATA_DIR NAME...: builds the data sets that are missing with
# bench/data/build.sh (idempotent; downloads from Debian and npm).
ensure_data() {
  local dir=$1 n todo=()
  shift
  for n in "$@"; do
    [[ -f $dir/MANIFEST.tsv && -n $(manifest_row "$dir" "$n") &&
      -s $dir/$n.bin ]] || todo+=("$n")
  done
  [[ ${#todo[@]} -eq 0 ]] && return 0
  log "building data sets ${todo[*]} (bench/data/build.sh --out $dir)"
  local IFS=,
  bash bench/data/build.sh --out "$dir" --only "${todo[*]}" ||
    die "bench/data/build.sh could not build ${todo[*]}"
}

# prefix_file DATA_DIR NAME LIMIT CACHE_DIR: prints the path of the data
# set's rows cut to the first LIMIT bytes (K/M/G suffixes; whole rows
# only), made once in CACHE_DIR; the data set itself when it is not larger.
prefix_file() {
  local dir=$1 name=$2 limit=$3 cache=$4 r size bytes want
  r=$(manifest_row "$dir" "$name" | cut -f 3)
  [[ -n $r ]] || die "no data set $name in $dir/MANIFEST.tsv"
  size=$(stat -c %s "$dir/$name.bin")
  bytes=$(numfmt --from=iec "$limit") || die "bad size '$limit'"
  want=$((bytes / r * r))
  [[ $want -gt 0 ]] || die "$limit is less than one row of $name ($r bytes)"
  if [[ $want -ge $size ]]; then
    echo "$dir/$name.bin"
    return 0
  fi
  local out=$cache/$name.$limit.bin
  if [[ ! -s $out || $(stat -c %s "$out") -ne $want ]]; then
    mkdir -p "$cache"
    head -c "$want" "$dir/$name.bin" >"$out.tmp" || die "cannot write $out"
    mv "$out.tmp" "$out"
  fi
  echo "$out"
}
