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
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
                const char *op = g->node[i] && g->node[i]->op_type ? g->node[i]->op_type : "";
                size_t j;
                for (j = 0; j < json_array_size(ops); j++)
                        if (strcmp(json_string_value(json_array_get(ops, j)), op) == 0)
                                break;
                if (j == json_array_size(ops))
                        json_array_append_new(ops, json_string(op));
        }
        if (g && check_value_types(g->input, g->n_input, "input", dtype_msg, msglen) == 0)
                check_value_types(g->output, g->n_output, "output", dtype_msg, msglen);
        onnx__model_proto__free_unpacked(m, NULL);
        return g ? 0 : -1;
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

/* The parent's list and results are the child's copies to free: exit() checks for leaks
 * under ASan, and they are no longer reachable once this frame is the last to use them. */
static void child_main(const struct test *t, const char *sock, int fd, struct test_list *tests,
                       json_t *results)
{
        struct outcome o = { .ops = json_array(), .unsupported = json_array() };
        json_t *j;
        char *text;
        int rc = 1;

        run_test(t, sock, &o);
        j = outcome_json(&o);
        text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        if (text && write_all(fd, text, strlen(text)) == 0)
                rc = 0;
        free(text);
        json_decref(j);
        json_decref(o.ops);
        json_decref(o.unsupported);
        close(fd);
        json_decref(results);
        test_list_free(tests);
        exit(rc);
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
        int quiet, summary, start_npud;
};

/* Run one test in a child; returns its outcome object (with "name" added). */
static json_t *run_one(const struct test *t, const struct daemon *d, double timeout,
                       struct test_list *tests, json_t *results)
{
        int pfd[2];
        pid_t pid;
        char *text = NULL;
        size_t len = 0, cap = 0;
        double deadline = now_s() + timeout;
        int status = 0, timed_out = 0;
        json_t *r = NULL;

        if (pipe2(pfd, O_CLOEXEC) < 0)
                return json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:b}", "status", "fail",
                                 "class", "error", "reason", "pipe failed", "what", "", "ops",
                                 "unsupported_ops", "lost", 0);
        fflush(NULL);
        pid = fork();
        if (pid == 0) {
                close(pfd[0]);
                child_main(t, d->socket, pfd[1], tests, results);
        }
        close(pfd[1]);
        while (pid > 0) {
                struct pollfd p = { .fd = pfd[0], .events = POLLIN };
                double left = deadline - now_s();
                ssize_t n;
                if (left <= 0) {
                        timed_out = 1;
                        break;
                }
                if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) {
                        if (errno == EINTR)
                                continue;
                        continue; /* the deadline check ends the wait */
                }
                if (len + 4096 > cap) {
                        char *nt = realloc(text, cap + 65536);
                        if (!nt)
                                break;
                        text = nt;
                        cap += 65536;
                }
                n = read(pfd[0], text + len, cap - len - 1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t)n;
        }
        close(pfd[0]);
        if (pid > 0) {
                if (timed_out)
                        kill(pid, SIGKILL);
                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
        }
        if (text) {
                text[len] = '\0';
                if (!timed_out && pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
                        r = json_loads(text, 0, NULL);
        }
        free(text);
        if (!json_is_object(r)) {
                char reason[128];
                json_decref(r);
                if (pid < 0)
                        snprintf(reason, sizeof(reason), "fork: %s", strerror(errno));
                else if (timed_out)
                        snprintf(reason, sizeof(reason), "timeout after %g s", timeout);
                else if (WIFSIGNALED(status))
                        snprintf(reason, sizeof(reason), "runner crashed (signal %d)", WTERMSIG(status));
                else
                        snprintf(reason, sizeof(reason), "runner exited with status %d",
                                 WEXITSTATUS(status));
                r = json_pack("{s:s, s:s, s:s, s:s, s:[], s:[], s:b, s:b}", "status", "fail",
                              "class", "error", "reason", reason, "what", "", "ops",
                              "unsupported_ops", "lost", 0, "timeout", timed_out);
        }
        if (r)
                json_object_set_new(r, "name", json_string(t->name));
        return r;
}

static void print_line(json_t *r)
{
        const char *name = json_string_value(json_object_get(r, "name"));
        const char *status = json_string_value(json_object_get(r, "status"));

        if (strcmp(status, "pass") == 0)
                printf("%s: pass\n", name);
        else if (strcmp(status, "unsupported") == 0)
                printf("%s: unsupported: %s\n", name, json_string_value(json_object_get(r, "what")));
        else
                printf("%s: fail: %s\n", name, json_string_value(json_object_get(r, "reason")));
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

/* Passed / total, failures by class, and the unsupported operators that block most tests. */
static void print_summary(json_t *tests, size_t passed, int restarts)
{
        static const char *const classes[] = { "unsupported-op", "unsupported-dtype", "mismatch",
                                               "error" };
        json_t *ops = json_object(), *r;
        json_t **sorted = NULL;
        const char *key;
        json_t *val;
        size_t i, nops, total = json_array_size(tests);

        printf("conformance: %zu / %zu passed (%.1f%%)\n", passed, total,
               total ? 100.0 * (double)passed / (double)total : 0.0);
        for (size_t c = 0; c < sizeof(classes) / sizeof(classes[0]); c++) {
                size_t n = 0;
                json_array_foreach(tests, i, r) {
                        const char *k = json_string_value(json_object_get(r, "class"));
                        n += k && strcmp(k, classes[c]) == 0;
                }
                printf("  %-18s %zu\n", classes[c], n);
        }
        json_array_foreach(tests, i, r) {
                size_t j;
                json_t *op;
                json_array_foreach(json_object_get(r, "unsupported_ops"), j, op) {
                        const char *name = json_string_value(op);
                        json_t *cnt = name ? json_object_get(ops, name) : NULL;
                        if (name)
                                json_object_set_new(ops, name, json_integer(cnt ? json_integer_value(cnt) + 1 : 1));
                }
        }
        nops = json_object_size(ops);
        if (nops) {
                sorted = calloc(nops, sizeof(*sorted));
                i = 0;
                json_object_foreach(ops, key, val)
                        if (sorted)
                                sorted[i++] = json_pack("[s, I]", key, json_integer_value(val));
                if (sorted) {
                        qsort(sorted, nops, sizeof(*sorted), count_cmp);
                        printf("  unsupported operators (%zu), by tests blocked:", nops);
                        for (i = 0; i < nops && i < TOP_OPS; i++)
                                printf("%s %s %lld", i ? "," : "",
                                       json_string_value(json_array_get(sorted[i], 0)),
                                       (long long)json_integer_value(json_array_get(sorted[i], 1)));
                        printf("%s\n", nops > TOP_OPS ? ", ..." : "");
                        for (i = 0; i < nops; i++)
                                json_decref(sorted[i]);
                        free(sorted);
                }
        }
        if (restarts)
                printf("  npud restarted %d times (crashes or timeouts; see stderr)\n", restarts);
        json_decref(ops);
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
                "  --quiet         no per-test lines\n"
                "  --summary       after the run: pass rate, failures by class, top unsupported ops\n"
                "  --help\n\n"
                "Exit: 0 after a complete run (whatever the results), 2 usage, 3 npud unreachable.\n",
                DEFAULT_TIMEOUT_S);
}

static int parse_options(int argc, char **argv, struct options *o)
{
        enum { O_SOCKET = 1, O_JSON, O_TIMEOUT, O_QUIET, O_SUMMARY, O_START, O_HELP };
        static const struct option longopts[] = {
                { "socket", required_argument, NULL, O_SOCKET },
                { "json", required_argument, NULL, O_JSON },
                { "timeout", required_argument, NULL, O_TIMEOUT },
                { "quiet", no_argument, NULL, O_QUIET },
                { "summary", no_argument, NULL, O_SUMMARY },
                { "start-npud", no_argument, NULL, O_START },
                { "help", no_argument, NULL, O_HELP },
                { NULL, 0, NULL, 0 },
        };
        int opt;
        char *end;

        o->timeout = DEFAULT_TIMEOUT_S;
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
        int r = doc ? json_dump_file(doc, path, JSON_INDENT(1)) : -1;

        json_decref(doc);
        if (r < 0)
                fprintf(stderr, "npu-onnx-test: cannot write %s\n", path);
        return r;
}

int main(int argc, char **argv)
{
        struct options opt = { 0 };
        struct test_list tests = { 0 };
        struct daemon d = { 0 };
        json_t *results;
        size_t passed = 0, failed = 0, kept = 0;
        int rc = 0;

        if (parse_options(argc, argv, &opt) < 0)
                return EXIT_USAGE;
        for (int i = optind; i < argc; i++) {
                if (!is_dir(argv[i])) {
                        fprintf(stderr, "npu-onnx-test: %s: not a directory\n", argv[i]);
                        test_list_free(&tests);
                        return EXIT_USAGE;
                }
                if (walk(&tests, argv[i], 0) < 0) {
                        fprintf(stderr, "npu-onnx-test: out of memory\n");
                        test_list_free(&tests);
                        return EXIT_UNREACHABLE;
                }
        }
        if (tests.n == 0) {
                fprintf(stderr, "npu-onnx-test: no ONNX backend tests under the given directories\n");
                return EXIT_USAGE;
        }
        qsort(tests.v, tests.n, sizeof(*tests.v), test_cmp);
        for (size_t i = 0; i < tests.n; i++) { /* a directory reached through two roots */
                if (kept && strcmp(tests.v[kept - 1].dir, tests.v[i].dir) == 0) {
                        free(tests.v[i].name);
                        free(tests.v[i].dir);
                        continue;
                }
                tests.v[kept++] = tests.v[i];
        }
        tests.n = kept;

        if (opt.json) { /* a bad path is a usage error, found before the run, not after */
                FILE *f = fopen(opt.json, "w");
                if (!f) {
                        fprintf(stderr, "npu-onnx-test: %s: %s\n", opt.json, strerror(errno));
                        test_list_free(&tests);
                        return EXIT_USAGE;
                }
                fclose(f);
        }
        signal(SIGPIPE, SIG_IGN);
        setvbuf(stdout, NULL, _IOLBF, 0);
        d.socket = opt.socket;
        if (opt.start_npud || (!opt.socket && !reachable(NULL))) {
                if (daemon_start_own(&d) < 0) {
                        daemon_cleanup(&d);
                        test_list_free(&tests);
                        return EXIT_UNREACHABLE;
                }
        } else if (!reachable(opt.socket)) {
                fprintf(stderr, "npu-onnx-test: npud unreachable at %s: %s\n",
                        opt.socket ? opt.socket : "the default socket", npu_error_message());
                test_list_free(&tests);
                return EXIT_UNREACHABLE;
        }

        results = json_array();
        for (size_t i = 0; i < tests.n; i++) {
                json_t *r = run_one(&tests.v[i], &d, opt.timeout, &tests, results);
                int lost, timeout;

                if (!r) {
                        fprintf(stderr, "npu-onnx-test: out of memory\n");
                        rc = EXIT_UNREACHABLE;
                        break;
                }
                lost = json_is_true(json_object_get(r, "lost"));
                timeout = json_is_true(json_object_get(r, "timeout"));
                if (strcmp(json_string_value(json_object_get(r, "status")), "pass") == 0)
                        passed++;
                else
                        failed++;
                if (!opt.quiet)
                        print_line(r);
                /* the report keeps what the lead reads; the rest was for this loop */
                json_object_del(r, "lost");
                json_object_del(r, "timeout");
                json_object_del(r, "what");
                json_array_append_new(results, r);
                if ((lost || timeout || (d.own && !daemon_alive(&d))) &&
                    daemon_recover(&d, tests.v[i].name, timeout) < 0) {
                        fprintf(stderr, "npu-onnx-test: npud unreachable after %s; stopping\n",
                                tests.v[i].name);
                        rc = EXIT_UNREACHABLE;
                        break;
                }
        }
        printf("%zu passed, %zu failed\n", passed, failed);
        if (opt.summary)
                print_summary(results, passed, d.restarts);
        if (opt.json && write_report(opt.json, results, passed, failed) < 0 && rc == 0)
                rc = EXIT_USAGE;
        if (d.own) {
                int st = daemon_stop(&d);
                if (st != 0) {
                        fprintf(stderr, "npu-onnx-test: warning: npud exited with status %d\n", st);
                        show_log_tail(&d);
                }
                daemon_cleanup(&d);
        }
        json_decref(results);
        test_list_free(&tests);
        return rc;
}
