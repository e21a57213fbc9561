# Bad input: one exact line on stderr, exit 2 (usage) or 1 (data / I/O),
# nothing on stdout, and no output or temporary file left behind.
. "$(dirname "$0")/common.sh"

"$GEN" floats 1000 1 >small.bin || exit 1
"$GEN" floats 65536 2 >in.bin || exit 1
: >empty.bin
mkdir adir
inputs="small.bin in.bin empty.bin adir"

# ---- input files (analyze, compress, bench, verify, decompress) --------------
for cmd in analyze compress; do
  out=""
  [ $cmd = compress ] && out=out.ibp
  expect_error 1 "ibp: nofile.bin: No such file or directory" $cmd nofile.bin $out --tensor-bytes 4
  expect_error 1 "ibp: adir: Is a directory" $cmd adir $out --tensor-bytes 4
  expect_error 1 "ibp: empty.bin: file is empty" $cmd empty.bin $out --tensor-bytes 4
  expect_error 1 "ibp: /dev/null: not a regular file" $cmd /dev/null $out --tensor-bytes 4
  expect_error 1 "ibp $cmd: tensor size 4096 B is larger than the file (1000 B)" \
    $cmd small.bin $out --tensor-bytes 4096
  expect_error 1 "ibp $cmd: tensor size 1048576 B is larger than the file (1000 B)" \
    $cmd small.bin $out --tensor-bytes 1M
  expect_files $inputs
done
expect_error 1 "ibp: nofile.bin: No such file or directory" bench nofile.bin
expect_error 1 "ibp: empty.bin: file is empty" bench empty.bin
expect_error 1 "ibp bench: tensor size 4096 B is larger than the file (1000 B)" \
  bench small.bin --tensor-bytes 4096
for cmd in verify decompress; do
  out=""
  [ $cmd = decompress ] && out=out.bin
  expect_error 1 "ibp: nofile.ibp: No such file or directory" $cmd nofile.ibp $out
  expect_error 1 "ibp: adir: Is a directory" $cmd adir $out
  expect_error 1 "ibp: empty.bin: file is empty" $cmd empty.bin $out
  expect_error 1 "ibp: in.bin is not an ibp container (bad magic)" $cmd in.bin $out
  expect_files $inputs
done

if [ "$(id -u)" -ne 0 ]; then # root reads anything
  cp small.bin locked.bin && chmod 000 locked.bin
  expect_error 1 "ibp: locked.bin: Permission denied" analyze locked.bin --tensor-bytes 4
  expect_error 1 "ibp: locked.bin: Permission denied" compress locked.bin out.ibp --tensor-bytes 4
  rm -f locked.bin
  mkdir ro && chmod 555 ro
  expect_error_like 1 "ibp: ro/out.ibp: (Permission denied|Read-only file system)" \
    compress in.bin ro/out.ibp --tensor-bytes 4
  checks=$((checks + 1))
  [ -z "$(ls -A ro)" ] || fail "files left in ro/: $(ls -A ro)"
  rmdir ro
fi

# ---- output files --------------------------------------------------------------
expect_error 1 "ibp: nodir/out.ibp: No such file or directory" compress in.bin nodir/out.ibp --tensor-bytes 4
expect_error 1 "ibp: adir: Is a directory" compress in.bin adir --tensor-bytes 4
expect_files $inputs
checks=$((checks + 1))
[ -z "$(ls -A adir)" ] || fail "files left in adir/: $(ls -A adir)"
expect_ok compress in.bin good.ibp --tensor-bytes 64 -q
expect_error 1 "ibp: nodir/out.bin: No such file or directory" decompress good.ibp nodir/out.bin
expect_error 1 "ibp: adir: Is a directory" decompress good.ibp adir
# /dev/null is written in place, never replaced.
expect_ok decompress good.ibp /dev/null -q
checks=$((checks + 1))
[ -c /dev/null ] || fail "/dev/null is no longer a device"

# ---- verify against a different original --------------------------------------
head -c 65535 in.bin >short.bin
expect_error 1 "ibp verify: good.ibp holds 65536 B but short.bin has 65535 B" \
  verify good.ibp --original short.bin
cp in.bin changed.bin && "$GEN" flip changed.bin 40000
expect_error 1 "ibp verify: good.ibp differs from changed.bin at byte 40000" \
  verify good.ibp --original changed.bin
expect_error 1 "ibp: nofile.bin: No such file or directory" verify good.ibp --original nofile.bin
rm -f short.bin changed.bin good.ibp

# ---- usage errors ------------------------------------------------------------
expect_error 2 "ibp: --tensor-bytes must be at least 1 (got 0)" analyze in.bin --tensor-bytes 0
expect_error 2 "ibp: --tensor-bytes must be at least 1 (got 0K)" analyze in.bin --tensor-bytes 0K
expect_error 2 "ibp: --tensor-bytes must be at most 1048576 (1 MiB) (got 1048577)" \
  analyze in.bin --tensor-bytes 1048577
expect_error 2 "ibp: --tensor-bytes must be at most 1048576 (1 MiB) (got 2M)" \
  analyze in.bin --tensor-bytes 2M
expect_error 2 "ibp: --tensor-bytes must be at most 1048576 (1 MiB) (got 99999999999999999999999)" \
  analyze in.bin --tensor-bytes 99999999999999999999999
expect_error 2 "ibp: --tensor-bytes must be at most 1048576 (1 MiB) (got 17179869184G)" \
  analyze in.bin --tensor-bytes 17179869184G
for bad in abc -5 -0 +4 " 4" "4 " 4X 4KB 4Ki 1.5 0x10 ""; do
  expect_error 2 "ibp: --tensor-bytes must be a whole number of bytes, e.g. 4096 or 4K (got $bad)" \
    analyze in.bin --tensor-bytes "$bad"
done
for bad in 0 3 16 auto1 -1 1.0 ""; do
  expect_error 2 "ibp: --chunk must be auto, 1, 2, 4 or 8 (got $bad)" analyze in.bin --tensor-bytes 4 --chunk "$bad"
done
for bad in 0.3 1.5 -0.9 abc nan inf 0x1p-1 "" " 0.9" 0.9x; do
  expect_error 2 "ibp: --threshold must be auto or a number in [0.5, 1.0] (got $bad)" \
    compress in.bin out.ibp --tensor-bytes 4 --threshold "$bad"
done
for bad in 0 1.5 -0.1 x 1e999; do
  expect_error 2 "ibp: --sample must be a fraction in (0, 1] (got $bad)" \
    analyze in.bin --tensor-bytes 4 --sample "$bad"
done
for bad in -1 x 1.5 99999; do
  expect_error 2 "ibp: --threads must be auto or a whole number from 0 to 4096 (got $bad)" \
    compress in.bin out.ibp --tensor-bytes 4 --threads "$bad"
done
expect_error 2 "ibp: unknown option '--frob' (see 'ibp analyze --help')" analyze in.bin --tensor-bytes 4 --frob
expect_error 2 "ibp: unknown option '-x' (see 'ibp compress --help')" compress in.bin out.ibp -x
expect_error 2 "ibp: unknown option '--quiet' (see 'ibp analyze --help')" analyze in.bin --quiet
expect_error 2 "ibp: option --tensor-bytes needs a value (see 'ibp analyze --help')" analyze in.bin --tensor-bytes
expect_error 2 "ibp: option --original needs a value (see 'ibp verify --help')" verify in.bin --original
expect_error 2 "ibp: option --json takes no value (see 'ibp analyze --help')" analyze in.bin --tensor-bytes 4 --json=yes
expect_error 2 "ibp: missing FILE (see 'ibp analyze --help')" analyze --tensor-bytes 4
expect_error 2 "ibp: --tensor-bytes R is required (see 'ibp analyze --help')" analyze in.bin
expect_error 2 "ibp: --tensor-bytes R is required (see 'ibp compress --help')" compress in.bin out.ibp
expect_error 2 "ibp: unexpected argument 'extra' (see 'ibp analyze --help')" analyze in.bin extra --tensor-bytes 4
expect_error 2 "ibp: missing IN (see 'ibp compress --help')" compress --tensor-bytes 4
expect_error 2 "ibp: missing OUT (see 'ibp compress --help')" compress in.bin --tensor-bytes 4
expect_error 2 "ibp: unexpected argument 'c' (see 'ibp compress --help')" compress a b c --tensor-bytes 4
expect_error 2 "ibp: missing OUT (see 'ibp decompress --help')" decompress in.ibp
expect_error 2 "ibp: missing IN (see 'ibp verify --help')" verify
expect_error 2 "ibp: unexpected argument 'x' (see 'ibp verify --help')" verify a.ibp x
expect_error 2 "ibp: --mb must be a whole number from 1 to 1048576 (got 0)" bench --mb 0
expect_error 2 "ibp: --mb must be a whole number from 1 to 1048576 (got 1.5)" bench --mb 1.5
expect_error 2 "ibp: --seconds must be a number in (0, 3600] (got 0)" bench --seconds 0
expect_error 2 "ibp: --seconds must be a number in (0, 3600] (got -1)" bench --seconds -1
expect_error 2 "ibp: --impl must be auto, portable or bmi2 (got avx)" bench --impl avx
expect_error 2 "ibp: --mb applies to generated data only, not to FILE (see 'ibp bench --help')" \
  bench in.bin --mb 4
expect_error 2 "ibp: --tensor-bytes must be at least 1 (got 0)" bench --tensor-bytes 0
# A usage error wins over a missing file, and nothing is written.
expect_error 2 "ibp: --tensor-bytes must be at least 1 (got 0)" compress nofile.bin out.ibp --tensor-bytes 0
# "--" ends the options: "-x.bin" is then a file name.
expect_error 1 "ibp: -x.bin: No such file or directory" analyze --tensor-bytes 4 -- -x.bin

expect_files $inputs
finish
