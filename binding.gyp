{
  "targets": [
    {
      "target_name": "procctl",
      "sources": ["native/addon.c", "native/spawn.c", "native/peer.c", "native/notify.c"],
      "cflags": ["-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"]
    }
  ]
}
