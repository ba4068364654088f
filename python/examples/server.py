#!/usr/bin/python3
"""An inference server over one model: an asyncio request loop on npud (docs/python.md).

Protocol: one JSON object per line, {"X": [[...], ...]} (an input name -> nested lists), answered
with one line {"Y": [[...]]} (the outputs) or {"error": "...", "status": N}. Requests run
concurrently: each awaits graph.run_async, which the event loop completes through the context's
completion fd; no thread blocks on npud.

    python3 server.py MODEL.onnx [--port 8707] [--socket /run/npud/npud.sock]
"""
import argparse
import asyncio
import json

import numpy as np

import npu


class ModelServer:
    def __init__(self, ctx, model, device=0):
        self.graph = ctx.load(model, device=device)
        self.dtypes = {name: dtype for name, dtype, _ in self.graph.inputs}

    async def infer(self, request):
        inputs = {name: np.asarray(value, dtype=self.dtypes.get(name)) for name, value in request.items()}
        outputs = await self.graph.run_async(inputs)
        return {name: array.tolist() for name, array in outputs.items()}

    async def handle(self, reader, writer):
        try:
            while line := await reader.readline():
                try:
                    answer = await self.infer(json.loads(line))
                except npu.Error as e:  # the model refused the request: tell the client, go on
                    answer = {"error": str(e), "status": e.status}
                except (ValueError, TypeError, KeyError) as e:
                    answer = {"error": "bad request: %s" % e}
                writer.write(json.dumps(answer).encode() + b"\n")
                await writer.drain()
        finally:
            writer.close()


async def serve(model, port=8707, socket=None, ready=None):
    with npu.connect(socket) as ctx:
        server = ModelServer(ctx, model)
        tcp = await asyncio.start_server(server.handle, "127.0.0.1", port)
        if ready:
            ready.set_result(tcp.sockets[0].getsockname()[1])
        async with tcp:
            await tcp.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--port", type=int, default=8707)
    ap.add_argument("--socket")
    a = ap.parse_args()
    asyncio.run(serve(a.model, a.port, a.socket))
