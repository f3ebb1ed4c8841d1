// sd_notify: one datagram to the AF_UNIX socket systemd names in $NOTIFY_SOCKET. Node has no
// datagram Unix sockets; doing it here keeps readiness and the watchdog working in an install
// whose dependency scripts never ran, since this file ships prebuilt with the rest of the addon.
//
// notify(path, message) -> undefined; throws an Error with `code` (an errno name) and
// `syscall` when the socket cannot be made or the datagram is not sent. A path starting with
// '@' is in the abstract namespace, as systemd writes it.
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <node_api.h>

static void throw_errno(napi_env env, const char *syscall, int err) {
  napi_value msg, code, error, sys;
  char text[160];
  snprintf(text, sizeof text, "sd_notify %s: %s", syscall, strerror(err));
  napi_create_string_utf8(env, text, NAPI_AUTO_LENGTH, &msg);
  napi_create_string_utf8(env, err == EAGAIN ? "EAGAIN" : err == ENOENT ? "ENOENT" : err == ECONNREFUSED ? "ECONNREFUSED" : err == EACCES ? "EACCES" : "EIO", NAPI_AUTO_LENGTH, &code);
  napi_create_error(env, code, msg, &error);
  napi_create_string_utf8(env, syscall, NAPI_AUTO_LENGTH, &sys);
  napi_set_named_property(env, error, "syscall", sys);
  napi_throw(env, error);
}

static napi_value Notify(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  struct sockaddr_un addr;
  size_t path_len = 0, msg_len = 0;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
      napi_get_value_string_utf8(env, argv[0], addr.sun_path, sizeof addr.sun_path, &path_len) != napi_ok ||
      napi_get_value_string_utf8(env, argv[1], NULL, 0, &msg_len) != napi_ok) {
    napi_throw_type_error(env, NULL, "notify(path, message): both must be strings");
    return NULL;
  }
  if (path_len == 0 || path_len >= sizeof addr.sun_path - 1) {
    napi_throw_range_error(env, NULL, "notify(path, message): the socket path is empty or too long");
    return NULL;
  }
  char *msg = malloc(msg_len + 1);
  if (!msg) {
    napi_throw_error(env, NULL, "notify: out of memory");
    return NULL;
  }
  napi_get_value_string_utf8(env, argv[1], msg, msg_len + 1, &msg_len);
  addr.sun_family = AF_UNIX;
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';
  socklen_t addr_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + path_len + (addr.sun_path[0] == '\0' ? 0 : 1));
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    int err = errno;
    free(msg);
    throw_errno(env, "socket", err);
    return NULL;
  }
  ssize_t sent = sendto(fd, msg, msg_len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&addr, addr_len);
  int err = errno;
  close(fd);
  free(msg);
  if (sent < 0) {
    throw_errno(env, "sendto", err);
    return NULL;
  }
  return NULL;
}

// Called by addon.c, the module's one init.
void procctl_notify_init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "notify", NAPI_AUTO_LENGTH, Notify, NULL, &fn);
  napi_set_named_property(env, exports, "notify", fn);
}
