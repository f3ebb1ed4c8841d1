// One extended attribute of a path, not following a final symlink (lgetxattr). Node has no call
// for it; src/changes/ reads overlayfs's marks on an upper directory (an opaque directory, a
// redirect) from it.
//
// getxattr(path, name) -> Buffer, or null when the path has no such attribute or its filesystem
// keeps none. path is a string or a Buffer (names that are not UTF-8 are passed as bytes).
// Throws an Error with `errno` for any other failure (no such file, permission).
//
// setxattr(path, name, value) (lsetxattr): the tests write the marks a kernel would, to play an
// upper directory the reader must refuse, without attr(1) on the machine. Throws as above.
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

// The path and the attribute's name of a call (its first two arguments), or false with a TypeError
// thrown that names `usage`; the caller frees both.
static bool path_and_name(napi_env env, napi_value *argv, const char *usage, char **path, char **name) {
  *path = procctl_name_arg(env, argv[0]);
  *name = procctl_name_arg(env, argv[1]);
  if (*path && *name) return true;
  free(*path);
  free(*name);
  procctl_throw_usage(env, usage);
  return false;
}

static napi_value GetXattr(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2], result;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2) return procctl_throw_usage(env, "getxattr(path, name): both are needed");
  char *path, *name;
  if (!path_and_name(env, argv, "getxattr(path, name): a string or Buffer without NUL bytes each", &path, &name)) return NULL;
  // Ask for the size first; the value may change in between, so retry on ERANGE.
  for (int tries = 0; tries < 4; tries++) {
    ssize_t size = lgetxattr(path, name, NULL, 0);
    if (size >= 0) {
      void *data;
      if (napi_create_buffer(env, (size_t)size, &data, &result) != napi_ok) break;
      ssize_t got = size == 0 ? 0 : lgetxattr(path, name, data, (size_t)size);
      if (got == size) {
        free(path);
        free(name);
        return result;
      }
      if (got >= 0 || errno == ERANGE) continue;
    }
    int err = errno;
    free(path);
    free(name);
    if (err == ENODATA || err == ENOTSUP) return procctl_null(env);
    return procctl_throw_errno(env, err, "lgetxattr");
  }
  free(path);
  free(name);
  return procctl_throw_errno(env, ERANGE, "lgetxattr");
}

static napi_value SetXattr(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3], result;
  void *value = NULL;
  size_t len = 0;
  bool is_buffer = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || napi_is_buffer(env, argv[2], &is_buffer) != napi_ok || !is_buffer ||
      napi_get_buffer_info(env, argv[2], &value, &len) != napi_ok) {
    return procctl_throw_usage(env, "setxattr(path, name, value): value is a Buffer");
  }
  char *path, *name;
  if (!path_and_name(env, argv, "setxattr(path, name, value): path and name a string or Buffer without NUL bytes each", &path, &name)) return NULL;
  int rc = lsetxattr(path, name, value, len, 0);
  int err = errno;
  free(path);
  free(name);
  if (rc != 0) return procctl_throw_errno(env, err, "lsetxattr");
  napi_get_undefined(env, &result);
  return result;
}

// Called by addon.c, the module's one init.
void procctl_xattr_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "getxattr", GetXattr);
  procctl_export(env, exports, "setxattr", SetXattr);
}
