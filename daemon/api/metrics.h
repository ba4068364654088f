/* Prometheus metrics: an evhttp server on the daemon's event loop answering GET /metrics in
 * the text exposition format (0.0.4). Device, engine, session and queue figures are read from
 * daemon state at scrape time; task counts and latencies are aggregated here as the
 * scheduler reports completions, keyed by tenant, device and tenant class only (never by
 * session or pid) so the number of series stays bounded. */
#ifndef NPUD_METRICS_H
#define NPUD_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct evbuffer;
struct npud;

/* Distinct tenant names counted separately; later ones are counted as tenant "other". */
#define METRICS_MAX_TENANTS 256

/* Parse a listen address: "HOST:PORT" (IPv4 literal), "[IPV6]:PORT", or an absolute Unix
 * socket path. 0 with *ret_addr and *ret_len filled, or -EINVAL with a message in err. */
int metrics_parse_listen(const char *text, struct sockaddr_storage *ret_addr,
                         socklen_t *ret_len, char *err, size_t errlen);

/* Start serving on d->config.metrics_listen (nothing to do when it is empty) and hang the
 * state off d->metrics. 0 or -errno with a message in err. */
int metrics_start(struct npud *d, char *err, size_t errlen);
/* Close the listener and every scrape connection, remove a Unix socket file, free the state.
 * Safe when metrics were never started. */
void metrics_stop(struct npud *d);

/* Append the exposition text (what GET /metrics answers) to out: 0, -EINVAL while metrics
 * are off, or -ENOMEM. */
int metrics_render(struct npud *d, struct evbuffer *out);

/* One task finished on an engine (outcome: EXEC_TASK_COMPLETED, _FAILED or _CANCELLED behind
 * a failure; called by the scheduler on the loop thread). No-op while
 * metrics are off. */
void metrics_task_done(struct npud *d, const char *tenant, const char *tenant_class, int device,
                       int outcome, uint64_t latency_ns);

#endif
