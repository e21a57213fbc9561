/* An empty shared library: stands in for libibp.so in the `ibp run` CLI
 * tests (cli_run), so that they do not depend on the interposer. */
int ibp_cli_preload_stub;
