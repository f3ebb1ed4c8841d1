// A review's file written into the workspace beside its target (src/changes/apply.ts): every name
// reached from a directory descriptor apply holds (openat, fstatat, linkat, renameat), none
// through a path, so no component swapped for a symlink can send a write elsewhere; and the whole
// file's writing in one call, where Node's fs took a dozen (each a /proc/self/fd path walk for
// the names).
//
// writeBeside(fromDir, fromName, dir, tmpName, mode, uid, gid, fsync) -> fingerprint | null
//   Opens fromName in fromDir (O_NOFOLLOW) and, when it is a regular file, makes tmpName in dir
//   (O_EXCL|O_NOFOLLOW, 0600), copies its bytes (copy_file_range, or read and write where the
//   kernel cannot), sets mode, the owner (uid/gid, -1 to leave it), the source's access and
//   modification times to the nanosecond, fsyncs when asked, and answers what was written:
//   { dev, ino (decimal string), size, mtimeNs (decimal string), mode }. null when fromName is not
//   a regular file (nothing made). On a failure tmpName is removed and an Error with `errno` thrown.
//
// statAt(dir, name) -> { type, uid, gid, mode, isDir } | null   (fstatat, AT_SYMLINK_NOFOLLOW)
// linkAt(dir, name, toDir, toName)   (linkat, no symlink followed)
// renameAt(dir, name, toDir, toName)
//   Names are strings or Buffers (bytes that are not UTF-8); dirs are descriptors.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

// The bytes of a file from one descriptor to another, `size` of them (a source found shorter ends
// where its data does): copy_file_range, falling back to read and write where the kernel refuses it.
static int copy_bytes(int in, int out, off_t size) {
  off_t left = size;
  while (left > 0) {
    ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0);
    if (n > 0) {
      left -= n;
      continue;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP && errno != EPERM) return -1;
    char buf[65536];
    while (left > 0) {
      ssize_t got = read(in, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return -1;
      if (got == 0) return 0;
      for (ssize_t off = 0; off < got;) {
        ssize_t put = write(out, buf + off, (size_t)(got - off));
        if (put < 0 && errno == EINTR) continue;
        if (put < 0) return -1;
        off += put;
      }
      left -= got;
    }
  }
  return 0;
}

static napi_value decimal(napi_env env, uint64_t value) {
  char text[24];
  int len = snprintf(text, sizeof text, "%" PRIu64, value);
  napi_value v;
  napi_create_string_utf8(env, text, (size_t)len, &v);
  return v;
}

static napi_value WriteBeside(napi_env env, napi_callback_info info) {
  static const char *usage = "writeBeside(fromDir, fromName, dir, tmpName, mode, uid, gid, fsync): descriptors and numbers, names a string or Buffer without NUL bytes";
  size_t argc = 8;
  napi_value argv[8];
  int32_t from_dir, dir, mode, uid, gid;
  bool want_sync = false;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 8 || napi_get_value_int32(env, argv[0], &from_dir) != napi_ok ||
      napi_get_value_int32(env, argv[2], &dir) != napi_ok || napi_get_value_int32(env, argv[4], &mode) != napi_ok ||
      napi_get_value_int32(env, argv[5], &uid) != napi_ok || napi_get_value_int32(env, argv[6], &gid) != napi_ok ||
      napi_get_value_bool(env, argv[7], &want_sync) != napi_ok) {
    return procctl_throw_usage(env, usage);
  }
  char *from_name = procctl_name_arg(env, argv[1]);
  char *tmp_name = procctl_name_arg(env, argv[3]);
  if (!from_name || !tmp_name) {
    free(from_name);
    free(tmp_name);
    return procctl_throw_usage(env, usage);
  }
  napi_value result = NULL;
  const char *what = "open the upper file";
  int err = 0, out = -1;
  struct stat src, wrote;
  int in = openat(from_dir, from_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (in < 0) {
    err = errno;
    goto done;
  }
  what = "fstat the upper file";
  if (fstat(in, &src) != 0) {
    err = errno;
    goto done;
  }
  if (!S_ISREG(src.st_mode)) {
    result = procctl_null(env);
    goto done;
  }
  what = "create the file beside its target";
  out = openat(dir, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) {
    err = errno;
    goto done;
  }
  // The job that wrote it is gone: its size as the descriptor says is all there is to copy.
  struct timespec times[2] = {src.st_atim, src.st_mtim};
  if ((what = "copy the file's bytes", copy_bytes(in, out, src.st_size) != 0) || (what = "fchmod", fchmod(out, (mode_t)mode) != 0) ||
      (uid >= 0 && (what = "fchown", fchown(out, (uid_t)uid, (gid_t)gid) != 0)) || (what = "futimens", futimens(out, times) != 0) ||
      (want_sync && (what = "fsync", fsync(out) != 0)) || (what = "fstat the file written", fstat(out, &wrote) != 0)) {
    err = errno;
    goto done;
  }
  result = procctl_object(env);
  napi_value v;
  napi_create_double(env, (double)wrote.st_dev, &v);
  napi_set_named_property(env, result, "dev", v);
  napi_set_named_property(env, result, "ino", decimal(env, (uint64_t)wrote.st_ino));
  napi_create_double(env, (double)wrote.st_size, &v);
  napi_set_named_property(env, result, "size", v);
  napi_set_named_property(env, result, "mtimeNs", decimal(env, (uint64_t)wrote.st_mtim.tv_sec * 1000000000u + (uint64_t)wrote.st_mtim.tv_nsec));
  procctl_set_int32(env, result, "mode", (int32_t)(wrote.st_mode & 07777));
done:
  if (in >= 0) close(in);
  if (out >= 0) {
    if (close(out) != 0 && !err && result) {
      err = errno;
      what = "close the file written";
    }
    if (err) unlinkat(dir, tmp_name, 0);
  }
  free(from_name);
  free(tmp_name);
  if (err) return procctl_throw_errno(env, err, what);
  return result;
}

static const char *type_of(mode_t mode) {
  if (S_ISREG(mode)) return "file";
  if (S_ISDIR(mode)) return "dir";
  if (S_ISLNK(mode)) return "symlink";
  if (S_ISFIFO(mode)) return "fifo";
  if (S_ISSOCK(mode)) return "socket";
  if (S_ISCHR(mode)) return "char";
  return "block";
}

static napi_value StatAt(napi_env env, napi_callback_info info) {
  static const char *usage = "statAt(dir, name): a descriptor and a string or Buffer without NUL bytes";
  size_t argc = 2;
  napi_value argv[2];
  int32_t dir;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || napi_get_value_int32(env, argv[0], &dir) != napi_ok) {
    return procctl_throw_usage(env, usage);
  }
  char *name = procctl_name_arg(env, argv[1]);
  if (!name) return procctl_throw_usage(env, usage);
  struct stat st;
  int rc = fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW);
  int err = errno;
  free(name);
  if (rc != 0) return err == ENOENT ? procctl_null(env) : procctl_throw_errno(env, err, "fstatat");
  napi_value result = procctl_object(env);
  const char *type = type_of(st.st_mode);
  procctl_set_string(env, result, "type", type, strlen(type));
  napi_value v;
  napi_create_double(env, (double)st.st_uid, &v);
  napi_set_named_property(env, result, "uid", v);
  napi_create_double(env, (double)st.st_gid, &v);
  napi_set_named_property(env, result, "gid", v);
  procctl_set_int32(env, result, "mode", (int32_t)(st.st_mode & 07777));
  return result;
}

// linkAt and renameAt: (dir, name, toDir, toName), one system call each.
static napi_value two_names(napi_env env, napi_callback_info info, bool link) {
  const char *usage = link ? "linkAt(dir, name, toDir, toName): descriptors, names a string or Buffer without NUL bytes"
                           : "renameAt(dir, name, toDir, toName): descriptors, names a string or Buffer without NUL bytes";
  size_t argc = 4;
  napi_value argv[4];
  int32_t dir, to_dir;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 || napi_get_value_int32(env, argv[0], &dir) != napi_ok ||
      napi_get_value_int32(env, argv[2], &to_dir) != napi_ok) {
    return procctl_throw_usage(env, usage);
  }
  char *name = procctl_name_arg(env, argv[1]);
  char *to_name = procctl_name_arg(env, argv[3]);
  bool named = name && to_name;
  int rc = -1, err = 0;
  if (named) {
    rc = link ? linkat(dir, name, to_dir, to_name, 0) : renameat(dir, name, to_dir, to_name);
    err = errno;
  }
  free(name);
  free(to_name);
  if (!named) return procctl_throw_usage(env, usage);
  if (rc != 0) return procctl_throw_errno(env, err, link ? "linkat" : "renameat");
  napi_value undefined;
  napi_get_undefined(env, &undefined);
  return undefined;
}

static napi_value LinkAt(napi_env env, napi_callback_info info) { return two_names(env, info, true); }
static napi_value RenameAt(napi_env env, napi_callback_info info) { return two_names(env, info, false); }

// Called by addon.c, the module's one init.
void procctl_copyat_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "writeBeside", WriteBeside);
  procctl_export(env, exports, "statAt", StatAt);
  procctl_export(env, exports, "linkAt", LinkAt);
  procctl_export(env, exports, "renameAt", RenameAt);
}
