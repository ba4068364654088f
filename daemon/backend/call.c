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

void exec_call_unpack(const struct exec_call *src, struct ops_call *dst, uint8_t *base,
                      uint64_t mem_addr)
{
        dst->nin = src->nin;
        dst->nout = src->nout;
        dst->nattr = src->nattr;
        dst->opset = src->opset;
        dst->graph_run = NULL;
        dst->graph_ctx = NULL;
        memcpy(dst->in, exec_call_in(src), sizeof(dst->in[0]) * (size_t)src->nin);
        memcpy(dst->out, exec_call_out(src), sizeof(dst->out[0]) * (size_t)src->nout);
        for (int i = 0; i < src->nin; i++)
                if (dst->in[i].data) /* an omitted optional input has none */
                        dst->in[i].data = base + (exec_tensor_addr(&dst->in[i]) - mem_addr);
        for (int i = 0; i < src->nout; i++)
                if (dst->out[i].data)
                        dst->out[i].data = base + (exec_tensor_addr(&dst->out[i]) - mem_addr);
        memcpy(dst->attr, exec_call_attr(src), sizeof(dst->attr[0]) * (size_t)src->nattr);
}
