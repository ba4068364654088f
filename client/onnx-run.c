/* ONNX backend tests on the client side (see onnx-run.h): the test layout on disk, the
 * model's operators and value types (read with the protobuf-c code generated from the
 * system's onnx.proto), and one test's run through libnpu's graph API, classified. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "npu.h"
#include "onnx.pb-c.h"
#include "onnx-run.h"
#include "onnx-tensor.h"

#define MAX_WALK_DEPTH 16
#define MAX_FILE_BYTES (UINT64_C(2) << 30)

/* ---- small helpers ---- */

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
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE_BYTES) {
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
        if (done != (size_t)st.st_size) { /* a read error, or the file shrank meanwhile */
                free(buf);
                errno = EIO;
                return NULL;
        }
        *ret_len = done;
        return buf;
}

/* ---- test discovery ---- */

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

static int test_list_add(struct onnx_test_list *l, const char *dir)
{
        const char *slash;
        char *copy = realpath(dir, NULL); /* one spelling per directory, for the dedup */
        size_t len;

        if (!copy)
                copy = strdup(dir);
        if (!copy)
                return -ENOMEM;
        len = strlen(copy); /* "a/b/" names the test "b" */
        while (len > 1 && copy[len - 1] == '/')
                copy[--len] = '\0';
        slash = strrchr(copy, '/');
        if (l->n == l->cap) {
                size_t cap = l->cap ? 2 * l->cap : 256;
                struct onnx_test *v = realloc(l->v, cap * sizeof(*v));
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
static int walk(struct onnx_test_list *l, const char *dir, int depth)
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
        const struct onnx_test *x = a, *y = b;
        int c = strcmp(x->name, y->name);

        return c ? c : strcmp(x->dir, y->dir);
}

void onnx_tests_free(struct onnx_test_list *l)
{
        for (size_t i = 0; i < l->n; i++) {
                free(l->v[i].name);
                free(l->v[i].dir);
        }
        free(l->v);
        l->v = NULL;
        l->n = l->cap = 0;
}

int onnx_tests_find(struct onnx_test_list *l, char *const *roots, int nroots, char *err,
                    size_t errlen)
{
        size_t kept = 0;

        for (int i = 0; i < nroots; i++) {
                if (!is_dir(roots[i])) {
                        snprintf(err, errlen, "%s: not a directory", roots[i]);
                        return -1;
                }
                if (walk(l, roots[i], 0) < 0) {
                        snprintf(err, errlen, "out of memory");
                        return -1;
                }
        }
        if (l->n == 0) {
                snprintf(err, errlen, "no ONNX backend tests under the given directories");
                return -1;
        }
        qsort(l->v, l->n, sizeof(*l->v), test_cmp);
        for (size_t i = 0; i < l->n; i++) { /* a directory reached through two roots */
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

/* ---- one test ---- */

static void set_outcome(struct onnx_outcome *o, const char *status, const char *class,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void set_outcome(struct onnx_outcome *o, const char *status, const char *class,
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

/* The kind of each graph input and output's data files (enum onnx_value_kind) and, for
 * sequences, the declared element type (that of an empty sequence). */
#define ONNX_RUN_MAX_VALUES 64 /* npud binds at most 64 inputs and outputs together */

struct value_kinds {
        int nin, nout;
        int in[ONNX_RUN_MAX_VALUES], in_elem[ONNX_RUN_MAX_VALUES];
        int out[ONNX_RUN_MAX_VALUES], out_elem[ONNX_RUN_MAX_VALUES];
};

/* A sequence's declared element dtype when it is a sequence of tensors, else -1. */
static int sequence_elem(const Onnx__TypeProto *t)
{
        const Onnx__TypeProto *e = t && t->sequence_type ? t->sequence_type->elem_type : NULL;

        if (!e)
                return 0;
        if (e->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !e->tensor_type)
                return -1;
        return e->tensor_type->has_elem_type ? e->tensor_type->elem_type : 0;
}

/* Graph inputs or outputs the runner can feed: dense tensors of a numeric dtype, sequences
 * of them and optionals of either. */
static int check_value_types(Onnx__ValueInfoProto **v, size_t n, const char *what,
                             char *msg, size_t len, int *kinds, int *elems)
{
        for (size_t i = 0; i < n; i++) {
                Onnx__TypeProto *t = v[i] ? v[i]->type : NULL;
                const char *name = v[i] && v[i]->name ? v[i]->name : "?";
                int k = ONNX_VALUE_TENSOR, elem = 0;

                if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
                        k = ONNX_VALUE_OPTIONAL;
                        t = t->optional_type ? t->optional_type->elem_type : NULL;
                        if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE) {
                                snprintf(msg, len, "%s '%s': dtype optional of optional", what, name);
                                return -1;
                        }
                }
                if (t && t->value_case == ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE) {
                        elem = sequence_elem(t);
                        if (elem < 0) {
                                snprintf(msg, len, "%s '%s': dtype sequence of non-tensors", what, name);
                                return -1;
                        }
                        if (k == ONNX_VALUE_TENSOR)
                                k = ONNX_VALUE_SEQUENCE;
                        t = NULL;
                }
                if (i < ONNX_RUN_MAX_VALUES) {
                        kinds[i] = k;
                        elems[i] = elem;
                }
                if (!t || t->value_case == ONNX__TYPE_PROTO__VALUE__NOT_SET)
                        continue; /* untyped: the data file will tell */
                switch (t->value_case) {
                case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
                        if (t->tensor_type && t->tensor_type->has_elem_type &&
                            onnx_dtype_size(t->tensor_type->elem_type) == 0 &&
                            t->tensor_type->elem_type != NPU_STRING) {
                                snprintf(msg, len, "%s '%s': dtype %s", what, name,
                                         onnx_dtype_name(t->tensor_type->elem_type));
                                return -1;
                        }
                        break;
                case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
                        snprintf(msg, len, "%s '%s': dtype map", what, name);
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
static int scan_model(const void *buf, size_t len, json_t *ops, char *dtype_msg, size_t msglen,
                      struct value_kinds *kinds)
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
        memset(kinds, 0, sizeof(*kinds));
        if (g && check_value_types(g->input, g->n_input, "input", dtype_msg, msglen, kinds->in,
                                   kinds->in_elem) == 0)
                check_value_types(g->output, g->n_output, "output", dtype_msg, msglen, kinds->out,
                                  kinds->out_elem);
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
static void classify_daemon_error(struct onnx_outcome *o, const char *stage, npu_status_t st,
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
static int load_tensors(const char *dir, const char *prefix, const int *kinds, const int *elems,
                        struct tensor_set *ret, struct onnx_outcome *o, const char *ds_tag)
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
                r = k < ONNX_RUN_MAX_VALUES
                            ? onnx_value_parse(buf, len, kinds[k], elems[k], &ret->t[k], err, sizeof(err))
                            : onnx_tensor_parse(buf, len, &ret->t[k], err, sizeof(err));
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

static npu_status_t bind_tensor(npu_context_t *ctx, const struct onnx_tensor *t, int copy_in,
                                npu_buffer_t *ret_buf, npu_tensor_t *ret_desc)
{
        uint64_t bytes = t->dtype == NPU_STRING ? t->nbytes : t->count * t->elem_size, room = bytes;
        npu_status_t st;

        /* STRING outputs: room for strings longer than expected, so that a wrong result is
         * a mismatch rather than a short buffer */
        if (t->dtype == NPU_STRING && !copy_in)
                room = 2 * bytes + 4 * t->count + 64;
        /* npud refuses zero-size buffers; an empty tensor gets one byte it never touches */
        st = npu_malloc(ctx, 0, room ? room : 1, ret_buf);
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

/* Put the data set's inputs in the graph's order: by tensor name when the files name the
 * graph's inputs one to one, else by position (input_K.pb is graph input K). */
static void order_inputs(json_t *graph_inputs, const struct tensor_set *in, int *order)
{
        int n = in->n, taken[n > 0 ? n : 1];

        memset(taken, 0, sizeof(taken));
        for (int i = 0; i < n; i++) {
                json_t *entry = json_array_get(graph_inputs, (size_t)i);
                const char *gname = json_string_value(json_object_get(entry, "name"));
                int found = -1;
                for (int k = 0; gname && k < n && found < 0; k++)
                        if (!taken[k] && strcmp(in->t[k].name, gname) == 0)
                                found = k;
                if (found < 0) {
                        for (int k = 0; k < n; k++)
                                order[k] = k;
                        return;
                }
                taken[found] = 1;
                order[i] = found;
        }
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
                         const struct value_kinds *kinds, const char *dir, const char *ds_tag,
                         struct onnx_outcome *o)
{
        struct tensor_set in = { 0 }, out = { 0 };
        json_t *gin = json_object_get(info, "inputs"), *gout = json_object_get(info, "outputs");
        npu_buffer_t *bufs = NULL;
        npu_tensor_t *desc = NULL;
        int *order = NULL;
        int nbufs = 0;
        npu_status_t st;

        if (load_tensors(dir, "input", kinds->in, kinds->in_elem, &in, o, ds_tag) < 0 ||
            load_tensors(dir, "output", kinds->out, kinds->out_elem, &out, o, ds_tag) < 0)
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
                uint64_t bytes = e->dtype == NPU_STRING ? 2 * e->nbytes + 4 * e->count + 64
                                                        : e->count * e->elem_size;
                struct onnx_mismatch m;
                char idx[160], where[160];
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
                if ((e->dtype == NPU_STRING ? onnx_tensor_compare_strings(e, got, bytes, &m)
                                            : onnx_value_compare(e, got, ONNX_TEST_RTOL, ONNX_TEST_ATOL, &m,
                                                                 where, sizeof(where))) > 0) {
                        if (e->dtype == NPU_SEQUENCE) {
                                set_outcome(o, "fail", "mismatch", "%soutput %d mismatch: %s%s%s%s%s",
                                            ds_tag, k, where, m.actual[0] ? ": " : "", m.actual,
                                            m.actual[0] ? " vs " : "", m.expected);
                                free(got);
                                goto done;
                        }
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

void onnx_run_test(const struct onnx_test *t, const char *sock, int accumulate, struct onnx_outcome *o)
{
        npu_load_options_t lo = { .size = sizeof(lo), .accumulate = accumulate };
        char *model_path = path_join(t->dir, "model.onnx");
        char dtype_msg[256] = "";
        struct value_kinds kinds;
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
        if (scan_model(model, len, o->ops, dtype_msg, sizeof(dtype_msg), &kinds) < 0) {
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
        st = npu_graph_load_with(ctx, 0, model, len, accumulate != NPU_ACCUMULATE_FLOAT32 ? &lo : NULL, &g);
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
                run_data_set(ctx, g, s, info, &kinds, dir, tag, o);
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

json_t *onnx_outcome_json(const struct onnx_outcome *o)
{
        return json_pack("{s:s, s:s?, s:s, s:s, s:O, s:O, s:b}", "status", o->status,
                         "class", o->class, "reason", o->reason, "what", o->what,
                         "ops", o->ops, "unsupported_ops", o->unsupported, "lost", o->lost);
}

int onnx_outcome_init(struct onnx_outcome *o)
{
        memset(o, 0, sizeof(*o));
        o->ops = json_array();
        o->unsupported = json_array();
        if (!o->ops || !o->unsupported) {
                onnx_outcome_deinit(o);
                return -1;
        }
        return 0;
}

void onnx_outcome_deinit(struct onnx_outcome *o)
{
        json_decref(o->ops);
        json_decref(o->unsupported);
        o->ops = o->unsupported = NULL;
}
