/* `ibp profile`: lists the built-in device cost profiles, or prints one
 * profile (built-in or file) in the profile text format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "kernels/ibp_kernels.h"
#include "profile/profile.h"

static const char help[] =
    "Usage: ibp profile [NAME|FILE]\n"
    "\n"
    "Device cost profiles: the copy, call and kernel costs of one GPU and\n"
    "its host link, which the simulated GPU's clock and libibp's choice of\n"
    "a transfer path use (docs/PROFILE.md; IBP_PROFILE=NAME|FILE selects\n"
    "one).\n"
    "\n"
    "Without an argument, lists the built-in profiles' names.  With NAME\n"
    "(a built-in) or FILE (a profile file), checks it and prints it in the\n"
    "profile text format, every parameter with its unit and meaning: a\n"
    "start for a profile of another machine.  Its first line, a comment,\n"
    "says whether its decode terms were measured with this ibp's\n"
    "decompress kernels (its decoder_build, docs/PROFILE.md).\n"
    "\n"
    "Options:\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit status: 0 success, 1 the profile cannot be read (one message on\n"
    "stderr), 2 usage error.\n";

static const cli_option options[] = {{"help", 'h', 0}, {NULL, 0, 0}};

static int list_builtins(void) {
  for (const char *const *n = ibp_profile_builtin_names(); *n != NULL; n++)
    printf("%s\n", *n);
  return CLI_EXIT_OK;
}

/* The comment that opens a printed profile: what its decode terms are of. */
static void print_decode_terms(const ibp_profile *p) {
  if (ibp_profile_decode_measured(p, IBP_DECODER_BUILD))
    printf("# decode terms: measured with this decoder (%s)\n",
           IBP_DECODER_BUILD);
  else
    printf("# decode terms: unmeasured for this decoder (decoder_build %s; "
           "this decoder: %s)\n",
           p->decoder_build, IBP_DECODER_BUILD);
  if (ibp_profile_stage_measured(p, IBP_STAGE_BUILD))
    printf("# stage decode terms: measured with this decoder's stage (%s)\n",
           IBP_STAGE_BUILD);
  else
    printf("# stage decode terms: unmeasured for this decoder's stage "
           "(stage_decoder_build %s; this stage: %s)\n",
           p->stage_decoder_build, IBP_STAGE_BUILD);
}

static int print_profile(const char *spec) {
  ibp_profile p;
  char err[512];
  if (ibp_profile_load(spec, &p, err, sizeof err) != 0) {
    cli_error("ibp", "%s", err);
    return CLI_EXIT_DATA;
  }
  size_t n = ibp_profile_format(&p, NULL, 0);
  char *text = malloc(n + 1);
  if (text == NULL) {
    cli_error("ibp profile", "out of memory");
    return CLI_EXIT_DATA;
  }
  ibp_profile_format(&p, text, n + 1);
  print_decode_terms(&p);
  int ok = fwrite(text, 1, n, stdout) == n && fflush(stdout) == 0;
  free(text);
  if (!ok) {
    cli_error("ibp profile", "cannot write the profile to stdout");
    return CLI_EXIT_DATA;
  }
  return CLI_EXIT_OK;
}

int cmd_profile(int argc, char **argv) {
  cli_parser ps;
  cli_item it;
  char err[256];
  const char *spec = NULL;
  cli_parser_init(&ps, argc, argv, 1, options);
  while (cli_next(&ps, &it, err, sizeof err) != CLI_END) {
    if (it.kind == CLI_ERROR)
      return cli_syntax_error("profile", "%s", err);
    if (it.kind == CLI_OPTION) { /* --help, the only option */
      fputs(help, stdout);
      return CLI_EXIT_OK;
    }
    if (spec != NULL)
      return cli_syntax_error("profile", "unexpected argument '%s'", it.value);
    spec = it.value;
  }
  return spec == NULL ? list_builtins() : print_profile(spec);
}
