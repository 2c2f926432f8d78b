/*
 * Zero-copy file-to-socket transfer for HTTP bodies: sendfile(2) driven by the Node event loop.
 *
 * Why: a Node server copies every byte of a download twice through user space (read into a
 * buffer, write from it); nginx hands the kernel the file and the socket instead. Measured on a
 * 1 GiB GET on loopback, the bare node:http floor reaches about 0.53x nginx, and only this closes
 * the gap. Nothing here blocks: the socket is watched for writability with a uv_poll handle on the
 * event loop, as the socket itself is.
 *
 * Safety: the poll and every sendfile use our own dup() of the socket, so the connection's file
 * descriptor number can never be closed by Node and reused by another connection while bytes are
 * still being sent to it. The file descriptor is borrowed: the caller keeps it open until the
 * callback. The callback runs exactly once, after our dup is closed: callback(errno, bytesSent),
 * errno 0 on success, ECANCELED after cancel(), ENODATA when the file ended early.
 */
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

/* Bytes sent per writability event before yielding to the rest of the event loop: a fast reader
 * must not starve other connections. The poll is level-triggered, so it fires again at once. */
#define BUDGET (8 << 20)

typedef struct {
  uv_poll_t poll;
  napi_env env;
  napi_ref callback;
  napi_async_context async;
  int sock; /* our dup of the socket */
  int file; /* borrowed */
  int64_t offset;
  int64_t remaining;
  int64_t sent;
  int err;
  int finishing; /* finish() has run: the poll is stopping */
  int closed;    /* the poll handle is closed and the callback has run */
  int released;  /* JS no longer holds the handle */
} Transfer;

static void maybe_free(Transfer* t) {
  if (t->closed && t->released) free(t);
}

static void on_closed(uv_handle_t* h) {
  Transfer* t = (Transfer*)h->data;
  close(t->sock);
  napi_env env = t->env;
  napi_handle_scope scope;
  napi_open_handle_scope(env, &scope);
  napi_value cb, recv, argv[2], result;
  napi_get_reference_value(env, t->callback, &cb);
  napi_get_global(env, &recv); /* napi_make_callback needs an object receiver */
  napi_create_int32(env, t->err, &argv[0]);
  napi_create_int64(env, t->sent, &argv[1]);
  if (napi_make_callback(env, t->async, recv, cb, 2, argv, &result) == napi_pending_exception) {
    napi_value exc;
    napi_get_and_clear_last_exception(env, &exc);
    napi_fatal_exception(env, exc);
  }
  napi_close_handle_scope(env, scope);
  napi_delete_reference(env, t->callback);
  napi_async_destroy(env, t->async);
  t->closed = 1;
  maybe_free(t);
}

static void finish(Transfer* t, int err) {
  if (t->finishing) return;
  t->finishing = 1;
  t->err = err;
  uv_poll_stop(&t->poll);
  uv_close((uv_handle_t*)&t->poll, on_closed);
}

static void on_writable(uv_poll_t* h, int status, int events) {
  (void)events;
  Transfer* t = (Transfer*)h->data;
  if (t->finishing) return;
  if (status < 0) {
    /* libuv reports any POLLERR as UV_EBADF: the socket itself knows the real error (a reset). */
    int err = 0;
    socklen_t len = sizeof err;
    if (status == UV_EBADF && getsockopt(t->sock, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) return finish(t, err);
    return finish(t, -status); /* libuv's codes are negated errnos on Unix */
  }
  int64_t budget = BUDGET;
  while (t->remaining > 0 && budget > 0) {
    size_t n = (size_t)(t->remaining < budget ? t->remaining : budget);
    off_t off = (off_t)t->offset;
    ssize_t w = sendfile(t->sock, t->file, &off, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return; /* wait for the next writability */
      return finish(t, errno);
    }
    if (w == 0) return finish(t, ENODATA); /* the file is shorter than it was said to be */
    t->offset += w;
    t->remaining -= w;
    t->sent += w;
    budget -= w;
  }
  if (t->remaining == 0) finish(t, 0);
}

static void on_release(napi_env env, void* data, void* hint) {
  (void)env;
  (void)hint;
  Transfer* t = (Transfer*)data;
  t->released = 1;
  maybe_free(t);
}

static napi_value throw_errno(napi_env env, const char* what, int err) {
  char msg[128];
  snprintf(msg, sizeof msg, "%s failed: errno %d", what, err);
  napi_throw_error(env, "ERR_SENDFILE", msg);
  return NULL;
}

/* start(socketFd, fileFd, offset, count, callback) -> handle for cancel() */
static napi_value start(napi_env env, napi_callback_info info) {
  size_t argc = 5;
  napi_value argv[5];
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  int32_t sockFd, fileFd;
  int64_t offset, count;
  napi_valuetype cbType;
  if (argc < 5 || napi_get_value_int32(env, argv[0], &sockFd) != napi_ok || napi_get_value_int32(env, argv[1], &fileFd) != napi_ok ||
      napi_get_value_int64(env, argv[2], &offset) != napi_ok || napi_get_value_int64(env, argv[3], &count) != napi_ok ||
      napi_typeof(env, argv[4], &cbType) != napi_ok || cbType != napi_function || sockFd < 0 || fileFd < 0 || offset < 0 || count <= 0) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "start(socketFd, fileFd, offset, count > 0, callback)");
    return NULL;
  }
  uv_loop_t* loop;
  if (napi_get_uv_event_loop(env, &loop) != napi_ok) return throw_errno(env, "napi_get_uv_event_loop", 0);
  int dup = fcntl(sockFd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return throw_errno(env, "dup", errno);
  Transfer* t = (Transfer*)calloc(1, sizeof *t);
  if (!t) {
    close(dup);
    return throw_errno(env, "calloc", ENOMEM);
  }
  int r = uv_poll_init(loop, &t->poll, dup);
  if (r < 0) {
    close(dup);
    free(t);
    return throw_errno(env, "uv_poll_init", -r);
  }
  t->poll.data = t;
  t->env = env;
  t->sock = dup;
  t->file = fileFd;
  t->offset = offset;
  t->remaining = count;
  napi_value name, handle;
  napi_create_reference(env, argv[4], 1, &t->callback);
  napi_create_string_utf8(env, "treegate.sendfile", NAPI_AUTO_LENGTH, &name);
  napi_async_init(env, NULL, name, &t->async);
  napi_create_external(env, t, on_release, NULL, &handle);
  r = uv_poll_start(&t->poll, UV_WRITABLE, on_writable);
  if (r < 0) finish(t, -r); /* reported through the callback, like every other failure */
  return handle;
}

/* cancel(handle): stop sending; the callback reports ECANCELED (unless it already finished). */
static napi_value cancel(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  void* data = NULL;
  napi_get_cb_info(env, info, &argc, argv, NULL, NULL);
  if (argc < 1 || napi_get_value_external(env, argv[0], &data) != napi_ok || !data) {
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", "cancel(handle)");
    return NULL;
  }
  finish((Transfer*)data, ECANCELED);
  return NULL;
}

static napi_value init(napi_env env, napi_value exports) {
  napi_property_descriptor props[] = {
      {"start", NULL, start, NULL, NULL, NULL, napi_default, NULL},
      {"cancel", NULL, cancel, NULL, NULL, NULL, napi_default, NULL},
  };
  napi_define_properties(env, exports, 2, props);
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
