/* npu: the CPython extension module of libnpu (docs/python.md).
 *
 * One C file over libnpu's public API (npu.h), linked with libnpu's static archive so the
 * installed module needs nothing but the Python runtime, NumPy and jansson. Every call that
 * may wait for npud runs with the GIL released; the Context's read-write lock keeps close()
 * from pulling the connection out from under a call another thread is still making.
 *
 * Objects: Context (a connection), Graph (a loaded model), DeviceArray (device memory with
 * a dtype and shape), HostRegion (a host region, shared with npud, seen through the buffer
 * protocol), Stream, Event, DeviceInfo (a struct sequence) and the Error hierarchy. Handles
 * hold a reference to their Context; they give their npud object back when collected,
 * unless the Context was closed (npud released everything then). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <npu.h>

PyMODINIT_FUNC PyInit_npu(void);

#define ALIGN64(x) (((x) + 63u) & ~(uint64_t)63u)
#define MAX_IO 64 /* tensors of one run this module binds at most */

/* ------------------------------------------------------------------ errors */

static PyObject *npu_Error;
static PyObject *err_class[NPU_ERR_SYSTEM + 1];

static const struct {
        int status;
        const char *name;
        const char *doc;
} err_names[] = {
        { NPU_ERR_INVALID, "InvalidError", "An argument was refused (NPU_ERR_INVALID)." },
        { NPU_ERR_BAD_HANDLE, "BadHandleError", "Unknown or released handle (NPU_ERR_BAD_HANDLE)." },
        { NPU_ERR_NO_MEMORY, "NoMemoryError", "Device memory exhausted (NPU_ERR_NO_MEMORY)." },
        { NPU_ERR_QUOTA, "QuotaError", "Over the tenant's quota (NPU_ERR_QUOTA)." },
        { NPU_ERR_LIMIT, "LimitError", "Over a session or tenant limit (NPU_ERR_LIMIT)." },
        { NPU_ERR_PERMISSION, "PermissionDeniedError", "Refused by npud's policy (NPU_ERR_PERMISSION)." },
        { NPU_ERR_UNSUPPORTED, "UnsupportedError", "Not supported (NPU_ERR_UNSUPPORTED)." },
        { NPU_ERR_SHAPE, "ShapeError", "Dtype or shape mismatch (NPU_ERR_SHAPE)." },
        { NPU_ERR_OUT_OF_RANGE, "OutOfRangeError", "Index or offset out of range (NPU_ERR_OUT_OF_RANGE)." },
        { NPU_ERR_PROTOCOL, "ProtocolError", "Malformed exchange with npud (NPU_ERR_PROTOCOL)." },
        { NPU_ERR_VERSION, "VersionError", "npud speaks another protocol version (NPU_ERR_VERSION)." },
        { NPU_ERR_DEVICE, "DeviceError", "The device failed (NPU_ERR_DEVICE)." },
        { NPU_ERR_EXEC, "ExecError", "A task failed while it ran (NPU_ERR_EXEC)." },
        { NPU_ERR_BUSY, "BusyError", "Busy; retry later (NPU_ERR_BUSY)." },
        { NPU_ERR_NOT_READY, "NotReadyError", "Not finished yet (NPU_ERR_NOT_READY)." },
        { NPU_ERR_CANCELLED, "CancelledError", "The task was cancelled (NPU_ERR_CANCELLED)." },
        { NPU_ERR_CONNECTION, "ConnectionLostError", "No connection to npud (NPU_ERR_CONNECTION)." },
        { NPU_ERR_SYSTEM, "SystemCallError", "A system call failed (NPU_ERR_SYSTEM)." },
};

/* Raises the class of `st` with (status, message, task) as its args and attributes. */
static PyObject *raise_status(npu_status_t st, const char *message, uint64_t task)
{
        PyObject *cls = (st > 0 && st <= NPU_ERR_SYSTEM && err_class[st]) ? err_class[st] : npu_Error;
        PyObject *text, *exc;

        text = PyUnicode_FromFormat("%s: %s", npu_strerror(st), message && *message ? message : npu_strerror(st));
        if (!text)
                return NULL;
        exc = PyObject_CallFunction(cls, "O", text);
        Py_DECREF(text);
        if (!exc)
                return NULL;
        {
                const char *m = message ? message : "";
                PyObject *vals[3] = { PyLong_FromLong(st), PyUnicode_DecodeUTF8(m, (Py_ssize_t)strlen(m), "replace"),
                                      PyLong_FromUnsignedLongLong(task) };
                const char *keys[3] = { "status", "message", "task" };
                int bad = 0;
                for (int i = 0; i < 3; i++) {
                        if (!vals[i] || PyObject_SetAttrString(exc, keys[i], vals[i]) < 0)
                                bad = 1;
                        Py_XDECREF(vals[i]);
                }
                if (bad) {
                        Py_DECREF(exc);
                        return NULL;
                }
        }
        PyErr_SetObject(cls, exc);
        Py_DECREF(exc);
        return NULL;
}

/* The last failure of this thread (npu_error_message and npu_error_task are per thread, and
 * the GIL hand-over does not change threads). */
static PyObject *raise_last(npu_status_t st)
{
        return raise_status(st, npu_error_message(), npu_error_task());
}

/* ------------------------------------------------------------------ dtypes */

/* npu dtype of a NumPy dtype, 0 for none. */
static int npu_dtype_of(PyArray_Descr *d)
{
        switch (d->kind) {
        case 'f':
                return d->elsize == 4 ? NPU_FLOAT32 : d->elsize == 8 ? NPU_FLOAT64 : d->elsize == 2 ? NPU_FLOAT16 : 0;
        case 'i':
                return d->elsize == 1 ? NPU_INT8 : d->elsize == 2 ? NPU_INT16 : d->elsize == 4 ? NPU_INT32
                     : d->elsize == 8 ? NPU_INT64 : 0;
        case 'u':
                return d->elsize == 1 ? NPU_UINT8 : d->elsize == 2 ? NPU_UINT16 : d->elsize == 4 ? NPU_UINT32
                     : d->elsize == 8 ? NPU_UINT64 : 0;
        case 'b':
                return d->elsize == 1 ? NPU_BOOL : 0;
        }
        return 0;
}

/* NumPy type number of an npu dtype, -1 for none (bfloat16 has no NumPy type). */
static int np_type_of(int dt)
{
        switch (dt) {
        case NPU_FLOAT32: return NPY_FLOAT32;
        case NPU_FLOAT64: return NPY_FLOAT64;
        case NPU_FLOAT16: return NPY_FLOAT16;
        case NPU_INT8: return NPY_INT8;
        case NPU_INT16: return NPY_INT16;
        case NPU_INT32: return NPY_INT32;
        case NPU_INT64: return NPY_INT64;
        case NPU_UINT8: return NPY_UINT8;
        case NPU_UINT16: return NPY_UINT16;
        case NPU_UINT32: return NPY_UINT32;
        case NPU_UINT64: return NPY_UINT64;
        case NPU_BOOL: return NPY_BOOL;
        }
        return -1;
}

/* A dtype argument: anything np.dtype() accepts. Returns the npu dtype, 0 with an exception. */
static int dtype_arg(PyObject *obj, PyArray_Descr **ret_descr)
{
        PyArray_Descr *d = NULL;
        int dt;

        if (!PyArray_DescrConverter(obj, &d))
                return 0;
        dt = npu_dtype_of(d);
        if (!dt) {
                PyErr_Format(PyExc_TypeError, "npu: dtype %R has no npu element type", (PyObject *)d);
                Py_DECREF(d);
                return 0;
        }
        if (ret_descr)
                *ret_descr = d;
        else
                Py_DECREF(d);
        return dt;
}

/* A shape argument: an int or a sequence of at most NPU_MAX_DIMS non-negative ints. */
static int shape_arg(PyObject *obj, int *ret_ndim, int64_t *dims)
{
        PyObject *seq;
        Py_ssize_t n;

        if (PyLong_Check(obj)) {
                long long v = PyLong_AsLongLong(obj);
                if (v == -1 && PyErr_Occurred())
                        return -1;
                if (v < 0) {
                        PyErr_SetString(PyExc_ValueError, "npu: negative dimension in shape");
                        return -1;
                }
                *ret_ndim = 1;
                dims[0] = v;
                return 0;
        }
        seq = PySequence_Fast(obj, "npu: shape must be an int or a sequence of ints");
        if (!seq)
                return -1;
        n = PySequence_Fast_GET_SIZE(seq);
        if (n > NPU_MAX_DIMS) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "npu: shape has %zd dimensions (at most %d)", n, NPU_MAX_DIMS);
                return -1;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
                long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
                if (v == -1 && PyErr_Occurred()) {
                        Py_DECREF(seq);
                        return -1;
                }
                if (v < 0 || v > (1ll << 40)) {
                        Py_DECREF(seq);
                        PyErr_Format(PyExc_ValueError, "npu: dimension %zd of shape is %lld", i, v);
                        return -1;
                }
                dims[i] = v;
        }
        Py_DECREF(seq);
        *ret_ndim = (int)n;
        return 0;
}

static PyObject *dtype_object(int dt)
{
        int t = np_type_of(dt);

        if (dt == 0)
                Py_RETURN_NONE;
        if (t < 0)
                return PyUnicode_FromString(dt == NPU_BFLOAT16 ? "bfloat16" : "unknown");
        return (PyObject *)PyArray_DescrFromType(t);
}

static PyObject *shape_tuple(int ndim, const int64_t *dims)
{
        PyObject *t;

        if (ndim < 0)
                Py_RETURN_NONE;
        t = PyTuple_New(ndim);
        for (int i = 0; t && i < ndim; i++) {
                PyObject *v = dims[i] < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(dims[i]);
                if (!v) {
                        Py_DECREF(t);
                        return NULL;
                }
                PyTuple_SET_ITEM(t, i, v);
        }
        return t;
}

/* ------------------------------------------------------------------ Context */

typedef struct {
        PyObject_HEAD
        npu_context_t *ctx;          /* NULL once closed */
        pthread_rwlock_t lock;       /* calls hold it shared; close() exclusively */
        int closing;                 /* close() began: new calls fail (the lock prefers readers,
                                        so without it a stream of calls would starve close) */
        Py_ssize_t exports;          /* buffer-protocol views of host regions alive */
        npu_stream_t default_stream[16]; /* per device, made at first need */
        int has_default[16];
        int cfd;                     /* completion fd, -1 before the first run_async */
        PyObject *pending;           /* dict: notify tag -> AsyncRun */
        PyObject *reader_loop;       /* the event loop the fd is registered with */
        uint64_t next_tag;
        PyObject *weakrefs;
} ContextObject;

static PyTypeObject Context_Type;

/* Enter a call on the context: NULL (exception set) when closed. Leave with ctx_leave. */
static npu_context_t *ctx_enter(ContextObject *c)
{
        if (__atomic_load_n(&c->closing, __ATOMIC_ACQUIRE)) {
                raise_status(NPU_ERR_CONNECTION, "the context is closed", 0);
                return NULL;
        }
        pthread_rwlock_rdlock(&c->lock);
        if (!c->ctx) {
                pthread_rwlock_unlock(&c->lock);
                raise_status(NPU_ERR_CONNECTION, "the context is closed", 0);
                return NULL;
        }
        return c->ctx;
}

static void ctx_leave(ContextObject *c)
{
        pthread_rwlock_unlock(&c->lock);
}

/* The context's default stream on a device (under ctx_enter): operations given no stream
 * run there, in submission order. */
static npu_status_t ctx_default_stream(ContextObject *c, int device, npu_stream_t *ret)
{
        npu_status_t st = NPU_OK;

        if (device < 0 || device >= 16)
                return NPU_ERR_INVALID;
        if (!__atomic_load_n(&c->has_default[device], __ATOMIC_ACQUIRE)) {
                npu_stream_t s;
                Py_BEGIN_ALLOW_THREADS
                st = npu_stream_create(c->ctx, device, 4, &s);
                Py_END_ALLOW_THREADS
                if (st != NPU_OK)
                        return st;
                if (__atomic_load_n(&c->has_default[device], __ATOMIC_ACQUIRE)) { /* another thread won */
                        Py_BEGIN_ALLOW_THREADS
                        npu_stream_destroy(c->ctx, s);
                        Py_END_ALLOW_THREADS
                } else {
                        c->default_stream[device] = s;
                        __atomic_store_n(&c->has_default[device], 1, __ATOMIC_RELEASE);
                }
        }
        *ret = c->default_stream[device];
        return NPU_OK;
}

static void fail_pending(ContextObject *c, const char *why);

static PyObject *Context_close(ContextObject *c, PyObject *unused)
{
        npu_context_t *ctx;

        if (c->exports > 0)
                return raise_status(NPU_ERR_BUSY, "close: host regions are still viewed through the buffer "
                                    "protocol (release those arrays and memoryviews first)", 0);
        if (c->pending && PyDict_Size(c->pending) > 0)
                fail_pending(c, "close: the context was closed while the run was in flight");
        if (c->reader_loop) {
                PyObject *r = PyObject_CallMethod(c->reader_loop, "remove_reader", "i", c->cfd);
                Py_XDECREF(r);
                PyErr_Clear(); /* a closed loop: nothing to remove */
                Py_CLEAR(c->reader_loop);
        }
        __atomic_store_n(&c->closing, 1, __ATOMIC_RELEASE);
        Py_BEGIN_ALLOW_THREADS
        pthread_rwlock_wrlock(&c->lock);
        ctx = c->ctx;
        c->ctx = NULL;
        pthread_rwlock_unlock(&c->lock);
        if (ctx)
                npu_disconnect(ctx);
        Py_END_ALLOW_THREADS
        Py_RETURN_NONE;
}

static PyObject *Context_enter(PyObject *self, PyObject *unused)
{
        return Py_NewRef(self);
}

static PyObject *Context_exit(PyObject *self, PyObject *args)
{
        PyObject *r = Context_close((ContextObject *)self, NULL);
        if (!r)
                return NULL;
        Py_DECREF(r);
        Py_RETURN_FALSE;
}

static void Context_dealloc(ContextObject *c)
{
        PyObject_GC_UnTrack(c);
        if (c->weakrefs)
                PyObject_ClearWeakRefs((PyObject *)c);
        Py_CLEAR(c->pending);
        Py_CLEAR(c->reader_loop);
        if (c->ctx) {
                npu_context_t *ctx = c->ctx;
                c->ctx = NULL;
                Py_BEGIN_ALLOW_THREADS
                npu_disconnect(ctx);
                Py_END_ALLOW_THREADS
        }
        pthread_rwlock_destroy(&c->lock);
        Py_TYPE(c)->tp_free((PyObject *)c);
}

static int Context_traverse(ContextObject *c, visitproc visit, void *arg)
{
        Py_VISIT(c->pending);
        Py_VISIT(c->reader_loop);
        return 0;
}

static int Context_clear(ContextObject *c)
{
        Py_CLEAR(c->pending);
        Py_CLEAR(c->reader_loop);
        return 0;
}

static PyObject *npu_connect_py(PyObject *mod, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "socket", "tenant", "backpressure", "wait_spin_us", NULL };
        PyObject *sock_obj = Py_None, *sock_bytes = NULL;
        const char *tenant = NULL, *bp = "block";
        npu_connect_options_t o = { .size = sizeof(o) };
        npu_context_t *ctx = NULL;
        ContextObject *c;
        npu_status_t st;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "|Ozsi:connect", kwlist, &sock_obj, &tenant, &bp,
                                         &o.wait_spin_us))
                return NULL;
        if (strcmp(bp, "block") == 0)
                o.backpressure = NPU_BACKPRESSURE_BLOCK;
        else if (strcmp(bp, "error") == 0)
                o.backpressure = NPU_BACKPRESSURE_ERROR;
        else {
                PyErr_Format(PyExc_ValueError, "connect: backpressure must be 'block' or 'error', not '%s'", bp);
                return NULL;
        }
        if (sock_obj != Py_None) {
                if (!PyUnicode_FSConverter(sock_obj, &sock_bytes))
                        return NULL;
                o.socket = PyBytes_AS_STRING(sock_bytes);
        }
        o.tenant = tenant;
        Py_BEGIN_ALLOW_THREADS
        st = npu_connect_with(&o, &ctx);
        Py_END_ALLOW_THREADS
        Py_XDECREF(sock_bytes);
        if (st != NPU_OK)
                return raise_last(st);
        c = PyObject_GC_New(ContextObject, &Context_Type);
        if (!c) {
                npu_disconnect(ctx);
                return NULL;
        }
        c->ctx = ctx;
        pthread_rwlock_init(&c->lock, NULL);
        c->exports = 0;
        c->closing = 0;
        memset(c->has_default, 0, sizeof(c->has_default));
        c->cfd = -1;
        c->pending = NULL;
        c->reader_loop = NULL;
        c->next_tag = 1;
        c->weakrefs = NULL;
        PyObject_GC_Track(c);
        return (PyObject *)c;
}

static PyObject *Context_get_tenant(ContextObject *c, void *unused)
{
        PyObject *r;

        if (!ctx_enter(c))
                return NULL;
        r = PyUnicode_FromString(npu_tenant(c->ctx));
        ctx_leave(c);
        return r;
}

static PyObject *Context_get_closed(ContextObject *c, void *unused)
{
        return PyBool_FromLong(c->ctx == NULL);
}

/* DeviceInfo: a struct sequence. */
static PyTypeObject *DeviceInfo_Type;
static PyStructSequence_Field devinfo_fields[] = {
        { "id", "device number" },
        { "name", "device name" },
        { "profile", "simulated profile or hardware kind" },
        { "health", "'ok', 'failed' or 'resetting'" },
        { "memory_total", "bytes of device memory" },
        { "memory_used", "bytes in use" },
        { "cube_cores", NULL },
        { "vector_cores", NULL },
        { "aicpu_cores", NULL },
        { NULL, NULL },
};
static PyStructSequence_Desc devinfo_desc = { "npu.DeviceInfo", "One device of npud.", devinfo_fields, 9 };

static PyObject *Context_devices(ContextObject *c, PyObject *unused)
{
        npu_device_info_t info[64];
        npu_status_t st;
        int n = 0;
        PyObject *list;

        if (!ctx_enter(c))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_device_count(c->ctx, &n);
        if (n > 64)
                n = 64;
        for (int i = 0; st == NPU_OK && i < n; i++) {
                info[i].size = sizeof(info[i]);
                st = npu_device_get_info(c->ctx, i, &info[i]);
        }
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                return raise_last(st);
        list = PyList_New(n);
        for (int i = 0; list && i < n; i++) {
                PyObject *d = PyStructSequence_New(DeviceInfo_Type);
                if (!d) {
                        Py_CLEAR(list);
                        break;
                }
                PyStructSequence_SET_ITEM(d, 0, PyLong_FromLong(info[i].id));
                PyStructSequence_SET_ITEM(d, 1, PyUnicode_DecodeUTF8(info[i].name, (Py_ssize_t)strnlen(info[i].name, 32), "replace"));
                PyStructSequence_SET_ITEM(d, 2, PyUnicode_DecodeUTF8(info[i].profile, (Py_ssize_t)strnlen(info[i].profile, 16), "replace"));
                PyStructSequence_SET_ITEM(d, 3, PyUnicode_DecodeUTF8(info[i].health, (Py_ssize_t)strnlen(info[i].health, 16), "replace"));
                PyStructSequence_SET_ITEM(d, 4, PyLong_FromUnsignedLongLong(info[i].memory_total));
                PyStructSequence_SET_ITEM(d, 5, PyLong_FromUnsignedLongLong(info[i].memory_used));
                PyStructSequence_SET_ITEM(d, 6, PyLong_FromLong(info[i].cube_cores));
                PyStructSequence_SET_ITEM(d, 7, PyLong_FromLong(info[i].vector_cores));
                PyStructSequence_SET_ITEM(d, 8, PyLong_FromLong(info[i].aicpu_cores));
                for (int k = 0; k < 9; k++)
                        if (!PyStructSequence_GET_ITEM(d, k)) {
                                Py_DECREF(d);
                                Py_CLEAR(list);
                                return NULL;
                        }
                PyList_SET_ITEM(list, i, d);
        }
        return list;
}

static PyObject *Context_ping(ContextObject *c, PyObject *unused)
{
        npu_status_t st;

        if (!ctx_enter(c))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_ping(c->ctx);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *Context_synchronize(ContextObject *c, PyObject *unused)
{
        npu_status_t st;

        if (!ctx_enter(c))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_synchronize(c->ctx);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *Context_admin(ContextObject *c, PyObject *args)
{
        const char *method, *params = NULL;
        char *json = NULL;
        npu_status_t st;
        PyObject *r;

        if (!PyArg_ParseTuple(args, "s|z:admin", &method, &params))
                return NULL;
        if (!ctx_enter(c))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_admin_call(c->ctx, method, params, &json);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                return raise_last(st);
        r = PyUnicode_DecodeUTF8(json, (Py_ssize_t)strlen(json), "replace");
        free(json);
        return r;
}

/* ------------------------------------------------------------------ DeviceArray */

typedef struct {
        PyObject_HEAD
        ContextObject *ctx;
        npu_buffer_t buf;
        int device;
        int dtype;
        int ndim;
        int64_t dims[NPU_MAX_DIMS];
        uint64_t nbytes;
        int freed;
} DeviceArrayObject;

static PyTypeObject DeviceArray_Type;

static uint64_t elem_size(int dt)
{
        switch (dt) {
        case NPU_UINT8: case NPU_INT8: case NPU_BOOL: return 1;
        case NPU_UINT16: case NPU_INT16: case NPU_FLOAT16: case NPU_BFLOAT16: return 2;
        case NPU_FLOAT32: case NPU_INT32: case NPU_UINT32: return 4;
        default: return 8;
        }
}

static uint64_t tensor_nbytes(int dtype, int ndim, const int64_t *dims)
{
        uint64_t n = elem_size(dtype);

        for (int i = 0; i < ndim; i++) {
                if (dims[i] && n > UINT64_MAX / (uint64_t)dims[i])
                        return UINT64_MAX;
                n *= (uint64_t)dims[i];
        }
        return n;
}

static void DeviceArray_dealloc(DeviceArrayObject *a)
{
        if (!a->freed && a->ctx) {
                pthread_rwlock_rdlock(&a->ctx->lock);
                if (a->ctx->ctx) {
                        npu_context_t *ctx = a->ctx->ctx;
                        npu_buffer_t b = a->buf;
                        Py_BEGIN_ALLOW_THREADS
                        npu_free(ctx, b);
                        Py_END_ALLOW_THREADS
                }
                pthread_rwlock_unlock(&a->ctx->lock);
        }
        Py_CLEAR(a->ctx);
        Py_TYPE(a)->tp_free((PyObject *)a);
}

static DeviceArrayObject *device_array_new(ContextObject *c, int device, int dtype, int ndim, const int64_t *dims)
{
        DeviceArrayObject *a;
        npu_status_t st;
        uint64_t n = tensor_nbytes(dtype, ndim, dims);

        if (n == UINT64_MAX || n > (1ull << 48)) {
                PyErr_SetString(PyExc_ValueError, "npu: array too large");
                return NULL;
        }
        a = PyObject_New(DeviceArrayObject, &DeviceArray_Type);
        if (!a)
                return NULL;
        a->ctx = NULL;
        a->freed = 1;
        a->device = device;
        a->dtype = dtype;
        a->ndim = ndim;
        memset(a->dims, 0, sizeof(a->dims));
        memcpy(a->dims, dims, sizeof(int64_t) * (size_t)ndim);
        a->nbytes = n;
        if (!ctx_enter(c)) {
                Py_DECREF(a);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = npu_malloc(c->ctx, device, n ? n : 1, &a->buf);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK) {
                Py_DECREF(a);
                return (DeviceArrayObject *)raise_last(st);
        }
        a->freed = 0;
        a->ctx = (ContextObject *)Py_NewRef(c);
        return a;
}

static PyObject *Context_empty(ContextObject *c, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "shape", "dtype", "device", NULL };
        PyObject *shape, *dtobj = NULL;
        int device = 0, ndim, dt = NPU_FLOAT32;
        int64_t dims[NPU_MAX_DIMS];

        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|Oi:empty", kwlist, &shape, &dtobj, &device))
                return NULL;
        if (shape_arg(shape, &ndim, dims) < 0)
                return NULL;
        if (dtobj && dtobj != Py_None && !(dt = dtype_arg(dtobj, NULL)))
                return NULL;
        return (PyObject *)device_array_new(c, device, dt, ndim, dims);
}

/* A C-contiguous, aligned ndarray of obj (new reference); dt: the npu dtype to convert a
 * non-array to, 0 to keep what NumPy picks. */
static PyArrayObject *as_array(PyObject *obj, int dt)
{
        PyArray_Descr *d = NULL;

        if (!PyArray_Check(obj) && dt > 0 && np_type_of(dt) >= 0)
                d = PyArray_DescrFromType(np_type_of(dt));
        return (PyArrayObject *)PyArray_FromAny(obj, d, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
}

static int array_npu_shape(PyArrayObject *arr, const char *what, int *ret_dt, int *ret_ndim, int64_t *dims)
{
        int dt = npu_dtype_of(PyArray_DESCR(arr));

        if (!dt) {
                PyErr_Format(PyExc_TypeError, "npu: %s has dtype %R, which npu does not handle", what,
                             (PyObject *)PyArray_DESCR(arr));
                return -1;
        }
        if (PyArray_NDIM(arr) > NPU_MAX_DIMS) {
                PyErr_Format(PyExc_ValueError, "npu: %s has %d dimensions (at most %d)", what, PyArray_NDIM(arr),
                             NPU_MAX_DIMS);
                return -1;
        }
        *ret_dt = dt;
        *ret_ndim = PyArray_NDIM(arr);
        for (int i = 0; i < PyArray_NDIM(arr); i++)
                dims[i] = PyArray_DIM(arr, i);
        return 0;
}

static PyObject *Context_array(ContextObject *c, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "data", "device", NULL };
        PyObject *obj;
        PyArrayObject *arr;
        DeviceArrayObject *a;
        int device = 0, dt, ndim;
        int64_t dims[NPU_MAX_DIMS];
        npu_status_t st;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|i:array", kwlist, &obj, &device))
                return NULL;
        arr = as_array(obj, 0);
        if (!arr)
                return NULL;
        if (array_npu_shape(arr, "array data", &dt, &ndim, dims) < 0 ||
            !(a = device_array_new(c, device, dt, ndim, dims))) {
                Py_DECREF(arr);
                return NULL;
        }
        if (!ctx_enter(c)) {
                Py_DECREF(arr);
                Py_DECREF(a);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = a->nbytes ? npu_memcpy_to_device(c->ctx, a->buf, 0, PyArray_DATA(arr), a->nbytes) : NPU_OK;
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        Py_DECREF(arr);
        if (st != NPU_OK) {
                Py_DECREF(a);
                return raise_last(st);
        }
        return (PyObject *)a;
}

static PyObject *DeviceArray_numpy(DeviceArrayObject *a, PyObject *unused)
{
        npy_intp dims[NPU_MAX_DIMS];
        PyObject *arr;
        npu_status_t st;
        int t = np_type_of(a->dtype);

        if (a->freed)
                return raise_status(NPU_ERR_BAD_HANDLE, "numpy: the array was freed", 0);
        if (t < 0)
                return raise_status(NPU_ERR_UNSUPPORTED, "numpy: bfloat16 has no NumPy type", 0);
        for (int i = 0; i < a->ndim; i++)
                dims[i] = (npy_intp)a->dims[i];
        arr = PyArray_SimpleNew(a->ndim, dims, t);
        if (!arr)
                return NULL;
        if (!ctx_enter(a->ctx)) {
                Py_DECREF(arr);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = a->nbytes ? npu_memcpy_from_device(a->ctx->ctx, PyArray_DATA((PyArrayObject *)arr), a->buf, 0, a->nbytes)
                       : NPU_OK;
        Py_END_ALLOW_THREADS
        ctx_leave(a->ctx);
        if (st != NPU_OK) {
                Py_DECREF(arr);
                return raise_last(st);
        }
        return arr;
}

static PyObject *DeviceArray_free(DeviceArrayObject *a, PyObject *unused)
{
        npu_status_t st = NPU_OK;

        if (a->freed)
                Py_RETURN_NONE;
        if (!ctx_enter(a->ctx)) {
                PyErr_Clear();
                a->freed = 1;
                Py_RETURN_NONE;
        }
        a->freed = 1;
        Py_BEGIN_ALLOW_THREADS
        st = npu_free(a->ctx->ctx, a->buf);
        Py_END_ALLOW_THREADS
        ctx_leave(a->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *DeviceArray_get_shape(DeviceArrayObject *a, void *u)
{
        return shape_tuple(a->ndim, a->dims);
}

static PyObject *DeviceArray_get_dtype(DeviceArrayObject *a, void *u)
{
        return dtype_object(a->dtype);
}

static PyObject *DeviceArray_repr(DeviceArrayObject *a)
{
        PyObject *s = shape_tuple(a->ndim, a->dims), *d = dtype_object(a->dtype), *r = NULL;

        if (s && d)
                r = PyUnicode_FromFormat("<npu.DeviceArray shape=%R dtype=%R device=%d handle=%u>", s, d, a->device,
                                         a->buf.id);
        Py_XDECREF(s);
        Py_XDECREF(d);
        return r;
}

static PyMethodDef DeviceArray_methods[] = {
        { "numpy", (PyCFunction)DeviceArray_numpy, METH_NOARGS,
          "numpy() -> ndarray\n\nA copy of the array's contents in a new NumPy array (synchronous: waits for "
          "nothing but the copy; synchronize the streams that write the array first)." },
        { "free", (PyCFunction)DeviceArray_free, METH_NOARGS,
          "free()\n\nGive the device memory back now (else when the object is collected)." },
        { NULL },
};

static PyMemberDef DeviceArray_members[] = {
        { "device", T_INT, offsetof(DeviceArrayObject, device), READONLY, "device number" },
        { "nbytes", T_ULONGLONG, offsetof(DeviceArrayObject, nbytes), READONLY, "size in bytes" },
        { NULL },
};

static PyGetSetDef DeviceArray_getset[] = {
        { "shape", (getter)DeviceArray_get_shape, NULL, "shape tuple", NULL },
        { "dtype", (getter)DeviceArray_get_dtype, NULL, "NumPy dtype", NULL },
        { NULL },
};

static PyTypeObject DeviceArray_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu.DeviceArray",
        .tp_basicsize = sizeof(DeviceArrayObject),
        .tp_dealloc = (destructor)DeviceArray_dealloc,
        .tp_repr = (reprfunc)DeviceArray_repr,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "Device memory holding a tensor (ctx.empty, ctx.array). Usable as launch operands and as "
                  "graph inputs and outputs (no copies); .numpy() copies it to the host.",
        .tp_methods = DeviceArray_methods,
        .tp_members = DeviceArray_members,
        .tp_getset = DeviceArray_getset,
};

static int device_tensor(PyObject *obj, const char *what, int idx, npu_tensor_t *t)
{
        DeviceArrayObject *a;

        if (!PyObject_TypeCheck(obj, &DeviceArray_Type)) {
                PyErr_Format(PyExc_TypeError, "npu: %s %d must be an npu.DeviceArray, not %.100s", what, idx,
                             Py_TYPE(obj)->tp_name);
                return -1;
        }
        a = (DeviceArrayObject *)obj;
        if (a->freed) {
                raise_status(NPU_ERR_BAD_HANDLE, "the device array was freed", 0);
                return -1;
        }
        memset(t, 0, sizeof(*t));
        t->buf = a->buf;
        t->offset = 0;
        t->dtype = (npu_dtype_t)a->dtype;
        t->ndim = a->ndim;
        memcpy(t->dims, a->dims, sizeof(t->dims));
        return 0;
}

/* ------------------------------------------------------------------ HostRegion */

typedef struct {
        PyObject_HEAD
        ContextObject *ctx;
        npu_region_t region;
        void *ptr;
        uint64_t size;
        Py_ssize_t exports;
        int freed;
} HostRegionObject;

static PyTypeObject HostRegion_Type;

static void HostRegion_dealloc(HostRegionObject *r)
{
        if (!r->freed && r->ctx) {
                pthread_rwlock_rdlock(&r->ctx->lock);
                if (r->ctx->ctx) {
                        npu_context_t *ctx = r->ctx->ctx;
                        npu_region_t reg = r->region;
                        Py_BEGIN_ALLOW_THREADS
                        npu_host_free(ctx, reg);
                        Py_END_ALLOW_THREADS
                }
                pthread_rwlock_unlock(&r->ctx->lock);
        }
        Py_CLEAR(r->ctx);
        Py_TYPE(r)->tp_free((PyObject *)r);
}

static int HostRegion_getbuffer(HostRegionObject *r, Py_buffer *view, int flags)
{
        if (r->freed || !r->ctx || !r->ctx->ctx) {
                raise_status(NPU_ERR_BAD_HANDLE, "the host region was freed or its context closed", 0);
                view->obj = NULL;
                return -1;
        }
        if (PyBuffer_FillInfo(view, (PyObject *)r, r->ptr, (Py_ssize_t)r->size, 0, flags) < 0)
                return -1;
        r->exports++;
        r->ctx->exports++;
        return 0;
}

static void HostRegion_releasebuffer(HostRegionObject *r, Py_buffer *view)
{
        r->exports--;
        r->ctx->exports--;
}

static PyBufferProcs HostRegion_buffer = {
        .bf_getbuffer = (getbufferproc)HostRegion_getbuffer,
        .bf_releasebuffer = (releasebufferproc)HostRegion_releasebuffer,
};

static PyObject *Context_host_alloc(ContextObject *c, PyObject *args)
{
        unsigned long long size;
        HostRegionObject *r;
        npu_status_t st;

        if (!PyArg_ParseTuple(args, "K:host_alloc", &size))
                return NULL;
        if (size == 0 || size > (1ull << 40)) {
                PyErr_Format(PyExc_ValueError, "host_alloc: size %llu (1 byte to 1 TiB)", size);
                return NULL;
        }
        r = PyObject_New(HostRegionObject, &HostRegion_Type);
        if (!r)
                return NULL;
        r->ctx = NULL;
        r->freed = 1;
        r->exports = 0;
        r->size = size;
        if (!ctx_enter(c)) {
                Py_DECREF(r);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = npu_host_alloc(c->ctx, size, &r->ptr, &r->region);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK) {
                Py_DECREF(r);
                return raise_last(st);
        }
        r->freed = 0;
        r->ctx = (ContextObject *)Py_NewRef(c);
        return (PyObject *)r;
}

static PyObject *HostRegion_len_get(HostRegionObject *r, void *u)
{
        return PyLong_FromUnsignedLongLong(r->size);
}

static PyObject *HostRegion_numpy(HostRegionObject *r, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "dtype", "shape", "offset", NULL };
        PyObject *dtobj = NULL, *shape = Py_None, *np, *frombuf, *arr, *res;
        unsigned long long offset = 0;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOK:numpy", kwlist, &dtobj, &shape, &offset))
                return NULL;
        np = PyImport_ImportModule("numpy");
        if (!np)
                return NULL;
        frombuf = PyObject_GetAttrString(np, "frombuffer");
        Py_DECREF(np);
        if (!frombuf)
                return NULL;
        arr = PyObject_CallFunction(frombuf, "OOiK", (PyObject *)r, dtobj ? dtobj : Py_None, -1, offset);
        Py_DECREF(frombuf);
        if (!arr || shape == Py_None)
                return arr;
        res = PyObject_CallMethod(arr, "reshape", "O", shape);
        Py_DECREF(arr);
        return res;
}

static PyGetSetDef HostRegion_getset[] = {
        { "size", (getter)HostRegion_len_get, NULL, "bytes in the region", NULL },
        { NULL },
};

static PyMethodDef HostRegion_methods[] = {
        { "numpy", (PyCFunction)(void (*)(void))HostRegion_numpy, METH_VARARGS | METH_KEYWORDS,
          "numpy(dtype=float, shape=None, offset=0) -> ndarray viewing the region in place (no copy)." },
        { NULL },
};

static PyTypeObject HostRegion_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu.HostRegion",
        .tp_basicsize = sizeof(HostRegionObject),
        .tp_dealloc = (destructor)HostRegion_dealloc,
        .tp_as_buffer = &HostRegion_buffer,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "Host memory shared with npud (ctx.host_alloc), the analogue of pinned memory. Exposes the "
                  "buffer protocol: numpy.frombuffer(region, dtype) or region.numpy(dtype, shape) read and "
                  "write it in place. Stream.copy moves it to and from DeviceArrays.",
        .tp_methods = HostRegion_methods,
        .tp_getset = HostRegion_getset,
};

/* ------------------------------------------------------------------ Stream, Event */

typedef struct {
        PyObject_HEAD
        ContextObject *ctx;
        uint32_t id;
        int destroyed;
} HandleObject;

static PyTypeObject Stream_Type, Event_Type;

static void Handle_dealloc(HandleObject *h)
{
        if (!h->destroyed && h->ctx) {
                pthread_rwlock_rdlock(&h->ctx->lock);
                if (h->ctx->ctx) {
                        npu_context_t *ctx = h->ctx->ctx;
                        uint32_t id = h->id;
                        int is_stream = Py_TYPE(h) == &Stream_Type;
                        Py_BEGIN_ALLOW_THREADS
                        if (is_stream)
                                npu_stream_destroy(ctx, (npu_stream_t){ id });
                        else
                                npu_event_destroy(ctx, (npu_event_t){ id });
                        Py_END_ALLOW_THREADS
                }
                pthread_rwlock_unlock(&h->ctx->lock);
        }
        Py_CLEAR(h->ctx);
        Py_TYPE(h)->tp_free((PyObject *)h);
}

static PyObject *Context_stream(ContextObject *c, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "device", "priority", NULL };
        int device = NPU_DEVICE_ANY, prio = 4;
        npu_stream_t s;
        npu_status_t st;
        HandleObject *h;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "|ii:stream", kwlist, &device, &prio))
                return NULL;
        if (!ctx_enter(c))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_stream_create(c->ctx, device, prio, &s);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                return raise_last(st);
        h = PyObject_New(HandleObject, &Stream_Type);
        if (!h)
                return NULL;
        h->ctx = (ContextObject *)Py_NewRef(c);
        h->id = s.id;
        h->destroyed = 0;
        return (PyObject *)h;
}

static PyObject *Context_event(ContextObject *c, PyObject *unused)
{
        npu_event_t e;
        npu_status_t st;
        HandleObject *h;

        if (!ctx_enter(c))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_event_create(c->ctx, &e);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                return raise_last(st);
        h = PyObject_New(HandleObject, &Event_Type);
        if (!h)
                return NULL;
        h->ctx = (ContextObject *)Py_NewRef(c);
        h->id = e.id;
        h->destroyed = 0;
        return (PyObject *)h;
}

/* A stream argument: None (the context's default stream on `device`) or a Stream of this
 * context. */
static int stream_arg(ContextObject *c, PyObject *obj, int device, npu_stream_t *ret)
{
        npu_status_t st;

        if (!obj || obj == Py_None) {
                st = ctx_default_stream(c, device, ret);
                if (st == NPU_ERR_INVALID && (device < 0 || device >= 16)) {
                        raise_status(st, "no default stream for that device: pass stream=", 0);
                        return -1;
                }
                if (st != NPU_OK) {
                        raise_last(st);
                        return -1;
                }
                return 0;
        }
        if (!PyObject_TypeCheck(obj, &Stream_Type)) {
                PyErr_Format(PyExc_TypeError, "npu: stream must be an npu.Stream or None, not %.100s",
                             Py_TYPE(obj)->tp_name);
                return -1;
        }
        if (((HandleObject *)obj)->ctx != c) {
                PyErr_SetString(PyExc_ValueError, "npu: the stream belongs to another context");
                return -1;
        }
        ret->id = ((HandleObject *)obj)->id;
        return 0;
}

static PyObject *Stream_synchronize(HandleObject *h, PyObject *unused)
{
        npu_status_t st;

        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_stream_synchronize(h->ctx->ctx, (npu_stream_t){ h->id });
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *Stream_device(HandleObject *h, void *u)
{
        npu_status_t st;
        int dev = -1;

        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_stream_device(h->ctx->ctx, (npu_stream_t){ h->id }, &dev);
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        return PyLong_FromLong(dev);
}

/* stream.copy(dst, src, size=None): host region <-> device array, or device <-> device. */
static PyObject *Stream_copy(HandleObject *h, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "dst", "src", "size", NULL };
        PyObject *dst, *src;
        long long size = -1;
        uint64_t n, task = 0;
        npu_status_t st;
        npu_stream_t s = { h->id };
        if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|L:copy", kwlist, &dst, &src, &size))
                return NULL;
        int dst_dev = PyObject_TypeCheck(dst, &DeviceArray_Type), src_dev = PyObject_TypeCheck(src, &DeviceArray_Type);
        int dst_host = PyObject_TypeCheck(dst, &HostRegion_Type), src_host = PyObject_TypeCheck(src, &HostRegion_Type);
        uint64_t dcap, scap;

        if (!(dst_dev || dst_host) || !(src_dev || src_host) || (dst_host && src_host)) {
                PyErr_SetString(PyExc_TypeError, "copy: dst and src are DeviceArray or HostRegion, at least one a "
                                "DeviceArray");
                return NULL;
        }
        dcap = dst_dev ? ((DeviceArrayObject *)dst)->nbytes : ((HostRegionObject *)dst)->size;
        scap = src_dev ? ((DeviceArrayObject *)src)->nbytes : ((HostRegionObject *)src)->size;
        /* A size past either end is npud's to refuse (it bounds-checks every copy, untrusted
         * clients included): OutOfRangeError at the stream's synchronize, naming the task. */
        n = size < 0 ? (dcap < scap ? dcap : scap) : (uint64_t)size;
        if ((dst_dev && ((DeviceArrayObject *)dst)->freed) || (src_dev && ((DeviceArrayObject *)src)->freed) ||
            (dst_host && ((HostRegionObject *)dst)->freed) || (src_host && ((HostRegionObject *)src)->freed))
                return raise_status(NPU_ERR_BAD_HANDLE, "copy: an operand was freed", 0);
        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        if (dst_dev && src_host)
                st = npu_memcpy_h2d_async(h->ctx->ctx, s, ((DeviceArrayObject *)dst)->buf, 0,
                                          ((HostRegionObject *)src)->region, 0, n, &task);
        else if (dst_host)
                st = npu_memcpy_d2h_async(h->ctx->ctx, s, ((HostRegionObject *)dst)->region, 0,
                                          ((DeviceArrayObject *)src)->buf, 0, n, &task);
        else
                st = npu_memcpy_d2d_async(h->ctx->ctx, s, ((DeviceArrayObject *)dst)->buf, 0,
                                          ((DeviceArrayObject *)src)->buf, 0, n, &task);
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        return PyLong_FromUnsignedLongLong(task);
}

static PyObject *Stream_wait(HandleObject *h, PyObject *ev)
{
        npu_status_t st;

        if (!PyObject_TypeCheck(ev, &Event_Type)) {
                PyErr_SetString(PyExc_TypeError, "wait: argument must be an npu.Event");
                return NULL;
        }
        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_stream_wait_event(h->ctx->ctx, (npu_stream_t){ h->id }, (npu_event_t){ ((HandleObject *)ev)->id });
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *Event_record(HandleObject *h, PyObject *stream)
{
        npu_stream_t s;
        npu_status_t st;

        if (!ctx_enter(h->ctx))
                return NULL;
        if (stream_arg(h->ctx, stream, 0, &s) < 0) {
                ctx_leave(h->ctx);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = npu_event_record(h->ctx->ctx, (npu_event_t){ h->id }, s);
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *Event_synchronize(HandleObject *h, PyObject *unused)
{
        npu_status_t st;

        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_event_synchronize(h->ctx->ctx, (npu_event_t){ h->id });
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        Py_RETURN_NONE;
}

static PyObject *Event_query(HandleObject *h, PyObject *unused)
{
        npu_status_t st;

        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_event_query(h->ctx->ctx, (npu_event_t){ h->id });
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st == NPU_OK)
                Py_RETURN_TRUE;
        if (st == NPU_ERR_NOT_READY)
                Py_RETURN_FALSE;
        return raise_last(st);
}

static PyObject *Event_elapsed_ms(HandleObject *h, PyObject *end)
{
        npu_status_t st;
        float ms = 0;

        if (!PyObject_TypeCheck(end, &Event_Type)) {
                PyErr_SetString(PyExc_TypeError, "elapsed_ms: argument must be an npu.Event");
                return NULL;
        }
        if (!ctx_enter(h->ctx))
                return NULL;
        Py_BEGIN_ALLOW_THREADS
        st = npu_event_elapsed_ms(h->ctx->ctx, (npu_event_t){ h->id }, (npu_event_t){ ((HandleObject *)end)->id }, &ms);
        Py_END_ALLOW_THREADS
        ctx_leave(h->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        return PyFloat_FromDouble(ms);
}

static PyMethodDef Stream_methods[] = {
        { "synchronize", (PyCFunction)Stream_synchronize, METH_NOARGS,
          "synchronize()\n\nWait for the stream's work; raises its first failure (Error.task names the task)." },
        { "copy", (PyCFunction)(void (*)(void))Stream_copy, METH_VARARGS | METH_KEYWORDS,
          "copy(dst, src, size=None) -> task\n\nQueue a copy between a HostRegion and a DeviceArray (either "
          "way) or two DeviceArrays; size defaults to the smaller of the two. A size past either end fails "
          "at the stream's synchronize with OutOfRangeError (npud checks every copy)." },
        { "wait", (PyCFunction)Stream_wait, METH_O, "wait(event)\n\nLater work of the stream waits for the event." },
        { NULL },
};

static PyGetSetDef Stream_getset[] = {
        { "device", (getter)Stream_device, NULL, "the device the stream runs on", NULL },
        { NULL },
};

static PyMemberDef Handle_members[] = {
        { "handle", T_UINT, offsetof(HandleObject, id), READONLY, "npud's handle number" },
        { NULL },
};

static PyTypeObject Stream_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu.Stream",
        .tp_basicsize = sizeof(HandleObject),
        .tp_dealloc = (destructor)Handle_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "An ordered queue of work on one device (ctx.stream(device=-1, priority=4)).",
        .tp_methods = Stream_methods,
        .tp_getset = Stream_getset,
        .tp_members = Handle_members,
};

static PyMethodDef Event_methods[] = {
        { "record", (PyCFunction)Event_record, METH_O, "record(stream)\n\nRecord the event at this point of the stream." },
        { "synchronize", (PyCFunction)Event_synchronize, METH_NOARGS, "synchronize()\n\nWait for the last record." },
        { "query", (PyCFunction)Event_query, METH_NOARGS, "query() -> bool\n\nWhether the last record completed." },
        { "elapsed_ms", (PyCFunction)Event_elapsed_ms, METH_O,
          "elapsed_ms(end) -> float\n\nMilliseconds between this event and end." },
        { NULL },
};

static PyTypeObject Event_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu.Event",
        .tp_basicsize = sizeof(HandleObject),
        .tp_dealloc = (destructor)Handle_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "A point in a stream (ctx.event()): record, wait, query, time.",
        .tp_methods = Event_methods,
        .tp_members = Handle_members,
};

/* ------------------------------------------------------------------ launch */

static PyObject *Context_launch(ContextObject *c, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "op", "inputs", "outputs", "stream", NULL };
        npu_tensor_t tin[MAX_IO], tout[MAX_IO];
        npu_attr_t attrs[32];
        PyObject *ins, *outs, *stream = Py_None, *sin = NULL, *sout = NULL, *bound = NULL;
        PyObject *attr_dict = NULL, *key, *val, *names[32];
        const char *op;
        Py_ssize_t nin, nout, pos = 0;
        int nattrs = 0;
        uint64_t task = 0;
        npu_stream_t s;
        npu_status_t st;
        PyObject *ret = NULL;

        /* Keywords other than stream are operator attributes. */
        if (kw) {
                attr_dict = PyDict_Copy(kw);
                if (!attr_dict)
                        return NULL;
                bound = PyDict_New();
                if (!bound)
                        goto out;
                for (int i = 0; kwlist[i]; i++) {
                        PyObject *v = PyDict_GetItemString(attr_dict, kwlist[i]);
                        if (v) {
                                if (PyDict_SetItemString(bound, kwlist[i], v) < 0 ||
                                    PyDict_DelItemString(attr_dict, kwlist[i]) < 0)
                                        goto out;
                        }
                }
        }
        if (!PyArg_ParseTupleAndKeywords(args, bound, "sOO|O:launch", kwlist, &op, &ins, &outs, &stream))
                goto out;
        sin = PySequence_Fast(ins, "launch: inputs must be a sequence of DeviceArray");
        sout = sin ? PySequence_Fast(outs, "launch: outputs must be a sequence of DeviceArray") : NULL;
        if (!sout)
                goto out;
        nin = PySequence_Fast_GET_SIZE(sin);
        nout = PySequence_Fast_GET_SIZE(sout);
        if (nin > MAX_IO || nout > MAX_IO) {
                PyErr_Format(PyExc_ValueError, "launch: at most %d inputs and %d outputs", MAX_IO, MAX_IO);
                goto out;
        }
        for (Py_ssize_t i = 0; i < nin; i++)
                if (device_tensor(PySequence_Fast_GET_ITEM(sin, i), "launch input", (int)i, &tin[i]) < 0)
                        goto out;
        for (Py_ssize_t i = 0; i < nout; i++)
                if (device_tensor(PySequence_Fast_GET_ITEM(sout, i), "launch output", (int)i, &tout[i]) < 0)
                        goto out;
        while (attr_dict && PyDict_Next(attr_dict, &pos, &key, &val)) {
                if (nattrs >= 32) {
                        PyErr_SetString(PyExc_ValueError, "launch: at most 32 attributes");
                        goto out;
                }
                memset(&attrs[nattrs], 0, sizeof(attrs[nattrs]));
                attrs[nattrs].name = PyUnicode_AsUTF8(key);
                if (!attrs[nattrs].name)
                        goto out;
                if (PyBool_Check(val) || PyLong_Check(val)) {
                        attrs[nattrs].i = PyLong_AsLongLong(val);
                        if (attrs[nattrs].i == -1 && PyErr_Occurred())
                                goto out;
                } else if (PyFloat_Check(val)) {
                        attrs[nattrs].is_float = 1;
                        attrs[nattrs].f = PyFloat_AS_DOUBLE(val);
                } else {
                        PyErr_Format(PyExc_TypeError, "launch: attribute '%U' must be an int or a float, not %.100s",
                                     key, Py_TYPE(val)->tp_name);
                        goto out;
                }
                names[nattrs] = key;
                nattrs++;
        }
        (void)names;
        int first_dev_in = nin ? ((DeviceArrayObject *)PySequence_Fast_GET_ITEM(sin, 0))->device : 0;
        int first_dev_out = nout ? ((DeviceArrayObject *)PySequence_Fast_GET_ITEM(sout, 0))->device : 0;
        if (!ctx_enter(c))
                goto out;
        if (stream_arg(c, stream, nin ? first_dev_in : nout ? first_dev_out : 0, &s) < 0) {
                ctx_leave(c);
                goto out;
        }
        Py_BEGIN_ALLOW_THREADS
        st = npu_launch(c->ctx, s, op, tin, (int)nin, tout, (int)nout, attrs, nattrs, &task);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK)
                raise_last(st);
        else
                ret = PyLong_FromUnsignedLongLong(task);
out:
        Py_XDECREF(sin);
        Py_XDECREF(sout);
        Py_XDECREF(attr_dict);
        Py_XDECREF(bound);
        return ret;
}

/* ------------------------------------------------------------------ Graph */

struct aslot {                 /* what one run_async in flight needs */
        npu_stream_t stream;
        npu_buffer_t buf;
        npu_region_t region;
        void *host;
        uint64_t cap;
        struct aslot *next;
};

typedef struct {
        PyObject_HEAD
        ContextObject *ctx;
        npu_graph_t graph;
        int device;
        int nin, nout;
        npu_graph_io_t *io;     /* inputs, then outputs */
        PyObject *inputs, *outputs, *in_names, *out_names;
        struct aslot *free_slots, **all_slots;
        int nslots;
        int unloaded;
        pthread_mutex_t mu;     /* free_slots */
} GraphObject;

static PyTypeObject Graph_Type;

static void slot_release(npu_context_t *ctx, struct aslot *s)
{
        if (ctx) {
                if (s->cap) {
                        npu_free(ctx, s->buf);
                        npu_host_free(ctx, s->region);
                }
                npu_stream_destroy(ctx, s->stream);
        }
        free(s);
}

static void graph_release(GraphObject *g)
{
        if (g->unloaded || !g->ctx)
                return;
        g->unloaded = 1;
        pthread_rwlock_rdlock(&g->ctx->lock);
        npu_context_t *ctx = g->ctx->ctx;
        Py_BEGIN_ALLOW_THREADS
        for (int i = 0; i < g->nslots; i++)
                slot_release(ctx, g->all_slots[i]);
        if (ctx)
                npu_graph_unload(ctx, g->graph);
        Py_END_ALLOW_THREADS
        pthread_rwlock_unlock(&g->ctx->lock);
        free(g->all_slots);
        g->all_slots = NULL;
        g->nslots = 0;
        g->free_slots = NULL;
}

static void Graph_dealloc(GraphObject *g)
{
        graph_release(g);
        Py_CLEAR(g->inputs);
        Py_CLEAR(g->outputs);
        Py_CLEAR(g->in_names);
        Py_CLEAR(g->out_names);
        free(g->io);
        pthread_mutex_destroy(&g->mu);
        Py_CLEAR(g->ctx);
        Py_TYPE(g)->tp_free((PyObject *)g);
}

static PyObject *io_list(const npu_graph_io_t *io, int n, PyObject **ret_names)
{
        PyObject *list = PyList_New(n), *names = PyTuple_New(n);

        for (int i = 0; list && names && i < n; i++) {
                PyObject *name = PyUnicode_DecodeUTF8(io[i].name, (Py_ssize_t)strlen(io[i].name), "replace");
                PyObject *t = name ? Py_BuildValue("(ONN)", name, dtype_object(io[i].dtype),
                                                   shape_tuple(io[i].ndim, io[i].dims)) : NULL;
                if (!t) {
                        Py_XDECREF(name);
                        Py_CLEAR(list);
                        break;
                }
                PyList_SET_ITEM(list, i, t);
                PyTuple_SET_ITEM(names, i, name);
        }
        if (!list) {
                Py_XDECREF(names);
                return NULL;
        }
        if (!names) {
                Py_DECREF(list);
                return NULL;
        }
        *ret_names = names;
        return list;
}

static PyObject *Context_load(ContextObject *c, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "model", "device", "accumulate", NULL };
        const char *accumulate = NULL;
        npu_load_options_t lo = { .size = sizeof(lo), .accumulate = NPU_ACCUMULATE_FLOAT32 };
        PyObject *model, *path = NULL;
        Py_buffer view = { 0 };
        void *bytes = NULL;
        size_t size = 0;
        int device = 0, nin = 0, nout = 0, have_view = 0, err = 0;
        npu_graph_t graph;
        npu_status_t st = NPU_OK;
        GraphObject *g;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|iz:load", kwlist, &model, &device, &accumulate))
                return NULL;
        if (accumulate && strcmp(accumulate, "float32") && strcmp(accumulate, "float64") &&
            strcmp(accumulate, "mixed")) {
                PyErr_Format(PyExc_ValueError,
                             "load: accumulate must be 'float32', 'float64' or 'mixed', not '%.32s'", accumulate);
                return NULL;
        }
        if (accumulate && strcmp(accumulate, "float64") == 0)
                lo.accumulate = NPU_ACCUMULATE_FLOAT64;
        if (accumulate && strcmp(accumulate, "mixed") == 0)
                lo.accumulate = NPU_ACCUMULATE_MIXED;
        if (PyUnicode_Check(model) || PyObject_HasAttrString(model, "__fspath__")) {
                if (!PyUnicode_FSConverter(model, &path))
                        return NULL;
                Py_BEGIN_ALLOW_THREADS
                int fd = open(PyBytes_AS_STRING(path), O_RDONLY | O_CLOEXEC);
                struct stat sb;
                if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_size > (1ll << 32)) {
                        err = fd < 0 ? errno : EINVAL;
                } else {
                        size = (size_t)sb.st_size;
                        bytes = malloc(size ? size : 1);
                        size_t got = 0;
                        while (bytes && got < size) {
                                ssize_t r = read(fd, (char *)bytes + got, size - got);
                                if (r <= 0) {
                                        err = r < 0 ? errno : EIO;
                                        break;
                                }
                                got += (size_t)r;
                        }
                        if (!bytes)
                                err = ENOMEM;
                }
                if (fd >= 0)
                        close(fd);
                Py_END_ALLOW_THREADS
                if (err) {
                        free(bytes);
                        errno = err;
                        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, model);
                        Py_DECREF(path);
                        return NULL;
                }
                Py_DECREF(path);
        } else {
                if (PyObject_GetBuffer(model, &view, PyBUF_SIMPLE) < 0) {
                        PyErr_Format(PyExc_TypeError, "load: model must be a path or bytes-like, not %.100s",
                                     Py_TYPE(model)->tp_name);
                        return NULL;
                }
                have_view = 1;
                bytes = view.buf;
                size = (size_t)view.len;
        }
        if (!ctx_enter(c))
                goto fail;
        Py_BEGIN_ALLOW_THREADS
        /* without accumulate=: npud's default (its configuration's graph_accumulate) */
        st = npu_graph_load_with(c->ctx, device, bytes, size, accumulate ? &lo : NULL, &graph);
        if (st == NPU_OK)
                st = npu_graph_io_count(c->ctx, graph, &nin, &nout);
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (have_view)
                PyBuffer_Release(&view);
        else
                free(bytes);
        have_view = 0;
        bytes = NULL;
        if (st != NPU_OK)
                return raise_last(st);
        g = PyObject_New(GraphObject, &Graph_Type);
        if (!g) {
                npu_graph_unload(c->ctx, graph);
                return NULL;
        }
        g->ctx = (ContextObject *)Py_NewRef(c);
        g->graph = graph;
        g->device = device;
        g->nin = nin;
        g->nout = nout;
        g->inputs = g->outputs = g->in_names = g->out_names = NULL;
        g->free_slots = NULL;
        g->all_slots = NULL;
        g->nslots = 0;
        g->unloaded = 0;
        pthread_mutex_init(&g->mu, NULL);
        g->io = calloc((size_t)(nin + nout) + 1, sizeof(*g->io));
        if (!g->io) {
                Py_DECREF(g);
                return PyErr_NoMemory();
        }
        if (nin > MAX_IO || nout > MAX_IO) {
                Py_DECREF(g);
                return raise_status(NPU_ERR_UNSUPPORTED, "load: the python module binds at most 64 inputs and outputs", 0);
        }
        if (!ctx_enter(c)) {
                Py_DECREF(g);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        for (int i = 0; i < nin + nout && st == NPU_OK; i++) {
                g->io[i].size = sizeof(g->io[i]);
                st = i < nin ? npu_graph_input(c->ctx, graph, i, &g->io[i])
                             : npu_graph_output(c->ctx, graph, i - nin, &g->io[i]);
        }
        Py_END_ALLOW_THREADS
        ctx_leave(c);
        if (st != NPU_OK) {
                raise_last(st);
                Py_DECREF(g);
                return NULL;
        }
        g->inputs = io_list(g->io, nin, &g->in_names);
        g->outputs = g->inputs ? io_list(g->io + nin, nout, &g->out_names) : NULL;
        if (!g->outputs) {
                Py_DECREF(g);
                return NULL;
        }
        return (PyObject *)g;
fail:
        if (have_view)
                PyBuffer_Release(&view);
        else
                free(bytes);
        return NULL;
}

/* The i-th value of a run's inputs: a mapping by name, or a sequence in binding order. */
static PyObject *run_input(GraphObject *g, PyObject *inputs, int i)
{
        PyObject *v;

        if (PyDict_Check(inputs)) {
                v = PyDict_GetItemWithError(inputs, PyTuple_GET_ITEM(g->in_names, i));
                if (!v && !PyErr_Occurred())
                        PyErr_Format(PyExc_KeyError, "run: input '%U' is missing", PyTuple_GET_ITEM(g->in_names, i));
                Py_XINCREF(v);
                return v;
        }
        return PySequence_GetItem(inputs, i);
}

static int run_check_inputs(GraphObject *g, PyObject *inputs)
{
        Py_ssize_t n;

        if (PyDict_Check(inputs)) {
                PyObject *key, *val;
                Py_ssize_t pos = 0;
                n = PyDict_Size(inputs);
                while (PyDict_Next(inputs, &pos, &key, &val)) {
                        int r = PySequence_Contains(g->in_names, key);
                        if (r < 0)
                                return -1;
                        if (!r) {
                                raise_status(NPU_ERR_INVALID, "run: the graph has no input of that name", 0);
                                PyObject *t, *v, *tb;
                                PyErr_Fetch(&t, &v, &tb);
                                PyObject *msg = PyUnicode_FromFormat("run: the graph has no input %R (inputs: %R)",
                                                                     key, g->in_names);
                                if (msg && v) {
                                        PyObject_SetAttrString(v, "message", msg);
                                        PyObject *a = PyTuple_Pack(1, msg);
                                        if (a) {
                                                PyObject_SetAttrString(v, "args", a);
                                                Py_DECREF(a);
                                        }
                                }
                                Py_XDECREF(msg);
                                PyErr_Restore(t, v, tb);
                                return -1;
                        }
                }
        } else if (PySequence_Check(inputs) && !PyUnicode_Check(inputs) && !PyBytes_Check(inputs)) {
                n = PySequence_Size(inputs);
                if (n < 0)
                        return -1;
        } else {
                PyErr_Format(PyExc_TypeError, "run: inputs must be a dict of name -> array or a sequence, not %.100s",
                             Py_TYPE(inputs)->tp_name);
                return -1;
        }
        if (n != g->nin) {
                char m[160];
                snprintf(m, sizeof(m), "run: the graph has %d input%s, %zd given", g->nin, g->nin == 1 ? "" : "s", n);
                raise_status(NPU_ERR_INVALID, m, 0);
                return -1;
        }
        return 0;
}

/* An output's shape: the description's, open extents from output_shapes[name] or, for an
 * open leading extent, the first input's leading extent (the batch). */
static int run_output_shape(GraphObject *g, int k, PyObject *out_shapes, PyArrayObject **arrs, int *ret_dt,
                            int *ret_ndim, int64_t *dims)
{
        const npu_graph_io_t *io = &g->io[g->nin + k];
        PyObject *given = NULL;
        int gndim = -1;
        int64_t gdims[NPU_MAX_DIMS];

        if (out_shapes && out_shapes != Py_None) {
                given = PyDict_Check(out_shapes) ? PyDict_GetItemWithError(out_shapes, PyTuple_GET_ITEM(g->out_names, k))
                                                 : NULL;
                if (!given && PyErr_Occurred())
                        return -1;
                if (given && shape_arg(given, &gndim, gdims) < 0)
                        return -1;
        }
        *ret_dt = io->dtype ? (int)io->dtype : (g->nin ? (int)npu_dtype_of(PyArray_DESCR(arrs[0])) : NPU_FLOAT32);
        if (gndim >= 0) {
                *ret_ndim = gndim;
                memcpy(dims, gdims, sizeof(gdims));
                return 0;
        }
        if (io->ndim < 0) {
                PyErr_Format(PyExc_ValueError, "run: output '%U' has an open rank: pass output_shapes={'%U': shape}",
                             PyTuple_GET_ITEM(g->out_names, k), PyTuple_GET_ITEM(g->out_names, k));
                return -1;
        }
        *ret_ndim = io->ndim;
        for (int d = 0; d < io->ndim; d++) {
                dims[d] = io->dims[d];
                if (dims[d] < 0 && d == 0 && g->nin && PyArray_NDIM(arrs[0]) > 0)
                        dims[d] = PyArray_DIM(arrs[0], 0);
                if (dims[d] < 0) {
                        PyErr_Format(PyExc_ValueError, "run: extent %d of output '%U' is open: pass "
                                     "output_shapes={'%U': shape}", d, PyTuple_GET_ITEM(g->out_names, k),
                                     PyTuple_GET_ITEM(g->out_names, k));
                        return -1;
                }
        }
        return 0;
}

/* Host inputs as arrays (new references into arrs[]) and fresh output arrays (outs[]). */
static int run_prepare(GraphObject *g, PyObject *inputs, PyObject *out_shapes, PyArrayObject **arrs,
                       PyArrayObject **outs)
{
        memset(arrs, 0, sizeof(*arrs) * (size_t)g->nin);
        memset(outs, 0, sizeof(*outs) * (size_t)g->nout);
        if (run_check_inputs(g, inputs) < 0)
                return -1;
        for (int i = 0; i < g->nin; i++) {
                PyObject *v = run_input(g, inputs, i);
                if (!v)
                        return -1;
                arrs[i] = as_array(v, g->io[i].dtype);
                Py_DECREF(v);
                if (!arrs[i])
                        return -1;
                if (PyArray_NDIM(arrs[i]) > NPU_MAX_DIMS || !npu_dtype_of(PyArray_DESCR(arrs[i]))) {
                        char m[200];
                        snprintf(m, sizeof(m), "run: input %d '%.100s' has %s", i, g->io[i].name,
                                 PyArray_NDIM(arrs[i]) > NPU_MAX_DIMS ? "too many dimensions" : "a dtype npu does not handle");
                        raise_status(NPU_ERR_SHAPE, m, 0);
                        return -1;
                }
        }
        for (int k = 0; k < g->nout; k++) {
                npy_intp d[NPU_MAX_DIMS];
                int64_t dims[NPU_MAX_DIMS];
                int dt, ndim, t;
                if (run_output_shape(g, k, out_shapes, arrs, &dt, &ndim, dims) < 0)
                        return -1;
                t = np_type_of(dt);
                if (t < 0)
                        return raise_status(NPU_ERR_UNSUPPORTED, "run: an output's dtype has no NumPy type", 0), -1;
                for (int i = 0; i < ndim; i++)
                        d[i] = (npy_intp)dims[i];
                outs[k] = (PyArrayObject *)PyArray_SimpleNew(ndim, d, t);
                if (!outs[k])
                        return -1;
        }
        return 0;
}

static void run_drop(GraphObject *g, PyArrayObject **arrs, PyArrayObject **outs)
{
        for (int i = 0; i < g->nin; i++)
                Py_XDECREF(arrs[i]);
        for (int k = 0; k < g->nout; k++)
                Py_XDECREF(outs[k]);
}

static PyObject *outputs_dict(GraphObject *g, PyArrayObject **outs)
{
        PyObject *d = PyDict_New();

        for (int k = 0; d && k < g->nout; k++)
                if (PyDict_SetItem(d, PyTuple_GET_ITEM(g->out_names, k), (PyObject *)outs[k]) < 0)
                        Py_CLEAR(d);
        return d;
}

static void host_tensor(npu_host_tensor_t *t, PyArrayObject *a)
{
        memset(t, 0, sizeof(*t));
        t->data = PyArray_DATA(a);
        t->bytes = (uint64_t)PyArray_NBYTES(a);
        t->dtype = (npu_dtype_t)npu_dtype_of(PyArray_DESCR(a));
        t->ndim = PyArray_NDIM(a);
        for (int i = 0; i < t->ndim; i++)
                t->dims[i] = PyArray_DIM(a, i);
}

/* graph.run with DeviceArrays: bound in place on a stream, no copies. */
static PyObject *graph_run_device(GraphObject *g, PyObject *inputs, PyObject *outputs, PyObject *stream)
{
        npu_tensor_t t[2 * MAX_IO];
        npu_stream_t s;
        npu_status_t st;
        uint64_t task = 0;

        if (run_check_inputs(g, inputs) < 0)
                return NULL;
        for (int i = 0; i < g->nin; i++) {
                PyObject *v = run_input(g, inputs, i);
                int r = v ? device_tensor(v, "graph input", i, &t[i]) : -1;
                Py_XDECREF(v);
                if (r < 0)
                        return NULL;
        }
        if (!outputs || outputs == Py_None) {
                PyErr_SetString(PyExc_TypeError, "run: with DeviceArray inputs, pass outputs= (DeviceArrays, a dict "
                                "by name or a sequence in order)");
                return NULL;
        }
        for (int k = 0; k < g->nout; k++) {
                PyObject *v;
                if (PyDict_Check(outputs)) {
                        v = PyDict_GetItemWithError(outputs, PyTuple_GET_ITEM(g->out_names, k));
                        if (!v) {
                                if (!PyErr_Occurred())
                                        PyErr_Format(PyExc_KeyError, "run: output '%U' is missing from outputs",
                                                     PyTuple_GET_ITEM(g->out_names, k));
                                return NULL;
                        }
                        Py_INCREF(v);
                } else if (!(v = PySequence_GetItem(outputs, k)))
                        return NULL;
                int r = device_tensor(v, "graph output", k, &t[g->nin + k]);
                Py_DECREF(v);
                if (r < 0)
                        return NULL;
        }
        if (!ctx_enter(g->ctx))
                return NULL;
        if (stream_arg(g->ctx, stream, g->device, &s) < 0) {
                ctx_leave(g->ctx);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = npu_graph_run(g->ctx->ctx, s, g->graph, t, g->nin, t + g->nin, g->nout, &task);
        Py_END_ALLOW_THREADS
        ctx_leave(g->ctx);
        if (st != NPU_OK)
                return raise_last(st);
        return PyLong_FromUnsignedLongLong(task);
}

static int has_device_input(GraphObject *g, PyObject *inputs)
{
        PyObject *v;
        int r;

        if (g->nin == 0)
                return 0;
        if (PyDict_Check(inputs)) {
                v = PyDict_GetItemWithError(inputs, PyTuple_GET_ITEM(g->in_names, 0));
                Py_XINCREF(v);
        } else if (PySequence_Check(inputs) && PySequence_Size(inputs) > 0) {
                v = PySequence_GetItem(inputs, 0);
        } else {
                v = NULL;
        }
        PyErr_Clear();
        r = v && PyObject_TypeCheck(v, &DeviceArray_Type);
        Py_XDECREF(v);
        return r;
}

static PyObject *Graph_run(GraphObject *g, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "inputs", "outputs", "stream", "output_shapes", NULL };
        PyObject *inputs, *outputs = Py_None, *stream = Py_None, *out_shapes = Py_None, *ret;
        PyArrayObject *arrs[MAX_IO], *outs[MAX_IO];
        npu_host_tensor_t hin[MAX_IO], hout[MAX_IO];
        npu_status_t st;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|OOO:run", kwlist, &inputs, &outputs, &stream, &out_shapes))
                return NULL;
        if (g->unloaded)
                return raise_status(NPU_ERR_BAD_HANDLE, "run: the graph was unloaded", 0);
        if (has_device_input(g, inputs))
                return graph_run_device(g, inputs, outputs, stream);
        if (run_prepare(g, inputs, out_shapes, arrs, outs) < 0) {
                run_drop(g, arrs, outs);
                return NULL;
        }
        for (int i = 0; i < g->nin; i++)
                host_tensor(&hin[i], arrs[i]);
        for (int k = 0; k < g->nout; k++)
                host_tensor(&hout[k], outs[k]);
        if (!ctx_enter(g->ctx)) {
                run_drop(g, arrs, outs);
                return NULL;
        }
        Py_BEGIN_ALLOW_THREADS
        st = npu_graph_run_host(g->ctx->ctx, g->graph, hin, g->nin, hout, g->nout);
        Py_END_ALLOW_THREADS
        ctx_leave(g->ctx);
        if (st != NPU_OK) {
                run_drop(g, arrs, outs);
                return raise_last(st);
        }
        ret = outputs_dict(g, outs);
        run_drop(g, arrs, outs);
        return ret;
}

/* ---- run_async: the completion fd driving an asyncio future ---- */

typedef struct {
        PyObject_HEAD
        GraphObject *graph;
        PyObject *future;
        struct aslot *slot;
        PyArrayObject *outs[MAX_IO];
        uint64_t offsets[MAX_IO];
        int nout;
} AsyncRunObject;

static PyTypeObject AsyncRun_Type;

static void slot_put(GraphObject *g, struct aslot *s)
{
        pthread_mutex_lock(&g->mu);
        s->next = g->free_slots;
        g->free_slots = s;
        pthread_mutex_unlock(&g->mu);
}

static void AsyncRun_dealloc(AsyncRunObject *r)
{
        if (r->slot && r->graph)
                slot_put(r->graph, r->slot);
        for (int k = 0; k < r->nout; k++)
                Py_XDECREF(r->outs[k]);
        Py_XDECREF(r->future);
        Py_XDECREF(r->graph);
        Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyTypeObject AsyncRun_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu._AsyncRun",
        .tp_basicsize = sizeof(AsyncRunObject),
        .tp_dealloc = (destructor)AsyncRun_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
};

/* A slot with room for `need` bytes (GIL released, under ctx_enter). */
static npu_status_t slot_take(GraphObject *g, npu_context_t *ctx, uint64_t need, struct aslot **ret)
{
        struct aslot *s;
        npu_status_t st;

        pthread_mutex_lock(&g->mu);
        s = g->free_slots;
        if (s)
                g->free_slots = s->next;
        pthread_mutex_unlock(&g->mu);
        if (!s) {
                struct aslot **all;
                s = calloc(1, sizeof(*s));
                if (!s)
                        return NPU_ERR_SYSTEM;
                st = npu_stream_create(ctx, g->device, 4, &s->stream);
                if (st != NPU_OK) {
                        free(s);
                        return st;
                }
                pthread_mutex_lock(&g->mu);
                all = realloc(g->all_slots, sizeof(*all) * (size_t)(g->nslots + 1));
                if (all) {
                        g->all_slots = all;
                        all[g->nslots++] = s;
                }
                pthread_mutex_unlock(&g->mu);
                if (!all) {
                        slot_release(ctx, s);
                        return NPU_ERR_SYSTEM;
                }
        }
        if (s->cap < need) {
                uint64_t cap = need < 4096 ? 4096 : need;
                if (s->cap) {
                        npu_free(ctx, s->buf);
                        npu_host_free(ctx, s->region);
                        s->cap = 0;
                }
                st = npu_malloc(ctx, g->device, cap, &s->buf);
                if (st == NPU_OK) {
                        st = npu_host_alloc(ctx, cap, &s->host, &s->region);
                        if (st != NPU_OK)
                                npu_free(ctx, s->buf);
                }
                if (st != NPU_OK) {
                        slot_put(g, s);
                        return st;
                }
                s->cap = cap;
        }
        *ret = s;
        return NPU_OK;
}

static PyObject *Context_dispatch(ContextObject *c, PyObject *unused);

/* Register the completion fd with the running loop (once per loop). */
static int ensure_reader(ContextObject *c, PyObject *loop)
{
        PyObject *cb, *r;

        if (c->reader_loop == loop)
                return 0;
        if (c->reader_loop) {
                r = PyObject_CallMethod(c->reader_loop, "remove_reader", "i", c->cfd);
                Py_XDECREF(r);
                PyErr_Clear();
                Py_CLEAR(c->reader_loop);
        }
        cb = PyObject_GetAttrString((PyObject *)c, "_dispatch");
        if (!cb)
                return -1;
        r = PyObject_CallMethod(loop, "add_reader", "iO", c->cfd, cb);
        Py_DECREF(cb);
        if (!r)
                return -1;
        Py_DECREF(r);
        c->reader_loop = Py_NewRef(loop);
        return 0;
}

static PyObject *Graph_run_async(GraphObject *g, PyObject *args, PyObject *kw)
{
        static char *kwlist[] = { "inputs", "output_shapes", NULL };
        PyObject *inputs, *out_shapes = Py_None, *asyncio, *loop = NULL, *future = NULL, *key = NULL;
        PyArrayObject *arrs[MAX_IO], *outs[MAX_IO];
        npu_tensor_t t[2 * MAX_IO];
        uint64_t offsets[2 * MAX_IO], off = 0, in_end, tag;
        ContextObject *c = g->ctx;
        struct aslot *s = NULL;
        AsyncRunObject *run;
        npu_status_t st;
        int fd = -1;

        if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O:run_async", kwlist, &inputs, &out_shapes))
                return NULL;
        if (g->unloaded)
                return raise_status(NPU_ERR_BAD_HANDLE, "run_async: the graph was unloaded", 0);
        asyncio = PyImport_ImportModule("asyncio");
        if (!asyncio)
                return NULL;
        loop = PyObject_CallMethod(asyncio, "get_running_loop", NULL);
        Py_DECREF(asyncio);
        if (!loop)
                return NULL; /* RuntimeError: no running event loop */
        if (run_prepare(g, inputs, out_shapes, arrs, outs) < 0)
                goto fail_arrays;
        for (int i = 0; i < g->nin + g->nout; i++) {
                PyArrayObject *a = i < g->nin ? arrs[i] : outs[i - g->nin];
                npu_host_tensor_t h;
                host_tensor(&h, a);
                memset(&t[i], 0, sizeof(t[i]));
                t[i].offset = off;
                t[i].dtype = h.dtype;
                t[i].ndim = h.ndim;
                memcpy(t[i].dims, h.dims, sizeof(t[i].dims));
                offsets[i] = off;
                off += ALIGN64(h.bytes);
        }
        in_end = g->nout ? offsets[g->nin] : off;
        if (!ctx_enter(c))
                goto fail_arrays;
        Py_BEGIN_ALLOW_THREADS
        st = c->cfd < 0 ? npu_completion_fd(c->ctx, &fd) : NPU_OK;
        if (st == NPU_OK)
                st = slot_take(g, c->ctx, off ? off : 64, &s);
        Py_END_ALLOW_THREADS
        if (st != NPU_OK) {
                ctx_leave(c);
                raise_last(st);
                goto fail_arrays;
        }
        if (c->cfd < 0)
                c->cfd = fd;
        for (int i = 0; i < g->nin; i++)
                memcpy((char *)s->host + offsets[i], PyArray_DATA(arrs[i]), (size_t)PyArray_NBYTES(arrs[i]));
        for (int i = 0; i < g->nin + g->nout; i++)
                t[i].buf = s->buf;
        tag = c->next_tag++;
        Py_BEGIN_ALLOW_THREADS
        st = in_end ? npu_memcpy_h2d_async(c->ctx, s->stream, s->buf, 0, s->region, 0, in_end, NULL) : NPU_OK;
        if (st == NPU_OK)
                st = npu_graph_run(c->ctx, s->stream, g->graph, t, g->nin, t + g->nin, g->nout, NULL);
        if (st == NPU_OK && off > in_end)
                st = npu_memcpy_d2h_async(c->ctx, s->stream, s->region, in_end, s->buf, in_end, off - in_end, NULL);
        if (st == NPU_OK)
                st = npu_stream_notify(c->ctx, s->stream, tag, NULL);
        Py_END_ALLOW_THREADS
        if (st != NPU_OK) {
                npu_status_t st2;
                char msg[512];
                uint64_t task = npu_error_task();
                snprintf(msg, sizeof(msg), "%s", npu_error_message());
                Py_BEGIN_ALLOW_THREADS /* drain and clear what was queued: the slot is reused */
                st2 = npu_stream_synchronize(c->ctx, s->stream);
                Py_END_ALLOW_THREADS
                (void)st2;
                ctx_leave(c);
                slot_put(g, s);
                raise_status(st, msg, task);
                goto fail_arrays;
        }
        ctx_leave(c);
        future = PyObject_CallMethod(loop, "create_future", NULL);
        run = future ? PyObject_New(AsyncRunObject, &AsyncRun_Type) : NULL;
        if (!run) {
                /* The run is queued: let it finish before the slot is reused. */
                pthread_rwlock_rdlock(&c->lock);
                if (c->ctx) {
                        Py_BEGIN_ALLOW_THREADS
                        npu_stream_synchronize(c->ctx, s->stream);
                        Py_END_ALLOW_THREADS
                }
                pthread_rwlock_unlock(&c->lock);
                slot_put(g, s);
                goto fail_arrays;
        }
        run->graph = (GraphObject *)Py_NewRef(g);
        run->future = Py_NewRef(future);
        run->slot = s;
        run->nout = g->nout;
        for (int k = 0; k < g->nout; k++) {
                run->outs[k] = outs[k];
                run->offsets[k] = offsets[g->nin + k];
                outs[k] = NULL;
        }
        if (!c->pending && !(c->pending = PyDict_New()))
                goto fail_run;
        key = PyLong_FromUnsignedLongLong(tag);
        if (!key || PyDict_SetItem(c->pending, key, (PyObject *)run) < 0)
                goto fail_run;
        Py_DECREF(key);
        Py_DECREF(run);
        if (ensure_reader(c, loop) < 0) {
                /* The run completes but nobody reads it: fail the future now. */
                PyObject *t2, *v, *tb;
                PyErr_Fetch(&t2, &v, &tb);
                PyObject *r = PyObject_CallMethod(future, "set_exception", "O", v ? v : Py_None);
                Py_XDECREF(r);
                PyErr_Restore(t2, v, tb);
                goto fail_arrays;
        }
        for (int i = 0; i < g->nin; i++)
                Py_DECREF(arrs[i]);
        Py_DECREF(loop);
        return future;
fail_run:
        Py_XDECREF(key);
        Py_DECREF(run); /* puts the slot back: the stream's notify is then unclaimed, harmless */
fail_arrays:
        run_drop(g, arrs, outs);
        Py_XDECREF(future);
        Py_XDECREF(loop);
        return NULL;
}

/* Resolve one finished run: outputs copied out of its region, or its failure. */
static void finish_run(ContextObject *c, AsyncRunObject *run, const npu_completion_t *cp)
{
        PyObject *done = PyObject_CallMethod(run->future, "done", NULL), *r = NULL;
        int is_done = done ? PyObject_IsTrue(done) : 1;

        Py_XDECREF(done);
        PyErr_Clear();
        if (cp->status != NPU_OK) {
                /* Clear the stream's failure (the notify does not) so the slot is clean. */
                Py_BEGIN_ALLOW_THREADS
                npu_stream_synchronize(c->ctx, run->slot->stream);
                Py_END_ALLOW_THREADS
                if (!is_done) {
                        raise_status(cp->status, cp->message, cp->error_task);
                        PyObject *t, *v, *tb;
                        PyErr_Fetch(&t, &v, &tb);
                        PyErr_NormalizeException(&t, &v, &tb);
                        r = v ? PyObject_CallMethod(run->future, "set_exception", "O", v) : NULL;
                        Py_XDECREF(t);
                        Py_XDECREF(v);
                        Py_XDECREF(tb);
                }
        } else if (!is_done) {
                PyObject *d;
                for (int k = 0; k < run->nout; k++)
                        memcpy(PyArray_DATA(run->outs[k]), (char *)run->slot->host + run->offsets[k],
                               (size_t)PyArray_NBYTES(run->outs[k]));
                d = outputs_dict(run->graph, run->outs);
                r = d ? PyObject_CallMethod(run->future, "set_result", "O", d) : NULL;
                Py_XDECREF(d);
        }
        Py_XDECREF(r);
        PyErr_Clear();
}

static void fail_pending(ContextObject *c, const char *why)
{
        PyObject *key, *val;
        Py_ssize_t pos = 0;

        while (c->pending && PyDict_Next(c->pending, &pos, &key, &val)) {
                AsyncRunObject *run = (AsyncRunObject *)val;
                PyObject *done = PyObject_CallMethod(run->future, "done", NULL);
                if (done && !PyObject_IsTrue(done)) {
                        PyObject *t, *v, *tb, *r;
                        raise_status(NPU_ERR_CONNECTION, why, 0);
                        PyErr_Fetch(&t, &v, &tb);
                        PyErr_NormalizeException(&t, &v, &tb);
                        r = v ? PyObject_CallMethod(run->future, "set_exception", "O", v) : NULL;
                        Py_XDECREF(r);
                        Py_XDECREF(t);
                        Py_XDECREF(v);
                        Py_XDECREF(tb);
                }
                Py_XDECREF(done);
                PyErr_Clear();
                /* The slot's stream may still hold the run: never reuse it. */
                run->slot = NULL;
        }
        if (c->pending)
                PyDict_Clear(c->pending);
}

/* The completion fd's reader: every queued completion, each resolving its run. */
static PyObject *Context_dispatch(ContextObject *c, PyObject *unused)
{
        npu_completion_t cp;
        npu_status_t st;

        for (;;) {
                if (!c->ctx)
                        break;
                pthread_rwlock_rdlock(&c->lock);
                if (!c->ctx) {
                        pthread_rwlock_unlock(&c->lock);
                        break;
                }
                cp.size = sizeof(cp);
                Py_BEGIN_ALLOW_THREADS
                st = npu_completion_next(c->ctx, &cp);
                Py_END_ALLOW_THREADS
                if (st == NPU_OK && cp.kind == NPU_COMPLETION_NOTIFY && c->pending) {
                        PyObject *key = PyLong_FromUnsignedLongLong(cp.tag), *run = NULL;
                        if (key) {
                                run = PyDict_GetItemWithError(c->pending, key);
                                Py_XINCREF(run);
                                if (run) {
                                        PyDict_DelItem(c->pending, key);
                                        finish_run(c, (AsyncRunObject *)run, &cp);
                                        Py_DECREF(run);
                                }
                                Py_DECREF(key);
                        }
                        PyErr_Clear();
                }
                pthread_rwlock_unlock(&c->lock);
                if (st == NPU_ERR_NOT_READY)
                        break;
                if (st == NPU_ERR_CONNECTION) {
                        fail_pending(c, "the connection to npud was lost");
                        if (c->reader_loop) {
                                PyObject *r = PyObject_CallMethod(c->reader_loop, "remove_reader", "i", c->cfd);
                                Py_XDECREF(r);
                                PyErr_Clear();
                                Py_CLEAR(c->reader_loop);
                        }
                        break;
                }
                if (st != NPU_OK)
                        break;
        }
        Py_RETURN_NONE;
}

static PyObject *Graph_unload(GraphObject *g, PyObject *unused)
{
        graph_release(g);
        Py_RETURN_NONE;
}

static PyObject *Graph_get_inputs(GraphObject *g, void *u)
{
        return PyList_GetSlice(g->inputs, 0, g->nin);
}

static PyObject *Graph_get_outputs(GraphObject *g, void *u)
{
        return PyList_GetSlice(g->outputs, 0, g->nout);
}

/* make bench's C side (python/bench/bench_loop.py): the request loop of graph.run written in
 * C, npu_graph_run_host on the same arrays `iters` times, the GIL released throughout; returns
 * each request's latency in seconds. Lives here so the C and the Python loops alternate in one
 * process, on one session and one graph: a noisy host slows both alike. */
static PyObject *Graph_c_loop(GraphObject *g, PyObject *args)
{
        PyObject *inputs, *list;
        PyArrayObject *arrs[MAX_IO], *outs[MAX_IO];
        npu_host_tensor_t hin[MAX_IO], hout[MAX_IO];
        npu_status_t st = NPU_OK;
        struct timespec t0, t1;
        double *lat;
        int iters;

        if (!PyArg_ParseTuple(args, "Oi:_c_loop", &inputs, &iters) || iters <= 0 || iters > 10000000) {
                if (!PyErr_Occurred())
                        PyErr_SetString(PyExc_ValueError, "_c_loop: iters 1 to 10000000");
                return NULL;
        }
        if (run_prepare(g, inputs, Py_None, arrs, outs) < 0) {
                run_drop(g, arrs, outs);
                return NULL;
        }
        lat = malloc(sizeof(double) * (size_t)iters);
        if (!lat || !ctx_enter(g->ctx)) {
                free(lat);
                run_drop(g, arrs, outs);
                return lat ? NULL : PyErr_NoMemory();
        }
        Py_BEGIN_ALLOW_THREADS
        for (int i = 0; i < iters && st == NPU_OK; i++) {
                clock_gettime(CLOCK_MONOTONIC, &t0);
                /* What graph.run does per request, in C: describe the arrays, run. */
                for (int k = 0; k < g->nin; k++)
                        host_tensor(&hin[k], arrs[k]);
                for (int k = 0; k < g->nout; k++)
                        host_tensor(&hout[k], outs[k]);
                st = npu_graph_run_host(g->ctx->ctx, g->graph, hin, g->nin, hout, g->nout);
                clock_gettime(CLOCK_MONOTONIC, &t1);
                lat[i] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        }
        Py_END_ALLOW_THREADS
        ctx_leave(g->ctx);
        run_drop(g, arrs, outs);
        if (st != NPU_OK) {
                free(lat);
                return raise_last(st);
        }
        list = PyList_New(iters);
        for (int i = 0; list && i < iters; i++) {
                PyObject *v = PyFloat_FromDouble(lat[i]);
                if (!v) {
                        Py_CLEAR(list);
                        break;
                }
                PyList_SET_ITEM(list, i, v);
        }
        free(lat);
        return list;
}

static PyMethodDef Graph_methods[] = {
        { "run", (PyCFunction)(void (*)(void))Graph_run, METH_VARARGS | METH_KEYWORDS,
          "run(inputs, outputs=None, stream=None, output_shapes=None)\n\n"
          "Host arrays: inputs is a dict name -> array-like (or a sequence in binding order); returns a dict "
          "name -> new ndarray, in one call (npu_graph_run_host), the GIL released. An output extent the model "
          "leaves open is the first input's leading extent when it is the leading one, else give it in "
          "output_shapes={name: shape}.\n"
          "DeviceArrays: inputs and outputs are DeviceArrays bound in place (no copies); the run is queued on "
          "stream (None: the context's default stream) and its task number returned; synchronize the stream." },
        { "run_async", (PyCFunction)(void (*)(void))Graph_run_async, METH_VARARGS | METH_KEYWORDS,
          "run_async(inputs, output_shapes=None) -> asyncio.Future\n\n"
          "Queue a run of host arrays (as run) and return a future of the running asyncio loop, resolved "
          "with the outputs dict (or the run's Error) when the context's completion fd reports it. No thread "
          "waits: the loop watches the fd." },
        { "unload", (PyCFunction)Graph_unload, METH_NOARGS, "unload()\n\nRelease the graph now." },
        { "_c_loop", (PyCFunction)Graph_c_loop, METH_VARARGS,
          "_c_loop(inputs, iters) -> list of seconds\n\nmake bench's C request loop (npu_graph_run_host)." },
        { NULL },
};

static PyGetSetDef Graph_getset[] = {
        { "inputs", (getter)Graph_get_inputs, NULL,
          "list of (name, dtype, shape): dtype a numpy.dtype (None: open), shape a tuple (None entries: open "
          "extents; None: open rank)", NULL },
        { "outputs", (getter)Graph_get_outputs, NULL, "list of (name, dtype, shape), as inputs", NULL },
        { NULL },
};

static PyMemberDef Graph_members[] = {
        { "device", T_INT, offsetof(GraphObject, device), READONLY, "the device holding the weights" },
        { NULL },
};

static PyTypeObject Graph_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu.Graph",
        .tp_basicsize = sizeof(GraphObject),
        .tp_dealloc = (destructor)Graph_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT,
        .tp_doc = "An ONNX model loaded into npud (ctx.load). Several threads may run it at once.",
        .tp_methods = Graph_methods,
        .tp_getset = Graph_getset,
        .tp_members = Graph_members,
};

/* ------------------------------------------------------------------ Context type */

static PyMethodDef Context_methods[] = {
        { "close", (PyCFunction)Context_close, METH_NOARGS,
          "close()\n\nDisconnect; npud releases everything the context holds. Raises BusyError while host "
          "regions are viewed through the buffer protocol. Pending run_async futures fail with "
          "ConnectionLostError." },
        { "__enter__", Context_enter, METH_NOARGS, NULL },
        { "__exit__", Context_exit, METH_VARARGS, NULL },
        { "devices", (PyCFunction)Context_devices, METH_NOARGS, "devices() -> list of DeviceInfo" },
        { "ping", (PyCFunction)Context_ping, METH_NOARGS, "ping()\n\nA null round trip to npud." },
        { "synchronize", (PyCFunction)Context_synchronize, METH_NOARGS,
          "synchronize()\n\nWait for all work of the context on every stream (npu_synchronize)." },
        { "load", (PyCFunction)(void (*)(void))Context_load, METH_VARARGS | METH_KEYWORDS,
          "load(model, device=0, accumulate=\"float32\") -> Graph\n\nmodel: a path or the ONNX model's bytes; accumulate: \"float64\" sums the graph's products in float64 (npu_graph_load_with)." },
        { "empty", (PyCFunction)(void (*)(void))Context_empty, METH_VARARGS | METH_KEYWORDS,
          "empty(shape, dtype=numpy.float32, device=0) -> DeviceArray (uninitialised device memory)" },
        { "array", (PyCFunction)(void (*)(void))Context_array, METH_VARARGS | METH_KEYWORDS,
          "array(data, device=0) -> DeviceArray holding a copy of data (an ndarray or array-like)" },
        { "host_alloc", (PyCFunction)Context_host_alloc, METH_VARARGS,
          "host_alloc(size) -> HostRegion (host memory shared with npud; buffer protocol)" },
        { "stream", (PyCFunction)(void (*)(void))Context_stream, METH_VARARGS | METH_KEYWORDS,
          "stream(device=-1, priority=4) -> Stream (device -1: placed by npud)" },
        { "event", (PyCFunction)Context_event, METH_NOARGS, "event() -> Event" },
        { "launch", (PyCFunction)(void (*)(void))Context_launch, METH_VARARGS | METH_KEYWORDS,
          "launch(op, inputs, outputs, stream=None, **attrs) -> task\n\nQueue one operator (\"MatMul\", "
          "\"Conv\", ...) on DeviceArrays; other keywords are its int or float attributes. Errors of the "
          "queued work surface at the next synchronize." },
        { "admin", (PyCFunction)Context_admin, METH_VARARGS,
          "admin(method, params_json=None) -> str\n\nnpud's JSON answer of an admin method (\"devices\", "
          "\"sessions\", ...)." },
        { "_dispatch", (PyCFunction)Context_dispatch, METH_NOARGS, "The completion fd's reader (internal)." },
        { NULL },
};

static PyGetSetDef Context_getset[] = {
        { "tenant", (getter)Context_get_tenant, NULL, "the tenant the session belongs to", NULL },
        { "closed", (getter)Context_get_closed, NULL, "whether close() was called", NULL },
        { NULL },
};

static PyTypeObject Context_Type = {
        PyVarObject_HEAD_INIT(NULL, 0)
        .tp_name = "npu.Context",
        .tp_basicsize = sizeof(ContextObject),
        .tp_dealloc = (destructor)Context_dealloc,
        .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
        .tp_doc = "A session with npud (npu.connect). A context manager; every method may be called from "
                  "any thread.",
        .tp_traverse = (traverseproc)Context_traverse,
        .tp_clear = (inquiry)Context_clear,
        .tp_methods = Context_methods,
        .tp_getset = Context_getset,
        .tp_weaklistoffset = offsetof(ContextObject, weakrefs),
};

/* ------------------------------------------------------------------ module */

static PyObject *npu_strerror_py(PyObject *mod, PyObject *arg)
{
        long v = PyLong_AsLong(arg);

        if (v == -1 && PyErr_Occurred())
                return NULL;
        return PyUnicode_FromString(npu_strerror((npu_status_t)v));
}

static PyMethodDef module_methods[] = {
        { "connect", (PyCFunction)(void (*)(void))npu_connect_py, METH_VARARGS | METH_KEYWORDS,
          "connect(socket=None, tenant=None, backpressure='block', wait_spin_us=0) -> Context\n\n"
          "socket None: $NPU_SOCKET, else the system socket, else this user's. backpressure: 'block' (submitting "
          "calls wait when over the session's limits) or 'error' (work over the limit fails with BusyError). "
          "wait_spin_us: how long a wait for a reply polls before it sleeps (0: 200 for a latency-critical "
          "tenant, none otherwise; -1: never)." },
        { "strerror", npu_strerror_py, METH_O, "strerror(status) -> str" },
        { NULL },
};

static struct PyModuleDef npu_module = {
        PyModuleDef_HEAD_INIT,
        .m_name = "npu",
        .m_doc = "Python binding of libnpu, the client library of npud (docs/python.md).\n\n"
                 "    with npu.connect() as ctx:\n"
                 "        g = ctx.load('model.onnx')\n"
                 "        y = g.run({'x': x})['y']\n",
        .m_size = -1,
        .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit_npu(void)
{
        PyObject *m;
        PyTypeObject *types[] = { &Context_Type, &Graph_Type, &DeviceArray_Type, &HostRegion_Type, &Stream_Type,
                                  &Event_Type, &AsyncRun_Type };
        const char *names[] = { "Context", "Graph", "DeviceArray", "HostRegion", "Stream", "Event", NULL };

        import_array();
        m = PyModule_Create(&npu_module);
        if (!m)
                return NULL;
        for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
                if (PyType_Ready(types[i]) < 0)
                        goto fail;
                if (names[i] && PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
                        goto fail;
        }
        DeviceInfo_Type = PyStructSequence_NewType(&devinfo_desc);
        if (!DeviceInfo_Type || PyModule_AddObjectRef(m, "DeviceInfo", (PyObject *)DeviceInfo_Type) < 0)
                goto fail;
        {
                PyObject *dict = PyDict_New();
                if (!dict)
                        goto fail;
                PyDict_SetItemString(dict, "__doc__", PyUnicode_FromString(
                        "Base of npu's errors. Attributes: status (the npu_status_t number), message (libnpu's "
                        "detail), task (the failed task's number, 0 when the failure was not a queued task)."));
                npu_Error = PyErr_NewException("npu.Error", NULL, dict);
                Py_DECREF(dict);
        }
        if (!npu_Error || PyModule_AddObjectRef(m, "Error", npu_Error) < 0)
                goto fail;
        for (size_t i = 0; i < sizeof(err_names) / sizeof(err_names[0]); i++) {
                char full[64];
                snprintf(full, sizeof(full), "npu.%s", err_names[i].name);
                PyObject *cls = PyErr_NewExceptionWithDoc(full, err_names[i].doc, npu_Error, NULL);
                if (!cls || PyModule_AddObjectRef(m, err_names[i].name, cls) < 0)
                        goto fail;
                PyObject *code = PyLong_FromLong(err_names[i].status);
                if (!code || PyObject_SetAttrString(cls, "status", code) < 0)
                        goto fail;
                Py_DECREF(code);
                err_class[err_names[i].status] = cls;
        }
        if (PyModule_AddStringConstant(m, "__version__", npu_version()) < 0 ||
            PyModule_AddIntConstant(m, "DEVICE_ANY", NPU_DEVICE_ANY) < 0)
                goto fail;
        return m;
fail:
        Py_DECREF(m);
        return NULL;
}
