// What keeps a running session's descriptors while no daemon lives (a crash, SPEC §19): the
// daemon sends each session's ends to the guardian over a socket pair of datagrams (SCM_RIGHTS),
// where they wait in the guardian's queue until it drains it; when the daemon dies, the guardian
// hands them to the next daemon over a listening socket of the same kind. Every message is one
// datagram: a text (the session's description, JSON) and up to KEEP_MAX_FDS (16) descriptors.
//
// keepPair() -> [a, b]: a connected pair of SOCK_SEQPACKET sockets, both close-on-exec.
// keepSend(socket, text, fds) -> true when sent, false when the peer's queue is full (EAGAIN).
// keepReceive(socket, timeoutMs) -> {messages: [{text, fds}], closed}: every datagram queued now
//   (timeoutMs 0), or until the peer closes (timeoutMs > 0, the whole hand-over, or ETIMEDOUT).
// keepListen(path) -> fd: a SOCK_SEQPACKET socket listening on `path` (0600, replacing a stale file).
// keepAccept(fd, timeoutMs) -> {fd, uid} | null: the next connection and its peer's uid, or null
//   when none came within timeoutMs.
// keepConnect(path) -> {fd, uid}: a connection to a keepListen socket and its peer's uid.
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <node_api.h>
#include "errors.h"
#include "fdpass.h"
#include "napi-util.h"

// A session's ends (3), its leader's pidfd (1), a confined job's channel (1), and its proxy's
// channel and listening sockets (3): 8 at most, with room to spare.
#define KEEP_MAX_FDS FDPASS_MAX
#define KEEP_MAX_TEXT 65536

static long long keep_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static napi_value int_pair(napi_env env, int a, int b, const char *na, const char *nb) {
  napi_value result = procctl_object(env);
  procctl_set_int32(env, result, na, a);
  procctl_set_int32(env, result, nb, b);
  return result;
}

static napi_value KeepPair(napi_env env, napi_callback_info info) {
  (void)info;
  return procctl_socket_pair(env, SOCK_SEQPACKET);
}

static napi_value KeepSend(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  int32_t sock;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || napi_get_value_int32(env, argv[0], &sock) != napi_ok) {
    return procctl_throw_usage(env, "keepSend(socket, text, fds)");
  }
  size_t len;
  char *text = procctl_string_copy(env, argv[1], &len);
  if (!text || len > KEEP_MAX_TEXT) {
    free(text);
    return procctl_throw_usage(env, "keepSend: text must be a string of at most 64 KiB");
  }
  uint32_t nfds = 0;
  napi_get_array_length(env, argv[2], &nfds);
  if (nfds > KEEP_MAX_FDS) {
    free(text);
    napi_throw_range_error(env, NULL, "keepSend: at most 16 descriptors in one message");
    return NULL;
  }
  int fds[KEEP_MAX_FDS];
  for (uint32_t i = 0; i < nfds; i++) {
    napi_value v;
    napi_get_element(env, argv[2], i, &v);
    napi_get_value_int32(env, v, &fds[i]);
  }
  ssize_t n = fdpass_send(sock, text, len, fds, nfds);
  int err = errno;
  free(text);
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == ENOBUFS)) return procctl_bool(env, false);
  if (n < 0) return procctl_throw_errno(env, err, "sending to the guardian");
  return procctl_bool(env, true);
}

/* One datagram, or 0 when none is queued (nonblocking), -1 at the peer's close; *out set on 1. */
static int receive_one(napi_env env, int sock, char *buf, napi_value *out) {
  int got[FDPASS_MAX];
  size_t count;
  ssize_t n = fdpass_receive(sock, buf, KEEP_MAX_TEXT, got, &count);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (n < 0) return -2;
  napi_value fds;
  napi_create_array(env, &fds);
  for (size_t i = 0; i < count; i++) napi_set_element(env, fds, (uint32_t)i, procctl_int32(env, got[i]));
  // A zero-length datagram without descriptors is the peer's close on a SOCK_SEQPACKET socket.
  if (n == 0 && count == 0) return -1;
  *out = procctl_object(env);
  procctl_set_string(env, *out, "text", buf, (size_t)n);
  napi_set_named_property(env, *out, "fds", fds);
  return 1;
}

static napi_value KeepReceive(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  int32_t sock, timeout = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || napi_get_value_int32(env, argv[0], &sock) != napi_ok) {
    return procctl_throw_usage(env, "keepReceive(socket, timeoutMs)");
  }
  if (argc > 1) napi_get_value_int32(env, argv[1], &timeout);
  long long deadline = keep_now_ms() + timeout;
  char *buf = malloc(KEEP_MAX_TEXT);
  napi_value messages;
  napi_create_array(env, &messages);
  uint32_t count = 0;
  int closed = 0;
  for (;;) {
    napi_value one;
    int r = receive_one(env, sock, buf, &one);
    if (r == 1) {
      napi_set_element(env, messages, count++, one);
      continue;
    }
    if (r == -1) {
      closed = 1;
      break;
    }
    if (r == -2) {
      int err = errno;
      if (err == ECONNRESET || err == ENOTCONN) {
        closed = 1;
        break;
      }
      free(buf);
      return procctl_throw_errno(env, err, "reading the guardian's socket");
    }
    if (timeout <= 0) break;
    long long left = deadline - keep_now_ms();
    if (left <= 0) {
      free(buf);
      return procctl_throw_errno(env, ETIMEDOUT, "waiting for the guardian's hand-over");
    }
    struct pollfd p = {sock, POLLIN, 0};
    poll(&p, 1, (int)left);
  }
  free(buf);
  napi_value result = procctl_object(env);
  napi_set_named_property(env, result, "messages", messages);
  procctl_set_bool(env, result, "closed", closed);
  return result;
}

static int path_arg(napi_env env, napi_callback_info info, struct sockaddr_un *addr, int32_t *extra) {
  size_t argc = 2;
  napi_value argv[2];
  size_t len;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) return 0;
  memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (napi_get_value_string_utf8(env, argv[0], addr->sun_path, sizeof addr->sun_path, &len) != napi_ok || len >= sizeof addr->sun_path - 1) return 0;
  if (extra && (argc < 2 || napi_get_value_int32(env, argv[1], extra) != napi_ok)) return 0;
  return 1;
}

static int peer_uid(int fd) {
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
  return (int)cred.uid;
}

static napi_value KeepListen(napi_env env, napi_callback_info info) {
  struct sockaddr_un addr;
  if (!path_arg(env, info, &addr, NULL)) return procctl_throw_usage(env, "keepListen(path): a path shorter than 107 bytes");
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return procctl_throw_errno(env, errno, "socket");
  unlink(addr.sun_path);
  // Made 0600 from the start: no moment when another user could connect.
  mode_t was = umask(0177);
  int r = bind(fd, (struct sockaddr *)&addr, sizeof addr);
  umask(was);
  if (r != 0 || listen(fd, 4) != 0) {
    int err = errno;
    close(fd);
    return procctl_throw_errno(env, err, "listening for the next daemon");
  }
  return procctl_int32(env, fd);
}

static napi_value KeepAccept(napi_env env, napi_callback_info info) {
  int32_t args[2];
  if (!procctl_int32_args(env, info, 2, args)) return procctl_throw_usage(env, "keepAccept(fd, timeoutMs)");
  long long deadline = keep_now_ms() + args[1];
  for (;;) {
    long long left = deadline - keep_now_ms();
    if (left <= 0) return procctl_null(env);
    struct pollfd p = {args[0], POLLIN, 0};
    int r = poll(&p, 1, (int)left);
    if (r < 0 && errno != EINTR) return procctl_throw_errno(env, errno, "waiting for the next daemon");
    if (r <= 0) continue;
    int c = accept4(args[0], NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) continue;
    return int_pair(env, c, peer_uid(c), "fd", "uid");
  }
}

static napi_value KeepConnect(napi_env env, napi_callback_info info) {
  struct sockaddr_un addr;
  if (!path_arg(env, info, &addr, NULL)) return procctl_throw_usage(env, "keepConnect(path): a path shorter than 107 bytes");
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return procctl_throw_errno(env, errno, "socket");
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
    int err = errno;
    close(fd);
    return procctl_throw_errno(env, err, "connecting to the guardian");
  }
  return int_pair(env, fd, peer_uid(fd), "fd", "uid");
}

// Called by addon.c, the module's one init.
void procctl_keep_init(napi_env env, napi_value exports) {
  static const struct { const char *name; napi_callback fn; } fns[] = {
    {"keepPair", KeepPair},
    {"keepSend", KeepSend},
    {"keepReceive", KeepReceive},
    {"keepListen", KeepListen},
    {"keepAccept", KeepAccept},
    {"keepConnect", KeepConnect},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) procctl_export(env, exports, fns[i].name, fns[i].fn);
}
