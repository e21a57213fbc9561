/* `ibp`: the libibp command-line tool -- subcommand dispatch, top-level
 * usage and version. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ibp/codec.h"

#ifndef IBP_VERSION
#define IBP_VERSION "unknown"
#endif

typedef struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *summary;
} command;

static const command commands[] = {
    {"analyze", cmd_analyze, "report how much IBP saves on a file"},
    {"compress", cmd_compress, "compress a file into an ibp container"},
    {"decompress", cmd_decompress, "decode an ibp container"},
    {"verify", cmd_verify, "check an ibp container (and compare it)"},
    {"bench", cmd_bench, "measure codec throughput"},
    {"run", cmd_run, "run a program with libibp preloaded"},
    {"profile", cmd_profile, "list or print device cost profiles"},
    {"calibrate", cmd_calibrate, "measure a device cost profile on a GPU"},
};
#define COMMAND_COUNT (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
  fputs("Usage: ibp COMMAND [ARGS...]\n"
        "\n"
        "Invariant Bit Packing: lossless compression of arrays of fixed-size\n"
        "tensors by removing the bits most tensors share.\n"
        "\n"
        "Commands:\n",
        f);
  for (size_t i = 0; i < COMMAND_COUNT; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
  fputs("\n"
        "  ibp COMMAND --help   options of a command\n"
        "  ibp --version        version of the tool and the format\n"
        "\n"
        "Exit status: 0 success, 1 bad data or I/O error, 2 usage error\n"
        "('ibp run': the command's status).\n",
        f);
}

static const command *find_command(const char *name) {
  for (size_t i = 0; i < COMMAND_COUNT; i++) {
    if (strcmp(commands[i].name, name) == 0)
      return &commands[i];
  }
  return NULL;
}

static int version(void) {
  printf("ibp %s (container format %u, codec %s)\n", IBP_VERSION,
         IBP_FORMAT_VERSION, ibp_impl_name(ibp_impl_active()));
  return CLI_EXIT_OK;
}

/* "ibp help [COMMAND]" */
static int help(int argc, char **argv) {
  if (argc < 2) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  const command *c = find_command(argv[1]);
  if (c == NULL)
    return cli_usage_error("unknown command '%s' (see 'ibp --help')", argv[1]);
  char *args[] = {argv[1], "--help", NULL};
  return c->run(2, args);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *name = argv[1];
  if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0)
    return version();
  if (strcmp(name, "help") == 0)
    return help(argc - 1, argv + 1);
  const command *c = find_command(name);
  if (c == NULL) {
    if (name[0] == '-')
      return cli_usage_error("unknown option '%s' (see 'ibp --help')", name);
    return cli_usage_error("unknown command '%s' (see 'ibp --help')", name);
  }
  return c->run(argc - 1, argv + 1);
}
