/* Runs a program where userfaultfd serves user-mode faults only, as for an
 * unprivileged process under vm.unprivileged_userfaultfd=0 (the default):
 * a seccomp filter fails userfaultfd(2) without UFFD_USER_MODE_ONLY with
 * EPERM, as the kernel does there.  `no_uffd all PROGRAM ARGS...` fails
 * every userfaultfd(2) (a kernel without it, or one that forbids it).
 *
 *   no_uffd user|all PROGRAM [ARGS...]
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define USER_MODE_ONLY 1 /* UFFD_USER_MODE_ONLY */

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "user") && strcmp(argv[1], "all"))) {
    fprintf(stderr, "usage: no_uffd user|all PROGRAM [ARGS...]\n");
    return 2;
  }
  const int all = !strcmp(argv[1], "all");
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_userfaultfd, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      /* flags: the low word of the first argument */
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args)),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, all ? 0 : USER_MODE_ONLY, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("no_uffd: seccomp");
    return 77; /* cannot build the environment: skipped */
  }
  execvp(argv[2], argv + 2);
  perror("no_uffd: exec");
  return 2;
}
