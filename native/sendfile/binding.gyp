{
  "targets": [
    {
      "target_name": "sendfile",
      "sources": ["sendfile.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "conditions": [["OS!='linux'", {"type": "none"}]]
    }
  ]
}
