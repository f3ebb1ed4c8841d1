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
#include "napi-util.h"

enum { MOVED = 0, EMPTY = 1, FULL = 2, END = 3 };

typedef struct {
  uv_poll_t master_poll;
  uv_poll_t pipe_poll;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  int master;
  int pipe;
  int paused;        // JavaScript held it (a restart's quiet moment)
  int stopped;       // no more calls into JS
  int open_handles;  // libuv handles not yet closed
  int js_gone;       // its JS object was collected
  int fault_errno;   // a test's injected failure (0: none)
  int64_t fault_after;
  int64_t moved;     // bytes moved so far (for the fault)
} tap_t;

static void tap_handle_closed(uv_handle_t *handle) {
  tap_t *t = (tap_t *)handle->data;
  if (--t->open_handles > 0) return;
  napi_delete_reference(t->env, t->callback);
  napi_async_destroy(t->env, t->context);
  if (t->js_gone) free(t);
}

static void tap_stop(tap_t *t) {
  if (t->stopped) return;
  t->stopped = 1;
  uv_poll_stop(&t->master_poll);
  uv_poll_stop(&t->pipe_poll);
  uv_close((uv_handle_t *)&t->master_poll, tap_handle_closed);
  uv_close((uv_handle_t *)&t->pipe_poll, tap_handle_closed);
}

static void tap_end(tap_t *t, int status) {
  if (t->stopped) return;
  napi_handle_scope scope;
  napi_value callback, recv, arg;
  tap_stop(t);
  if (napi_open_handle_scope(t->env, &scope) != napi_ok) return;
  napi_get_reference_value(t->env, t->callback, &callback);
  napi_get_global(t->env, &recv);
  napi_create_int32(t->env, status, &arg);
  napi_status st = napi_make_callback(t->env, t->context, recv, callback, 1, &arg, NULL);
  if (st == napi_pending_exception) {
    napi_value error;
    napi_get_and_clear_last_exception(t->env, &error);
    napi_fatal_exception(t->env, error);
  }
  napi_close_handle_scope(t->env, scope);
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
  if (t->stopped || t->paused) return;
  if (status < 0) {
    tap_end(t, status);
    return;
  }
  int st = tap_move(t);
  if (st == END) tap_end(t, 0);
  else if (st < 0) tap_end(t, st);
  else if (st == FULL) {
    uv_poll_stop(&t->master_poll);
    int err = uv_poll_start(&t->pipe_poll, UV_WRITABLE, pipe_has_room);
    if (err != 0) tap_end(t, err);
  }
}

static void pipe_has_room(uv_poll_t *handle, int status, int events) {
  tap_t *t = (tap_t *)handle->data;
  (void)events;
  if (t->stopped) return;
  uv_poll_stop(&t->pipe_poll);
  if (status < 0) {
    tap_end(t, status);
    return;
  }
  if (t->paused) return;
  int err = uv_poll_start(&t->master_poll, UV_READABLE | UV_DISCONNECT, master_readable);
  if (err != 0) tap_end(t, err);
}

static tap_t *tap_of(napi_env env, napi_callback_info info) {
  tap_t *t = NULL;
  napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&t);
  return t;
}

static napi_value TapPause(napi_env env, napi_callback_info info) {
  tap_t *t = tap_of(env, info);
  if (t && !t->stopped && !t->paused) {
    t->paused = 1;
    uv_poll_stop(&t->master_poll);
    uv_poll_stop(&t->pipe_poll);
  }
  return NULL;
}

static napi_value TapResume(napi_env env, napi_callback_info info) {
  tap_t *t = tap_of(env, info);
  if (t && !t->stopped && t->paused) {
    t->paused = 0;
    // The master is looked at again first: a full pipe is found by the next splice.
    int err = uv_poll_start(&t->master_poll, UV_READABLE | UV_DISCONNECT, master_readable);
    if (err != 0) return procctl_throw_errno(env, -err, "tapTerminal resume");
  }
  return NULL;
}

static napi_value TapClose(napi_env env, napi_callback_info info) {
  tap_t *t = tap_of(env, info);
  if (t) tap_stop(t);
  return NULL;
}

static void tap_finalize(napi_env env, void *data, void *hint) {
  tap_t *t = (tap_t *)data;
  (void)env;
  (void)hint;
  t->js_gone = 1;
  if (!t->stopped) tap_stop(t);
  else if (t->open_handles == 0) free(t);
}

static int set_nonblock(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags < 0) return errno;
  if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return errno;
  return 0;
}

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
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) return procctl_throw_errno(env, EINVAL, "tapTerminal: no event loop");
  // Non-blocking on both: a splice from an empty master, or into a full pipe, says EAGAIN.
  int err = set_nonblock(master);
  if (err == 0) err = set_nonblock(pipe_fd);
  if (err != 0) return procctl_throw_errno(env, err, "tapTerminal: fcntl");
  tap_t *t = calloc(1, sizeof *t);
  if (!t) return procctl_throw_errno(env, ENOMEM, "tapTerminal");
  t->env = env;
  t->master = master;
  t->pipe = pipe_fd;
  t->fault_errno = fault_errno;
  t->fault_after = fault_after;
  t->master_poll.data = t;
  t->pipe_poll.data = t;
  err = uv_poll_init(loop, &t->master_poll, master);
  if (err != 0) {
    free(t);
    return procctl_throw_errno(env, -err, "tapTerminal: the master");
  }
  napi_create_reference(env, argv[2], 1, &t->callback);
  napi_value name;
  napi_create_string_utf8(env, "procctl.tap", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &t->context);
  t->open_handles = 1;
  err = uv_poll_init(loop, &t->pipe_poll, pipe_fd);
  if (err != 0) {
    t->stopped = 1;
    t->js_gone = 1;
    uv_close((uv_handle_t *)&t->master_poll, tap_handle_closed);
    return procctl_throw_errno(env, -err, "tapTerminal: the pipe");
  }
  t->open_handles = 2;
  err = uv_poll_start(&t->master_poll, UV_READABLE | UV_DISCONNECT, master_readable);
  if (err != 0) {
    t->js_gone = 1;
    tap_stop(t);
    return procctl_throw_errno(env, -err, "tapTerminal");
  }
  napi_value handle, fn;
  napi_create_object(env, &handle);
  static const struct { const char *name; napi_callback fn; } methods[] = {{"pause", TapPause}, {"resume", TapResume}, {"close", TapClose}};
  for (size_t i = 0; i < 3; i++) {
    napi_create_function(env, methods[i].name, NAPI_AUTO_LENGTH, methods[i].fn, t, &fn);
    napi_set_named_property(env, handle, methods[i].name, fn);
  }
  // Freed once both libuv and JavaScript are done with it: tied to the handle object.
  napi_add_finalizer(env, handle, t, tap_finalize, NULL, NULL);
  return handle;
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
  if (err == 0) err = set_nonblock(master);
  if (err == 0) {
    // The byte reaches the master from the terminal's worker a moment after the write: wait a
    // little for it. EAGAIN (not there yet) still says yes: a kernel without a tty's splice_read
    // refuses with EINVAL before it looks for data.
    struct pollfd p = {.fd = master, .events = POLLIN};
    int n;
    do n = poll(&p, 1, 100);
    while (n < 0 && errno == EINTR);
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
