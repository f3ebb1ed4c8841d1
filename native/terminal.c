// A terminal session carried across a planned restart (SPEC §19): the new image holds the master
// of a pseudo-terminal node-pty opened, without node-pty's objects, so it resizes it itself
// (setWindowSize). And node-pty reaps its child on a thread of its own, blocked in waitpid(pid):
// an exit that thread reaps in the old image's last moment would never reach the new image, and
// no one can stop a thread from the outside. parkWaiters makes each such thread wait in a signal
// handler instead (the kernel interrupts its waitpid; node-pty calls it again on EINTR once the
// handler returns): while parked it reaps nothing, and execve ends it. unparkWaiters lets them go
// when the restart is undone.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

// A real-time signal neither Node, libuv nor glibc uses.
#define PARK_SIGNAL (SIGRTMAX - 3)
// How long the threads signalled get to reach the handler.
#define PARK_WAIT_NS (2000L * 1000 * 1000)

static atomic_int parked = 0;
static atomic_int released = 1;

static void park(int sig) {
  (void)sig;
  int saved = errno;
  atomic_fetch_add(&parked, 1);
  struct timespec tick = {0, 1000 * 1000};
  while (!atomic_load(&released)) nanosleep(&tick, NULL);
  atomic_fetch_sub(&parked, 1);
  errno = saved;
}

static void sleep_ms(long ms) {
  struct timespec t = {ms / 1000, (ms % 1000) * 1000 * 1000};
  nanosleep(&t, NULL);
}

// The pid a thread of this process waits for in wait4 now, or 0 (/proc/self/task/T/syscall).
static pid_t waiting_for(pid_t tid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  FILE *f = fopen(path, "re");
  if (!f) return 0;
  char *got = fgets(line, sizeof line, f);
  fclose(f);
  if (!got) return 0;
  char *end;
  long nr = strtol(line, &end, 10);
  if (end == line || nr != SYS_wait4) return 0;
  return (pid_t)strtol(end, NULL, 16);
}

// setWindowSize(fd, cols, rows): TIOCSWINSZ on a terminal's master; the job gets SIGWINCH.
static napi_value SetWindowSize(napi_env env, napi_callback_info info) {
  int32_t a[3];  // fd, cols, rows
  if (!procctl_int32_args(env, info, 3, a) || a[1] <= 0 || a[2] <= 0 || a[1] > 65535 || a[2] > 65535) {
    return procctl_throw_usage(env, "setWindowSize(fd, cols, rows): cols and rows are 1..65535");
  }
  int32_t fd = a[0], cols = a[1], rows = a[2];
  struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
  if (ioctl(fd, TIOCSWINSZ, &ws) != 0) return procctl_throw_errno(env, errno, "ioctl(TIOCSWINSZ)");
  return NULL;
}

// parkWaiters(pids): park every thread of this process blocked in waitpid on one of `pids`, then
// look at each pid: returns the pids that are still this process's to reap (running, or exited
// and not reaped) with their waiting thread parked. A pid missing from the answer was reaped
// already (its exit is on its way to the event loop) or has no thread waiting yet.
static napi_value ParkWaiters(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value arg;
  bool is_array = false;
  uint32_t n = 0;
  if (napi_get_cb_info(env, info, &argc, &arg, NULL, NULL) != napi_ok || argc < 1 || napi_is_array(env, arg, &is_array) != napi_ok || !is_array ||
      napi_get_array_length(env, arg, &n) != napi_ok) {
    return procctl_throw_usage(env, "parkWaiters(pids)");
  }
  pid_t *pids = calloc(n + 1, sizeof(pid_t));
  bool *covered = calloc(n + 1, sizeof(bool));
  if (!pids || !covered) {
    free(pids);
    free(covered);
    return procctl_throw_errno(env, ENOMEM, "parkWaiters");
  }
  for (uint32_t i = 0; i < n; i++) {
    napi_value v;
    int32_t p = 0;
    napi_get_element(env, arg, i, &v);
    napi_get_value_int32(env, v, &p);
    pids[i] = p;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = park;
  sigfillset(&sa.sa_mask);
  sa.sa_flags = 0; // no SA_RESTART: waitpid returns EINTR once the handler does
  atomic_store(&released, 0);
  if (sigaction(PARK_SIGNAL, &sa, NULL) != 0) {
    atomic_store(&released, 1);
    free(pids);
    free(covered);
    return procctl_throw_errno(env, errno, "sigaction");
  }
  int signalled = 0;
  pid_t self = (pid_t)syscall(SYS_gettid);
  DIR *d = opendir("/proc/self/task");
  if (d) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      pid_t tid = (pid_t)atoi(e->d_name);
      if (tid <= 0 || tid == self) continue;
      pid_t waited = waiting_for(tid);
      if (waited <= 0) continue;
      for (uint32_t i = 0; i < n; i++) {
        if (pids[i] != waited || covered[i]) continue;
        if (syscall(SYS_tgkill, getpid(), tid, PARK_SIGNAL) == 0) {
          covered[i] = true;
          signalled++;
        }
        break;
      }
    }
    closedir(d);
  }
  for (long waited = 0; atomic_load(&parked) < signalled && waited < PARK_WAIT_NS; waited += 1000 * 1000) sleep_ms(1);
  bool all = atomic_load(&parked) >= signalled;
  napi_value out;
  napi_create_array(env, &out);
  uint32_t k = 0;
  for (uint32_t i = 0; all && i < n; i++) {
    if (!covered[i]) continue;
    siginfo_t si;
    memset(&si, 0, sizeof si);
    // WNOWAIT: look, leave the status for whoever reaps it next (the new image).
    if (waitid(P_PID, (id_t)pids[i], &si, WEXITED | WNOHANG | WNOWAIT) != 0) continue;
    napi_set_element(env, out, k++, procctl_int32(env, pids[i]));
  }
  free(pids);
  free(covered);
  return out;
}

// unparkWaiters(): the threads parked go back to waiting (a restart undone).
static napi_value UnparkWaiters(napi_env env, napi_callback_info info) {
  atomic_store(&released, 1);
  for (int i = 0; i < 2000 && atomic_load(&parked) > 0; i++) sleep_ms(1);
  return NULL;
}

void procctl_terminal_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "setWindowSize", SetWindowSize);
  procctl_export(env, exports, "parkWaiters", ParkWaiters);
  procctl_export(env, exports, "unparkWaiters", UnparkWaiters);
}
