# Prints a C source with its comments blanked (and, unless keep_strings=1,
# the contents of string and character literals removed), one output line
# per input line, so that a grep -n on the result gives the source's line
# numbers.  Used by the checks in this directory.
#   awk -v keep_strings=0|1 -f strip_c.awk file.c
BEGIN { in_comment = 0 }
{
  line = $0
  n = length(line)
  out = ""
  i = 1
  while (i <= n) {
    c = substr(line, i, 1)
    c2 = substr(line, i, 2)
    if (in_comment) {
      if (c2 == "*/") { in_comment = 0; out = out "  "; i += 2 }
      else { out = out " "; i++ }
      continue
    }
    if (c2 == "/*") { in_comment = 1; out = out "  "; i += 2; continue }
    if (c2 == "//") break
    if (c == "\"" || c == "'") {
      j = i + 1
      body = ""
      while (j <= n) {
        d = substr(line, j, 1)
        if (d == "\\") { body = body substr(line, j, 2); j += 2; continue }
        if (d == c) break
        body = body d
        j++
      }
      out = out c (keep_strings ? body : "") c
      i = j + 1
      continue
    }
    out = out c
    i++
  }
  print out
}
