{
  "targets": [
    {
      "target_name": "linkfd",
      "sources": ["linkfd.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "conditions": [["OS!='linux'", {"type": "none"}]]
    }
  ]
}
