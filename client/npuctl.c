/* npuctl: the administration CLI of npud (the npu-smi of this host). Talks to npud only
 * through libnpu: the typed calls of npu-admin.h for actions (session kill, drain, reset,
 * faults), npu_admin_call for the listings, whose --json form is the daemon's own answer.
 * This file holds the command table, the global options (accepted before or after the
 * command), the --watch loop, and helpers the command groups share. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "npuctl.h"

volatile int npuctl_stop;

enum { CMD_WATCH = 1 }; /* read-only: may be repeated with --watch */

static const struct {
        const char *name;
        int (*fn)(struct npuctl *c, int argc, char **argv);
        unsigned flags;
        const char *synopsis, *help;
} cmds[] = {
        { "devices", npuctl_cmd_devices, CMD_WATCH, "devices [--history [SECONDS]]",
          "device table: health, memory, AI core use, sessions, temperature, power; --history: "
          "utilization, temperature and power per second over the last SECONDS (default 60, at most 300)" },
        { "device", npuctl_cmd_device, CMD_WATCH, "device show N", "one device in detail: memory, engines, faults, holders, tenants" },
        { "top", npuctl_cmd_top, 0, "top", "live view of devices, engines and tenants (q or Ctrl-C quits)" },
        { "health", npuctl_cmd_health, CMD_WATCH, "health", "device health, draining and injected faults" },
        { "sessions", npuctl_cmd_sessions, CMD_WATCH, "sessions", "client sessions (all of them for root and the admin group)" },
        { "session", npuctl_cmd_session, 0, "session kill ID", "end a client session, releasing what it holds" },
        { "mem", npuctl_cmd_mem, CMD_WATCH, "mem [DEV]", "device memory: use, fragmentation, sessions and tenants holding it" },
        { "drain", npuctl_cmd_drain, 0, "drain DEV", "place no new streams on a device" },
        { "undrain", npuctl_cmd_undrain, 0, "undrain DEV", "let a drained device take streams again" },
        { "reset", npuctl_cmd_reset, 0, "reset DEV", "cancel a device's queued work, clear faults, health ok" },
        { "fault", npuctl_cmd_fault, 0, "fault inject DEV KIND [VALUE] | fault clear DEV",
          "simulated faults: fail-next [N], fail-device, slow [FACTOR], ecc-corrected [N], ecc-uncorrected [N]" },
        { "tenants", npuctl_cmd_tenants, CMD_WATCH, "tenants", "tenants: class, weight, usage, quotas, limits" },
        { "quota", npuctl_cmd_quota, 0, "quota show [TENANT] | quota set TENANT [--device N] BYTES",
          "tenant device-memory quotas (BYTES: 512, 64K, 1.5G, 2T; 0 = unlimited)" },
        { "tenant", npuctl_cmd_tenant, 0,
          "tenant add NAME [--uid U,..] [--gid G,..] [--devices D,..] [--quota BYTES] "
          "[--quota-per-device BYTES] [--class C] [--weight W] | tenant remove NAME",
          "tenants at run time (kept by reloads, not by a restart); remove takes only those added so" },
        { "cdi", npuctl_cmd_cdi, 0, "cdi generate [-o FILE] [--host-socket PATH] | cdi tenants [--uid U,..] [--gid G,..]",
          "Container Device Interface spec (default /etc/cdi/npud.yaml; a container may be given "
          "several devices), and per-device npud.conf tenants" },
        { "slurm", npuctl_cmd_slurm, 0, "slurm gres [--name NAME] [--type TYPE]",
          "gres.conf lines for npud's devices (contrib/slurm has the prolog and epilog)" },
        { "sched", npuctl_cmd_sched, CMD_WATCH, "sched", "per device and tenant: tasks, engine time, share, queue wait" },
        { "reload", npuctl_cmd_reload, 0, "reload", "re-read the configuration file (old one stays on error)" },
        { "topo", npuctl_cmd_topo, CMD_WATCH, "topo", "how the devices connect (HCCS, PCIe switch, NUMA node), as a matrix" },
        { "diag", npuctl_cmd_diag, 0, "diag [-r 1|2|3]",
          "diagnostics as a best-effort tenant: known-answer kernels per engine kind, memory pattern "
          "and copy bandwidth per device (level 1 quick, 2 medium, 3 long)" },
        { "tune", npuctl_cmd_tune, CMD_WATCH, "tune [list [OP]] | tune clear [OP]",
          "kernel tuning cache: the GEMM variant chosen per operator and shapes on this host, with "
          "what each variant measured; clear makes the next graph load measure again" },
        { "version", npuctl_cmd_version, 0, "version", "npuctl, libnpu and npud versions" },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static void usage(FILE *f)
{
        fprintf(f, "Usage: npuctl [OPTIONS] COMMAND [ARGS] [OPTIONS]\n"
                   "Administer npud, the NPU runtime service.\n\nCommands:\n");
        for (size_t i = 0; i < NCMDS; i++)
                fprintf(f, "  %s\n        %s\n", cmds[i].synopsis, cmds[i].help);
        fprintf(f,
                "\nOptions:\n"
                "  --socket PATH     npud socket (default: $NPU_SOCKET, else /run/npud/npud.sock\n"
                "                    when it exists, else the per-user socket)\n"
                "  --json            the daemon's JSON answer\n"
                "  --csv             CSV with a header line (listings)\n"
                "  --fields A,B,C    columns of a listing, in this order (table and CSV)\n"
                "  --watch SECONDS, -l SECONDS, --loop SECONDS\n"
                "                    repeat the command every SECONDS, clearing the screen\n"
                "                    (top: refresh period, default 1); with --csv a log: one\n"
                "                    header, a timestamp column; reconnects when npud restarts\n"
                "  --count N         stop --watch and top after N refreshes\n"
                "  --version         npuctl's version (npuctl version asks npud too)\n"
                "  --help            this help\n\n"
                "Exit codes: 0 ok, 1 request failed, 2 usage, 3 npud unreachable, 4 permission denied.\n");
}

int npuctl_connect(struct npuctl *c)
{
        npu_status_t st;

        if (c->ctx)
                return 0;
        st = npu_connect(c->socket, &c->ctx);
        if (st == NPU_OK)
                return 0;
        if (!c->quiet_connect)
                fprintf(stderr, "npuctl: %s\n", npuctl_esc(npu_error_message()));
        return st == NPU_ERR_PERMISSION ? NPUCTL_PERMISSION : NPUCTL_CONNECT;
}

int npuctl_failed(const char *method, npu_status_t st)
{
        const char *msg = npuctl_esc(npu_error_message());
        size_t n = strlen(method);

        /* npud's messages already start with "method: " */
        if (strncmp(msg, method, n) == 0 && msg[n] == ':')
                fprintf(stderr, "npuctl: %s\n", msg);
        else
                fprintf(stderr, "npuctl: %s: %s\n", method, msg);
        return st == NPU_ERR_PERMISSION ? NPUCTL_PERMISSION
             : st == NPU_ERR_CONNECTION ? NPUCTL_CONNECT
                                         : NPUCTL_ERROR;
}

json_t *npuctl_call(struct npuctl *c, const char *method, json_t *params, int *ret_code)
{
        char *text = NULL, *ptext = NULL;
        npu_status_t st;
        json_t *v;

        if ((*ret_code = npuctl_connect(c)) != 0)
                return NULL;
        if (params && !(ptext = json_dumps(params, JSON_COMPACT))) {
                fprintf(stderr, "npuctl: out of memory\n");
                *ret_code = NPUCTL_ERROR;
                return NULL;
        }
        st = npu_admin_call(c->ctx, method, ptext, &text);
        free(ptext);
        if (st != NPU_OK) {
                *ret_code = npuctl_failed(method, st);
                return NULL;
        }
        v = json_loads(text, 0, NULL);
        free(text);
        if (!v) {
                fprintf(stderr, "npuctl: %s: unreadable answer\n", npuctl_esc(method));
                *ret_code = NPUCTL_ERROR;
        }
        return v;
}

void npuctl_print_json(json_t *v)
{
        char *s = npuctl_json_text(v, 1);
        if (s)
                printf("%s\n", s);
        free(s);
}

void npuctl_format_bytes(double bytes, char *buf, size_t len)
{
        static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
        int u = 0;

        while (bytes >= 1024 && u < 5) {
                bytes /= 1024;
                u++;
        }
        snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
}

int npuctl_nargs(const char *cmd, int argc, char **argv, int min, int max)
{
        for (int i = 1; i < argc; i++)
                if (argv[i][0] == '-' && argv[i][1] && !(argv[i][1] >= '0' && argv[i][1] <= '9')) {
                        fprintf(stderr, "npuctl %s: unknown option '%s'\n", cmd, npuctl_esc(argv[i]));
                        return -1;
                }
        if (argc - 1 < min) {
                fprintf(stderr, "npuctl %s: missing argument (see npuctl --help)\n", cmd);
                return -1;
        }
        if (argc - 1 > max) {
                fprintf(stderr, "npuctl %s: unexpected argument '%s'\n", cmd, npuctl_esc(argv[max + 1]));
                return -1;
        }
        return 0;
}

int npuctl_parse_u64(const char *cmd, const char *what, const char *arg, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(arg, &end, 10);
        if (errno || end == arg || *end || arg[0] == '-' || v > INT64_MAX) {
                fprintf(stderr, "npuctl %s: %s '%s' is not a non-negative integer\n", cmd, what,
                        npuctl_esc(arg));
                return -1;
        }
        *ret = v;
        return 0;
}

int npuctl_parse_device(const char *cmd, const char *arg, int *ret)
{
        uint64_t v;

        if (npuctl_parse_u64(cmd, "device", arg, &v) < 0)
                return -1;
        if (v > INT32_MAX) {
                fprintf(stderr, "npuctl %s: device '%s' is out of range\n", cmd, npuctl_esc(arg));
                return -1;
        }
        *ret = (int)v;
        return 0;
}

int npuctl_parse_bytes(const char *cmd, const char *arg, uint64_t *ret)
{
        static const char *const suffixes = "KMGTP";
        unsigned long long whole;
        double frac = 0;
        uint64_t mult = 1;
        const char *p = arg;
        char *end;

        if (strcasecmp(arg, "unlimited") == 0 || strcasecmp(arg, "none") == 0) {
                *ret = 0;
                return 0;
        }
        errno = 0;
        whole = strtoull(p, &end, 10);
        if (errno || end == p || *p == '-' || *p == '+')
                goto bad;
        p = end;
        if (*p == '.') {
                /* strtod on the fraction alone keeps the whole part exact */
                char buf[32];
                size_t n = strspn(p + 1, "0123456789");
                if (n == 0 || n > 20)
                        goto bad;
                snprintf(buf, sizeof(buf), "0.%.*s", (int)n, p + 1);
                frac = strtod(buf, NULL);
                p += 1 + n;
        }
        if (*p) {
                const char *s = strchr(suffixes, *p >= 'a' && *p <= 'z' ? *p - 32 : *p);
                if (*p == 'b' || *p == 'B') {
                        p++; /* plain bytes: "512B" */
                } else if (s) {
                        mult = 1ull << (10 * (s - suffixes + 1));
                        p++;
                        /* K, KB, Ki and KiB all mean 1024: memory is sized in binary units */
                        if (*p == 'i' || *p == 'I')
                                p++;
                        if (*p == 'b' || *p == 'B')
                                p++;
                } else {
                        goto bad;
                }
                if (*p)
                        goto bad;
        }
        if (whole > INT64_MAX / mult || ((double)whole + frac) * (double)mult > (double)INT64_MAX)
                goto bad;
        *ret = (uint64_t)whole * mult + (uint64_t)(frac * (double)mult + 0.5);
        return 0;
bad:
        fprintf(stderr,
                "npuctl %s: '%s' is not a size (bytes, or a number with K, M, G, T or P: 64K, 1.5G)\n",
                cmd, npuctl_esc(arg));
        return -1;
}

/* ---- --watch and top: waiting for the next refresh ---- */

static struct termios saved_tio;
static int tio_saved;

static void restore_tty(void)
{
        if (tio_saved)
                tcsetattr(STDIN_FILENO, TCSANOW, &saved_tio);
        tio_saved = 0;
}

static void on_signal(int sig)
{
        npuctl_stop = sig;
}

static void catch_signals(void)
{
        static int done;
        struct sigaction sa;

        if (done)
                return;
        done = 1;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        /* no SA_RESTART: a signal must cut poll() short so the loop ends at once */
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
                struct termios raw = saved_tio;
                /* single keys without Enter, no echo; ISIG stays so Ctrl-C still signals */
                raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
                raw.c_cc[VMIN] = 0;
                raw.c_cc[VTIME] = 0;
                if (tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0) {
                        tio_saved = 1;
                        atexit(restore_tty);
                }
        }
}

static double mono_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int npuctl_wait(double seconds)
{
        double deadline = mono_now() + seconds;

        catch_signals();
        while (!npuctl_stop) {
                double left = deadline - mono_now();
                if (left <= 0)
                        return 0;
                /* keys are read only from a terminal: a pipe or /dev/null on stdin would
                 * report end of file at once and turn the wait into a busy loop */
                struct pollfd p = { .fd = STDIN_FILENO, .events = POLLIN };
                int n = poll(&p, tio_saved ? 1 : 0, (int)(left * 1000) + 1);
                if (n > 0 && (p.revents & POLLIN)) {
                        char ch;
                        if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                                return 1;
                }
        }
        return 1;
}

void npuctl_clear(const struct npuctl *c)
{
        if (c->tty)
                fputs("\033[H\033[2J", stdout);
}

/* ---- global options ---- */

static int set_option(struct npuctl *c, const char *name, const char *val)
{
        char *end;

        if (strcmp(name, "socket") == 0) {
                c->socket = val;
        } else if (strcmp(name, "fields") == 0) {
                if (!*val) {
                        fprintf(stderr, "npuctl: --fields needs a list of fields (a,b,c)\n");
                        return -1;
                }
                c->fields = val;
        } else if (strcmp(name, "watch") == 0) {
                errno = 0;
                c->watch = strtod(val, &end);
                if (errno || end == val || *end || !(c->watch >= 0.05 && c->watch <= 86400)) {
                        fprintf(stderr, "npuctl: --watch '%s' is not a number of seconds from 0.05 to 86400\n",
                                npuctl_esc(val));
                        return -1;
                }
        } else if (strcmp(name, "count") == 0) {
                errno = 0;
                c->count = strtol(val, &end, 10);
                if (errno || end == val || *end || c->count < 1) {
                        fprintf(stderr, "npuctl: --count '%s' is not a positive integer\n", npuctl_esc(val));
                        return -1;
                }
        }
        return 0;
}

/* Take the global options out of the command's arguments, so that "npuctl top --count 2"
 * works as well as "npuctl --count 2 top"; what is left belongs to the command. */
static int take_globals(struct npuctl *c, int *argc, char **argv)
{
        static const char *const with_value[] = { "socket", "fields", "watch", "count" };
        int out = 1;

        for (int i = 1; i < *argc; i++) {
                const char *a = argv[i];
                int taken = 0;
                if (strcmp(a, "--") == 0) {
                        while (i + 1 < *argc)
                                argv[out++] = argv[++i];
                        break;
                }
                if ((strcmp(a, "-l") == 0 || strcmp(a, "--loop") == 0) && i + 1 < *argc) {
                        /* nvidia-smi's spelling of the watch interval */
                        if (set_option(c, "watch", argv[++i]) < 0)
                                return -1;
                        taken = 1;
                } else if (strcmp(a, "--json") == 0) {
                        c->json = 1;
                        taken = 1;
                } else if (strcmp(a, "--csv") == 0) {
                        c->csv = 1;
                        taken = 1;
                }
                for (size_t k = 0; !taken && k < sizeof(with_value) / sizeof(with_value[0]); k++) {
                        size_t n = strlen(with_value[k]);
                        if (strncmp(a, "--", 2) || strncmp(a + 2, with_value[k], n))
                                continue;
                        if (a[2 + n] == '=') {
                                if (set_option(c, with_value[k], a + 3 + n) < 0)
                                        return -1;
                                taken = 1;
                        } else if (a[2 + n] == 0) {
                                if (i + 1 >= *argc) {
                                        fprintf(stderr, "npuctl: %s needs a value\n", npuctl_esc(a));
                                        return -1;
                                }
                                if (set_option(c, with_value[k], argv[++i]) < 0)
                                        return -1;
                                taken = 1;
                        }
                }
                if (!taken)
                        argv[out++] = argv[i];
        }
        *argc = out;
        argv[out] = NULL;
        return 0;
}

int main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "csv", no_argument, NULL, 'c' },
                { "fields", required_argument, NULL, 'f' },
                { "watch", required_argument, NULL, 'w' },
                { "count", required_argument, NULL, 'n' },
                { "loop", required_argument, NULL, 'l' },
                { "version", no_argument, NULL, 'V' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        struct npuctl c = { 0 };
        int opt, r = NPUCTL_USAGE, cargc;
        char **cargv;
        size_t i;

        opterr = 0;
        while ((opt = getopt_long(argc, argv, "+hl:", opts, NULL)) != -1) {
                switch (opt) {
                case 's': c.socket = optarg; break;
                case 'j': c.json = 1; break;
                case 'c': c.csv = 1; break;
                case 'f': if (set_option(&c, "fields", optarg) < 0) return NPUCTL_USAGE; break;
                case 'w':
                case 'l': if (set_option(&c, "watch", optarg) < 0) return NPUCTL_USAGE; break;
                case 'V': printf("npuctl %s (libnpu %s)\n", NPUD_VERSION, npu_version()); return 0;
                case 'n': if (set_option(&c, "count", optarg) < 0) return NPUCTL_USAGE; break;
                case 'h': usage(stdout); return 0;
                default:
                        fprintf(stderr, "npuctl: unknown or incomplete option '%s' (see npuctl --help)\n",
                                npuctl_esc(argv[optind - 1]));
                        return NPUCTL_USAGE;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return NPUCTL_USAGE;
        }
        cargc = argc - optind;
        cargv = argv + optind;
        if (strcmp(cargv[0], "help") == 0) {
                usage(stdout);
                return 0;
        }
        for (i = 0; i < NCMDS; i++)
                if (strcmp(cargv[0], cmds[i].name) == 0)
                        break;
        if (i == NCMDS) {
                fprintf(stderr, "npuctl: unknown command '%s' (see npuctl --help)\n", npuctl_esc(cargv[0]));
                return NPUCTL_USAGE;
        }
        if (take_globals(&c, &cargc, cargv) < 0)
                return NPUCTL_USAGE;
        if (c.json && (c.csv || c.fields)) {
                fprintf(stderr, "npuctl: --json cannot be combined with --csv or --fields\n");
                return NPUCTL_USAGE;
        }
        if (c.watch > 0 && !(cmds[i].flags & CMD_WATCH) && cmds[i].fn != npuctl_cmd_top) {
                fprintf(stderr, "npuctl: --watch repeats only listings, not '%s'\n", cmds[i].name);
                return NPUCTL_USAGE;
        }
        if (c.count && c.watch <= 0 && cmds[i].fn != npuctl_cmd_top) {
                fprintf(stderr, "npuctl: --count needs --watch (or top)\n");
                return NPUCTL_USAGE;
        }
        c.tty = isatty(STDOUT_FILENO);
        if (c.watch <= 0 || cmds[i].fn == npuctl_cmd_top) {
                r = cmds[i].fn(&c, cargc, cargv);
        } else {
                /* like watch(1): the output of each run replaces the previous one */
                int lost = 0;
                for (long n = 1;; n++) {
                        if (c.csv) {
                                time_t now = time(NULL);
                                strftime(c.stamp, sizeof(c.stamp), "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
                        }
                        npuctl_clear(&c);
                        if (!c.tty && !c.csv && n > 1)
                                printf("\n");
                        if (!c.json && !c.csv) {
                                time_t now = time(NULL);
                                char when[32];
                                strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
                                printf("Every %gs: npuctl %s    %s\n\n", c.watch, cmds[i].name, when);
                        }
                        r = cmds[i].fn(&c, cargc, cargv);
                        fflush(stdout);
                        npuctl_esc_release();
                        /* npud went away after a first answer (a restart): a log must not end
                         * there. Say so once, retry every interval, say when it is back. */
                        if (r == NPUCTL_CONNECT && n > 1 - lost) {
                                if (!lost)
                                        fprintf(stderr, "npuctl: lost npud; reconnecting every %gs\n", c.watch);
                                lost = 1;
                                c.quiet_connect = 1;
                                npu_disconnect(c.ctx);
                                c.ctx = NULL;
                                if ((c.count && n >= c.count) || npuctl_wait(c.watch))
                                        break;
                                continue;
                        }
                        if (lost && r != NPUCTL_CONNECT) {
                                fprintf(stderr, "npuctl: reconnected to npud\n");
                                lost = 0;
                                c.quiet_connect = 0;
                        }
                        if (r == NPUCTL_USAGE || r == NPUCTL_CONNECT || r == NPUCTL_PERMISSION ||
                            (c.count && n >= c.count) || npuctl_wait(c.watch))
                                break;
                }
        }
        npu_disconnect(c.ctx);
        return r;
}
