/* The reference for preload_no_init_array: the smallest shared library this
 * toolchain makes, so that the .init_array entries the toolchain adds by
 * itself are known. */
int ibp_check_minimal(void);

int ibp_check_minimal(void) {
  return 0;
}
