/* A context's life across fork() and npud restarts: detection of a context used in a forked
 * child (which would write into the parent's session and steal its replies), and
 * npu_reconnect, which gives a context a new session after npud went away. */
#include "client/libnpu-internal.h"

unsigned npu_fork_gen;

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void atfork_child(void)
{
        __atomic_add_fetch(&npu_fork_gen, 1, __ATOMIC_RELAXED);
}

static void atfork_install(void)
{
        pthread_atfork(NULL, NULL, atfork_child);
}

void npu_fork_init(npu_context_t *ctx)
{
        pthread_once(&atfork_once, atfork_install);
        ctx->pid = getpid();
        ctx->fork_gen = __atomic_load_n(&npu_fork_gen, __ATOMIC_RELAXED);
}

int npu_forked_fail(npu_context_t *ctx, const char *what)
{
        fail(NPU_ERR_CONNECTION, "%s: this context was connected by process %d and this is process "
             "%d (a child of fork): a context is not inherited; in the child, npu_disconnect it "
             "and npu_connect again (or npu_reconnect it)", what, (int)ctx->pid, (int)getpid());
        return 1;
}

NPU_EXPORT npu_status_t npu_reconnect(npu_context_t *ctx)
{
        npu_connect_options_t o;
        npu_context_t *fresh;
        npu_status_t st;

        if (!ctx)
                return fail(NPU_ERR_INVALID, "npu_reconnect: NULL context");
        o = (npu_connect_options_t){ .size = sizeof(o), .socket = ctx->conn_socket,
                                     .tenant = ctx->conn_tenant,
                                     .backpressure = ctx->conn_backpressure,
                                     .wait_spin_us = ctx->conn_wait_spin_us };
        /* The old session stays as it is until the new one exists: a failed reconnect leaves
         * the context as it was (broken, to be retried or disconnected). */
        st = npu_connect_with(&o, &fresh);
        if (st != NPU_OK)
                return st;
        /* Drop the old session's state (socket, mappings of its host regions, graph
         * descriptions, operator ids) and move the new one into the caller's context, so
         * that the pointer the program holds stays valid. The locks are the fresh context's,
         * unused and unlocked, made anew in place rather than copied. */
        npu_context_release(ctx);
        memcpy(ctx, fresh, sizeof(*ctx));
        pthread_mutex_init(&ctx->mu, NULL);
        pthread_cond_init(&ctx->cv, NULL);
        pthread_mutex_init(&ctx->stage_mu, NULL);
        pthread_mutex_destroy(&fresh->mu);
        pthread_cond_destroy(&fresh->cv);
        pthread_mutex_destroy(&fresh->stage_mu);
        free(fresh);
        return NPU_OK;
}
