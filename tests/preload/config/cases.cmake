# The cases of tests/preload/config: one ibp_case() per bad configuration.
# Read twice: by CMakeLists.txt (one CTest test per case, named
# preload_config_<name>) and by run_case.cmake (the case it runs).
#
#   ibp_case(<name> [LINES <n>] [FILE <text>] ENV <VAR=value>...
#            EXPECT <substring>...)
#
# ENV      the variables set for the run (every other IBP_* is unset);
#          "<SEMI>" stands for ';' (which a CMake list cannot hold), and
#          "{WORK}" for the case's scratch directory.
# FILE     written to {WORK}/ibp.conf before the run.
# LINES    how many stderr lines start with "[ibp]" (default 1).
# EXPECT   substrings of one of those lines ({WORK} substituted).
# Every run must exit 0 and print the checksum line of the IBP_DISABLE=1
# run.  Messages: config/ (ibp_config_format_error) and docs/CONFIG.md,
# "Bad values".

set(pass "libibp passes everything through")

# ---- IBP_REGIONS ------------------------------------------------------------
ibp_case(unknown_key ENV "IBP_REGIONS=min=1M,colour=red"
  EXPECT "IBP_REGIONS rule 1, token 'colour=red'" "unknown key" "${pass}")
ibp_case(bad_size_suffix ENV "IBP_REGIONS=min=2G<SEMI>min=1M,tensor=5X"
  EXPECT "IBP_REGIONS rule 2, token 'tensor=5X'"
         "size suffix must be K, M or G" "${pass}")
ibp_case(bad_size_number ENV "IBP_REGIONS=min=1.5M"
  EXPECT "IBP_REGIONS rule 1, token 'min=1.5M'" "${pass}")
ibp_case(threshold_low ENV "IBP_REGIONS=min=1M,threshold=0.3"
  EXPECT "IBP_REGIONS rule 1, token 'threshold=0.3'"
         "threshold must be auto or from 0.5 to 1.0" "${pass}")
ibp_case(chunk_3 ENV "IBP_REGIONS=min=1M,chunk=3"
  EXPECT "IBP_REGIONS rule 1, token 'chunk=3'"
         "chunk must be 1, 2, 4, 8 or auto" "${pass}")
ibp_case(tensor_0 ENV "IBP_REGIONS=min=1M,tensor=0"
  EXPECT "IBP_REGIONS rule 1, token 'tensor=0'" "tensor must be 1 byte to 1M"
         "${pass}")
ibp_case(clusters_0 ENV "IBP_REGIONS=min=1M,clusters=0"
  EXPECT "IBP_REGIONS rule 1, token 'clusters=0'"
         "clusters must be auto or a whole number from 1 to 256" "${pass}")
ibp_case(empty_value ENV "IBP_REGIONS=min=1M,tensor="
  EXPECT "IBP_REGIONS rule 1, token 'tensor='" "empty value" "${pass}")
# A rule of nothing but separators: not an empty rule (those are skipped,
# see empty_rules_ignored) but a rule without a selector.
ibp_case(empty_rule ENV "IBP_REGIONS=min=1M<SEMI> ,, "
  EXPECT "IBP_REGIONS rule 2, token ',,'" "rule needs a selector" "${pass}")
ibp_case(no_selector ENV "IBP_REGIONS=tensor=4K,name=w"
  EXPECT "IBP_REGIONS rule 1, token 'tensor=4K,name=w'"
         "rule needs a selector" "${pass}")
ibp_case(pair_without_equals ENV "IBP_REGIONS=min=1M,tensor"
  EXPECT "IBP_REGIONS rule 1, token 'tensor'" "expected key=value" "${pass}")
ibp_case(key_twice ENV "IBP_REGIONS=min=1M,min=2M"
  EXPECT "IBP_REGIONS rule 1, token 'min=2M'" "key given twice" "${pass}")
string(REPEAT "min=1G<SEMI>" 32 rules32)
ibp_case(too_many_rules ENV "IBP_REGIONS=${rules32}min=2G"
  EXPECT "IBP_REGIONS rule 33, token 'min=2G'" "too many rules" "${pass}")

# ---- the scalar variables ----------------------------------------------------
ibp_case(log_loud ENV "IBP_LOG=loud"
  EXPECT "IBP_LOG, token 'loud'" "must be error, warn, info or debug"
         "${pass}")
ibp_case(min_copy_abc ENV "IBP_MIN_COPY=abc" "IBP_REGIONS=min=1M"
  EXPECT "IBP_MIN_COPY, token 'abc'" "size must be a whole number" "${pass}")
ibp_case(disable_2 ENV "IBP_DISABLE=2" "IBP_REGIONS=min=1M"
  EXPECT "IBP_DISABLE, token '2'" "must be 0 or 1" "${pass}")
ibp_case(wait_ready_yes ENV "IBP_WAIT_READY=yes" "IBP_REGIONS=min=1M"
  EXPECT "IBP_WAIT_READY, token 'yes'" "must be 0 or 1" "${pass}")
string(REPEAT "x" 300 long)
ibp_case(stats_path_too_long ENV "IBP_STATS=/tmp/${long}.json"
  EXPECT "IBP_STATS, token '/tmp/xxx" "path too long" "${pass}")

# ---- IBP_CONFIG --------------------------------------------------------------
ibp_case(config_missing ENV "IBP_CONFIG=/nonexistent/ibp.conf"
  EXPECT "IBP_CONFIG, token '/nonexistent/ibp.conf'"
         "no such file or directory" "${pass}")
ibp_case(config_is_directory ENV "IBP_CONFIG={WORK}"
  EXPECT "IBP_CONFIG, token '" "it is a directory" "${pass}")
ibp_case(config_is_device ENV "IBP_CONFIG=/dev/zero"
  EXPECT "IBP_CONFIG, token '/dev/zero'" "not a regular file (a device)"
         "${pass}")
ibp_case(config_bad_line ENV "IBP_CONFIG={WORK}/ibp.conf"
  FILE "# weights\nmin=64M, name=weights\n\nmin=1M, chunk=3   # bad\nauto\n"
  EXPECT "IBP_CONFIG line 4, token 'chunk=3'"
         "chunk must be 1, 2, 4, 8 or auto" "${pass}")
ibp_case(config_after_good_regions ENV "IBP_REGIONS=min=1M"
  "IBP_CONFIG={WORK}/ibp.conf" FILE "min=2M, sample=0\n"
  EXPECT "IBP_CONFIG line 1, token 'sample=0'" "${pass}")

# ---- not configuration errors ------------------------------------------------
# IBP_STATS may name any path; a directory that is missing at exit is a
# failure to write the report: one warning from preload/stats/report.c,
# naming the variable and the path, while the regions worked normally.
# (IBP_WAIT_READY=1: copies made before compression finished would add
# the report's note on them.  The second line: the report's note that the
# gate left every copy (256 KiB each) to the driver.)
ibp_case(stats_missing_dir LINES 2
  ENV "IBP_REGIONS=min=1M" "IBP_STATS={WORK}/no-such-dir/stats.json"
      "IBP_WAIT_READY=1"
  EXPECT "IBP_STATS" "{WORK}/no-such-dir/stats.json")
# IBP_DISABLE=1: nothing else is read, so nothing is reported.
ibp_case(disable_hides_errors LINES 0
  ENV "IBP_DISABLE=1" "IBP_LOG=loud" "IBP_REGIONS=colour=red")
# Empty rules are skipped: no message, the rule after them applies.
ibp_case(empty_rules_ignored LINES 0 ENV "IBP_REGIONS=<SEMI> <SEMI>min=1M<SEMI><SEMI>")
