{
  "targets": [
    {
      "target_name": "sendfile",
      "sources": ["sendfile.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "defines": ["_FILE_OFFSET_BITS=64"],
      "conditions": [["OS!='linux'", {"type": "none"}]]
    }
  ]
}
