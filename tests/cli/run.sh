# `ibp run`: usage errors, where libibp.so and the simulated driver are
# found, and the environment the command gets (/usr/bin/env's output).
#   sh run.sh IBP GEN WORKDIR STUB PRELOAD SIMDIR
# STUB: an empty shared library standing in for libibp.so; PRELOAD: the
# libibp.so of this build (may not be built); SIMDIR: this build's sim/lib
# (may not be built).
. "$(dirname "$0")/common.sh"
STUB=$4
PRELOAD=$5
SIMDIR=$6

# every IBP_* the caller set (IBP_TEST_TIMEOUT_SCALE from tests/run-all.sh,
# a user's IBP_PROFILE, ...): ibp run passes them on, and --print-env lists
# them
for v in $(env | sed -n 's/^\(IBP_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset "$v"
done
unset LD_PRELOAD
mkdir fakesim && : >fakesim/libcuda.so.1
mkdir nodriver

# env_of NAME: the value of NAME in the last run's stdout (env's output).
env_of() {
  sed -n "s/^$1=//p" "$OUT"
}

# ---- help, usage errors -----------------------------------------------------
expect_ok run --help
grep -q '^Usage: ibp run \[options\] -- COMMAND' "$OUT" || fail "ibp run --help: no usage line"
expect_ok help run
grep -q '^Usage: ibp run' "$OUT" || fail "ibp help run: no usage line"
expect_ok --help
grep -q '^  run ' "$OUT" || fail "ibp --help does not list run"

expect_error 2 "ibp: missing '--' before the command (see 'ibp run --help')" run
expect_error 2 "ibp: missing '--' before the command (see 'ibp run --help')" run --sim
expect_error 2 "ibp: unexpected argument '/usr/bin/env' (the command goes after '--') (see 'ibp run --help')" \
  run /usr/bin/env
expect_error 2 "ibp: no command after '--' (see 'ibp run --help')" run --sim --
expect_error 2 "ibp: unknown option '--frob' (see 'ibp run --help')" run --frob -- /usr/bin/env
expect_error 2 "ibp: option --regions needs a value (see 'ibp run --help')" run --regions
expect_error 2 "ibp: option --disable takes no value (see 'ibp run --help')" run --disable=1 -- /usr/bin/env

# ---- libibp.so and the simulated driver not found -------------------------------
export IBP_SIM_LIB_DIR="$FILES/fakesim"
IBP_PRELOAD_LIB=nofile.so expect_error 2 "ibp: IBP_PRELOAD_LIB=nofile.so: No such file or directory" \
  run -- /usr/bin/env
export IBP_PRELOAD_LIB="$STUB"
IBP_SIM_LIB_DIR=nodriver expect_error 2 "ibp: IBP_SIM_LIB_DIR=nodriver: no libcuda.so.1 there" \
  run --sim -- /usr/bin/env
mkdir 'a:b' && cp "$STUB" 'a:b/libibp.so'
IBP_PRELOAD_LIB='a:b/libibp.so' expect_error_like 2 "ibp: /.*/a:b/libibp.so: cannot go in LD_PRELOAD \(it holds ':' or a space\)" \
  run -- /usr/bin/env
rm -r 'a:b'

# ---- the environment ------------------------------------------------------------
stub=$(cd "$(dirname "$STUB")" && pwd)/$(basename "$STUB")
LD_LIBRARY_PATH=/old/lib expect_ok run --sim -- /usr/bin/env
expect_eq "LD_PRELOAD" "$(env_of LD_PRELOAD)" "$stub"
expect_eq "LD_LIBRARY_PATH" "$(env_of LD_LIBRARY_PATH)" "$FILES/fakesim:/old/lib"
expect_eq "IBP_REGIONS (not given)" "$(env_of IBP_REGIONS)" ""
expect_eq "IBP_DISABLE (not given)" "$(env_of IBP_DISABLE)" ""

# An LD_PRELOAD already set stays behind libibp.so.  (ibp itself gets it
# too: a harmless copy of the stub; the ASan runtime, in a sanitizer build,
# is told not to insist on coming first.)
cp "$STUB" old.so
ASAN_OPTIONS=verify_asan_link_order=0 LD_PRELOAD=$FILES/old.so \
  expect_ok run --sim --regions 'min=64M,name=weights' --stats s.json --disable -- /usr/bin/env
expect_eq "LD_PRELOAD" "$(env_of LD_PRELOAD)" "$stub:$FILES/old.so"
expect_eq "LD_LIBRARY_PATH" "$(env_of LD_LIBRARY_PATH)" "$FILES/fakesim"
expect_eq "IBP_REGIONS" "$(env_of IBP_REGIONS)" "min=64M,name=weights"
expect_eq "IBP_STATS" "$(env_of IBP_STATS)" "s.json"
expect_eq "IBP_DISABLE" "$(env_of IBP_DISABLE)" "1"

# Arguments reach the command as they are; its exit status is ibp's.
expect_ok run --sim -- sh -c 'echo "$#:$1:$2"' sh 'a b' --help
expect_eq "arguments" "$(cat "$OUT")" "2:a b:--help"
run run --sim -- sh -c 'exit 7'
expect_eq "exit status of the command" "$rc" 7
expect_error 127 "ibp: no-such-command-here: No such file or directory" run --sim -- no-such-command-here
: >not-executable
expect_error 126 "ibp: ./not-executable: Permission denied" run --sim -- ./not-executable

# ---- the configuration is checked before the command starts --------------------
# (the command would print "ran": a bad rule stops ibp run first)
expect_error_like 2 "ibp run: IBP_REGIONS rule 1, token 'mim=1M': unknown key; .*" \
  run --sim --regions 'mim=1M' -- sh -c 'echo ran'
expect_error 2 "ibp run: IBP_REGIONS rule 1, token 'min=64MB': size suffix must be K, M or G" \
  run --sim --regions 'min=64MB' -- sh -c 'echo ran'
IBP_REGIONS='min=1M; tensor=5X' expect_error_like 2 "ibp run: IBP_REGIONS rule 2, token 'tensor=5X': .*" \
  run --sim -- sh -c 'echo ran'
printf 'min=1M  # fine\nchunk=3,min=0\n' >rules.conf
IBP_CONFIG=rules.conf expect_error_like 2 "ibp run: IBP_CONFIG line 2, token 'chunk=3': .*" \
  run --sim -- sh -c 'echo ran'
IBP_LOG=verbose expect_error_like 2 "ibp run: IBP_LOG, token 'verbose': .*" \
  run --sim --regions 'min=1M' -- sh -c 'echo ran'
IBP_WAIT_READY=yes expect_error_like 2 "ibp run: IBP_WAIT_READY, token 'yes': .*" \
  run --sim -- sh -c 'echo ran'
expect_error_like 2 "ibp run: IBP_REGIONS rule 1, token 'mim=1M': .*" \
  run --print-env --sim --regions 'mim=1M'
# The rules come first: checked even before libibp.so is looked for.
IBP_PRELOAD_LIB=nofile.so expect_error_like 2 "ibp run: IBP_REGIONS rule 1, token 'mim=1M': .*" \
  run --regions 'mim=1M' -- true
# IBP_PROFILE is loaded as libibp will: a name that is neither a built-in
# nor a file stops ibp run (libibp would pass everything through).
IBP_PROFILE=no-such-gpu expect_error_like 2 "ibp run: IBP_PROFILE, token 'no-such-gpu': .*" \
  run --sim --regions 'min=1M' -- sh -c 'echo ran'
IBP_PROFILE=a100-pcie4 expect_ok run --sim -- sh -c 'echo ran'
expect_eq "a built-in IBP_PROFILE" "$(cat "$OUT")" "ran"
# --regions with no rule in it is a mistake, not "no regions".
expect_error 2 "ibp run: --regions '': no rule (leave --regions out to run without regions; docs/CONFIG.md)" \
  run --sim --regions '' -- sh -c 'echo ran'
expect_error 2 "ibp run: --regions ' ; ': no rule (leave --regions out to run without regions; docs/CONFIG.md)" \
  run --sim --regions ' ; ' -- sh -c 'echo ran'
# The statistics file is written before the command starts: a path that
# cannot be written stops ibp run, and a command that makes no CUDA call
# leaves the file saying so (%p: the command keeps ibp run's process id).
expect_error 2 "ibp run: IBP_STATS, path 'nodir/s-%p.json': cannot create a file in its directory: No such file or directory" \
  run --sim --stats 'nodir/s-%p.json' -- sh -c 'echo ran'
IBP_STATS=nodir/s.json expect_error 2 "ibp run: IBP_STATS, path 'nodir/s.json': cannot create a file in its directory: No such file or directory" \
  run --sim -- sh -c 'echo ran'
expect_ok run --sim --stats 'nc-%p.json' -- sh -c 'echo $$'
expect_eq "no CUDA activity: stats file" "$(cat "nc-$(cat "$OUT").json" 2>&1 | grep -c '"no_cuda_activity": true, "note": "no CUDA activity')" 1
rm -f nc-*.json
IBP_DISCOVER=nodir/d.txt expect_error 2 "ibp run: IBP_DISCOVER, path 'nodir/d.txt': cannot open it: No such file or directory" \
  run --sim -- sh -c 'echo ran'
IBP_DISCOVER=d-%r.txt expect_ok run --sim -- sh -c 'echo ran'
expect_ok run --sim --stats 'nc.json' --print-env
[ -e nc.json ] && fail "--print-env wrote the statistics file"
# Disabled, libibp reads nothing else, and neither does ibp run.
expect_ok run --sim --disable --regions 'mim=1M' -- sh -c 'echo ran'
expect_eq "--disable with a bad rule" "$(cat "$OUT")" "ran"
IBP_DISABLE=1 expect_ok run --sim --regions 'mim=1M' -- sh -c 'echo ran'
expect_eq "IBP_DISABLE=1 with a bad rule" "$(cat "$OUT")" "ran"
IBP_PROFILE=no-such-gpu expect_ok run --sim --disable --stats nodir/s.json -- sh -c 'echo ran'
expect_eq "--disable with a bad profile and stats path" "$(cat "$OUT")" "ran"
# Good rules and files go through.
: >empty.conf
IBP_CONFIG=empty.conf expect_ok run --sim --regions 'min=64M,name=weights; nth=3,tensor=256' -- sh -c 'echo ran'
expect_eq "good rules" "$(cat "$OUT")" "ran"
rm rules.conf empty.conf

# ---- --print-env: export lines for a job script, nothing run -----------------------
"$IBP" profile a100-pcie4 >"it's"
IBP_PROFILE="it's" LD_LIBRARY_PATH= expect_ok run --print-env --sim --regions 'min=1M,name=w' \
  --stats 's-%r-%p.json' --discover
expect_eq "--print-env" "$(grep -v '^export IBP_\(TEST\|LOG\|MIN_COPY\|WAIT_READY\|CONFIG\)=' "$OUT" | sort)" \
  "$(printf '%s\n' "export IBP_DISCOVER='1'" "export IBP_PROFILE='it'\\''s'" \
    "export IBP_REGIONS='min=1M,name=w'" "export IBP_STATS='s-%r-%p.json'" \
    "export LD_LIBRARY_PATH='$FILES/fakesim'" "export LD_PRELOAD='$stub'" | sort)"
# the lines read back in a shell give the same values
( eval "$(cat "$OUT")" && [ "$IBP_PROFILE" = "it's" ] && [ "$LD_PRELOAD" = "$stub" ] ) ||
  fail "--print-env output does not read back: $(cat "$OUT")"
expect_ok run --print-env --sim -- sh -c 'echo ran'
grep -q '^export LD_PRELOAD=' "$OUT" && ! grep -q '^ran$' "$OUT" ||
  fail "--print-env with a command: $(cat "$OUT")"
expect_error 2 "ibp: no command after '--' (see 'ibp run --help')" run --print-env --sim --

# ---- without --sim: the simulated driver only where there is no real one --------
# libcuda.so.1 as the command would find it is the simulated one: sim.
if [ -e "$SIMDIR/libcuda.so.1" ]; then
  LD_LIBRARY_PATH=$SIMDIR expect_ok run -- /usr/bin/env
  expect_eq "LD_LIBRARY_PATH (simulated driver found)" "$(env_of LD_LIBRARY_PATH)" "$FILES/fakesim:$SIMDIR"
fi
# No libcuda.so.1 at all: sim (unless this machine has NVIDIA's driver).
real_driver=no
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib/x86_64-linux-gnu /usr/lib/wsl/lib; do
  [ -e "$d/libcuda.so.1" ] && real_driver=yes
done
if [ $real_driver = no ]; then
  LD_LIBRARY_PATH=$FILES/nodriver expect_ok run -- /usr/bin/env
  expect_eq "LD_LIBRARY_PATH (no driver)" "$(env_of LD_LIBRARY_PATH)" "$FILES/fakesim:$FILES/nodriver"
fi

# ---- the defaults: this build's libibp.so and sim/lib ------------------------------
unset IBP_PRELOAD_LIB IBP_SIM_LIB_DIR
if [ -e "$PRELOAD" ] && [ -e "$SIMDIR/libcuda.so.1" ]; then
  # (A sanitizer build's libibp.so brings the ASan runtime along.)
  ASAN_OPTIONS=verify_asan_link_order=0 expect_ok run --sim -- /usr/bin/env
  env_of LD_PRELOAD | grep -q '/preload/libibp\.so$' || fail "LD_PRELOAD is '$(env_of LD_PRELOAD)'"
  env_of LD_LIBRARY_PATH | grep -q '/sim/lib$' || fail "LD_LIBRARY_PATH is '$(env_of LD_LIBRARY_PATH)'"
  # libibp itself, with a command that makes no CUDA call: the file stays
  ASAN_OPTIONS=verify_asan_link_order=0 expect_ok run --sim --regions 'min=1M' --stats nc.json -- true
  grep -q '"no_cuda_activity": true' nc.json 2>/dev/null || fail "libibp, no CUDA call: no stats file saying so"
  rm -f nc.json
elif [ ! -e "$PRELOAD" ]; then
  expect_error 2 "ibp run: libibp.so not found (build the ibp_preload target, or set IBP_PRELOAD_LIB)" \
    run --sim -- /usr/bin/env
fi

rm -r fakesim nodriver not-executable old.so "it's"
expect_files
finish
