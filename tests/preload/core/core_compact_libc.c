/* The C-library calls that let the kernel read or write a compact
 * region's released pages (docs/CONFIG.md, mode=compact): read, pread,
 * readv, recv, recvmsg and fread into it; write, pwrite, writev, send,
 * sendmsg and fwrite from it; then device-to-host copies into it, which
 * leave it compact.  Each must succeed as it does without libibp, move
 * the region's bytes, and every copy to the device afterwards must bring
 * what the host holds.  Run as a compact region where
 * userfaultfd serves kernel-mode faults, under no_uffd user (user-mode
 * faults only: libibp's hooks prepare the pages), and disabled.  With
 * CORE_EXPECT_COMPACT=1, each call's pages must be released before it
 * (mincore). */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#define N (4u << 20)
#define SLOT (N / 16) /* each call works in a slot of its own */
#define LEN 70001u    /* bytes a call moves: across pages, unaligned */

static uint8_t *host, *dev, *want, *back;
static uint8_t data[LEN], got[LEN];
static int failures, compact;

#define CK(call)                                                               \
  do {                                                                         \
    if ((call) != cudaSuccess) {                                               \
      fprintf(stderr, "%s:%d: %s failed\n", __FILE__, __LINE__, #call);        \
      return 2;                                                                \
    }                                                                          \
  } while (0)

/* A call that must succeed in full, as without libibp. */
#define MOVED(call, n, what)                                                   \
  do {                                                                         \
    long long r_ = (long long)(call);                                          \
    if (r_ != (long long)(n)) {                                                \
      fprintf(stderr, "core_compact_libc: %s gave %lld (%s)\n", what, r_,      \
              strerror(errno));                                                \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static void expect(int c, const char *what) {
  if (!c) {
    fprintf(stderr, "core_compact_libc: %s\n", what);
    failures++;
  }
}

/* Slot k's first byte, at an unaligned offset. */
static uint8_t *at(unsigned k) {
  return host + k * SLOT + 777;
}
static uint8_t *want_at(unsigned k) {
  return want + k * SLOT + 777;
}

/* Before a call on slot k: its pages are released (compact regions). */
static void released(unsigned k, const char *what) {
  const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  unsigned char v[LEN / 4096 + 3];
  uintptr_t lo = (uintptr_t)at(k) & ~(pg - 1);
  size_t n = ((uintptr_t)at(k) + LEN - lo + pg - 1) / pg, resident = 0;
  if (!compact || n > sizeof v)
    return;
  if (mincore((void *)lo, n * pg, v) != 0)
    return;
  for (size_t i = 0; i < n; i++)
    resident += v[i] & 1;
  if (resident) {
    fprintf(stderr,
            "core_compact_libc: before %s, %zu of %zu pages "
            "resident\n",
            what, resident, n);
    failures++;
  }
}

/* Bytes [off, off+n) of the region to the device and back: the host's
 * bytes, the expected ones. */
static int round_trip(size_t off, size_t n, const char *after) {
  CK(cudaMemcpy(dev, host + off, n, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(back, dev, n, cudaMemcpyDeviceToHost));
  if (memcmp(back, want + off, n) != 0) {
    fprintf(stderr,
            "core_compact_libc: after %s the device has other "
            "bytes\n",
            after);
    failures++;
  }
  return 0;
}

int main(void) {
  compact = getenv("CORE_EXPECT_COMPACT") != NULL;
  CK(cudaHostAlloc((void **)&host, N, cudaHostAllocDefault));
  CK(cudaMalloc((void **)&dev, N));
  want = malloc(N);
  back = malloc(N);
  if (!want || !back)
    return 2;
  /* bf16-like values: the region compresses, and its pages are released
   * once the first copy has waited for that (IBP_WAIT_READY=1) */
  for (size_t i = 0; i < N; i += 2) {
    want[i] = host[i] = (uint8_t)(i * 2654435761u >> 13);
    want[i + 1] = host[i + 1] = (uint8_t)(0x3c + (i >> 12) % 3);
  }
  for (size_t i = 0; i < LEN; i++)
    data[i] = (uint8_t)(i * 13 + 5);
  CK(round_trip(0, N, "nothing"));
  int p[2], sv[2];
  FILE *f = tmpfile();
  if (pipe(p) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || !f)
    return 2;
  const int fd = fileno(f);
  /* the kernel reads the region: write, pwrite, writev, send, sendmsg,
   * fwrite (each checked through a file) */
  const size_t half = LEN / 2;
  struct iovec two[2] = {{at(0), half}, {at(0) + half, LEN - half}};
  struct msghdr m = {.msg_iov = two, .msg_iovlen = 2};
  for (unsigned k = 0; k < 6; k++) {
    static const char *const what[] = {"write", "pwrite",  "writev",
                                       "send",  "sendmsg", "fwrite"};
    released(k, what[k]);
    two[0].iov_base = at(k);
    two[1].iov_base = at(k) + half;
    if (lseek(fd, 0, SEEK_SET) != 0)
      return 2;
    switch (k) {
    case 0:
      MOVED(write(fd, at(k), LEN), LEN, what[k]);
      break;
    case 1:
      MOVED(pwrite(fd, at(k), LEN, 0), LEN, what[k]);
      break;
    case 2:
      MOVED(writev(fd, two, 2), LEN, what[k]);
      break;
    case 3: /* through the socket, a part at a time */
    case 4:
      for (size_t done = 0; done < LEN;) {
        size_t n = LEN - done < 8192 ? LEN - done : 8192;
        two[0].iov_base = at(k) + done;
        two[0].iov_len = n;
        m.msg_iovlen = 1;
        ssize_t s =
            k == 3 ? send(sv[0], at(k) + done, n, 0) : sendmsg(sv[0], &m, 0);
        MOVED(s, n, what[k]);
        if (s != (ssize_t)n)
          break; /* nothing to wait for */
        MOVED(recv(sv[1], got + done, n, MSG_WAITALL), n, "recv (a check)");
        done += n;
      }
      two[0].iov_len = half;
      m.msg_iovlen = 2;
      MOVED(pwrite(fd, got, LEN, 0), LEN, "pwrite (a check)");
      break;
    case 5:
      if (fseek(f, 0, SEEK_SET) != 0)
        return 2;
      MOVED(fwrite(at(k), 1, LEN, f), LEN, what[k]);
      expect(fflush(f) == 0, "fflush");
      break;
    }
    MOVED(pread(fd, got, LEN, 0), LEN, "pread (a check)");
    if (memcmp(got, want_at(k), LEN) != 0) {
      fprintf(stderr, "core_compact_libc: %s took other bytes\n", what[k]);
      failures++;
    }
  }
  CK(round_trip(0, N, "the kernel read the region"));
  /* the kernel writes the region: read, pread, readv, recv, recvmsg, fread
   * (the data from the file) */
  MOVED(pwrite(fd, data, LEN, 0), LEN, "pwrite (the data)");
  for (unsigned k = 6; k < 12; k++) {
    static const char *const what[] = {"read", "pread",   "readv",
                                       "recv", "recvmsg", "fread"};
    const char *w = what[k - 6];
    released(k, w);
    two[0].iov_base = at(k);
    two[1].iov_base = at(k) + half;
    if (lseek(fd, 0, SEEK_SET) != 0)
      return 2;
    switch (k) {
    case 6:
      MOVED(read(fd, at(k), LEN), LEN, w);
      break;
    case 7:
      MOVED(pread(fd, at(k), LEN, 0), LEN, w);
      break;
    case 8:
      MOVED(readv(fd, two, 2), LEN, w);
      break;
    case 9:
    case 10:
      for (size_t done = 0; done < LEN;) {
        size_t n = LEN - done < 8192 ? LEN - done : 8192;
        MOVED(send(sv[0], data + done, n, 0), n, "send (the data)");
        two[0].iov_base = at(k) + done;
        two[0].iov_len = n;
        m.msg_iovlen = 1;
        ssize_t r = k == 9 ? recv(sv[1], at(k) + done, n, MSG_WAITALL)
                           : recvmsg(sv[1], &m, MSG_WAITALL);
        MOVED(r, n, w);
        if (r != (ssize_t)n) { /* what was sent must not wait for the next */
          for (ssize_t left = (ssize_t)n - (r > 0 ? r : 0), g; left > 0;
               left -= g)
            if ((g = recv(sv[1], got, (size_t)left, MSG_WAITALL)) <= 0)
              return 1;
          break;
        }
        done += n;
      }
      two[0].iov_len = half;
      m.msg_iovlen = 2;
      break;
    case 11:
      if (fseek(f, 0, SEEK_SET) != 0)
        return 2;
      MOVED(fread(at(k), 1, LEN, f), LEN, w);
      break;
    }
    memcpy(want_at(k), data, LEN);
    CK(round_trip(k * SLOT, SLOT, w)); /* its slot: the others stay released */
  }
  /* the device writes slots 12 and 13 by copies (synchronous, and
   * asynchronous on a stream): the region stays compact -- slot 14's pages
   * are still released after -- and copies from it bring the new bytes */
  cudaStream_t st;
  CK(cudaStreamCreate(&st));
  CK(cudaMemcpy(dev, data, LEN, cudaMemcpyHostToDevice));
  released(12, "a device-to-host copy");
  CK(cudaMemcpy(at(12), dev, LEN, cudaMemcpyDeviceToHost));
  memcpy(want_at(12), data, LEN);
  released(13, "an asynchronous device-to-host copy");
  CK(cudaMemcpyAsync(at(13), dev, LEN, cudaMemcpyDeviceToHost, st));
  CK(cudaStreamSynchronize(st));
  memcpy(want_at(13), data, LEN);
  released(14, "nothing (the region stayed compact)");
  CK(round_trip(12 * SLOT, 2 * SLOT, "device-to-host copies"));
  CK(cudaStreamDestroy(st));
  /* a copy of the whole region, its written slots included: served in
   * parts, the driver's parts reading only those -- slot 15 stays
   * released */
  CK(round_trip(0, N, "everything"));
  released(15, "nothing (a whole copy took the untouched slots from the "
               "shadow)");
  expect(memcmp(host, want, N) == 0, "the host's bytes differ at the end");
  fclose(f);
  close(p[0]);
  close(p[1]);
  close(sv[0]);
  close(sv[1]);
  CK(cudaFreeHost(host));
  CK(cudaFree(dev));
  free(want);
  free(back);
  if (failures)
    return 1;
  printf("core_compact_libc: ok\n");
  return 0;
}
