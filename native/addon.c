// The project's one addon (build/Release/procctl.node, or prebuilds/<platform>-<arch>/ in a
// package): one module, so one prebuilt file per platform that node-gyp-build can find.
// Each source file adds its own functions.
#include <node_api.h>

void procctl_spawn_init(napi_env env, napi_value exports);
void procctl_peer_init(napi_env env, napi_value exports);
void procctl_notify_init(napi_env env, napi_value exports);
void procctl_channel_init(napi_env env, napi_value exports);
void procctl_seccomp_init(napi_env env, napi_value exports);
void procctl_relay_init(napi_env env, napi_value exports);
void procctl_xattr_init(napi_env env, napi_value exports);
void procctl_exec_init(napi_env env, napi_value exports);
void procctl_terminal_init(napi_env env, napi_value exports);
void procctl_keep_init(napi_env env, napi_value exports);

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  procctl_spawn_init(env, exports);
  procctl_peer_init(env, exports);
  procctl_notify_init(env, exports);
  procctl_channel_init(env, exports);
  procctl_seccomp_init(env, exports);
  procctl_relay_init(env, exports);
  procctl_xattr_init(env, exports);
  procctl_exec_init(env, exports);
  procctl_terminal_init(env, exports);
  procctl_keep_init(env, exports);
  return exports;
}
