/*
 * V8's low-memory notification for Node: shrink the JS heap of an idle process.
 *
 * Why: V8 keeps the heap a burst of work grew. After a busy spell (a 10,000-entry PROPFIND, runs of
 * uploads) its young generation stays at 32 MiB and the old one holds its free pages, because Node,
 * unlike a browser, never tells V8 the process went idle. Isolate::LowMemoryNotification runs full
 * collections that shrink both (measured after the WebDAV bench: RSS 129 -> 81 MiB, 60-100 ms).
 * Node has no JS API for it. src/idle-reclaim.ts calls shrink() once the server has been idle a
 * moment after such a spell.
 *
 * This uses V8's C++ API, which is tied to the Node version it was built for: a build for another
 * one fails to load and treegate does without (scripts/build-native.mjs rebuilds it on a new Node).
 */
#include <node.h>

namespace {

void Shrink(const v8::FunctionCallbackInfo<v8::Value>& args) {
  args.GetIsolate()->LowMemoryNotification();
}

}  // namespace

// Context-aware, so a worker thread may load it too.
NODE_MODULE_INIT(/* exports, module, context */) {
  NODE_SET_METHOD(exports, "shrink", Shrink);
}
