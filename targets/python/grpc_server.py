"""The Python reference service over gRPC: loadlab.reference.v1.Reference on grpcio's asyncio
server, with grpcio's own server reflection (grpc.reflection.v1alpha).

Each method does the work of the HTTP endpoint it is named after (docs/service.md): Delay
awaits without holding the event loop, Block sleeps on it, Heavy and Calc spend CPU on it.
The .proto file is compiled at start with grpcio-tools' protoc, so nothing generated is kept
in the repository.

    python grpc_server.py --proto PATH/TO/reference.proto --port 50051
"""

import argparse
import asyncio
import importlib
import math
import os
import sys
import tempfile
import time

import grpc
from grpc_reflection.v1alpha import reflection
from grpc_tools import protoc

SERVICE = "loadlab.reference.v1.Reference"
MAX_WAIT_MS = 600_000
MAX_CALC_N = 2_000_000_000


def compiled(proto):
    """Compiles `proto` into a temporary directory and imports its messages and stubs; the
    directory is removed once they are imported (a process started again compiles again)."""
    include = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(proto))))
    name = os.path.relpath(proto, include)
    with tempfile.TemporaryDirectory(prefix="loadlab-grpc-py-") as out:
        code = protoc.main(
            ["protoc", f"-I{include}", f"--python_out={out}", f"--grpc_python_out={out}", name]
        )
        if code != 0:
            sys.exit(f"error: protoc could not compile {proto}")
        sys.path.insert(0, out)
        module = name[: -len(".proto")].replace("/", ".")
        pb = importlib.import_module(module + "_pb2")
        stubs = importlib.import_module(module + "_pb2_grpc")
        sys.path.remove(out)
    return pb, stubs


def servicer(pb, stubs, started):
    """The methods, as a servicer of the generated base class."""

    async def wait_ms(ms, context):
        if ms > MAX_WAIT_MS:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"ms must be at most {MAX_WAIT_MS}")
        return ms / 1000

    class Reference(stubs.ReferenceServicer):
        async def Ping(self, request, context):
            return pb.PingReply(message="pong")

        async def Delay(self, request, context):
            await asyncio.sleep(await wait_ms(request.ms, context))
            return pb.DelayReply(ms=request.ms)

        async def Block(self, request, context):
            time.sleep(await wait_ms(request.ms, context))
            return pb.DelayReply(ms=request.ms)

        async def Heavy(self, request, context):
            end = time.thread_time() + await wait_ms(request.ms, context)
            while time.thread_time() < end:
                pass
            return pb.DelayReply(ms=request.ms)

        async def Calc(self, request, context):
            if request.n > MAX_CALC_N or getattr(request, "from") > MAX_CALC_N:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"n and from must be at most {MAX_CALC_N}")
            start = getattr(request, "from")
            total = 0.0
            for i in range(start, start + request.n):
                total += math.sin(i)
            return pb.CalcReply(sum=total)

        async def Stall(self, request, context):
            every = request.every_ms or 2000
            freeze = request.for_ms or 1000
            if freeze > every:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "for_ms must not exceed every_ms")
            phase = int((time.monotonic() - started) * 1000) % every
            if phase >= every - freeze:
                await asyncio.sleep((every - phase) / 1000)
            return pb.DelayReply(ms=0)

        async def Ticks(self, request, context):
            for index in range(request.count):
                if index > 0:
                    await asyncio.sleep(request.interval_ms / 1000)
                yield pb.Tick(index=index)

    return Reference()


async def serve(proto, host, port):
    pb, stubs = compiled(proto)
    server = grpc.aio.server()
    stubs.add_ReferenceServicer_to_server(servicer(pb, stubs, time.monotonic()), server)
    reflection.enable_server_reflection([SERVICE, reflection.SERVICE_NAME], server)
    bound = server.add_insecure_port(f"{host}:{port}")
    await server.start()
    print(f"listening on {host}:{bound}", flush=True)
    await server.wait_for_termination()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proto", required=True, help="the reference service's .proto file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=50051)
    a = parser.parse_args()
    asyncio.run(serve(os.path.abspath(a.proto), a.host, a.port))


if __name__ == "__main__":
    main()
