/* A full disk for the tests, without root: an LD_PRELOAD library whose write(), pwrite()
 * and pwrite64() fail with ENOSPC once the files whose path contains HERD_ENOSPC_PATTERN
 * (default ".h5") have received HERD_ENOSPC_AFTER bytes (default 0) in all. Other files
 * are written normally. */
#define _GNU_SOURCE /* NOLINT(bugprone-reserved-identifier): glibc's feature-test macro, for RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static long long written_so_far = 0;

/* Whether fd is a file the shim fills, and the bytes it may still take (-1: unlimited). */
static long long room_for(int fd) {
  const char* pattern = getenv("HERD_ENOSPC_PATTERN");
  if (pattern == NULL || pattern[0] == '\0') pattern = ".h5";
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return -1;
  path[n] = '\0';
  if (strstr(path, pattern) == NULL) return -1;
  const char* after = getenv("HERD_ENOSPC_AFTER");
  const long long limit = after != NULL ? atoll(after) : 0;
  return limit > written_so_far ? limit - written_so_far : 0;
}

/* The part of a write of `count` bytes that fits, or -1 with errno = ENOSPC. */
static ssize_t allowed(int fd, size_t count, int* full) {
  *full = 0;
  const long long room = room_for(fd);
  if (room < 0 || (long long)count <= room) return (ssize_t)count;
  if (room == 0) {
    *full = 1;
    errno = ENOSPC;
    return -1;
  }
  return (ssize_t)room;
}

ssize_t write(int fd, const void* buf, size_t count) {
  static ssize_t (*real)(int, const void*, size_t) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
  int full = 0;
  const ssize_t n = allowed(fd, count, &full);
  if (full) return -1;
  const ssize_t w = real(fd, buf, (size_t)n);
  if (w > 0 && room_for(fd) >= 0) written_so_far += w;
  return w;
}

static ssize_t shim_pwrite(const char* name, int fd, const void* buf, size_t count, off_t off) {
  static ssize_t (*real)(int, const void*, size_t, off_t) = NULL;
  if (real == NULL) real = (ssize_t(*)(int, const void*, size_t, off_t))dlsym(RTLD_NEXT, name);
  int full = 0;
  const ssize_t n = allowed(fd, count, &full);
  if (full) return -1;
  const ssize_t w = real(fd, buf, (size_t)n, off);
  if (w > 0 && room_for(fd) >= 0) written_so_far += w;
  return w;
}

ssize_t pwrite(int fd, const void* buf, size_t count, off_t off) { return shim_pwrite("pwrite", fd, buf, count, off); }
ssize_t pwrite64(int fd, const void* buf, size_t count, off_t off) {
  return shim_pwrite("pwrite64", fd, buf, count, off);
}
