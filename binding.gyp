{
  "targets": [
    {
      "target_name": "procctl",
      "sources": ["native/addon.c", "native/spawn.c", "native/peer.c", "native/notify.c", "native/channel.c", "native/seccomp.c", "native/relay.c", "native/xattr.c", "native/exec.c", "native/terminal.c", "native/keep.c", "native/pidfd.c", "native/handle.c", "native/splice.c", "native/tap.c", "native/sched.c", "native/dirwatch.c", "native/sockdiag.c", "native/copyat.c"],
      "libraries": ["-ldl"],
      "defines": ["PROCCTL_SOURCE_HASH=\"<!(node native/source-hash.cjs)\""],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
