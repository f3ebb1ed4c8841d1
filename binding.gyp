{
  "targets": [
    {
      "target_name": "procctl_spawn",
      "sources": ["native/spawn.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    },
    {
      "target_name": "procctl_peer",
      "sources": ["native/peer.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
