// A terminal's output moved by the kernel from its pseudo-terminal's master into a pipe (the
// "tap"), which the daemon splices into the session's spool as it does a job's output pipe
// (native/splice.c). The guardian keeps a copy of the pipe's read end, so what has left the
// master is in the pipe or in the spool at every instant: a daemon killed at any moment holds no
// terminal output it read and had not written (docs/durability.md, "Terminals").
//
// tapPipe() -> [read, write]
//   A pipe for a tap, both ends close-on-exec and non-blocking.
//
// tapTerminal(master, pipe, onEnd[, faultErrno, faultAfter]) -> { pause(), resume(), close() }
//   A uv_poll_t on `master` (a descriptor of the master that nothing else in this process polls:
//   a dup): when it is readable, splice(2) from it into `pipe` (the tap's write end) until the
//   master is empty. When the pipe is full (its reader is behind, or held by a restart), the
//   master is left alone and the pipe is polled for room instead; the job then blocks in its
//   write once the terminal's own buffer is full, as it does on a full pipe. onEnd(status) once:
//     0    the job's side is closed by every holder and all its output has been moved (EIO)
//    <0    -errno: a splice failed otherwise (-EPIPE: the pipe has no reader; -EINVAL: this
//          kernel does not splice from a tty). The master is not at its end then: JavaScript
//          reads it another way (runner/launch/tap.ts).
//   The kernel says EIO on a master only once every holder of the job's side closed it and its
//   output has all been read (a job that exited while the daemon holds its side reads EAGAIN):
//   that is the end, never an error. faultErrno, faultAfter (tests only, PROCCTL_FAULT_TAP): once
//   faultAfter bytes were moved, the next splice fails with faultErrno instead of being made.
//   Neither descriptor is ever closed here: JavaScript owns them (a restart hands them on).
//
// tapProbe() -> 0 or errno
//   Whether a pseudo-terminal's master splices into a pipe on this kernel (ttys lost splice_read
//   in 5.10 and got it back in 6.5): a new terminal, one byte written on its side, one splice.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <uv.h>
#include <node_api.h>
#include "errors.h"
#include "handle.h"
#include "napi-util.h"

enum { MOVED = 0, EMPTY = 1, FULL = 2, END = 3 };

// Its life (handle.h): polls[MASTER] on the master from start and resume, polls[PIPE] on the pipe
// while it is full; pause/resume/close; onEnd.
enum { MASTER = 0, PIPE = 1 };

typedef struct {
  procctl_handle_t h;
  int master;
  int pipe;
  int fault_errno;  // a test's injected failure (0: none)
  int64_t fault_after;
  int64_t moved;    // bytes moved so far (for the fault)
} tap_t;

// onEnd(status), once: stopped first.
static void tap_end(tap_t *t, int status) {
  if (t->h.stopped) return;
  procctl_handle_stop(&t->h);
  const int64_t arg = status;
  procctl_handle_call(&t->h, 1, &arg);
}

// Move what the master holds into the pipe: a bounded number of splices, then back to the loop
// (level-triggered: it comes back while the master has more).
static int tap_move(tap_t *t) {
  for (int round = 0; round < 16; round++) {
    if (t->fault_errno != 0 && t->moved >= t->fault_after) return -t->fault_errno;
    ssize_t r = splice(t->master, NULL, t->pipe, NULL, 1 << 20, SPLICE_F_NONBLOCK | SPLICE_F_MOVE);
    if (r > 0) {
      t->moved += r;
      continue;
    }
    if (r == 0) return END;
    if (errno == EINTR) continue;
    // A master whose other side every holder closed reads EIO once its output has all been read.
    if (errno == EIO) return END;
    if (errno != EAGAIN) return -errno;
    // EAGAIN: the master is empty, or the pipe is full. The pipe says which.
    struct pollfd p = {.fd = t->pipe, .events = POLLOUT};
    int n;
    do n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    if (n == 1 && (p.revents & POLLERR)) return -EPIPE;
    return n == 1 && (p.revents & POLLOUT) ? EMPTY : FULL;
  }
  return MOVED;
}

static void pipe_has_room(uv_poll_t *handle, int status, int events);

static void master_readable(uv_poll_t *handle, int status, int events) {
  tap_t *t = (tap_t *)handle->data;
  (void)events;
  if (t->h.stopped || t->h.paused) return;
  if (status < 0) {
    tap_end(t, status);
    return;
  }
  int st = tap_move(t);
  if (st == END) tap_end(t, 0);
  else if (st < 0) tap_end(t, st);
  else if (st == FULL) {
    uv_poll_stop(&t->h.polls[MASTER]);
    int err = uv_poll_start(&t->h.polls[PIPE], UV_WRITABLE, pipe_has_room);
    if (err != 0) tap_end(t, err);
  }
}

static void pipe_has_room(uv_poll_t *handle, int status, int events) {
  tap_t *t = (tap_t *)handle->data;
  (void)events;
  if (t->h.stopped) return;
  uv_poll_stop(&t->h.polls[PIPE]);
  if (status < 0) {
    tap_end(t, status);
    return;
  }
  if (t->h.paused) return;
  int err = uv_poll_start(&t->h.polls[MASTER], UV_READABLE | UV_DISCONNECT, master_readable);
  if (err != 0) tap_end(t, err);
}

// A resume looks at the master again first: a full pipe is found by the next splice.
static const procctl_handle_kind_t tap_kind = {"tapTerminal", "procctl.tap", master_readable, NULL};

static napi_value TapTerminal(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  int32_t master, pipe_fd, fault_errno = 0;
  int64_t fault_after = 0;
  napi_valuetype type;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || napi_get_value_int32(env, argv[0], &master) != napi_ok || master < 0 ||
      napi_get_value_int32(env, argv[1], &pipe_fd) != napi_ok || pipe_fd < 0 || napi_typeof(env, argv[2], &type) != napi_ok || type != napi_function ||
      (argc >= 5 && (napi_get_value_int32(env, argv[3], &fault_errno) != napi_ok || fault_errno < 0 || napi_get_value_int64(env, argv[4], &fault_after) != napi_ok || fault_after < 0))) {
    return procctl_throw_usage(env, "tapTerminal(master, pipe, onEnd[, faultErrno, faultAfter]): a terminal's master (a descriptor of its own), the tap pipe's write end, a function, and for a test a failure to inject (an errno, after so many bytes)");
  }
  // Non-blocking on both: a splice from an empty master, or into a full pipe, says EAGAIN.
  int err = procctl_set_nonblock(master);
  if (err == 0) err = procctl_set_nonblock(pipe_fd);
  if (err != 0) return procctl_throw_errno(env, err, "tapTerminal: fcntl");
  tap_t *t = calloc(1, sizeof *t);
  if (!t) return procctl_throw_errno(env, ENOMEM, "tapTerminal");
  t->master = master;
  t->pipe = pipe_fd;
  t->fault_errno = fault_errno;
  t->fault_after = fault_after;
  const int fds[] = {[MASTER] = master, [PIPE] = pipe_fd};
  static const char *const what[] = {[MASTER] = "tapTerminal: the master", [PIPE] = "tapTerminal: the pipe"};
  return procctl_handle_start(env, &t->h, &tap_kind, 2, fds, what, argv[2]);
}

static napi_value TapPipe(napi_env env, napi_callback_info info) {
  (void)info;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return procctl_throw_errno(env, errno, "tapPipe: pipe2");
  napi_value out;
  napi_create_array_with_length(env, 2, &out);
  napi_set_element(env, out, 0, procctl_int32(env, fds[0]));
  napi_set_element(env, out, 1, procctl_int32(env, fds[1]));
  return out;
}

static napi_value TapProbe(napi_env env, napi_callback_info info) {
  (void)info;
  int err = 0, master = -1, side = -1, fds[2] = {-1, -1};
  master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) err = errno;
  char name[128];
  if (err == 0 && ptsname_r(master, name, sizeof name) != 0) err = errno;
  if (err == 0 && (side = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0) err = errno;
  if (err == 0 && write(side, "x", 1) != 1) err = errno ? errno : EIO;
  if (err == 0 && pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) err = errno;
  if (err == 0) err = procctl_set_nonblock(master);
  if (err == 0) {
    // One non-blocking attempt, no wait for the byte (this runs on the daemon's loop): a kernel
    // without a tty's splice_read refuses with EINVAL before it looks for data, so EAGAIN (the
    // byte not at the master yet) already says yes.
    ssize_t r;
    do r = splice(master, NULL, fds[1], NULL, 64, SPLICE_F_NONBLOCK);
    while (r < 0 && errno == EINTR);
    if (r < 0 && errno != EAGAIN) err = errno;
    else if (r == 0) err = EIO;
  }
  int fdv[] = {fds[0], fds[1], side, master};
  for (size_t i = 0; i < 4; i++) {
    if (fdv[i] >= 0) close(fdv[i]);
  }
  return procctl_int32(env, err);
}

// Called by addon.c, the module's one init.
void procctl_tap_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "tapTerminal", TapTerminal);
  procctl_export(env, exports, "tapPipe", TapPipe);
  procctl_export(env, exports, "tapProbe", TapProbe);
}
