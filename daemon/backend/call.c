/* Packing operator calls for the queue and unpacking them for the kernel (see backend.h). */
#include <string.h>

#include "backend.h"

void exec_call_pack(struct exec_call *dst, const struct ops_call *src)
{
        dst->nin = (uint8_t)src->nin;
        dst->nout = (uint8_t)src->nout;
        dst->nattr = (uint8_t)src->nattr;
        dst->opset = src->opset;
        memcpy(exec_call_in(dst), src->in, sizeof(src->in[0]) * (size_t)src->nin);
        memcpy(exec_call_out(dst), src->out, sizeof(src->out[0]) * (size_t)src->nout);
        memcpy(exec_call_attr(dst), src->attr, sizeof(src->attr[0]) * (size_t)src->nattr);
}

void exec_call_unpack(const struct exec_call *src, struct ops_call *dst)
{
        dst->nin = src->nin;
        dst->nout = src->nout;
        dst->nattr = src->nattr;
        dst->opset = src->opset;
        dst->graph_run = NULL;
        dst->graph_ctx = NULL;
        memcpy(dst->in, exec_call_in(src), sizeof(dst->in[0]) * (size_t)src->nin);
        memcpy(dst->out, exec_call_out(src), sizeof(dst->out[0]) * (size_t)src->nout);
        memcpy(dst->attr, exec_call_attr(src), sizeof(dst->attr[0]) * (size_t)src->nattr);
}
