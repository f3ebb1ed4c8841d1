// The sandbox's seccomp filter (SPEC §12): a sandboxed job may not make a Unix socket, so a
// socket on the host it can see (a Docker socket, an ssh agent, a session bus, the daemon's
// own) is no way out. The filter is built by libseccomp, loaded when first asked for (dlopen:
// the addon builds and loads without it; only a sandbox that needs the filter does), and handed
// to bwrap as the BPF program its `--seccomp FD` reads.
//
// Refused with EPERM: socket(AF_UNIX, ...), and io_uring_setup (a ring can make sockets without
// the socket system call). socketpair stays allowed: a pair reaches nothing outside the job.
// Other architectures' system calls (a 32-bit program) are refused by libseccomp's default.
//
// seccompFilter() -> fd: a memfd holding the program, at offset 0, close-on-exec. Throws an
//   Error saying why when libseccomp cannot be loaded or cannot build it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>

// libseccomp's stable interface (seccomp.h, version 2), declared here so the addon builds on
// hosts without its headers.
#define ACT_ALLOW 0x7fff0000U
#define ACT_ERRNO(x) (0x00050000U | ((x) & 0x0000ffffU))
#define CMP_EQ 4
struct arg_cmp {
  unsigned int arg;
  int op;
  uint64_t datum_a;
  uint64_t datum_b;
};
typedef void *(*init_fn)(uint32_t);
typedef int (*rule_add_fn)(void *, uint32_t, int, unsigned int, ...);
typedef int (*export_fn)(void *, int);
typedef void (*release_fn)(void *);
typedef int (*resolve_fn)(const char *);

static char *program;      // the exported BPF, built once
static size_t program_len;
static char failure[256];  // why it cannot be built, once known

static int build(void) {
  void *lib = dlopen("libseccomp.so.2", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    snprintf(failure, sizeof failure, "libseccomp cannot be loaded (%s); install it (Debian: apt-get install -y libseccomp2)", dlerror());
    return -1;
  }
  init_fn init = (init_fn)dlsym(lib, "seccomp_init");
  rule_add_fn rule_add = (rule_add_fn)dlsym(lib, "seccomp_rule_add");
  export_fn export_bpf = (export_fn)dlsym(lib, "seccomp_export_bpf");
  release_fn release = (release_fn)dlsym(lib, "seccomp_release");
  resolve_fn resolve = (resolve_fn)dlsym(lib, "seccomp_syscall_resolve_name");
  if (!init || !rule_add || !export_bpf || !release || !resolve) {
    snprintf(failure, sizeof failure, "libseccomp.so.2 lacks the functions a filter needs");
    return -1;
  }
  void *ctx = init(ACT_ALLOW);
  if (!ctx) {
    snprintf(failure, sizeof failure, "seccomp_init failed");
    return -1;
  }
  struct arg_cmp unix_domain = {0, CMP_EQ, AF_UNIX, 0};
  int rc = rule_add(ctx, ACT_ERRNO(EPERM), resolve("socket"), 1, unix_domain);
  int ring = resolve("io_uring_setup");
  if (rc == 0 && ring >= 0) rc = rule_add(ctx, ACT_ERRNO(EPERM), ring, 0);
  int fd = rc == 0 ? memfd_create("procctl-seccomp", MFD_CLOEXEC) : -1;
  if (rc == 0 && fd < 0) rc = -errno;
  if (rc == 0) rc = export_bpf(ctx, fd);
  release(ctx);
  if (rc != 0) {
    if (fd >= 0) close(fd);
    snprintf(failure, sizeof failure, "libseccomp could not build the filter (%s)", strerror(-rc));
    return -1;
  }
  off_t len = lseek(fd, 0, SEEK_END);
  program = len > 0 ? malloc((size_t)len) : NULL;
  if (!program || pread(fd, program, (size_t)len, 0) != len) {
    close(fd);
    free(program);
    program = NULL;
    snprintf(failure, sizeof failure, "the exported filter could not be read back");
    return -1;
  }
  program_len = (size_t)len;
  close(fd);
  return 0;
}

static napi_value SeccompFilter(napi_env env, napi_callback_info info) {
  if (!program && !failure[0]) build();
  if (!program) {
    napi_throw_error(env, NULL, failure);
    return NULL;
  }
  int fd = memfd_create("procctl-seccomp", MFD_CLOEXEC);
  if (fd < 0 || write(fd, program, program_len) != (ssize_t)program_len || lseek(fd, 0, SEEK_SET) != 0) {
    int err = errno;
    if (fd >= 0) close(fd);
    char text[128];
    snprintf(text, sizeof text, "the seccomp filter could not be written to a memfd (%s)", strerror(err));
    napi_throw_error(env, NULL, text);
    return NULL;
  }
  napi_value result;
  napi_create_int32(env, fd, &result);
  return result;
}

// Called by addon.c, the module's one init.
void procctl_seccomp_init(napi_env env, napi_value exports) {
  napi_value fn;
  napi_create_function(env, "seccompFilter", NAPI_AUTO_LENGTH, SeccompFilter, NULL, &fn);
  napi_set_named_property(env, exports, "seccompFilter", fn);
}
