"""The HTTP port's first-bytes switch (broker/oneport.py): HTTP to aiohttp, DAP to the front door."""

from __future__ import annotations

import asyncio

import aiohttp
from aiohttp import web

from raysleuth.broker.oneport import serve_one_port


async def _serve():
    app = web.Application()
    app.router.add_get("/v1/ping", lambda _: web.json_response({"pong": True}))
    runner = web.AppRunner(app)
    await runner.setup()
    dap_heads = []

    async def dap_handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        dap_heads.append(head)
        writer.write(b"DAP-ECHO " + head)
        await writer.drain()
        writer.close()

    server = await serve_one_port(runner.server, dap_handler, "127.0.0.1", 0)
    return runner, server, server.sockets[0].getsockname()[1], dap_heads


async def test_http_requests_reach_the_http_server():
    runner, server, port, dap_heads = await _serve()
    try:
        async with aiohttp.ClientSession() as http:
            for _ in range(2):  # keep-alive: the second request rides the handed-over connection
                async with http.get(f"http://127.0.0.1:{port}/v1/ping") as res:
                    assert (await res.json()) == {"pong": True}
        assert dap_heads == []
    finally:
        server.close()
        await runner.cleanup()


async def test_a_dap_header_split_over_packets_reaches_the_dap_handler():
    runner, server, port, dap_heads = await _serve()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"Cont")  # fewer bytes than the header: the switch waits
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(b"ent-Length: 2\r\n\r\n{}")
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
        assert answer == b"DAP-ECHO Content-Length: 2\r\n\r\n"
        assert dap_heads == [b"Content-Length: 2\r\n\r\n"]
        writer.close()
    finally:
        server.close()
        await runner.cleanup()


async def test_a_connection_closed_before_any_byte_is_harmless():
    runner, server, port, dap_heads = await _serve()
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        await writer.wait_closed()
        async with aiohttp.ClientSession() as http:  # the server still answers
            async with http.get(f"http://127.0.0.1:{port}/v1/ping") as res:
                assert res.status == 200
        assert dap_heads == []
    finally:
        server.close()
        await runner.cleanup()
