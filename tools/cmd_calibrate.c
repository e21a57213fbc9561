/* `ibp calibrate`: measures a device cost profile on a GPU (or on the
 * simulated one) and writes it in the profile text format; what cannot be
 * measured comes from a base profile (calibrate.h; docs/PROFILE.md,
 * "Calibration"). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "calibrate.h"
#include "cli.h"
#include "cli_args.h"
#include "kernels/ibp_kernels.h"
#include "out_file.h"
#include "profile/profile.h"

static const char help[] =
    "Usage: ibp calibrate [options]\n"
    "\n"
    "Measures a device cost profile on one GPU (docs/PROFILE.md): copy-engine\n"
    "bandwidths and setup (of a copy, and of each later entry of one\n"
    "cuMemcpyBatchAsync where the driver has it), the CPU time of driver\n"
    "calls, the launch latency, SM reads of pinned host memory (whole-GPU\n"
    "bandwidth, round trip, bytes in flight per SM), device-memory\n"
    "bandwidth, the SM count, and libibp's decompress kernel (its rate per\n"
    "SM and per tensor, checked byte for byte, and its reads of host\n"
    "memory), all timed with CUDA events through the driver\n"
    "(libcuda.so.1).  The parameters it cannot measure\n"
    "(runtime_call_us, ibp_hold_us, batch_deadline_us, sector_bytes) keep\n"
    "the base profile's values.  The profile, with a header saying which\n"
    "values were measured, is written in the profile text format, its\n"
    "decoder_build naming this ibp's decompress kernels; one line says so\n"
    "when the base profile's decode terms were measured with another\n"
    "build or an unknown one.  Takes well under a minute on a GPU.\n"
    "\n"
    "Options:\n"
    "  --out FILE         write the profile to FILE (default: stdout)\n"
    "  --device N         the device to measure (default 0)\n"
    "  --base NAME|FILE   the profile the unmeasured values come from\n"
    "                     (default: h100-pcie5 when the device's name says\n"
    "                     H100 or H200, else a100-pcie4)\n"
    "  --name NAME        the profile's name (default: calibrated-<device>)\n"
    "  --quick            small transfers, few repetitions: for the\n"
    "                     simulated GPU, whose kernels run emulated\n"
    "  --sim              measure the simulated GPU (its libcuda.so.1 in\n"
    "                     front of LD_LIBRARY_PATH, as 'ibp run --sim'; its\n"
    "                     clock follows IBP_PROFILE)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit status: 0 success, 1 no driver or device, a failed measurement, or\n"
    "the profile cannot be written, 2 usage error.\n";

static const cli_option options[] = {
    {"out", 0, 1},   {"device", 0, 1}, {"base", 0, 1},   {"name", 0, 1},
    {"quick", 0, 0}, {"sim", 0, 0},    {"help", 'h', 0}, {NULL, 0, 0}};

typedef struct calibrate_args {
  const char *out, *base, *name;
  int device, quick;
  int sim_index; /* argv index of --sim; 0 = not given */
} calibrate_args;

/* A profile name: 1..63 printable ASCII characters, no spaces. */
static int valid_name(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n >= IBP_PROFILE_NAME_MAX)
    return 0;
  for (; *s; s++)
    if (*s <= ' ' || *s > '~')
      return 0;
  return 1;
}

static int set_option(const char *name, const char *value, int index,
                      calibrate_args *a) {
  if (strcmp(name, "out") == 0) {
    a->out = value;
  } else if (strcmp(name, "device") == 0) {
    uint64_t d;
    if (cli_parse_u64(value, &d) != CLI_NUM_OK || d > INT_MAX)
      return cli_syntax_error("calibrate",
                              "--device: '%s' is not a device "
                              "number",
                              value);
    a->device = (int)d;
  } else if (strcmp(name, "base") == 0) {
    a->base = value;
  } else if (strcmp(name, "name") == 0) {
    if (!valid_name(value))
      return cli_syntax_error("calibrate",
                              "--name: '%s' is not a profile "
                              "name (1 to 63 printable "
                              "characters, no spaces)",
                              value);
    a->name = value;
  } else if (strcmp(name, "quick") == 0) {
    a->quick = 1;
  } else {
    a->sim_index = index;
  }
  return -1;
}

/* Returns -1 to go on, else the exit code. */
static int parse_args(int argc, char **argv, calibrate_args *a) {
  cli_parser ps;
  cli_item it;
  char err[256];
  memset(a, 0, sizeof *a);
  cli_parser_init(&ps, argc, argv, 1, options);
  while (cli_next(&ps, &it, err, sizeof err) != CLI_END) {
    if (it.kind == CLI_ERROR)
      return cli_syntax_error("calibrate", "%s", err);
    if (it.kind == CLI_POSITIONAL)
      return cli_syntax_error("calibrate", "unexpected argument '%s'",
                              it.value);
    const char *name = options[it.option].name;
    if (strcmp(name, "help") == 0) {
      fputs(help, stdout);
      return CLI_EXIT_OK;
    }
    int rc = set_option(name, it.value, ps.next - 1, a);
    if (rc >= 0)
      return rc;
  }
  return -1;
}

/* --sim: runs this command again, without --sim, with the simulated
 * driver's directory in front of LD_LIBRARY_PATH.  Returns only on
 * failure, with the exit code. */
static int exec_on_sim(int argc, char **argv, int sim_index) {
  char dir[PATH_MAX];
  int rc = cli_find_sim_dir("ibp calibrate", dir);
  if (rc >= 0)
    return rc;
  if (cli_prepend_env("LD_LIBRARY_PATH", dir, ':') != 0) {
    cli_error("ibp calibrate", "cannot set LD_LIBRARY_PATH: %s",
              strerror(errno));
    return CLI_EXIT_USAGE;
  }
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (args == NULL) {
    cli_error("ibp calibrate", "out of memory");
    return CLI_EXIT_DATA;
  }
  int n = 0;
  args[n++] = "ibp";
  for (int i = 0; i < argc; i++)
    if (i != sim_index)
      args[n++] = argv[i];
  fflush(NULL);
  execv("/proc/self/exe", args);
  cli_error("ibp calibrate", "cannot run itself again: %s", strerror(errno));
  free(args);
  return CLI_EXIT_DATA;
}

/* ---- the profile ------------------------------------------------------------
 */

/* The built-in whose GPU the device's name names, else a100-pcie4. */
static const char *default_base(const char *device_name) {
  const char *b = ibp_profile_builtin_for_device(device_name);
  return b ? b : "a100-pcie4";
}

/* "calibrated-" and the device's name, every run of characters other than
 * letters, digits, '.', '_' and '-' made one '-'. */
static void default_name(const char *device_name, char *out, size_t len) {
  size_t n = (size_t)snprintf(out, len, "calibrated-");
  for (const char *s = device_name; *s && n + 1 < len; s++) {
    char c = *s;
    int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (keep)
      out[n++] = c;
    else if (out[n - 1] != '-')
      out[n++] = '-';
  }
  while (out[n - 1] == '-')
    n--;
  out[n] = '\0';
}

/* The profile a calibration starts from: --base, else the built-in the
 * device's name names, loaded once the device is open. */
typedef struct base_profile {
  const char *spec; /* NULL until known */
  ibp_profile p;
} base_profile;

/* One line when the base's decode terms were not measured with this ibp's
 * decompress kernels (another build, or none named): they are measured
 * anyway, as every calibration does. */
static void say_decode_terms(const base_profile *b) {
  if (ibp_profile_decode_measured(&b->p, IBP_DECODER_BUILD))
    return;
  fprintf(stderr,
          "ibp calibrate: %s: decode terms unmeasured for this decoder (its "
          "decoder_build: %s; this decoder: %s): re-measuring\n",
          b->spec, b->p.decoder_build, IBP_DECODER_BUILD);
}

/* calibrate_opened_fn: the default base, now that the device's name is
 * known, and what its decode terms are of. */
static int on_opened(const char *device_name, void *ctx, char *err,
                     size_t errlen) {
  base_profile *b = ctx;
  if (b->spec == NULL) {
    b->spec = default_base(device_name);
    if (ibp_profile_load(b->spec, &b->p, err, errlen) != 0)
      return -1;
  }
  say_decode_terms(b);
  return 0;
}

/* base with the measured values of r; the decoder build when every decode
 * term was measured. */
static void merge(ibp_profile *base, const calibrate_result *r) {
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what)                             \
  if (r->measured[CALIBRATE_##key])                                            \
    base->key = r->values.key;
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
  if (r->measured[CALIBRATE_decode_gbps_per_sm] &&
      r->measured[CALIBRATE_decode_tensor_us] &&
      r->measured[CALIBRATE_decode_h2d_gbps])
    snprintf(base->decoder_build, sizeof base->decoder_build, "%s",
             IBP_DECODER_BUILD);
}

/* The keys of the parameters measured (want 1) or not (want 0). */
static void key_list(const calibrate_result *r, int want, char *out,
                     size_t len) {
  static const char *const keys[] = {
#define IBP_PROFILE_PARAM(key, unit, lo, hi, what) #key,
#include "profile/profile.def"
#undef IBP_PROFILE_PARAM
  };
  size_t n = 0;
  out[0] = '\0';
  for (int i = 0; i < CALIBRATE_PARAMS && n < len; i++)
    if (r->measured[i] == want)
      n += (size_t)snprintf(out + n, len - n, " %s", keys[i]);
}

/* The header: where and when, what was measured, what was kept; then the
 * measurement's notes, each a comment. */
static int header(const calibrate_result *r, int device, const char *base,
                  char *out, size_t len) {
  char date[32], measured[512], kept[512];
  time_t now = time(NULL);
  struct tm tm;
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
  key_list(r, 1, measured, sizeof measured);
  key_list(r, 0, kept, sizeof kept);
  size_t n = (size_t)snprintf(
      out, len,
      "# Measured by 'ibp calibrate' (docs/PROFILE.md, \"Calibration\")\n"
      "# device %d: %s%s\n"
      "# date: %s\n"
      "# measured:%s\n"
      "# kept from %s:%s\n"
      "# sms: the device's multiprocessor count%s\n",
      device, r->device_name, r->simulated ? " (the simulated GPU)" : "", date,
      measured, base, kept,
      r->simulated ? " (the simulated GPU always reports 132; its clock uses "
                     "its profile's)"
                   : "");
  for (const char *s = r->notes; *s && n < len;) {
    const char *eol = strchr(s, '\n');
    int w = eol ? (int)(eol - s) : (int)strlen(s);
    n += (size_t)snprintf(out + n, len - n, "# %.*s\n", w, s);
    s += w + (eol != NULL);
  }
  return n < len ? 0 : -1;
}

/* The header and p in the text format, checked by reading it back;
 * malloc'd, NULL on failure (reported). */
static char *profile_text(const ibp_profile *p, const char *head) {
  size_t h = strlen(head), n = ibp_profile_format(p, NULL, 0);
  char *text = malloc(h + n + 1);
  if (text == NULL) {
    cli_error("ibp calibrate", "out of memory");
    return NULL;
  }
  memcpy(text, head, h);
  ibp_profile_format(p, text + h, n + 1);
  ibp_profile back;
  char err[512];
  if (ibp_profile_parse(text, h + n, "the calibrated profile", &back, err,
                        sizeof err) != 0) {
    cli_error("ibp calibrate", "%s", err);
    free(text);
    return NULL;
  }
  return text;
}

static int write_text(const char *path, const char *text) {
  size_t n = strlen(text);
  if (path == NULL) {
    if (fwrite(text, 1, n, stdout) != n || fflush(stdout) != 0) {
      cli_error("ibp calibrate", "cannot write the profile to stdout");
      return CLI_EXIT_DATA;
    }
    return CLI_EXIT_OK;
  }
  out_file of;
  int e = out_file_open(&of, path);
  if (e == 0 && out_file_pwrite(&of, 0, text, n) != 0)
    e = errno;
  if (e == 0)
    e = out_file_commit(&of, n);
  else
    out_file_abort(&of);
  if (e != 0)
    return cli_file_error(path, strerror(e));
  return CLI_EXIT_OK;
}

int cmd_calibrate(int argc, char **argv) {
  calibrate_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0)
    return rc;
  if (a.sim_index != 0)
    return exec_on_sim(argc, argv, a.sim_index);
  base_profile b;
  memset(&b, 0, sizeof b);
  b.spec = a.base;
  char err[512];
  if (a.base != NULL && ibp_profile_load(a.base, &b.p, err, sizeof err)) {
    cli_error("ibp", "%s", err);
    return CLI_EXIT_DATA;
  }
  static calibrate_result r;
  if (calibrate_measure(a.device, a.quick, on_opened, &b, &r, err,
                        sizeof err) != 0) {
    cli_error("ibp calibrate", "%s", err);
    return CLI_EXIT_DATA;
  }
  merge(&b.p, &r);
  if (a.name != NULL)
    snprintf(b.p.name, sizeof b.p.name, "%s", a.name);
  else
    default_name(r.device_name, b.p.name, sizeof b.p.name);
  static char head[4096];
  if (header(&r, a.device, b.spec, head, sizeof head) != 0) {
    cli_error("ibp calibrate", "the profile's header is too long");
    return CLI_EXIT_DATA;
  }
  char *text = profile_text(&b.p, head);
  if (text == NULL)
    return CLI_EXIT_DATA;
  rc = write_text(a.out, text);
  free(text);
  return rc;
}
