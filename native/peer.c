// Who is on the other end of a Unix socket: the kernel's record of the peer's pid, uid and gid
// when it connected (SO_PEERCRED). Node has no call for it; the daemon logs it with every
// refused request, so an operator can tell which process tried a scope it may not use.
//
// peerCredentials(fd) -> { pid, uid, gid }, or null when the kernel cannot say.
#define _GNU_SOURCE
#include <sys/socket.h>
#include <node_api.h>
#include "napi-util.h"

static napi_value PeerCredentials(napi_env env, napi_callback_info info) {
  int32_t fd;
  if (!procctl_int32_args(env, info, 1, &fd)) return procctl_throw_usage(env, "peerCredentials(fd): fd must be a number");
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return procctl_null(env);
  napi_value result = procctl_object(env);
  procctl_set_int32(env, result, "pid", cred.pid);
  procctl_set_uint32(env, result, "uid", cred.uid);
  procctl_set_uint32(env, result, "gid", cred.gid);
  return result;
}

// Called by addon.c, the module's one init.
void procctl_peer_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "peerCredentials", PeerCredentials);
}
