{
  "targets": [
    {
      "target_name": "heapshrink",
      "sources": ["heapshrink.cc"],
      "cflags_cc": ["-O2", "-Wall", "-Wextra", "-Wno-cast-function-type"],
      "conditions": [["OS!='linux'", {"type": "none"}]]
    }
  ]
}
