#!/usr/bin/env bash
# What a fresh machine needs besides the CUDA Toolkit: the one list of
# Debian packages, read by scripts/demo.sh, tests/run-all.sh and .ci/run
# (README, "Quick start").  Sourced, it defines
#
#   ibp_deps_missing GROUP...   prints the packages of GROUPs not installed
#   ibp_deps_install GROUP...   installs them with apt-get (sudo when not
#                               root); returns 1 with a message naming them
#                               when it cannot (no apt-get, no sudo, apt
#                               failed, or IBP_NO_INSTALL=1)
#
# Run, it installs the groups named (default: all of them):
#   bash scripts/deps.sh [--missing] [GROUP...]
#   --missing   only print what is missing (exit 1 when something is)
#
# Groups: build  compilers, CMake and the headers and libraries the default
#                build (tests included) needs (libegl-dev: the EGL and GL
#                headers the toolkit's cudaEGL.h and cudaGL.h include, for
#                test_simcuda_decls)
#         test   what tests/run-all.sh uses besides the build
#         fuzz   clang and its libFuzzer runtime (the fuzz preset)
#         bench  what bench/ab uses (never run by the tests)
# A package counts as installed when its probe is there: a command on PATH,
# or a file (a glob).  The CMake configure step checks the build group's
# libraries again and names the package of any that is missing
# (cmake/dependencies.cmake).

# group package probe
ibp_deps_list='
build cmake          cmake
build make           make
build gcc            gcc
build g++            g++
build uthash-dev     /usr/include/uthash.h
build libxxhash-dev  /usr/include/xxhash.h
build libegl-dev     /usr/include/EGL/egl.h
test  git            git
test  clang-format   clang-format
test  pkgconf        pkg-config
test  python3        python3
fuzz  clang          clang
fuzz  libclang-rt-dev /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a
bench gnuplot-nox    gnuplot
bench zstd           zstd
bench lz4            lz4
'

# ibp_deps_missing GROUP...: the missing packages of GROUPs, one line.
ibp_deps_missing() {
  local group pkg probe want missing=()
  while read -r group pkg probe; do
    [ -n "$group" ] || continue
    for want in "$@"; do
      [ "$want" = "$group" ] || continue
      if [ "${probe#/}" != "$probe" ]; then
        # shellcheck disable=SC2086 # the probe is a glob
        compgen -G $probe >/dev/null || missing+=("$pkg")
      else
        command -v "$probe" >/dev/null 2>&1 || missing+=("$pkg")
      fi
    done
  done <<<"$ibp_deps_list"
  echo "${missing[*]}"
}

# ibp_deps_install GROUP...: installs the missing packages of GROUPs.
ibp_deps_install() {
  local missing sudo=''
  missing=$(ibp_deps_missing "$@")
  [ -n "$missing" ] || return 0
  local how="install them (Debian package names) or their equivalents first"
  if [ "${IBP_NO_INSTALL:-0}" = 1 ]; then
    echo "missing: $missing; IBP_NO_INSTALL=1: $how" >&2
    return 1
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "missing: $missing; apt-get not found: $how" >&2
    return 1
  fi
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
      echo "missing: $missing; not root and no sudo: $how" >&2
      return 1
    }
    sudo=sudo
  fi
  echo "installing: $missing"
  # shellcheck disable=SC2086 # one word per package
  { $sudo apt-get update -q &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
      --no-install-recommends $missing; } || {
    echo "apt-get could not install: $missing" >&2
    return 1
  }
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  only_missing=0 groups=()
  for arg in "$@"; do
    case $arg in
    --missing) only_missing=1 ;;
    build | test | fuzz | bench) groups+=("$arg") ;;
    -h | --help)
      sed -n '2,/^# (cmake/p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "deps.sh: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
    esac
  done
  [ "${#groups[@]}" -gt 0 ] || groups=(build test fuzz bench)
  if [ "$only_missing" = 1 ]; then
    m=$(ibp_deps_missing "${groups[@]}")
    [ -z "$m" ] || echo "$m"
    [ -z "$m" ]
  else
    ibp_deps_install "${groups[@]}" || exit 1
  fi
fi
