// Descriptors passed over a Unix socket (SCM_RIGHTS): the control message's layout in one place,
// for the session channels (channel.c) and the guardian's copies of a session's ends (keep.c).
#ifndef PROCCTL_FDPASS_H
#define PROCCTL_FDPASS_H

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>

/* A Unix socket pair of `type` (close-on-exec) as a JavaScript [ours, theirs]; throws and returns NULL on failure. */
napi_value procctl_socket_pair(napi_env env, int type);

/* Descriptors in one message, at most. */
#define FDPASS_MAX 16

/* Send `len` bytes of `data` and `nfds` descriptors (<= FDPASS_MAX) as one message, never blocking. */
static inline ssize_t fdpass_send(int sock, const void *data, size_t len, const int *fds, size_t nfds) {
  struct iovec iov = {(void *)data, len};
  union {
    char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
    struct cmsghdr align;
  } control;
  memset(&control, 0, sizeof control);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  if (nfds > 0) {
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  return n;
}

/*
 * Receive one message, never blocking: up to `len` bytes into `data`, its descriptors (close-on-exec)
 * into `fds`, how many in *nfds. Descriptors past FDPASS_MAX are closed by the kernel (MSG_CTRUNC).
 * Returns recvmsg's result (-1 with errno, EAGAIN when nothing waits).
 */
static inline ssize_t fdpass_receive(int sock, void *data, size_t len, int fds[FDPASS_MAX], size_t *nfds) {
  struct iovec iov = {data, len};
  union {
    char buf[CMSG_SPACE(sizeof(int) * FDPASS_MAX)];
    struct cmsghdr align;
  } control;
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf};
  ssize_t n;
  do n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  *nfds = 0;
  if (n < 0) return n;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm; cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      if (*nfds < FDPASS_MAX) fds[(*nfds)++] = fd;
      else close(fd);
    }
  }
  return n;
}

#endif
