/* npuctl for containers and clusters:
 *   tenant add NAME [--uid U,..] [--gid G,..] [--devices D,..] [--quota BYTES]
 *              [--quota-per-device BYTES] [--class CLASS] [--weight W]
 *   tenant remove NAME
 *       tenants at run time (npud's tenant_add / tenant_remove; root or the admin group).
 *       A Slurm prolog adds one per job, its epilog removes it (contrib/slurm/).
 *   cdi generate [-o FILE] [--host-socket PATH]
 *       a Container Device Interface spec, kind npud.io/npu: device N sets
 *       NPU_VISIBLE_DEVICE_N=N, "all" sets NPU_VISIBLE_DEVICE_ALL=1. CDI merges the edits of
 *       every device a container is given, so each device needs a variable of its own: with
 *       --device npud.io/npu=0 --device npud.io/npu=1 the container has both, and libnpu asks
 *       npud at hello for devices 0 and 1 (libnpu-visible.c); npud hides the others from the
 *       session. Every device mounts npud's socket at /run/npud/npud.sock and sets NPU_SOCKET.
 *   cdi tenants [--uid U,..] [--gid G,..]
 *       "tenants" entries of npud.conf, one per device (npu-devN, device N only), for a
 *       container that should also be accounted apart: podman run -e NPU_TENANT=npu-dev1.
 *   slurm gres [--name NAME] [--type TYPE]
 *       gres.conf lines, one per device.
 * The spec is JSON, which is also YAML: CDI reads either, by the file's extension. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "npuctl.h"

#define CDI_VERSION "0.6.0"
#define CDI_KIND "npud.io/npu"
#define CDI_CONTAINER_SOCKET "/run/npud/npud.sock"

/* "1,2,3" -> a JSON array of integers at most max; NULL after a message. */
static json_t *parse_id_list(const char *cmd, const char *what, const char *arg, uint64_t max)
{
        json_t *a = json_array();
        char *copy = strdup(arg), *save = NULL;

        if (!a || !copy) {
                fprintf(stderr, "npuctl %s: out of memory\n", cmd);
                exit(NPUCTL_ERROR);
        }
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                uint64_t v;
                if (npuctl_parse_u64(cmd, what, tok, &v) < 0 || v > max) {
                        if (v > max)
                                fprintf(stderr, "npuctl %s: %s '%s' is out of range\n", cmd, what,
                                        npuctl_esc(tok));
                        json_decref(a);
                        a = NULL;
                        break;
                }
                json_array_append_new(a, json_integer((json_int_t)v));
        }
        free(copy);
        if (a && json_array_size(a) == 0) {
                fprintf(stderr, "npuctl %s: %s list '%s' is empty\n", cmd, what, npuctl_esc(arg));
                json_decref(a);
                a = NULL;
        }
        return a;
}

/* The number of devices npud has; -1 after printing why not (*ret_code set). */
static int device_count(struct npuctl *c, int *ret_code)
{
        json_t *r = npuctl_call(c, "devices", NULL, ret_code);
        int n;

        if (!r)
                return -1;
        n = (int)json_array_size(json_object_get(r, "devices"));
        json_decref(r);
        return n;
}

/* The value of option argv[*i] (--opt VALUE or --opt=VALUE), or NULL if argv[*i] is not opt. */
static const char *opt_value(const char *cmd, int argc, char **argv, int *i, const char *opt, int *bad)
{
        size_t n = strlen(opt);
        const char *a = argv[*i];

        if (strncmp(a, opt, n))
                return NULL;
        if (a[n] == '=')
                return a + n + 1;
        if (a[n])
                return NULL;
        if (*i + 1 >= argc) {
                fprintf(stderr, "npuctl %s: %s needs a value\n", cmd, opt);
                *bad = 1;
                return NULL;
        }
        return argv[++*i];
}

static int tenant_add(struct npuctl *c, int argc, char **argv)
{
        const char *cmd = "tenant add";
        json_t *t = json_object(), *quota = json_object();
        int bad = 0, code = NPUCTL_OK;

        for (int i = 1; i < argc && !bad; i++) {
                const char *v;
                uint64_t bytes;
                if ((v = opt_value(cmd, argc, argv, &i, "--uid", &bad))) {
                        json_t *a = parse_id_list(cmd, "uid", v, UINT32_MAX - 1);
                        bad = !a || json_object_set_new(t, "uids", a);
                } else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--gid", &bad))) {
                        json_t *a = parse_id_list(cmd, "gid", v, UINT32_MAX - 1);
                        bad = !a || json_object_set_new(t, "gids", a);
                } else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--devices", &bad))) {
                        json_t *a = parse_id_list(cmd, "device", v, 63);
                        bad = !a || json_object_set_new(t, "devices", a);
                } else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--quota-per-device", &bad))) {
                        bad = npuctl_parse_bytes(cmd, v, &bytes) < 0 ||
                              json_object_set_new(quota, "per_device", json_integer((json_int_t)bytes));
                } else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--quota", &bad))) {
                        bad = npuctl_parse_bytes(cmd, v, &bytes) < 0 ||
                              json_object_set_new(quota, "total", json_integer((json_int_t)bytes));
                } else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--class", &bad))) {
                        json_object_set_new(t, "class", json_string(v));
                } else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--weight", &bad))) {
                        char *end;
                        double w = strtod(v, &end);
                        if (end == v || *end) {
                                fprintf(stderr, "npuctl %s: weight '%s' is not a number\n", cmd, npuctl_esc(v));
                                bad = 1;
                        } else
                                json_object_set_new(t, "weight", json_real(w));
                } else if (!bad && argv[i][0] == '-') {
                        fprintf(stderr, "npuctl %s: unknown option '%s'\n", cmd, npuctl_esc(argv[i]));
                        bad = 1;
                } else if (!bad && json_object_get(t, "name")) {
                        fprintf(stderr, "npuctl %s: unexpected argument '%s'\n", cmd, npuctl_esc(argv[i]));
                        bad = 1;
                } else if (!bad)
                        json_object_set_new(t, "name", json_string(argv[i]));
        }
        if (!bad && !json_object_get(t, "name")) {
                fprintf(stderr, "npuctl %s: missing tenant name (see npuctl --help)\n", cmd);
                bad = 1;
        }
        if (json_object_size(quota))
                json_object_set(t, "memory_quota", quota);
        json_decref(quota);
        if (bad) {
                json_decref(t);
                return NPUCTL_USAGE;
        }
        json_t *params = json_pack("{s:o}", "tenant", t);
        json_t *r = npuctl_call(c, "tenant_add", params, &code);
        json_decref(params);
        if (!r)
                return code;
        if (c->json)
                npuctl_print_json(r);
        else
                printf("tenant '%s' added\n", npuctl_esc(json_string_value(json_object_get(r, "tenant"))));
        json_decref(r);
        return NPUCTL_OK;
}

static int tenant_remove(struct npuctl *c, int argc, char **argv)
{
        int code;

        if (npuctl_nargs("tenant remove", argc, argv, 1, 1) < 0)
                return NPUCTL_USAGE;
        json_t *params = json_pack("{s:s}", "name", argv[1]);
        json_t *r = npuctl_call(c, "tenant_remove", params, &code);
        json_decref(params);
        if (!r)
                return code;
        if (c->json)
                npuctl_print_json(r);
        else
                printf("tenant '%s' removed\n", npuctl_esc(argv[1]));
        json_decref(r);
        return NPUCTL_OK;
}

int npuctl_cmd_tenant(struct npuctl *c, int argc, char **argv)
{
        if (argc >= 2 && strcmp(argv[1], "add") == 0)
                return tenant_add(c, argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "remove") == 0)
                return tenant_remove(c, argc - 1, argv + 1);
        fprintf(stderr, "npuctl tenant: expected 'add NAME [OPTIONS]' or 'remove NAME'\n");
        return NPUCTL_USAGE;
}

/* The path of npud's socket on the host, as the spec mounts it. */
static const char *host_socket(const struct npuctl *c, const char *given)
{
        const char *env = getenv("NPU_SOCKET");

        if (given)
                return given;
        if (c->socket)
                return c->socket;
        return env && *env ? env : "/run/npud/npud.sock";
}

static int cdi_generate(struct npuctl *c, int argc, char **argv)
{
        const char *cmd = "cdi generate", *out = "/etc/cdi/npud.yaml", *hsock = NULL;
        int bad = 0, code, n;
        char *abs = NULL;

        for (int i = 1; i < argc && !bad; i++) {
                const char *v;
                if ((v = opt_value(cmd, argc, argv, &i, "-o", &bad)) ||
                    (!bad && (v = opt_value(cmd, argc, argv, &i, "--output", &bad))))
                        out = v;
                else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--host-socket", &bad)))
                        hsock = v;
                else if (!bad) {
                        fprintf(stderr, "npuctl %s: unexpected argument '%s'\n", cmd, npuctl_esc(argv[i]));
                        bad = 1;
                }
        }
        if (bad)
                return NPUCTL_USAGE;
        if ((n = device_count(c, &code)) < 0)
                return code;
        /* CDI wants absolute host paths */
        const char *hs = host_socket(c, hsock);
        if (hs[0] != '/') {
                abs = realpath(hs, NULL);
                if (!abs) {
                        fprintf(stderr, "npuctl %s: socket '%s': %s\n", cmd, npuctl_esc(hs), strerror(errno));
                        return NPUCTL_ERROR;
                }
                hs = abs;
        }
        json_t *devs = json_array();
        for (int i = 0; i < n; i++) {
                char name[16], env[64];
                snprintf(name, sizeof(name), "%d", i);
                snprintf(env, sizeof(env), "NPU_VISIBLE_DEVICE_%d=%d", i, i);
                json_array_append_new(devs, json_pack("{s:s, s:{s:[s]}}", "name", name, "containerEdits",
                                                      "env", env));
        }
        /* "all": no device restriction of its own (the tenant's devices still apply), also
         * when given beside single devices */
        json_array_append_new(devs, json_pack("{s:s, s:{s:[s]}}", "name", "all", "containerEdits",
                                              "env", "NPU_VISIBLE_DEVICE_ALL=1"));
        json_t *spec = json_pack("{s:s, s:s, s:o, s:{s:[s], s:[{s:s, s:s, s:[s, s]}]}}",
                                 "cdiVersion", CDI_VERSION, "kind", CDI_KIND, "devices", devs,
                                 "containerEdits", "env", "NPU_SOCKET=" CDI_CONTAINER_SOCKET, "mounts",
                                 "hostPath", hs, "containerPath", CDI_CONTAINER_SOCKET, "options",
                                 "bind", "rw");
        free(abs);
        char *text = spec ? json_dumps(spec, JSON_INDENT(2)) : NULL;
        json_decref(spec);
        if (!text) {
                fprintf(stderr, "npuctl %s: out of memory\n", cmd);
                return NPUCTL_ERROR;
        }
        FILE *f = strcmp(out, "-") == 0 ? stdout : fopen(out, "w");
        int ok = f && fprintf(f, "%s\n", text) >= 0;
        if (f && f != stdout)
                ok = fclose(f) == 0 && ok;
        free(text);
        if (!ok) {
                fprintf(stderr, "npuctl %s: cannot write %s: %s\n", cmd, npuctl_esc(out), strerror(errno));
                return NPUCTL_ERROR;
        }
        if (f != stdout)
                fprintf(stderr, "npuctl: wrote %s (%d device(s) and \"all\"; a container may be given "
                        "several)\n", npuctl_esc(out), n);
        return NPUCTL_OK;
}

static int cdi_tenants(struct npuctl *c, int argc, char **argv)
{
        const char *cmd = "cdi tenants";
        json_t *uids = NULL, *gids = NULL;
        int bad = 0, code, n;

        for (int i = 1; i < argc && !bad; i++) {
                const char *v;
                if ((v = opt_value(cmd, argc, argv, &i, "--uid", &bad)))
                        bad = !(uids = parse_id_list(cmd, "uid", v, UINT32_MAX - 1));
                else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--gid", &bad)))
                        bad = !(gids = parse_id_list(cmd, "gid", v, UINT32_MAX - 1));
                else if (!bad) {
                        fprintf(stderr, "npuctl %s: unexpected argument '%s'\n", cmd, npuctl_esc(argv[i]));
                        bad = 1;
                }
        }
        if (bad) {
                json_decref(uids);
                json_decref(gids);
                return NPUCTL_USAGE;
        }
        if ((n = device_count(c, &code)) < 0) {
                json_decref(uids);
                json_decref(gids);
                return code;
        }
        /* Who may join: by default whoever may connect at all, the socket's group. */
        if (!uids && !gids) {
                struct stat st;
                const char *hs = host_socket(c, NULL);
                if (stat(hs, &st) < 0) {
                        fprintf(stderr, "npuctl %s: socket '%s': %s (name --uid or --gid)\n", cmd,
                                npuctl_esc(hs), strerror(errno));
                        return NPUCTL_ERROR;
                }
                gids = json_pack("[i]", (int)st.st_gid);
        }
        json_t *list = json_array();
        for (int i = 0; i < n; i++) {
                char name[32];
                snprintf(name, sizeof(name), "npu-dev%d", i);
                json_t *t = json_pack("{s:s, s:[i]}", "name", name, "devices", i);
                if (uids)
                        json_object_set(t, "uids", uids);
                if (gids)
                        json_object_set(t, "gids", gids);
                json_array_append_new(list, t);
        }
        json_decref(uids);
        json_decref(gids);
        json_t *frag = json_pack("{s:o}", "tenants", list);
        npuctl_print_json(frag);
        json_decref(frag);
        return NPUCTL_OK;
}

int npuctl_cmd_cdi(struct npuctl *c, int argc, char **argv)
{
        if (argc >= 2 && strcmp(argv[1], "generate") == 0)
                return cdi_generate(c, argc - 1, argv + 1);
        if (argc >= 2 && strcmp(argv[1], "tenants") == 0)
                return cdi_tenants(c, argc - 1, argv + 1);
        fprintf(stderr, "npuctl cdi: expected 'generate [-o FILE]' or 'tenants [--uid U] [--gid G]'\n");
        return NPUCTL_USAGE;
}

int npuctl_cmd_slurm(struct npuctl *c, int argc, char **argv)
{
        const char *cmd = "slurm gres", *name = "gpu", *type = "npu";
        int bad = 0, code, n;

        if (argc < 2 || strcmp(argv[1], "gres")) {
                fprintf(stderr, "npuctl slurm: expected 'gres [--name NAME] [--type TYPE]'\n");
                return NPUCTL_USAGE;
        }
        for (int i = 2; i < argc && !bad; i++) {
                const char *v;
                if ((v = opt_value(cmd, argc, argv, &i, "--name", &bad)))
                        name = v;
                else if (!bad && (v = opt_value(cmd, argc, argv, &i, "--type", &bad)))
                        type = v;
                else if (!bad) {
                        fprintf(stderr, "npuctl %s: unexpected argument '%s'\n", cmd, npuctl_esc(argv[i]));
                        bad = 1;
                }
        }
        for (const char *p = name; !bad && *p; p++)
                bad = !((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_');
        for (const char *p = type; !bad && *p; p++)
                bad = !((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                        *p == '_' || *p == '-');
        if (bad) {
                fprintf(stderr, "npuctl %s: a GRES name is [a-z0-9_], a type [A-Za-z0-9_-]\n", cmd);
                return NPUCTL_USAGE;
        }
        if ((n = device_count(c, &code)) < 0)
                return code;
        /* Name=gpu makes slurmd export the job's devices to the prolog as SLURM_JOB_GPUS
         * (contrib/slurm/npud-prolog reads it) and to the job as CUDA_VISIBLE_DEVICES. */
        printf("# npud: %d NPU(s), from npuctl slurm gres\nAutoDetect=off\n", n);
        for (int i = 0; i < n; i++)
                printf("Name=%s Type=%s File=/dev/davinci%d\n", name, type, i);
        return NPUCTL_OK;
}
