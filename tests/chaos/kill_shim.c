// SPDX-License-Identifier: Apache-2.0
// kill_shim: an LD_PRELOAD module that SIGKILLs the process at the k-th of its mutating calls, so
// that the chaos checker (tests/chaos) can end an ibcni-ipam ADD, DEL or agent pass at a random
// point of its work, as a node losing power would.
//
// Counted calls: rename, renameat, renameat2, link, linkat, symlink, symlinkat, unlink, unlinkat
// (the store's and the ledger's commit points) and send, sendto, sendmsg (libcurl's requests to
// the backend; libcurl is dlopen'd by ibcni-ipam, its calls still resolve to the preloaded ones).
//
//   CHAOS_KILL_AT=k         the k-th counted call (1-based); 0 or absent: never kill
//   CHAOS_KILL_WHEN=before  kill instead of making the k-th call (nothing of it happened)
//   CHAOS_KILL_WHEN=after   make the call, then kill (a send: the backend got the request, the
//                           answer is lost; a rename: done, nothing after it)
//   CHAOS_COUNT_FILE=PATH   at exit, write how many counted calls the process made (for tuning k)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static atomic_long calls;
static long killAt = -1;  // -1: not read yet; 0: never
static int killAfter;

static void readSettings(void) {
  if (killAt >= 0) {
    return;
  }
  const char* at = getenv("CHAOS_KILL_AT");
  const char* when = getenv("CHAOS_KILL_WHEN");
  killAfter = when != NULL && strcmp(when, "after") == 0;
  killAt = at != NULL ? strtol(at, NULL, 10) : 0;
  if (killAt < 0) {
    killAt = 0;
  }
}

// libfaketime (preloaded beside this shim) keeps a semaphore and a shared memory object per
// process, removed at exit; a process killed here would leave them in /dev/shm for good. They are
// removed first (syscalls: not through the wrappers below), then the process dies.
static void forgetFaketimeObjects(void) {
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/faketime_shm_%ld", (long)getpid());
  syscall(SYS_unlinkat, AT_FDCWD, path, 0);
  snprintf(path, sizeof path, "/dev/shm/sem.faketime_sem_%ld", (long)getpid());
  syscall(SYS_unlinkat, AT_FDCWD, path, 0);
}

static void die(void) {
  forgetFaketimeObjects();
  syscall(SYS_kill, getpid(), SIGKILL);
}

// Counts one call; kills now when it is the k-th and the kill comes before it.
static long enter(void) {
  readSettings();
  const long n = atomic_fetch_add(&calls, 1) + 1;
  if (killAt > 0 && n == killAt && !killAfter) {
    die();
  }
  return n;
}

// Kills after the k-th call when asked to.
static void leave(long n) {
  if (killAt > 0 && n == killAt && killAfter) {
    die();
  }
}

__attribute__((destructor)) static void writeCount(void) {
  const char* path = getenv("CHAOS_COUNT_FILE");
  if (path == NULL) {
    return;
  }
  char buf[32];
  const int len = snprintf(buf, sizeof buf, "%ld\n", atomic_load(&calls));
  const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (write(fd, buf, (size_t)len) < 0) {
      // nothing to do: the count is a tuning aid
    }
    close(fd);
  }
}

// One wrapper per counted call: count, maybe kill, call the real one, maybe kill. The real
// function comes from dlsym(RTLD_NEXT) (copied into a function pointer: ISO C has no cast).
#define WRAP(ret, name, params, args)              \
  ret name params {                                \
    static __typeof__(&name) real;                 \
    if (real == NULL) {                            \
      void* sym = dlsym(RTLD_NEXT, #name);         \
      memcpy(&real, &sym, sizeof real);            \
    }                                              \
    const long n = enter();                        \
    const ret r = real args;                       \
    leave(n);                                      \
    return r;                                      \
  }

WRAP(int, rename, (const char* a, const char* b), (a, b))
WRAP(int, renameat, (int fa, const char* a, int fb, const char* b), (fa, a, fb, b))
WRAP(int, renameat2, (int fa, const char* a, int fb, const char* b, unsigned flags), (fa, a, fb, b, flags))
WRAP(int, link, (const char* a, const char* b), (a, b))
WRAP(int, linkat, (int fa, const char* a, int fb, const char* b, int flags), (fa, a, fb, b, flags))
WRAP(int, symlink, (const char* a, const char* b), (a, b))
WRAP(int, symlinkat, (const char* a, int fd, const char* b), (a, fd, b))
WRAP(int, unlink, (const char* a), (a))
WRAP(int, unlinkat, (int fd, const char* a, int flags), (fd, a, flags))
WRAP(ssize_t, send, (int fd, const void* buf, size_t len, int flags), (fd, buf, len, flags))
WRAP(ssize_t, sendto, (int fd, const void* buf, size_t len, int flags, __CONST_SOCKADDR_ARG to, socklen_t tolen),
     (fd, buf, len, flags, to, tolen))
WRAP(ssize_t, sendmsg, (int fd, const struct msghdr* msg, int flags), (fd, msg, flags))
