#!/bin/sh
# preload_stats_json: the JSON report of preload/stats/report.c, checked with
# Python's strict parser.  Skips (77) only when python3 is absent.
#   run_json.sh <test_stats> <check_stats.py> <work dir>
# With localedef available, the JSON and the text report are repeated under
# a locale whose decimal separator is a comma (the numbers must not change).
set -u
test_stats=$1 checker=$2 dir=$3
if ! command -v python3 >/dev/null 2>&1; then
  echo "python3 not found; skipped"
  exit 77
fi
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$test_stats" json "$dir" || exit 1
python3 "$checker" "$dir/json/stats.json" || exit 1
if command -v localedef >/dev/null 2>&1 && mkdir -p "$dir/locale" &&
   localedef -i de_DE -f UTF-8 "$dir/locale/de_DE.UTF-8" >/dev/null 2>&1; then
  export LOCPATH="$dir/locale" LOCALE=de_DE.UTF-8
  "$test_stats" json "$dir/de" || exit 1
  "$test_stats" text "$dir/de" >/dev/null || exit 1
  python3 "$checker" "$dir/de/json/stats.json" || exit 1
else
  echo "note: no de_DE locale could be built; comma-locale case not run"
fi
