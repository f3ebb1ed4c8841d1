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
void procctl_pidfd_init(napi_env env, napi_value exports);
void procctl_splice_init(napi_env env, napi_value exports);
void procctl_tap_init(napi_env env, napi_value exports);
void procctl_sched_init(napi_env env, napi_value exports);
void procctl_dirwatch_init(napi_env env, napi_value exports);
void procctl_sockdiag_init(napi_env env, napi_value exports);
void procctl_copyat_init(napi_env env, napi_value exports);

#ifndef PROCCTL_SOURCE_HASH
#define PROCCTL_SOURCE_HASH "unknown"
#endif

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  // Which sources this build was made from (native/source-hash.cjs): src/base/addon.ts says when
  // the sources beside it have changed since.
  napi_value hash;
  if (napi_create_string_utf8(env, PROCCTL_SOURCE_HASH, NAPI_AUTO_LENGTH, &hash) == napi_ok) {
    napi_set_named_property(env, exports, "sourceHash", hash);
  }
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
  procctl_pidfd_init(env, exports);
  procctl_splice_init(env, exports);
  procctl_tap_init(env, exports);
  procctl_sched_init(env, exports);
  procctl_dirwatch_init(env, exports);
  procctl_sockdiag_init(env, exports);
  procctl_copyat_init(env, exports);
  return exports;
}
