// A network namespace's listening TCP sockets, from the kernel's socket diagnostics (netlink,
// NETLINK_SOCK_DIAG), for the ports a session listens on (src/runner/ports-read.ts). The kernel is
// asked for LISTEN sockets alone and walks only its listening table; /proc/<pid>/net/tcp and tcp6
// walk every bucket of the established table to print a few lines (262,144 buckets on a host with
// 24 GB: 4 ms a read, spent in the kernel where, on a kernel built without preemption, nothing
// on that core runs until it returns).
//
// listeningSockets(nsPath, nsInode) -> Buffer of 24-byte records, one per socket: inode (u32,
//   little-endian), family (u8: 4 or 6), a pad byte, port (u16, little-endian), address (16 bytes,
//   network order; the first 4 for IPv4). nsPath null: the calling thread's own namespace. Else
//   the namespace file (/proc/<pid>/ns/net) is opened, checked to be namespace `nsInode` (the pid
//   may be another process's by now: ESRCH if not), and joined by a thread made for the one
//   question, which ends with it, so no thread of the caller's ever leaves its own namespace.
//   Throws with errno when the kernel refuses (setns needs CAP_SYS_ADMIN; a kernel without
//   sock_diag): the caller reads /proc then.
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <node_api.h>
#include "errors.h"
#include "napi-util.h"

// TCP_LISTEN in the kernel's TCP state numbering (include/net/tcp_states.h).
#define STATE_LISTEN 10
#define RECORD 24
// A dump the kernel says changed under it (NLM_F_DUMP_INTR) is asked again, this many times at most.
#define TRIES 3

struct query {
  int ns_fd;
  uint8_t *records;
  size_t count, cap;
  int err;
};

static int put(struct query *q, const struct inet_diag_msg *m) {
  if (q->count == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 16;
    uint8_t *more = realloc(q->records, cap * RECORD);
    if (!more) return ENOMEM;
    q->records = more;
    q->cap = cap;
  }
  uint8_t *r = q->records + q->count++ * RECORD;
  memset(r, 0, RECORD);
  uint32_t inode = htole32(m->idiag_inode);
  uint16_t port = htole16(ntohs(m->id.idiag_sport));
  memcpy(r, &inode, 4);
  r[4] = m->idiag_family == AF_INET6 ? 6 : 4;
  memcpy(r + 6, &port, 2);
  memcpy(r + 8, m->id.idiag_src, m->idiag_family == AF_INET6 ? 16 : 4);
  return 0;
}

// One family's LISTEN sockets into q; 0, EAGAIN when the table changed during the dump, or an errno.
static int dump(int fd, uint8_t family, struct query *q) {
  struct {
    struct nlmsghdr nlh;
    struct inet_diag_req_v2 req;
  } msg;
  memset(&msg, 0, sizeof msg);
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  msg.req.sdiag_family = family;
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = 1u << STATE_LISTEN;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  if (sendto(fd, &msg, sizeof msg, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) return errno;
  static __thread char buf[32768] __attribute__((aligned(NLMSG_ALIGNTO)));
  int interrupted = 0;
  for (;;) {
    ssize_t got = recv(fd, buf, sizeof buf, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return errno;
    if (got == 0) return EIO;
    int len = (int)got;
    for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_flags & NLM_F_DUMP_INTR) interrupted = 1;
      if (h->nlmsg_type == NLMSG_DONE) {
        // The dump's own error, where the kernel puts one after DONE.
        int err = h->nlmsg_len >= NLMSG_LENGTH(sizeof(int)) ? *(const int *)NLMSG_DATA(h) : 0;
        return err < 0 ? -err : interrupted ? EAGAIN : 0;
      }
      if (h->nlmsg_type == NLMSG_ERROR) {
        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) return EIO;
        const struct nlmsgerr *e = NLMSG_DATA(h);
        return e->error ? -e->error : EIO;
      }
      if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg))) continue;
      const struct inet_diag_msg *m = NLMSG_DATA(h);
      // /proc leaves out a socket with no inode the same way (ports-read.ts listenRows).
      if (m->idiag_inode == 0) continue;
      int err = put(q, m);
      if (err) return err;
    }
  }
}

static void ask(struct query *q) {
  for (int tries = 0; tries < TRIES; tries++) {
    int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0) {
      q->err = errno;
      return;
    }
    q->count = 0;
    q->err = dump(fd, AF_INET, q);
    if (!q->err) q->err = dump(fd, AF_INET6, q);
    close(fd);
    if (q->err != EAGAIN) return;
  }
}

static void *ask_in_namespace(void *arg) {
  struct query *q = arg;
  // This thread alone joins it, and ends.
  if (setns(q->ns_fd, CLONE_NEWNET) != 0) q->err = errno;
  else ask(q);
  return NULL;
}

static napi_value ListeningSockets(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value args[2];
  napi_valuetype type = napi_undefined;
  double expect_inode = 0;
  if (napi_get_cb_info(env, info, &argc, args, NULL, NULL) != napi_ok || argc < 1 || napi_typeof(env, args[0], &type) != napi_ok ||
      (type != napi_null && type != napi_string) || (type == napi_string && (argc < 2 || napi_get_value_double(env, args[1], &expect_inode) != napi_ok))) {
    return procctl_throw_usage(env, "listeningSockets(nsPath: string | null, nsInode?: number): nsInode with a path");
  }
  napi_value arg = args[0];
  struct query q = {.ns_fd = -1};
  if (type == napi_null) ask(&q);
  else {
    char *path = procctl_c_string(env, arg);
    if (!path) return procctl_throw_usage(env, "listeningSockets(nsPath): a path without NUL bytes");
    q.ns_fd = open(path, O_RDONLY | O_CLOEXEC);
    int err = errno;
    free(path);
    if (q.ns_fd < 0) return procctl_throw_errno(env, err, "open of a network namespace");
    struct stat st;
    if (fstat(q.ns_fd, &st) != 0 || (double)st.st_ino != expect_inode) {
      close(q.ns_fd);
      return procctl_throw_errno(env, ESRCH, "a network namespace other than the one asked for (its process is gone)");
    }
    pthread_t t;
    int made = pthread_create(&t, NULL, ask_in_namespace, &q);
    if (made != 0) q.err = made;
    else pthread_join(t, NULL);
    close(q.ns_fd);
  }
  if (q.err) {
    free(q.records);
    return procctl_throw_errno(env, q.err, "sock_diag of listening TCP sockets");
  }
  napi_value out;
  napi_status s = napi_create_buffer_copy(env, q.count * RECORD, q.records ? (const void *)q.records : (const void *)"", NULL, &out);
  free(q.records);
  if (s != napi_ok) return procctl_throw_errno(env, ENOMEM, "a buffer for the sockets");
  return out;
}

// Called by addon.c, the module's one init.
void procctl_sockdiag_init(napi_env env, napi_value exports) {
  procctl_export(env, exports, "listeningSockets", ListeningSockets);
}
