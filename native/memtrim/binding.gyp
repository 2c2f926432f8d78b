{
  "targets": [
    {
      "target_name": "memtrim",
      "sources": ["memtrim.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "conditions": [["OS!='linux'", {"type": "none"}]]
    }
  ]
}
