/* npu-onnx-test: the ONNX backend conformance runner. Finds every backend test directory
 * (model.onnx + test_data_set_*) under the given roots, runs each model through npud's graph
 * API (npu_graph_load / npu_graph_run) on every data set and compares the outputs with the
 * suite's expected tensors and tolerances. One line per test, a final "N passed, M failed",
 * optionally a JSON report and a summary by failure class.
 *
 * Each test runs in a child process with its own connection: a test that hangs is killed at
 * --timeout (npud reclaims its session), a corrupt file or a runner bug cannot end the run,
 * and a daemon that dies in one test is restarted (when the runner started it) or reconnected
 * to before the next. Exit status: 0 after a complete run whatever the results (the CI gate
 * is tests/onnx/expected-pass.txt), 2 usage, 3 npud unreachable or could not be started. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "npu.h"
#include "onnx.pb-c.h"
#include "onnx-tensor.h"

#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3
#define DEFAULT_TIMEOUT_S 60.0
#define MAX_WALK_DEPTH 16
#define MAX_MODEL_BYTES (UINT64_C(2) << 30)
#define REASON_MAX 1024
#define TOP_OPS 15
#define TOP_NAMES 8
#define MAX_JOBS 64
#define MAX_BATCH 32

/* ---- small helpers ---- */

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char *path_join(const char *a, const char *b)
{
        char *p = NULL;

        if (asprintf(&p, "%s/%s", a, b) < 0)
                return NULL;
        return p;
}

static int is_dir(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
        struct stat st;

        return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Whole file into memory (NULL with errno set on failure; a one-byte buffer for empty). */
static void *read_file(const char *path, size_t *ret_len)
{
        struct stat st;
        uint8_t *buf;
        size_t done = 0;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return NULL;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_MODEL_BYTES) {
                close(fd);
                errno = EFBIG;
                return NULL;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf) {
                close(fd);
                return NULL;
        }
        while (done < (size_t)st.st_size) {
                ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                done += (size_t)n;
        }
        close(fd);
        *ret_len = done;
        return buf;
}

static int write_all(int fd, const char *s, size_t len)
{
        while (len > 0) {
                ssize_t n = write(fd, s, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                s += n;
                len -= (size_t)n;
        }
        return 0;
}

/* ---- test discovery ---- */

struct test {
        char *name; /* the directory's base name, e.g. "test_abs" */
        char *dir;
};

struct test_list {
        struct test *v;
        size_t n, cap;
};

static int has_data_set(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        int found = 0;

        if (!d)
                return 0;
        while (!found && (e = readdir(d)))
                if (strncmp(e->d_name, "test_data_set_", 14) == 0) {
                        char *p = path_join(dir, e->d_name);
                        found = p && is_dir(p);
                        free(p);
                }
        closedir(d);
        return found;
}

static int is_test_dir(const char *dir)
{
        char *model = path_join(dir, "model.onnx");
        int yes = model && is_file(model) && has_data_set(dir);

        free(model);
        return yes;
}

static int test_list_add(struct test_list *l, const char *dir)
{
        const char *slash;
        char *copy = strdup(dir);
        size_t len;

        if (!copy)
                return -ENOMEM;
        len = strlen(copy); /* "a/b/" names the test "b" */
        while (len > 1 && copy[len - 1] == '/')
                copy[--len] = '\0';
        slash = strrchr(copy, '/');
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 256;
                struct test *v = realloc(l->v, cap * sizeof(*v));
                if (!v) {
                        free(copy);
                        return -ENOMEM;
                }
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n].dir = copy;
        l->v[l->n].name = strdup(slash ? slash + 1 : copy);
        if (!l->v[l->n].name) {
                free(copy);
                return -ENOMEM;
        }
        l->n++;
        return 0;
}

/* A test directory is not searched further: its data sets are not tests. */
static int walk(struct test_list *l, const char *dir, int depth)
{
        DIR *d;
        struct dirent *e;
        int r = 0;

        if (is_test_dir(dir))
                return test_list_add(l, dir);
        if (depth >= MAX_WALK_DEPTH || !(d = opendir(dir)))
                return 0;
        while (r == 0 && (e = readdir(d))) {
                char *p;
                if (e->d_name[0] == '.')
                        continue;
                p = path_join(dir, e->d_name);
                if (!p) {
                        r = -ENOMEM;
                        break;
                }
                if (is_dir(p))
                        r = walk(l, p, depth + 1);
                free(p);
        }
        closedir(d);
        return r;
}

static int test_cmp(const void *a, const void *b)
{
        const struct test *x = a, *y = b;
        int c = strcmp(x->name, y->name);

        return c ? c : strcmp(x->dir, y->dir);
}

static void test_list_free(struct test_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->v[i].name);
                free(l->v[i].dir);
        }
        free(l->v);
        l->v = NULL;
        l->n = l->cap = 0;
}

/* ---- one test, run in a child process ---- */

/* What the child reports. status "pass" / "fail" / "unsupported"; class NULL for a pass. */
struct outcome {
        const char *status;
        const char *class;
        char reason[REASON_MAX];
        char what[256];        /* the text after "unsupported: " */
        json_t *ops;           /* operator types of the model, in first-use order */
        json_t *unsupported;   /* operators the daemon named unsupported */
        int lost;              /* the connection to npud broke */
};

static void set_outcome(struct outcome *o, const char *status, const char *class,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void set_outcome(struct outcome *o, const char *status, const char *class,
                        const char *fmt, ...)
{
        va_list ap;

        o->status = status;
        o->class = class;
        va_start(ap, fmt);
        vsnprintf(o->reason, sizeof(o->reason), fmt, ap);
        va_end(ap);
}

static const char *last_error(npu_status_t st)
{
        const char *m = npu_error_message();

        return m && *m ? m : npu_strerror(st);
}

static void add_unique(json_t *arr, const char *s)
{
        for (size_t j = 0; j < json_array_size(arr); j++)
                if (strcmp(json_string_value(json_array_get(arr, j)), s) == 0)
                        return;
        json_array_append_new(arr, json_string(s));
}

static int op_char(char c)
{
        return c == '_' || c == '.' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') ||
               (c >= 'a' && c <= 'z');
}

/* Graph inputs or outputs the runner can feed: dense tensors of a numeric dtype. */
static int check_value_types(Onnx__ValueInfoProto **v, size_t n, const char *what,
                             char *msg, size_t len)
{
        for (size_t i = 0; i < n; i++) {
                Onnx__TypeProto *t = v[i] ? v[i]->type : NULL;
                const char *name = v[i] && v[i]->name ? v[i]->name : "?";

                if (!t || t->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
                        continue; /* untyped: the data file will tell */
                switch (t->value_case) {
                case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
                        if (t->tensor_type && t->tensor_type->has_elem_type &&
                            onnx_dtype_size(t->tensor_type->elem_type) == 0) {
                                snprintf(msg, len, "%s '%s': dtype %s", what, name,
                                         onnx_dtype_name(t->tensor_type->elem_type));
                                return -1;
                        }
                        break;
                case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
                        snprintf(msg, len, "%s '%s': dtype sequence", what, name);
                        return -1;
                case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
                        snprintf(msg, len, "%s '%s': dtype map", what, name);
                        return -1;
                case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
                        snprintf(msg, len, "%s '%s': dtype optional", what, name);
                        return -1;
                default:
                        snprintf(msg, len, "%s '%s': dtype sparse tensor", what, name);
                        return -1;
                }
        }
        return 0;
}

/* What the runner needs of the model itself: its operators, and whether its inputs and
 * outputs are tensors it can feed (dtype_msg empty) or not. */
static int scan_model(const void *buf, size_t len, json_t *ops, char *dtype_msg, size_t msglen)
{
        Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, buf);
        Onnx__GraphProto *g;

        dtype_msg[0] = '\0';
        if (!m)
                return -1;
        g = m->graph;
        for (size_t i = 0; g && i < g->n_node; i++) {
                const Onnx__NodeProto *nd = g->node[i];
                const char *op = nd && nd->op_type ? nd->op_type : "";
                const char *dom = nd && nd->domain ? nd->domain : "";
                char name[256];
                /* named as npud's load errors name them: "domain.Op" outside ai.onnx */
                if (*dom && strcmp(dom, "ai.onnx") != 0)
                        snprintf(name, sizeof(name), "%s.%s", dom, op);
                else
                        snprintf(name, sizeof(name), "%s", op);
                add_unique(ops, name);
        }
        if (g && check_value_types(g->input, g->n_input, "input", dtype_msg, msglen) == 0)
                check_value_types(g->output, g->n_output, "output", dtype_msg, msglen);
        onnx__model_proto__free_unpacked(m, NULL);
        return g ? 0 : -1;
}

/* Operators named by a load error: "node 'x' (Foo): unsupported operator" (any number of
 * them), or a list, "unsupported operator(s)[:] Foo, 'Bar' (node 'y'), ...". */
static void parse_unsupported_ops(const char *msg, json_t *ret)
{
        static const char key[] = "unsupported operator";
        const char *p = msg;

        while ((p = strstr(p, key))) {
                char op[128];
                const char *s = p + sizeof(key) - 1;
                size_t n;

                if (p - msg >= 3 && p[-1] == ' ' && p[-2] == ':' && p[-3] == ')') {
                        const char *end = p - 3, *start = end;
                        while (start > msg && start[-1] != '(')
                                start--;
                        n = (size_t)(end - start);
                        if (start > msg && n > 0 && n < sizeof(op)) {
                                memcpy(op, start, n);
                                op[n] = '\0';
                                add_unique(ret, op);
                        }
                        p = s;
                        continue;
                }
                if (*s == 's')
                        s++;
                for (;;) {
                        while (*s == ':' || *s == ' ' || *s == '\'' || *s == '"')
                                s++;
                        for (n = 0; n < sizeof(op) - 1 && op_char(s[n]); n++)
                                op[n] = s[n];
                        if (n == 0)
                                break;
                        op[n] = '\0';
                        add_unique(ret, op);
                        s += n;
                        while (*s == '\'' || *s == '"' || *s == ' ')
                                s++;
                        if (*s == '(') { /* "(node 'y')" after the name */
                                const char *close = strchr(s, ')');
                                s = close ? close + 1 : s + strlen(s);
                        }
                        if (*s != ',')
                                break;
                        s++;
                }
                p = s > p ? s : p + 1;
        }
}

/* Classify a failed load or run: operators the daemon names unsupported, dtypes the runner
 * (dtype_msg) or a kernel cannot handle, else `class` (mismatch or error). */
static void classify_daemon_error(struct outcome *o, const char *stage, npu_status_t st,
                                  const char *msg, const char *dtype_msg, const char *class)
{
        if (st == NPU_ERR_CONNECTION)
                o->lost = 1;
        parse_unsupported_ops(msg, o->unsupported);
        if (json_array_size(o->unsupported) > 0) {
                size_t used = 0;
                for (size_t i = 0; i < json_array_size(o->unsupported) && used < sizeof(o->what); i++)
                        used += (size_t)snprintf(o->what + used, sizeof(o->what) - used, "%s%s",
                                                 i ? ", " : "",
                                                 json_string_value(json_array_get(o->unsupported, i)));
                set_outcome(o, "unsupported", "unsupported-op", "%s: %s", stage, msg);
        } else if (strstr(msg, "unsupported operator")) { /* a count, too many to name */
                snprintf(o->what, sizeof(o->what), "operators (%s)", msg);
                set_outcome(o, "unsupported", "unsupported-op", "%s: %s", stage, msg);
        } else if (dtype_msg[0]) {
                snprintf(o->what, sizeof(o->what), "%s", dtype_msg);
                set_outcome(o, "unsupported", "unsupported-dtype", "%s (%s: %s)", dtype_msg, stage, msg);
        } else if (strstr(msg, "unsupported dtype") ||
                   (st == NPU_ERR_UNSUPPORTED && strstr(msg, "dtype"))) {
                snprintf(o->what, sizeof(o->what), "dtype (%s)", msg);
                set_outcome(o, "unsupported", "unsupported-dtype", "%s: %s", stage, msg);
        } else {
                set_outcome(o, "fail", class, "%s: %s", stage, msg);
        }
}

/* The test_data_set_N directories of a test, in numeric order. */
static int data_set_cmp(const void *a, const void *b)
{
        long x = strtol(*(char *const *)a + 14, NULL, 10);
        long y = strtol(*(char *const *)b + 14, NULL, 10);

        return x < y ? -1 : x > y ? 1 : strcmp(*(char *const *)a, *(char *const *)b);
}

static char **list_data_sets(const char *dir, size_t *ret_n)
{
        DIR *d = opendir(dir);
        struct dirent *e;
        char **v = NULL;
        size_t n = 0;

        if (!d)
                return NULL;
        while ((e = readdir(d))) {
                char **nv;
                if (strncmp(e->d_name, "test_data_set_", 14) != 0)
                        continue;
                nv = realloc(v, (n + 1) * sizeof(*v));
                if (!nv)
                        break;
                v = nv;
                v[n] = strdup(e->d_name);
                if (v[n])
                        n++;
        }
        closedir(d);
        if (n)
                qsort(v, n, sizeof(*v), data_set_cmp);
        *ret_n = n;
        return v;
}

struct tensor_set {
        struct onnx_tensor *t;
        int n;
};

static void tensor_set_free(struct tensor_set *s)
{
        for (int i = 0; i < s->n; i++)
                onnx_tensor_free(&s->t[i]);
        free(s->t);
        s->t = NULL;
        s->n = 0;
}

/* prefix_0.pb, prefix_1.pb, ... of a data set until the first missing one. */
static int load_tensors(const char *dir, const char *prefix, struct tensor_set *ret,
                        struct outcome *o, const char *ds_tag)
{
        for (int k = 0;; k++) {
                char file[64], err[256];
                char *path;
                void *buf;
                size_t len = 0;
                struct onnx_tensor *nt;
                int r;

                snprintf(file, sizeof(file), "%s_%d.pb", prefix, k);
                path = path_join(dir, file);
                if (!path || !is_file(path)) {
                        free(path);
                        return 0;
                }
                buf = read_file(path, &len);
                free(path);
                if (!buf) {
                        set_outcome(o, "fail", "error", "%s%s: %s", ds_tag, file, strerror(errno));
                        return -1;
                }
                nt = realloc(ret->t, (size_t)(k + 1) * sizeof(*nt));
                if (!nt) {
                        free(buf);
                        set_outcome(o, "fail", "error", "%sout of memory", ds_tag);
                        return -1;
                }
                ret->t = nt;
                r = onnx_tensor_parse(buf, len, &ret->t[k], err, sizeof(err));
                free(buf);
                if (r == -ENOTSUP) {
                        snprintf(o->what, sizeof(o->what), "%s", err);
                        set_outcome(o, "unsupported", "unsupported-dtype", "%s%s: %s", ds_tag, file, err);
                        return -1;
                }
                if (r < 0) {
                        set_outcome(o, "fail", "error", "%s%s: %s", ds_tag, file, err);
                        return -1;
                }
                ret->n = k + 1;
        }
}

/* Device buffers of one data set. */
struct bound {
        npu_buffer_t *bufs;
        int n;
};

static npu_status_t bind_tensor(npu_context_t *ctx, const struct onnx_tensor *t, int copy_in,
                                npu_buffer_t *ret_buf, npu_tensor_t *ret_desc)
{
        uint64_t bytes = t->count * t->elem_size;
        npu_status_t st;

        /* npud refuses zero-size buffers; an empty tensor gets one byte it never touches */
        st = npu_malloc(ctx, 0, bytes ? bytes : 1, ret_buf);
        if (st != NPU_OK)
                return st;
        if (copy_in && bytes) {
                st = npu_memcpy_to_device(ctx, *ret_buf, 0, t->data, bytes);
                if (st != NPU_OK)
                        return st;
        }
        memset(ret_desc, 0, sizeof(*ret_desc));
        ret_desc->buf = *ret_buf;
        ret_desc->dtype = (npu_dtype_t)t->dtype;
        ret_desc->ndim = t->ndim;
        for (int i = 0; i < t->ndim; i++)
                ret_desc->dims[i] = t->dims[i];
        return NPU_OK;
}

/* Put the data set's inputs in the graph's order: by tensor name when every file names a
 * graph input, else by position (input_K.pb is graph input K). */
static int order_inputs(json_t *graph_inputs, const struct tensor_set *in, int *order)
{
        int n = in->n;

        for (int i = 0; i < n; i++)
                order[i] = i;
        for (int i = 0; i < n; i++) {
                const char *gname = json_string_value(json_object_get(json_array_get(graph_inputs, (size_t)i), "name"));
                int found = -1;
                if (!gname)
                        return 0;
                for (int k = 0; k < n; k++)
                        if (strcmp(in->t[k].name, gname) == 0)
                                found = k;
                if (found < 0) { /* not all named: positional */
                        for (int k = 0; k < n; k++)
                                order[k] = k;
                        return 0;
                }
                order[i] = found;
        }
        return 0;
}

/* Declared dtype of a graph info entry ({"name","dtype","shape"}), 0 when not given. */
static int info_dtype(json_t *entry)
{
        json_t *d = json_object_get(entry, "dtype");

        if (json_is_integer(d))
                return (int)json_integer_value(d);
        if (json_is_string(d))
                for (int c = 1; c <= NPU_BFLOAT16; c++)
                        if (strcmp(json_string_value(d), onnx_dtype_name(c)) == 0)
                                return c;
        return 0;
}

/* The ONNX 1.12 test data stores bfloat16 tensors as uint16 bit patterns (numpy has no
 * bfloat16): take them as the bfloat16 the graph declares. */
static void retag_bfloat16(struct onnx_tensor *t, json_t *entry)
{
        if (t->dtype == NPU_UINT16 && info_dtype(entry) == NPU_BFLOAT16)
                t->dtype = NPU_BFLOAT16;
}

static void run_data_set(npu_context_t *ctx, npu_graph_t g, npu_stream_t s, json_t *info,
                         const char *dir, const char *ds_tag, struct outcome *o)
{
        struct tensor_set in = { 0 }, out = { 0 };
        json_t *gin = json_object_get(info, "inputs"), *gout = json_object_get(info, "outputs");
        npu_buffer_t *bufs = NULL;
        npu_tensor_t *desc = NULL;
        int *order = NULL;
        int nbufs = 0;
        npu_status_t st;

        if (load_tensors(dir, "input", &in, o, ds_tag) < 0 ||
            load_tensors(dir, "output", &out, o, ds_tag) < 0)
                goto done;
        if (json_is_array(gin) && json_array_size(gin) != (size_t)in.n) {
                set_outcome(o, "fail", "error", "%sthe graph has %zu inputs, the data set %d",
                            ds_tag, json_array_size(gin), in.n);
                goto done;
        }
        if (json_is_array(gout) && json_array_size(gout) != (size_t)out.n) {
                set_outcome(o, "fail", "error", "%sthe graph has %zu outputs, the data set %d",
                            ds_tag, json_array_size(gout), out.n);
                goto done;
        }
        bufs = calloc((size_t)(in.n + out.n) + 1, sizeof(*bufs));
        desc = calloc((size_t)(in.n + out.n) + 1, sizeof(*desc));
        order = calloc((size_t)in.n + 1, sizeof(*order));
        if (!bufs || !desc || !order) {
                set_outcome(o, "fail", "error", "%sout of memory", ds_tag);
                goto done;
        }
        order_inputs(gin, &in, order);
        for (int i = 0; i < in.n; i++)
                retag_bfloat16(&in.t[order[i]], json_array_get(gin, (size_t)i));
        for (int k = 0; k < out.n; k++)
                retag_bfloat16(&out.t[k], json_array_get(gout, (size_t)k));
        for (int i = 0; i < in.n + out.n; i++) {
                int is_in = i < in.n;
                const struct onnx_tensor *t = is_in ? &in.t[order[i]] : &out.t[i - in.n];
                st = bind_tensor(ctx, t, is_in, &bufs[nbufs], &desc[i]);
                if (st == NPU_OK || bufs[nbufs].id)
                        nbufs++;
                if (st != NPU_OK) {
                        o->lost = st == NPU_ERR_CONNECTION;
                        set_outcome(o, "fail", "error", "%s%s %d: %s", ds_tag,
                                    is_in ? "input" : "output", is_in ? i : i - in.n,
                                    last_error(st));
                        goto done;
                }
        }
        st = npu_graph_run(ctx, s, g, desc, in.n, desc + in.n, out.n, NULL);
        if (st == NPU_OK)
                st = npu_stream_synchronize(ctx, s);
        if (st != NPU_OK) {
                char tag[320];
                snprintf(tag, sizeof(tag), "%srun", ds_tag);
                const char *msg = last_error(st);
                /* a wrong result is an output whose computed dtype or shape is not the
                 * expected one ("output 'y' is float [2,3] but bound as ..."); other shape
                 * errors (a node's inference failing) are errors */
                int wrong = st == NPU_ERR_SHAPE && strstr(msg, "output '") &&
                            strstr(msg, " but bound as ");
                classify_daemon_error(o, tag, st, msg, "", wrong ? "mismatch" : "error");
                goto done;
        }
        for (int k = 0; k < out.n; k++) {
                const struct onnx_tensor *e = &out.t[k];
                uint64_t bytes = e->count * e->elem_size;
                struct onnx_mismatch m;
                char idx[160];
                void *got = malloc(bytes ? bytes : 1);

                if (!got) {
                        set_outcome(o, "fail", "error", "%sout of memory", ds_tag);
                        goto done;
                }
                st = bytes ? npu_memcpy_from_device(ctx, got, bufs[in.n + k], 0, bytes) : NPU_OK;
                if (st != NPU_OK) {
                        free(got);
                        o->lost = st == NPU_ERR_CONNECTION;
                        set_outcome(o, "fail", "error", "%soutput %d: copy out: %s", ds_tag, k,
                                    last_error(st));
                        goto done;
                }
                if (onnx_tensor_compare(e, got, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m) > 0) {
                        onnx_tensor_format_index(e, m.first, idx, sizeof(idx));
                        set_outcome(o, "fail", "mismatch",
                                    "%soutput %d mismatch at %s: %s vs %s (%llu of %llu elements differ)",
                                    ds_tag, k, idx, m.actual, m.expected,
                                    (unsigned long long)m.count, (unsigned long long)e->count);
                        free(got);
                        goto done;
                }
                free(got);
        }
done:
        if (!o->lost)
                for (int i = 0; i < nbufs; i++)
                        npu_free(ctx, bufs[i]);
        free(bufs);
        free(desc);
        free(order);
        tensor_set_free(&in);
        tensor_set_free(&out);
}

static void run_test(const struct test *t, const char *sock, struct outcome *o)
{
        char *model_path = path_join(t->dir, "model.onnx");
        char dtype_msg[256] = "";
        npu_context_t *ctx = NULL;
        npu_graph_t g = { 0 };
        npu_stream_t s = { 0 };
        char **sets = NULL;
        size_t nsets = 0, len = 0;
        char *info_text = NULL;
        json_t *info = NULL;
        void *model = NULL;
        npu_status_t st;

        set_outcome(o, "pass", NULL, "%s", "");
        model = model_path ? read_file(model_path, &len) : NULL;
        if (!model) {
                set_outcome(o, "fail", "error", "model.onnx: %s", strerror(errno));
                goto done;
        }
        if (scan_model(model, len, o->ops, dtype_msg, sizeof(dtype_msg)) < 0) {
                set_outcome(o, "fail", "error", "model.onnx: not a valid ModelProto");
                goto done;
        }
        st = npu_connect(sock, &ctx);
        if (st != NPU_OK) {
                o->lost = 1;
                set_outcome(o, "fail", "error", "connect: %s", last_error(st));
                ctx = NULL;
                goto done;
        }
        st = npu_graph_load(ctx, 0, model, len, &g);
        if (st != NPU_OK) {
                g.id = 0;
                classify_daemon_error(o, "load", st, last_error(st), dtype_msg, "error");
                goto done;
        }
        if (dtype_msg[0]) {
                snprintf(o->what, sizeof(o->what), "%s", dtype_msg);
                set_outcome(o, "unsupported", "unsupported-dtype", "%s", dtype_msg);
                goto done;
        }
        st = npu_graph_info(ctx, g, &info_text);
        if (st != NPU_OK) {
                o->lost = st == NPU_ERR_CONNECTION;
                set_outcome(o, "fail", "error", "info: %s", last_error(st));
                info_text = NULL;
                goto done;
        }
        info = json_loads(info_text, 0, NULL);
        if (!json_is_object(info)) {
                set_outcome(o, "fail", "error", "info: not a JSON object");
                goto done;
        }
        st = npu_stream_create(ctx, 0, 0, &s);
        if (st != NPU_OK) {
                o->lost = st == NPU_ERR_CONNECTION;
                set_outcome(o, "fail", "error", "stream: %s", last_error(st));
                s.id = 0;
                goto done;
        }
        sets = list_data_sets(t->dir, &nsets);
        if (nsets == 0)
                set_outcome(o, "fail", "error", "no data sets");
        for (size_t i = 0; i < nsets && strcmp(o->status, "pass") == 0; i++) {
                char *dir = path_join(t->dir, sets[i]);
                char tag[300] = "";
                if (nsets > 1) /* name the data set only where there is a choice */
                        snprintf(tag, sizeof(tag), "%s: ", sets[i]);
                if (!dir) {
                        set_outcome(o, "fail", "error", "out of memory");
                        break;
                }
                run_data_set(ctx, g, s, info, dir, tag, o);
                free(dir);
        }
done:
        if (ctx && !o->lost) {
                if (s.id)
                        npu_stream_destroy(ctx, s);
                if (g.id)
                        npu_graph_unload(ctx, g);
        }
        if (ctx)
                npu_disconnect(ctx);
        for (size_t i = 0; i < nsets; i++)
                free(sets[i]);
        free(sets);
        json_decref(info);
        free(info_text);
        free(model);
        free(model_path);
}

static json_t *outcome_json(const struct outcome *o)
{
        return json_pack("{s:s, s:s?, s:s, s:s, s:O, s:O, s:b}", "status", o->status,
                         "class", o->class, "reason", o->reason, "what", o->what,
                         "ops", o->ops, "unsupported_ops", o->unsupported, "lost", o->lost);
}

/* ---- npud: the one given, the default one, or one the runner starts ---- */

struct daemon {
        const char *socket;    /* NULL: $NPU_SOCKET or the default socket */
        int own;               /* started by the runner */
        pid_t pid;
        char dir[64], sock[128], log[128];
        char bin[PATH_MAX];
        int wstatus;           /* of the last instance that died */
        int restarts;
};

static int reachable(const char *sock)
{
        npu_context_t *ctx;
        int ok;

        if (npu_connect(sock, &ctx) != NPU_OK)
                return 0;
        ok = npu_ping(ctx) == NPU_OK;
        npu_disconnect(ctx);
        return ok;
}

/* npud next to this binary (build/bin/npud), unless NPUD_BIN names another. */
static int find_npud(struct daemon *d)
{
        const char *env = getenv("NPUD_BIN");
        char self[PATH_MAX];
        ssize_t n;
        char *slash;

        if (env && *env) {
                snprintf(d->bin, sizeof(d->bin), "%s", env);
                return 0;
        }
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return -1;
        self[n] = '\0';
        slash = strrchr(self, '/');
        if (!slash)
                return -1;
        *slash = '\0';
        if ((size_t)snprintf(d->bin, sizeof(d->bin), "%s/npud", self) >= sizeof(d->bin))
                return -1;
        return 0;
}

static int daemon_spawn(struct daemon *d)
{
        const char *argv[] = { d->bin, "--socket", d->sock, "--sim-devices", "1",
                               "--log-level", "warn", NULL };

        d->pid = fork();
        if (d->pid < 0)
                return -1;
        if (d->pid == 0) {
                int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                if (fd >= 0) {
                        dup2(fd, 1);
                        dup2(fd, 2);
                }
                setpgid(0, 0); /* a Ctrl-C at the terminal is the runner's to handle */
                prctl(PR_SET_PDEATHSIG, SIGTERM); /* and if the runner is killed, npud goes too */
                execv(d->bin, (char *const *)argv);
                _exit(127);
        }
        for (int i = 0; i < 1000; i++) { /* up to 10 s: an ASan build starts slowly */
                if (reachable(d->sock))
                        return 0;
                if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
                        d->pid = 0;
                        return -1;
                }
                usleep(10000);
        }
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
        return -1;
}

static int daemon_start_own(struct daemon *d)
{
        if (find_npud(d) < 0 || access(d->bin, X_OK) < 0) {
                fprintf(stderr, "npu-onnx-test: no npud to start (%s)\n", d->bin[0] ? d->bin : "?");
                return -1;
        }
        snprintf(d->dir, sizeof(d->dir), "/tmp/npu-onnx-test-XXXXXX");
        if (!mkdtemp(d->dir)) {
                fprintf(stderr, "npu-onnx-test: mkdtemp: %s\n", strerror(errno));
                return -1;
        }
        snprintf(d->sock, sizeof(d->sock), "%s/npud.sock", d->dir);
        snprintf(d->log, sizeof(d->log), "%s/npud.log", d->dir);
        d->own = 1;
        d->socket = d->sock;
        if (daemon_spawn(d) < 0) {
                fprintf(stderr, "npu-onnx-test: could not start %s\n", d->bin);
                return -1;
        }
        return 0;
}

static void show_log_tail(const struct daemon *d)
{
        size_t len = 0;
        char *text = read_file(d->log, &len);

        if (text && len) {
                size_t from = len > 4000 ? len - 4000 : 0;
                fprintf(stderr, "--- npud log (%s) ---\n", d->log);
                fwrite(text + from, 1, len - from, stderr);
                fprintf(stderr, "---\n");
        }
        free(text);
}

/* SIGTERM, then SIGKILL after 10 s. Returns the exit status (0 clean). */
static int daemon_stop(struct daemon *d)
{
        int status = 0;

        if (d->pid <= 0)
                return 0;
        kill(d->pid, SIGTERM);
        for (int i = 0; i < 1000; i++) {
                if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
                        d->pid = 0;
                        break;
                }
                usleep(10000);
        }
        if (d->pid > 0) {
                kill(d->pid, SIGKILL);
                waitpid(d->pid, &status, 0);
                d->pid = 0;
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Reaps a daemon that has died, keeping its wait status for the message. */
static int daemon_alive(struct daemon *d)
{
        if (d->pid > 0 && waitpid(d->pid, &d->wstatus, WNOHANG) == d->pid)
                d->pid = 0;
        return d->pid > 0;
}

static void daemon_cleanup(struct daemon *d)
{
        if (!d->own)
                return;
        unlink(d->sock);
        unlink(d->log);
        rmdir(d->dir);
}

/* After a test that lost its connection or timed out: make npud usable for the next one.
 * 0, or -1 when it cannot be reached again. */
static int daemon_recover(struct daemon *d, const char *test, int force_restart)
{
        if (d->own) {
                if (!force_restart && daemon_alive(d) && reachable(d->sock))
                        return 0;
                if (!daemon_alive(d)) {
                        fprintf(stderr, "npu-onnx-test: npud %s during %s; restarting it\n",
                                WIFSIGNALED(d->wstatus) ? "crashed" : "exited", test);
                        show_log_tail(d);
                } else { /* alive but stuck (a timeout) or deaf: start afresh */
                        fprintf(stderr, "npu-onnx-test: restarting npud after %s\n", test);
                        daemon_stop(d);
                }
                d->restarts++;
                return daemon_spawn(d);
        }
        for (int i = 0; i < 50; i++) { /* an external npud may be restarting: wait up to 5 s */
                if (reachable(d->socket))
                        return 0;
                usleep(100000);
        }
        return -1;
}

/* ---- the run ---- */

struct options {
        const char *socket;
        const char *json;
        double timeout;
        int jobs;
        int quiet, summary, start_npud;
};

/* A batch of tests in flight in one child (a child per batch, not per test, because a fork
 * and an exit cost more than most tests under ASan): the pipe their outcomes come through,
 * one JSON line each in order, and the deadline of the one running now. */
struct slot {
        pid_t pid;             /* 0: free */
        int fd;
        size_t *tests;
        size_t ntests, ndone;
        double start, deadline; /* of the test running now */
        char *buf;
        size_t len, cap;
};

struct runner {
        struct options opt;
        struct test_list tests;
        struct daemon d;
        json_t **res;          /* per test: its final outcome, NULL while pending */
        unsigned char *retried;
        size_t next;           /* next test of the first pass */
        size_t *again;         /* tests whose batch ended before them: run in new batches */
        size_t nagain;
        size_t *retry;         /* tests that lost npud: run again, one at a time */
        size_t nretry;
        size_t batch;          /* tests per child */
        size_t printed;        /* outcomes printed so far, in test order */
        struct slot *slots;
        int draining;          /* npud must be recovered once the running tests end */
        int force_restart;     /* ... by restarting it (a test timed out) */
        size_t drain_cause;    /* the test whose outcome started the draining */
        int unreachable;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
        interrupted = sig;
}

static void runner_free(struct runner *r)
{
        for (size_t i = 0; r->res && i < r->tests.n; i++)
                json_decref(r->res[i]);
        free(r->res);
        free(r->retried);
        free(r->again);
        free(r->retry);
        for (int i = 0; r->slots && i < r->opt.jobs; i++) {
                free(r->slots[i].tests);
                free(r->slots[i].buf);
        }
        free(r->slots);
        test_list_free(&r->tests);
}

/* In the child: run the batch, one outcome line per test, and stop early when npud is lost
 * (the parent runs the rest once npud is back). The parent's state is this process's copy
 * to free, so that exit()'s leak check (ASan builds) sees only the tests' memory. */
static void child_main(struct runner *r, const struct slot *self, int fd)
{
        int rc = 0;

        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphan tests if the runner dies */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        for (int i = 0; i < r->opt.jobs; i++)
                if (r->slots[i].pid > 0)
                        close(r->slots[i].fd);
        for (size_t i = 0; i < self->ntests && rc == 0; i++) {
                struct outcome o = { .ops = json_array(), .unsupported = json_array() };
                json_t *j;
                char *text;

                run_test(&r->tests.v[self->tests[i]], r->d.socket, &o);
                j = outcome_json(&o);
                text = j ? json_dumps(j, JSON_COMPACT) : NULL;
                if (!text || write_all(fd, text, strlen(text)) < 0 || write_all(fd, "\n", 1) < 0)
                        rc = 1;
                if (o.lost)
                        rc = 2;
                free(text);
                json_decref(j);
                json_decref(o.ops);
                json_decref(o.unsupported);
        }
        close(fd);
        runner_free(r);
        exit(rc == 1);
}

static json_t *error_outcome(const char *reason, int timeout)
{
        return json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:b, s:b}", "status", "fail",
                         "class", "error", "reason", reason, "what", "", "ops",
                         "unsupported_ops", "lost", 0, "timeout", timeout);
}

/* Record a test's outcome. A test that lost its connection is run again, alone, once npud
 * is back: it may only have been in flight next to the test that broke the daemon. */
static void record(struct runner *r, size_t test, json_t *o)
{
        int lost = json_is_true(json_object_get(o, "lost"));
        int timeout = json_is_true(json_object_get(o, "timeout"));

        if (lost || timeout || (r->d.own && !daemon_alive(&r->d))) {
                if (!r->draining)
                        r->drain_cause = test;
                r->draining = 1;
                r->force_restart |= timeout;
        }
        if (lost && !r->retried[test]) {
                r->retried[test] = 1;
                r->retry[r->nretry++] = test;
                json_decref(o);
                return;
        }
        json_object_del(o, "lost");
        json_object_del(o, "timeout");
        json_object_set_new(o, "name", json_string(r->tests.v[test].name));
        r->res[test] = o;
}

static int slot_start(struct runner *r, struct slot *s)
{
        int pfd[2];
        pid_t pid;

        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -1;
        fflush(NULL);
        pid = fork();
        if (pid < 0) {
                close(pfd[0]);
                close(pfd[1]);
                return -1;
        }
        if (pid == 0) {
                close(pfd[0]);
                child_main(r, s, pfd[1]);
        }
        close(pfd[1]);
        s->pid = pid;
        s->fd = pfd[0];
        s->ndone = 0;
        s->len = 0;
        s->start = now_s();
        s->deadline = s->start + r->opt.timeout;
        return 0;
}

/* The complete outcome lines received so far. */
static void slot_take_lines(struct runner *r, struct slot *s)
{
        char *line = s->buf, *nl;

        while (s->ndone < s->ntests && (nl = memchr(line, '\n', s->len - (size_t)(line - s->buf)))) {
                json_t *o;
                double now = now_s();
                *nl = '\0';
                o = json_loads(line, 0, NULL);
                if (!json_is_object(o)) {
                        json_decref(o);
                        o = error_outcome("runner sent an unreadable result", 0);
                }
                if (o) {
                        json_object_set_new(o, "seconds", json_real(floor((now - s->start) * 1000) / 1000));
                        record(r, s->tests[s->ndone], o);
                }
                s->ndone++;
                s->start = now;
                s->deadline = now + r->opt.timeout;
                line = nl + 1;
        }
        s->len -= (size_t)(line - s->buf);
        memmove(s->buf, line, s->len);
}

/* The child has closed its pipe or its current test is past the deadline: reap it. Its
 * current test, if it had one, failed (timeout, crash); the rest of its batch is run again
 * in another. */
static void slot_finish(struct runner *r, struct slot *s, int timed_out)
{
        int status = 0;
        char reason[128];

        close(s->fd);
        if (timed_out)
                kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
                ;
        s->pid = 0;
        if (!timed_out)
                slot_take_lines(r, s);
        if (s->ndone < s->ntests && (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
                                     s->ndone == 0)) {
                if (timed_out)
                        snprintf(reason, sizeof(reason), "timeout after %g s", r->opt.timeout);
                else if (WIFSIGNALED(status))
                        snprintf(reason, sizeof(reason), "runner crashed (signal %d)", WTERMSIG(status));
                else
                        snprintf(reason, sizeof(reason), "runner exited with status %d without a result",
                                 WEXITSTATUS(status));
                json_t *o = error_outcome(reason, timed_out);
                if (o) {
                        json_object_set_new(o, "seconds", json_real(floor((now_s() - s->start) * 1000) / 1000));
                        record(r, s->tests[s->ndone], o);
                }
                s->ndone++;
        }
        while (s->ndone < s->ntests)
                r->again[r->nagain++] = s->tests[s->ndone++];
        s->ntests = 0;
}

/* Read what a child has written; 1 when it has closed its end. */
static int slot_read(struct runner *r, struct slot *s)
{
        ssize_t n;

        if (s->len + 4096 > s->cap) {
                char *nb = realloc(s->buf, s->cap + 65536);
                if (!nb)
                        return 1; /* its outcomes are lost: reported as a runner failure */
                s->buf = nb;
                s->cap += 65536;
        }
        n = read(s->fd, s->buf + s->len, s->cap - s->len - 1);
        if (n < 0)
                return errno != EINTR && errno != EAGAIN;
        if (n == 0)
                return 1;
        s->len += (size_t)n;
        slot_take_lines(r, s);
        return 0;
}

static void print_line(json_t *o)
{
        const char *name = json_string_value(json_object_get(o, "name"));
        const char *status = json_string_value(json_object_get(o, "status"));

        if (strcmp(status, "pass") == 0)
                printf("%s: pass\n", name);
        else if (strcmp(status, "unsupported") == 0)
                printf("%s: unsupported: %s\n", name, json_string_value(json_object_get(o, "what")));
        else
                printf("%s: fail: %s\n", name, json_string_value(json_object_get(o, "reason")));
}

/* Print, in test order, the outcomes that are final. */
static void print_ready(struct runner *r)
{
        while (r->printed < r->tests.n && r->res[r->printed]) {
                if (!r->opt.quiet)
                        print_line(r->res[r->printed]);
                r->printed++;
        }
}

static int running(const struct runner *r)
{
        int n = 0;

        for (int i = 0; i < r->opt.jobs; i++)
                n += r->slots[i].pid > 0;
        return n;
}

static struct slot *free_slot(struct runner *r)
{
        for (int i = 0; i < r->opt.jobs; i++)
                if (r->slots[i].pid == 0)
                        return &r->slots[i];
        return NULL;
}

/* Start what may start now: retries one at a time on a quiet daemon, else batches of the
 * tests left over from ended batches, then of new tests, up to --jobs children. Nothing
 * while npud waits to be recovered. */
static void start_tests(struct runner *r)
{
        struct slot *s;

        while (!r->draining && (s = free_slot(r))) {
                s->ntests = 0;
                if (r->nretry > 0) {
                        if (running(r) > 0)
                                return;
                        s->tests[s->ntests++] = r->retry[0];
                        memmove(r->retry, r->retry + 1, --r->nretry * sizeof(*r->retry));
                } else if (r->nagain > 0) {
                        while (r->nagain > 0 && s->ntests < r->batch)
                                s->tests[s->ntests++] = r->again[--r->nagain];
                } else {
                        while (r->next < r->tests.n && s->ntests < r->batch)
                                s->tests[s->ntests++] = r->next++;
                }
                if (s->ntests == 0)
                        return;
                if (slot_start(r, s) < 0) {
                        char reason[128];
                        snprintf(reason, sizeof(reason), "fork: %s", strerror(errno));
                        for (size_t i = 0; i < s->ntests; i++)
                                record(r, s->tests[i], error_outcome(reason, 0));
                        s->ntests = 0;
                }
        }
}

/* Wait for outcomes, ended children or a deadline (or a signal), handling each. */
static void wait_tests(struct runner *r)
{
        struct pollfd pfd[MAX_JOBS];
        int idx[MAX_JOBS], n = 0;
        double now = now_s(), first = now + 3600;

        for (int i = 0; i < r->opt.jobs; i++) {
                struct slot *s = &r->slots[i];
                if (s->pid <= 0)
                        continue;
                pfd[n] = (struct pollfd){ .fd = s->fd, .events = POLLIN };
                idx[n++] = i;
                if (s->deadline < first)
                        first = s->deadline;
        }
        if (n == 0)
                return;
        if (poll(pfd, (nfds_t)n, first > now ? (int)((first - now) * 1000) + 1 : 0) > 0) {
                for (int k = 0; k < n; k++)
                        if ((pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) &&
                            slot_read(r, &r->slots[idx[k]]))
                                slot_finish(r, &r->slots[idx[k]], 0);
        }
        now = now_s();
        for (int k = 0; k < n; k++) {
                struct slot *s = &r->slots[idx[k]];
                if (s->pid > 0 && now >= s->deadline)
                        slot_finish(r, s, 1);
        }
}

static void stop_tests(struct runner *r)
{
        for (int i = 0; i < r->opt.jobs; i++) {
                struct slot *s = &r->slots[i];
                if (s->pid <= 0)
                        continue;
                kill(s->pid, SIGKILL);
                close(s->fd);
                while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                s->pid = 0;
        }
}

/* The whole run. 0, or -1 when npud became unreachable (the rest is reported not run). */
static int run_all(struct runner *r)
{
        for (;;) {
                start_tests(r);
                if (running(r) == 0) {
                        if (r->draining) {
                                const char *after = r->tests.v[r->drain_cause].name;
                                if (daemon_recover(&r->d, after, r->force_restart) < 0) {
                                        fprintf(stderr, "npu-onnx-test: npud unreachable after %s; "
                                                "stopping\n", after);
                                        r->unreachable = 1;
                                        break;
                                }
                                r->draining = r->force_restart = 0;
                                continue;
                        }
                        if (r->nretry == 0 && r->nagain == 0 && r->next >= r->tests.n)
                                break;
                }
                wait_tests(r);
                print_ready(r);
                if (interrupted) {
                        stop_tests(r);
                        return -1;
                }
        }
        for (size_t i = 0; i < r->tests.n; i++)
                if (!r->res[i]) {
                        json_t *o = error_outcome("not run: npud unreachable", 0);
                        json_object_del(o, "lost");
                        json_object_del(o, "timeout");
                        json_object_set_new(o, "name", json_string(r->tests.v[i].name));
                        r->res[i] = o;
                }
        print_ready(r);
        return r->unreachable ? -1 : 0;
}

static int count_cmp(const void *a, const void *b)
{
        json_int_t x = json_integer_value(json_array_get(*(json_t *const *)a, 1));
        json_int_t y = json_integer_value(json_array_get(*(json_t *const *)b, 1));

        if (x != y)
                return x > y ? -1 : 1;
        return strcmp(json_string_value(json_array_get(*(json_t *const *)a, 0)),
                      json_string_value(json_array_get(*(json_t *const *)b, 0)));
}

/* The unsupported operators, by the number of tests each blocks, most first. */
static void print_top_ops(json_t *tests)
{
        json_t *ops = json_object(), *o, *val, *op;
        json_t **sorted;
        const char *key;
        size_t i, j, nops;

        json_array_foreach(tests, i, o) {
                json_array_foreach(json_object_get(o, "unsupported_ops"), j, op) {
                        json_t *cnt = json_object_get(ops, json_string_value(op));
                        json_object_set_new(ops, json_string_value(op),
                                            json_integer(cnt ? json_integer_value(cnt) + 1 : 1));
                }
        }
        nops = json_object_size(ops);
        sorted = nops ? calloc(nops, sizeof(*sorted)) : NULL;
        if (sorted) {
                i = 0;
                json_object_foreach(ops, key, val)
                        sorted[i++] = json_pack("[s, I]", key, json_integer_value(val));
                qsort(sorted, nops, sizeof(*sorted), count_cmp);
                printf("  unsupported operators: %zu; blocking the most tests:", nops);
                for (i = 0; i < nops && i < TOP_OPS; i++)
                        printf("%s %s %lld", i ? "," : "",
                               json_string_value(json_array_get(sorted[i], 0)),
                               (long long)json_integer_value(json_array_get(sorted[i], 1)));
                printf("%s\n", nops > TOP_OPS ? ", ..." : "");
                for (i = 0; i < nops; i++)
                        json_decref(sorted[i]);
                free(sorted);
        }
        json_decref(ops);
}

/* Pass rate, failures by class (naming the tests of the rarer classes, which are the ones
 * to look at: wrong results and errors), and the operators worth writing next. */
static void print_summary(json_t *tests, size_t passed, int restarts)
{
        static const char *const classes[] = { "unsupported-op", "unsupported-dtype", "mismatch",
                                               "error" };
        size_t i, total = json_array_size(tests);
        json_t *o;

        printf("conformance: %zu / %zu passed (%.1f%%)\n", passed, total,
               total ? 100.0 * (double)passed / (double)total : 0.0);
        for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++) {
                size_t n = 0, shown = 0;
                json_array_foreach(tests, i, o) {
                        const char *k = json_string_value(json_object_get(o, "class"));
                        n += k && strcmp(k, classes[c]) == 0;
                }
                printf("  %-18s %4zu", classes[c], n);
                if (c > 0) {
                        json_array_foreach(tests, i, o) {
                                const char *k = json_string_value(json_object_get(o, "class"));
                                if (!k || strcmp(k, classes[c]) != 0)
                                        continue;
                                if (shown++ == TOP_NAMES) {
                                        printf(", ...");
                                        break;
                                }
                                printf("%s%s", shown > 1 ? ", " : "  ",
                                       json_string_value(json_object_get(o, "name")));
                        }
                }
                printf("\n");
        }
        print_top_ops(tests);
        if (restarts)
                printf("  npud restarted %d times (crashes or timeouts; see stderr)\n", restarts);
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: npu-onnx-test [OPTIONS] DIR...\n"
                "Run the ONNX backend tests found under each DIR (directories holding model.onnx\n"
                "and test_data_set_*) through npud's graph API and compare the results.\n\n"
                "  --socket PATH   npud to use (default: $NPU_SOCKET or the per-user socket;\n"
                "                  when none answers there, start a private npud)\n"
                "  --start-npud    always start a private npud (the one next to this binary,\n"
                "                  or $NPUD_BIN) on a temporary socket with 1 device\n"
                "  --json FILE     write the results as JSON\n"
                "  --timeout S     per-test time limit in seconds (default %g)\n"
                "  --jobs N        tests run at once (default: the number of CPUs, at most %d)\n"
                "  --quiet         no per-test lines\n"
                "  --summary       after the run: pass rate, failures by class, top unsupported ops\n"
                "  --help\n\n"
                "Exit: 0 after a complete run (whatever the results), 2 usage, 3 npud unreachable,\n"
                "130 interrupted.\n",
                DEFAULT_TIMEOUT_S, MAX_JOBS);
}

static int parse_options(int argc, char **argv, struct options *o)
{
        enum { O_SOCKET = 1, O_JSON, O_TIMEOUT, O_JOBS, O_QUIET, O_SUMMARY, O_START, O_HELP };
        static const struct option longopts[] = {
                { "socket", required_argument, NULL, O_SOCKET },
                { "json", required_argument, NULL, O_JSON },
                { "timeout", required_argument, NULL, O_TIMEOUT },
                { "jobs", required_argument, NULL, O_JOBS },
                { "quiet", no_argument, NULL, O_QUIET },
                { "summary", no_argument, NULL, O_SUMMARY },
                { "start-npud", no_argument, NULL, O_START },
                { "help", no_argument, NULL, O_HELP },
                { NULL, 0, NULL, 0 },
        };
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        int opt;
        char *end;
        long v;

        o->timeout = DEFAULT_TIMEOUT_S;
        o->jobs = cpus < 1 ? 1 : cpus > MAX_JOBS ? MAX_JOBS : (int)cpus;
        while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
                switch (opt) {
                case O_SOCKET:
                        o->socket = optarg;
                        break;
                case O_JSON:
                        o->json = optarg;
                        break;
                case O_TIMEOUT:
                        errno = 0;
                        o->timeout = strtod(optarg, &end);
                        if (errno || end == optarg || *end || !(o->timeout > 0) || o->timeout > 1e6) {
                                fprintf(stderr, "npu-onnx-test: bad --timeout '%s'\n", optarg);
                                return -1;
                        }
                        break;
                case O_JOBS:
                        errno = 0;
                        v = strtol(optarg, &end, 10);
                        if (errno || end == optarg || *end || v < 1 || v > MAX_JOBS) {
                                fprintf(stderr, "npu-onnx-test: bad --jobs '%s' (1 to %d)\n", optarg,
                                        MAX_JOBS);
                                return -1;
                        }
                        o->jobs = (int)v;
                        break;
                case O_QUIET:
                        o->quiet = 1;
                        break;
                case O_SUMMARY:
                        o->summary = 1;
                        break;
                case O_START:
                        o->start_npud = 1;
                        break;
                case O_HELP:
                        usage(stdout);
                        exit(0);
                default:
                        usage(stderr);
                        return -1;
                }
        }
        if (o->socket && o->start_npud) {
                fprintf(stderr, "npu-onnx-test: --socket and --start-npud exclude each other\n");
                return -1;
        }
        if (optind >= argc) {
                usage(stderr);
                return -1;
        }
        return 0;
}

static int write_report(const char *path, json_t *tests, size_t passed, size_t failed)
{
        json_t *doc = json_pack("{s:O, s:I, s:I}", "tests", tests, "passed", (json_int_t)passed,
                                "failed", (json_int_t)failed);
        int rc = doc ? json_dump_file(doc, path, JSON_INDENT(1)) : -1;

        json_decref(doc);
        if (rc < 0)
                fprintf(stderr, "npu-onnx-test: cannot write %s\n", path);
        return rc;
}

/* The tests under the roots, sorted by name, each directory once. */
static int find_tests(struct test_list *l, char **roots, int nroots)
{
        size_t kept = 0;

        for (int i = 0; i < nroots; i++) {
                if (!is_dir(roots[i])) {
                        fprintf(stderr, "npu-onnx-test: %s: not a directory\n", roots[i]);
                        return -1;
                }
                if (walk(l, roots[i], 0) < 0) {
                        fprintf(stderr, "npu-onnx-test: out of memory\n");
                        return -1;
                }
        }
        if (l->n == 0) {
                fprintf(stderr, "npu-onnx-test: no ONNX backend tests under the given directories\n");
                return -1;
        }
        qsort(l->v, l->n, sizeof(*l->v), test_cmp);
        for (size_t i = 0; i < l->n; i++) {
                if (kept && strcmp(l->v[kept - 1].dir, l->v[i].dir) == 0) {
                        free(l->v[i].name);
                        free(l->v[i].dir);
                        continue;
                }
                l->v[kept++] = l->v[i];
        }
        l->n = kept;
        return 0;
}

/* The npud to use: --socket, else the default one if it answers, else a private one. */
static int connect_daemon(struct runner *r)
{
        r->d.socket = r->opt.socket;
        if (r->opt.start_npud || (!r->opt.socket && !reachable(NULL)))
                return daemon_start_own(&r->d);
        if (!reachable(r->opt.socket)) {
                fprintf(stderr, "npu-onnx-test: npud unreachable at %s: %s\n",
                        r->opt.socket ? r->opt.socket : "the default socket", npu_error_message());
                return -1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct runner r = { 0 };
        struct sigaction sa = { .sa_handler = on_signal };
        size_t passed = 0, failed = 0;
        json_t *all;
        int rc = 0;

        if (parse_options(argc, argv, &r.opt) < 0)
                return EXIT_USAGE;
        if (find_tests(&r.tests, argv + optind, argc - optind) < 0) {
                runner_free(&r);
                return EXIT_USAGE;
        }
        if (r.opt.json) { /* a bad path is a usage error, found before the run, not after */
                FILE *f = fopen(r.opt.json, "w");
                if (!f) {
                        fprintf(stderr, "npu-onnx-test: %s: %s\n", r.opt.json, strerror(errno));
                        runner_free(&r);
                        return EXIT_USAGE;
                }
                fclose(f);
        }
        r.res = calloc(r.tests.n, sizeof(*r.res));
        r.retried = calloc(r.tests.n, 1);
        r.again = calloc(r.tests.n, sizeof(*r.again));
        r.retry = calloc(r.tests.n, sizeof(*r.retry));
        r.slots = calloc((size_t)r.opt.jobs, sizeof(*r.slots));
        /* batches small enough that every child gets several, so one slow batch does not
         * hold the end of the run */
        r.batch = r.tests.n / ((size_t)r.opt.jobs * 4);
        r.batch = r.batch < 1 ? 1 : r.batch > MAX_BATCH ? MAX_BATCH : r.batch;
        for (int i = 0; r.slots && i < r.opt.jobs; i++)
                if (!(r.slots[i].tests = calloc(r.batch, sizeof(size_t))))
                        r.batch = 0;
        if (!r.res || !r.retried || !r.again || !r.retry || !r.slots || !r.batch) {
                fprintf(stderr, "npu-onnx-test: out of memory\n");
                runner_free(&r);
                return EXIT_UNREACHABLE;
        }
        signal(SIGPIPE, SIG_IGN);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (connect_daemon(&r) < 0) {
                daemon_cleanup(&r.d);
                runner_free(&r);
                return EXIT_UNREACHABLE;
        }

        if (run_all(&r) < 0)
                rc = interrupted ? 128 + (int)interrupted : EXIT_UNREACHABLE;
        if (!interrupted) {
                all = json_array();
                for (size_t i = 0; i < r.tests.n; i++) {
                        if (strcmp(json_string_value(json_object_get(r.res[i], "status")), "pass") == 0)
                                passed++;
                        else
                                failed++;
                        json_object_del(r.res[i], "what"); /* for the line, not the report */
                        json_array_append(all, r.res[i]);
                }
                printf("%zu passed, %zu failed\n", passed, failed);
                if (r.opt.summary)
                        print_summary(all, passed, r.d.restarts);
                if (r.opt.json && write_report(r.opt.json, all, passed, failed) < 0 && rc == 0)
                        rc = EXIT_USAGE;
                json_decref(all);
        }
        if (r.d.own) {
                int st = daemon_stop(&r.d);
                if (st != 0 && !interrupted) {
                        fprintf(stderr, "npu-onnx-test: warning: npud exited with status %d\n", st);
                        show_log_tail(&r.d);
                }
                daemon_cleanup(&r.d);
        }
        runner_free(&r);
        return rc;
}
