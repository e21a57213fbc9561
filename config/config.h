/*
 * libibp configuration (config/): parses the IBP_* environment variables and
 * the IBP_CONFIG rule file into one fixed-size, plain-data ibp_config.
 *
 * The interposer calls ibp_config_load() once, at the first CUDA call, inside
 * the application's process.  Therefore this module:
 *   - never prints, exits or aborts: every problem comes back as an
 *     ibp_config_error, which the caller logs once (ibp_config_format_error)
 *     before running as pass-through (docs/ARCHITECTURE.md, "Fail open");
 *   - never calls malloc itself; storage is fixed (IBP_CONFIG_MAX_RULES);
 *     reading IBP_CONFIG uses stdio (one FILE) and nothing else;
 *   - depends on nothing else of libibp but the header-only list of chunk
 *     widths (include/ibp/chunk_widths.h).
 * Threading: no global state.  The functions are reentrant; an ibp_config is
 * plain data, safe to share read-only once loaded.
 * The grammar, defaults and examples are in docs/CONFIG.md.
 */
#ifndef IBP_CONFIG_CONFIG_H
#define IBP_CONFIG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IBP_CONFIG_MAX_RULES 32  /* IBP_REGIONS and IBP_CONFIG together */
#define IBP_CONFIG_NAME_MAX 64   /* name= holds 1..63 characters + NUL */
#define IBP_CONFIG_PATH_MAX 256  /* IBP_STATS path, NUL included */
#define IBP_CONFIG_LINE_MAX 1024 /* longest IBP_CONFIG line, NUL included */
#define IBP_CONFIG_AUTO_MIN_BYTES ((uint64_t)64 << 20) /* IBP_REGIONS=auto */
#define IBP_CONFIG_DEFAULT_TENSOR 4096u
#define IBP_CONFIG_MAX_TENSOR (1u << 20)
#define IBP_CONFIG_MAX_CLUSTERS 256u /* clusters=K: docs/FORMAT.md §4 */

typedef enum ibp_log_level {
  IBP_LOG_ERROR = 0,
  IBP_LOG_WARN = 1, /* the default */
  IBP_LOG_INFO = 2,
  IBP_LOG_DEBUG = 3
} ibp_log_level;

typedef enum ibp_mode {
  IBP_MODE_SHADOW = 0, /* the default: the app's bytes are never changed */
  IBP_MODE_INPLACE = 1,
  /* the allocation is libibp's memory, released once compressed and
   * rebuilt on access: host memory at (1 - saved) of the region */
  IBP_MODE_COMPACT = 2
} ibp_mode;

typedef enum ibp_track {
  IBP_TRACK_PROTECT = 0, /* the default: write-protect, else pass through */
  IBP_TRACK_TRUST = 1
} ibp_track;

/* IBP_TRACKER: which write tracker holds regions (docs/CONFIG.md). */
typedef enum ibp_tracker {
  IBP_TRACKER_AUTO = 0,    /* the default: userfaultfd where it works */
  IBP_TRACKER_USERFAULTFD, /* userfaultfd only: elsewhere pass through */
  IBP_TRACKER_MPROTECT     /* the mprotect + SIGSEGV tracker only */
} ibp_tracker;

typedef enum ibp_stats_mode {
  IBP_STATS_OFF = 0,    /* IBP_STATS unset, empty or 0 */
  IBP_STATS_STDERR = 1, /* IBP_STATS=1: text table on stderr at exit */
  IBP_STATS_JSON = 2    /* IBP_STATS=<path>: JSON written to stats_path */
} ibp_stats_mode;

/* Bits of ibp_rule.selectors.  A rule matches an allocation when every
 * selector it names matches (logical AND); each rule names at least one. */
#define IBP_SELECT_SIZE 1u /* alloc_bytes == size */
#define IBP_SELECT_MIN 2u  /* alloc_bytes >= min */
#define IBP_SELECT_NTH 4u  /* nth_alloc == nth (1-based) */

/* One IBP_REGIONS / IBP_CONFIG rule.  Fields not named by the rule hold the
 * defaults listed here. */
typedef struct ibp_rule {
  unsigned selectors;             /* IBP_SELECT_* bits, never 0 */
  uint64_t size;                  /* valid when IBP_SELECT_SIZE; >= 1 */
  uint64_t min;                   /* valid when IBP_SELECT_MIN; may be 0 */
  uint64_t nth;                   /* valid when IBP_SELECT_NTH; >= 1 */
  char name[IBP_CONFIG_NAME_MAX]; /* label for logs/stats; "" = none given */
  uint32_t tensor_bytes;          /* 1..IBP_CONFIG_MAX_TENSOR; default 4096 */
  unsigned chunk;                 /* IBP_CHUNK_WIDTHS; 0 = auto (default) */
  double threshold;               /* 0.5..1.0; 0 = auto (default) */
  double sample;                  /* (0, 1]; 0 = not given (codec default) */
  unsigned clusters; /* Mask/Bitval pairs: 1..IBP_CONFIG_MAX_CLUSTERS;
                        0 = auto (default: the codec's search) */
  ibp_mode mode;     /* default IBP_MODE_SHADOW */
  ibp_track track;   /* default IBP_TRACK_PROTECT */
  int wc;         /* wc=yes: write-combined allocations too (default 0: left to
                     the driver, docs/CONFIG.md) */
  unsigned index; /* 1-based position in ibp_config.rules */
  int is_auto;    /* written as `auto`: warnings name it so (docs/CONFIG.md) */
} ibp_rule;

/* IBP_PATH: which of libibp's two ways of serving one copy the gate may
 * choose (the driver's own copy and batched launches stay open). */
typedef enum ibp_path {
  IBP_PATH_AUTO = 0,     /* the faster of the two, per copy */
  IBP_PATH_ZEROCOPY = 1, /* the kernel reads the streams over PCIe */
  IBP_PATH_STAGED = 2    /* the copy engine moves them, the kernel decodes */
} ibp_path;

/* IBP_FORCE_ROUTE: a route libibp takes for every copy it can take it
 * for, whatever the gate's estimates say (comparisons: bench/paths.sh);
 * in the order of the routes (preload/stats/routes.def), after NONE. */
typedef enum ibp_force_route {
  IBP_FORCE_NONE = 0,     /* the gate chooses */
  IBP_FORCE_DRIVER = 1,   /* the driver's own copy */
  IBP_FORCE_ZEROCOPY = 2, /* the kernel reading the streams over PCIe */
  IBP_FORCE_STAGED = 3,   /* the copy engine, then the kernel */
  IBP_FORCE_BATCHED = 4   /* held for its stream's batched launch */
} ibp_force_route;

#define IBP_STAGING_DEFAULT (16ull << 20)
#define IBP_MAX_SMS_DEFAULT 32u
#define IBP_SCANNERS_DEFAULT 4u
#define IBP_SCANNERS_MAX 16u
/* the value bench/ab measured the embedding lines with (docs/
 * ARCHITECTURE.md "Quiet regions") */
#define IBP_TRACK_QUIET_DEFAULT 250u

typedef struct ibp_config {
  int disabled;            /* IBP_DISABLE=1, or forced to 1 by a load error */
  ibp_log_level log_level; /* IBP_LOG */
  ibp_stats_mode stats;    /* IBP_STATS */
  char stats_path[IBP_CONFIG_PATH_MAX]; /* set when stats == IBP_STATS_JSON */
  uint64_t min_copy_bytes; /* IBP_MIN_COPY; copies smaller pass through */
  int wait_ready;      /* IBP_WAIT_READY=1: a region's first copy waits until it
                          is ready (tests, benchmarks) */
  ibp_tracker tracker; /* IBP_TRACKER */
  unsigned track_quiet_ms; /* IBP_TRACK_QUIET: a region the userfaultfd
                              tracker holds with no write found for this
                              long is held by faults (0 = never; docs/
                              ARCHITECTURE.md "Quiet regions") */
  int no_batch;     /* IBP_BATCH=0: every served copy gets a launch of its
                       own (docs/ARCHITECTURE.md "Batched launches") */
  unsigned threads; /* IBP_THREADS: compression threads, 1..64; 0 = auto
                       (a quarter of the CPUs, at least 1) */
  /* The staged path (docs/ARCHITECTURE.md "Staged copies"). */
  uint64_t staging_bytes;      /* IBP_STAGING: device memory per context for
                                  staged copies; 0 = none (the path is off) */
  unsigned max_sms;            /* IBP_MAX_SMS: blocks a staged copy's decode
                                  uses, 1..4096 */
  ibp_path path;               /* IBP_PATH: the GPU paths the gate may choose */
  ibp_force_route force_route; /* IBP_FORCE_ROUTE */
  unsigned scanners;           /* IBP_SCANNERS: threads that scan held copies'
                                  pages ahead of their batched launch, 0..16
                                  (docs/ARCHITECTURE.md "Batched launches") */
  /* IBP_PROFILE: a built-in device cost profile or a profile file
   * (docs/PROFILE.md), read by the interposer; "" = chosen per device */
  char profile[IBP_CONFIG_PATH_MAX];
  unsigned n_rules; /* IBP_REGIONS rules first, then IBP_CONFIG's */
  ibp_rule rules[IBP_CONFIG_MAX_RULES];
} ibp_config;

/* Where and why a value was rejected.  Strings are always NUL-terminated and
 * truncated to fit (a truncated token ends in "..."). */
typedef struct ibp_config_error {
  char variable[32]; /* "IBP_REGIONS", "IBP_CONFIG", "IBP_LOG", ... */
  unsigned rule;     /* 1-based rule in IBP_REGIONS (or in the line of
                        IBP_CONFIG); 0 = n/a */
  unsigned line;     /* 1-based line within the IBP_CONFIG file; 0 = n/a */
  char token[64];    /* the offending token, e.g. "tensor=5X" */
  char message[160]; /* the rule violated, e.g. "size suffix must be ..." */
} ibp_config_error;

/* Sets *out to the defaults: enabled, IBP_LOG_WARN, stats off,
 * min_copy_bytes 0, no rules.  out must not be NULL. */
void ibp_config_init(ibp_config *out);

/* Sets *rule to the defaults listed at ibp_rule, with no selector. */
void ibp_rule_init(ibp_rule *rule);

/* Reads IBP_DISABLE, IBP_LOG, IBP_STATS, IBP_MIN_COPY, IBP_WAIT_READY,
 * IBP_TRACKER, IBP_TRACK_QUIET, IBP_BATCH, IBP_THREADS, IBP_STAGING,
 * IBP_MAX_SMS, IBP_SCANNERS, IBP_PATH, IBP_FORCE_ROUTE,
 * IBP_PROFILE, IBP_REGIONS and IBP_CONFIG
 * through getenv_fn (NULL = the C library's getenv) and fills *out.  If
 * IBP_DISABLE=1 the other variables are not read (nothing of them is reported).
 * Unset and empty variables take their defaults. out: must not be NULL; fully
 * overwritten. err: may be NULL; on error it names the variable, rule or line,
 * and token. Returns 0 on success. Returns -1 on the first bad value; *out is
 * then the fail-open configuration: defaults with disabled = 1 and no rules. */
int ibp_config_load(ibp_config *out, const char *(*getenv_fn)(const char *),
                    ibp_config_error *err);

/* Parses IBP_REGIONS syntax from text (NUL-terminated; NULL or empty = no
 * rules) and appends the rules to out->rules (out initialized, e.g. by
 * ibp_config_init).  Rule numbers in errors count the non-empty rules of
 * text from 1.
 * Returns 0 on success, -1 on error with *err filled (err may be NULL) and
 * out->n_rules and out->rules left as they were on entry. */
int ibp_config_parse_regions(const char *text, ibp_config *out,
                             ibp_config_error *err);

/* Parses an IBP_CONFIG rule file (same rules, one or more per line, '#'
 * starts a comment, blank lines ignored) and appends its rules to out.
 * Returns 0 on success, -1 on error (unreadable file, line longer than
 * IBP_CONFIG_LINE_MAX - 1, bad rule) with err->line set where it applies;
 * out->n_rules and out->rules are then left as they were on entry. */
int ibp_config_parse_file(const char *path, ibp_config *out,
                          ibp_config_error *err);

/* Returns the first rule of c that matches an allocation of alloc_bytes that
 * is the nth_alloc-th pinned allocation of the process (1-based), or NULL if
 * none matches or c->disabled.  c must not be NULL. */
const ibp_rule *ibp_config_match(const ibp_config *c, uint64_t alloc_bytes,
                                 uint64_t nth_alloc);

/* Writes the one-line message the interposer logs for e into buf (always
 * NUL-terminated when len > 0; truncated to fit), e.g.
 *   [ibp] IBP_REGIONS rule 2, token 'tensor=5X': size suffix must be K, M
 *   or G — libibp passes everything through
 * e must not be NULL; buf may be NULL only when len == 0. */
void ibp_config_format_error(const ibp_config_error *e, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* IBP_CONFIG_CONFIG_H */
