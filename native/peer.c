// Who is on the other end of a Unix socket: the kernel's record of the peer's pid, uid and gid
// when it connected (SO_PEERCRED). Node has no call for it; the daemon logs it with every
// refused request, so an operator can tell which process tried a scope it may not use.
//
// peerCredentials(fd) -> { pid, uid, gid }, or null when the kernel cannot say.
#define _GNU_SOURCE
#include <sys/socket.h>
#include <node_api.h>

static napi_value PeerCredentials(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  napi_value result;
  int32_t fd;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
      napi_get_value_int32(env, argv[0], &fd) != napi_ok) {
    napi_throw_type_error(env, NULL, "peerCredentials(fd): fd must be a number");
    return NULL;
  }
  struct ucred cred;
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    napi_get_null(env, &result);
    return result;
  }
  napi_value pid, uid, gid;
  napi_create_object(env, &result);
  napi_create_int32(env, cred.pid, &pid);
  napi_create_uint32(env, cred.uid, &uid);
  napi_create_uint32(env, cred.gid, &gid);
  napi_set_named_property(env, result, "pid", pid);
  napi_set_named_property(env, result, "uid", uid);
  napi_set_named_property(env, result, "gid", gid);
  return result;
}

// Called by addon.c, the module's one init.
void procctl_peer_init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "peerCredentials", NAPI_AUTO_LENGTH, PeerCredentials, NULL, &fn);
  napi_set_named_property(env, exports, "peerCredentials", fn);
}
