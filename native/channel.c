// A confined job's line back to the daemon (src/daemon/channel.ts), and descriptors a job is
// given. Inside the sandbox no Unix socket can be made (seccomp.c), so a job cannot connect to
// anything by path: it inherits one end of a socket pair instead, and asks it for a connection
// of its own. Each ask is one byte; each answer is one byte carrying a fresh connected socket
// (SCM_RIGHTS). Any answer fits any asker, so processes of the job may ask at the same time.
//
// socketPair() -> [a, b]: a connected pair of stream sockets, both close-on-exec.
// sendDescriptor(socket, fd) -> true when sent, false when the peer's buffer is full or gone.
// receiveConnection(socket, timeoutMs) -> fd: asks and waits for a connection (the job's side).
// setInheritable(fd, inheritable): clears or sets close-on-exec (for spawners that take no fds).
// watchDescriptors(socket, onDescriptor) -> {close()}: the daemon's side of a channel whose peer
//   sends it sockets (the network helper in a sandbox hands over its proxy port's listening sockets):
//   on the event loop, each socket received is given to onDescriptor(fd); anything that is not a
//   socket is closed unread; onDescriptor(-1) once when the peer is gone.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <node_api.h>
#include "errors.h"
#include "fdpass.h"
#include "napi-util.h"
#include <uv.h>

// Throw an Error "WHAT: strerror(err)" with `errno` set; returns NULL for the caller to return.
// Shared with relay.c (native/errors.h).
napi_value procctl_throw_errno(napi_env env, int err, const char *what) {
  napi_value msg, error, code;
  char text[160];
  snprintf(text, sizeof text, "%s: %s", what, strerror(err));
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_error(env, NULL, msg, &error);
  napi_create_int32(env, err, &code);
  napi_set_named_property(env, error, "errno", code);
  napi_throw(env, error);
  return NULL;
}

napi_value procctl_socket_pair(napi_env env, int type) {
  int fds[2];
  if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, fds) != 0) return procctl_throw_errno(env, errno, "socketpair");
  napi_value result, a, b;
  napi_create_array_with_length(env, 2, &result);
  napi_create_int32(env, fds[0], &a);
  napi_create_int32(env, fds[1], &b);
  napi_set_element(env, result, 0, a);
  napi_set_element(env, result, 1, b);
  return result;
}

static napi_value SocketPair(napi_env env, napi_callback_info info) {
  (void)info;
  return procctl_socket_pair(env, SOCK_STREAM);
}

static napi_value SendDescriptor(napi_env env, napi_callback_info info) {
  int32_t args[2];
  if (!procctl_int32_args(env, info, 2, args)) {
    napi_throw_type_error(env, NULL, "sendDescriptor(socket, fd): both must be numbers");
    return NULL;
  }
  char byte = 'c';
  ssize_t n = fdpass_send(args[0], &byte, 1, &args[1], 1);
  napi_value sent;
  napi_get_boolean(env, n == 1, &sent);
  return sent;
}

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* receiveConnection(socket, timeoutMs): ask the channel for a connection and wait for it. */
static napi_value ReceiveConnection(napi_env env, napi_callback_info info) {
  int32_t args[2];
  if (!procctl_int32_args(env, info, 2, args)) {
    napi_throw_type_error(env, NULL, "receiveConnection(socket, timeoutMs): both must be numbers");
    return NULL;
  }
  int sock = args[0];
  long long deadline = now_ms() + args[1];
  char byte = 'c';
  ssize_t n;
  do n = send(sock, &byte, 1, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != 1) return procctl_throw_errno(env, n < 0 ? errno : EIO, "asking the session's channel");
  for (;;) {
    struct pollfd p = {sock, POLLIN, 0};
    long long left = deadline - now_ms();
    if (left <= 0) return procctl_throw_errno(env, ETIMEDOUT, "waiting for the session's channel");
    int r = poll(&p, 1, (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return procctl_throw_errno(env, errno, "waiting for the session's channel");
    if (r == 0) continue;
    int fds[FDPASS_MAX];
    size_t count;
    n = fdpass_receive(sock, &byte, 1, fds, &count);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;  // another process of the job took it
    if (n < 0) return procctl_throw_errno(env, errno, "reading the session's channel");
    if (n == 0 && count == 0) return procctl_throw_errno(env, ECONNRESET, "the session's channel is closed");
    if (count != 1) {
      for (size_t i = 0; i < count; i++) close(fds[i]);
      return procctl_throw_errno(env, EPROTO, "the session's channel answered without a connection");
    }
    int fd = fds[0];
    napi_value result;
    napi_create_int32(env, fd, &result);
    return result;
  }
}

static napi_value SetInheritable(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t fd;
  bool inheritable = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
      napi_get_value_bool(env, argv[1], &inheritable) != napi_ok) {
    napi_throw_type_error(env, NULL, "setInheritable(fd, inheritable)");
    return NULL;
  }
  if (fcntl(fd, F_SETFD, inheritable ? 0 : FD_CLOEXEC) != 0) return procctl_throw_errno(env, errno, "fcntl");
  return NULL;
}

/* At most this many descriptors arrive in one message (the helper sends one at a time). */

typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_async_context context;
  int socket;
  int stopped;    /* no more calls into JS: the peer is gone, or close() was called */
  int uv_closed;  /* libuv is done with the poll handle */
  int js_gone;    /* close() itself was collected: nothing can call it any more */
} watcher_t;

/* The watcher is freed once both libuv and JS are done with it, whichever is last. */
static void watcher_closed(uv_handle_t *handle) {
  watcher_t *w = (watcher_t *)handle->data;
  napi_delete_reference(w->env, w->callback);
  napi_async_destroy(w->env, w->context);
  w->uv_closed = 1;
  if (w->js_gone) free(w);
}

static void watcher_stop(watcher_t *w) {
  if (w->stopped) return;
  w->stopped = 1;
  uv_poll_stop(&w->poll);
  uv_close((uv_handle_t *)&w->poll, watcher_closed);
}

/* Call onDescriptor(fd) as a callback from the event loop (nextTicks and microtasks run after it). */
static void watcher_call(watcher_t *w, int fd) {
  napi_handle_scope scope;
  napi_value callback, recv, arg;
  if (napi_open_handle_scope(w->env, &scope) != napi_ok) return;
  napi_get_reference_value(w->env, w->callback, &callback);
  napi_get_global(w->env, &recv);  /* a receiver must be an object */
  napi_create_int32(w->env, fd, &arg);
  napi_status st = napi_make_callback(w->env, w->context, recv, callback, 1, &arg, NULL);
  if (st == napi_pending_exception) {
    napi_value error;
    napi_get_and_clear_last_exception(w->env, &error);
    napi_fatal_exception(w->env, error);
  }
  napi_close_handle_scope(w->env, scope);
}

static void watcher_readable(uv_poll_t *handle, int status, int events) {
  watcher_t *w = (watcher_t *)handle->data;
  (void)events;
  for (int round = 0; round < 64 && !w->stopped; round++) {
    char bytes[FDPASS_MAX];
    int fds[FDPASS_MAX];
    size_t count = 0;
    ssize_t n = status < 0 ? -1 : fdpass_receive(w->socket, bytes, sizeof bytes, fds, &count);
    if (n < 0 && status >= 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n <= 0) {
      /* The peer is gone (or the socket failed): say so once, and stop. */
      for (size_t i = 0; i < count; i++) close(fds[i]);
      watcher_call(w, -1);
      watcher_stop(w);
      return;
    }
    for (size_t i = 0; i < count; i++) {
      int fd = fds[i];
      struct stat st;
      /* Only sockets are taken: a file or pipe from a confused or hostile peer is closed unread. */
      if (w->stopped || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        close(fd);
        continue;
      }
      watcher_call(w, fd);
    }
  }
}

static void watcher_finalize(napi_env env, void *data, void *hint) {
  watcher_t *w = (watcher_t *)data;
  (void)env;
  (void)hint;
  w->js_gone = 1;
  if (!w->stopped) watcher_stop(w);
  else if (w->uv_closed) free(w);
}

static napi_value WatcherClose(napi_env env, napi_callback_info info) {
  watcher_t *w;
  if (napi_get_cb_info(env, info, NULL, NULL, NULL, (void **)&w) == napi_ok && w) watcher_stop(w);
  return NULL;
}

static napi_value WatchDescriptors(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t sock;
  napi_valuetype type;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_int32(env, argv[0], &sock) != napi_ok ||
      napi_typeof(env, argv[1], &type) != napi_ok || type != napi_function) {
    napi_throw_type_error(env, NULL, "watchDescriptors(socket, onDescriptor): a descriptor and a function");
    return NULL;
  }
  uv_loop_t *loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) return procctl_throw_errno(env, EINVAL, "watchDescriptors: no event loop");
  watcher_t *w = calloc(1, sizeof *w);
  if (!w) return procctl_throw_errno(env, ENOMEM, "watchDescriptors");
  w->env = env;
  w->socket = sock;
  w->poll.data = w;
  napi_value name;
  napi_create_string_utf8(env, "procctl.channel", NAPI_AUTO_LENGTH, &name);
  int err = uv_poll_init(loop, &w->poll, sock);
  if (err != 0) {
    free(w);
    return procctl_throw_errno(env, -err, "watchDescriptors");
  }
  napi_create_reference(env, argv[1], 1, &w->callback);
  napi_async_init(env, NULL, name, &w->context);
  err = uv_poll_start(&w->poll, UV_READABLE | UV_DISCONNECT, watcher_readable);
  if (err != 0) {
    w->stopped = 1;
    w->js_gone = 1;  /* nothing of it reaches JS: freed once libuv lets the handle go */
    uv_close((uv_handle_t *)&w->poll, watcher_closed);
    return procctl_throw_errno(env, -err, "watchDescriptors");
  }
  napi_value handle, close_fn;
  napi_create_object(env, &handle);
  napi_create_function(env, "close", NAPI_AUTO_LENGTH, WatcherClose, w, &close_fn);
  napi_set_named_property(env, handle, "close", close_fn);
  napi_add_finalizer(env, close_fn, w, watcher_finalize, NULL, NULL);
  return handle;
}

// Called by addon.c, the module's one init.
void procctl_channel_init(napi_env env, napi_value exports) {
  static const struct { const char *name; napi_callback fn; } fns[] = {
    {"socketPair", SocketPair},
    {"sendDescriptor", SendDescriptor},
    {"receiveConnection", ReceiveConnection},
    {"setInheritable", SetInheritable},
    {"watchDescriptors", WatchDescriptors},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) procctl_export(env, exports, fns[i].name, fns[i].fn);
}
