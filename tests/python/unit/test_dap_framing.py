import asyncio

import pytest

from raysleuth.dap.framing import FramingError, encode, read_message


def feed(data: bytes) -> asyncio.StreamReader:
    r = asyncio.StreamReader()
    r.feed_data(data)
    r.feed_eof()
    return r


async def test_round_trip_of_two_messages():
    r = feed(encode({"seq": 1, "type": "request", "command": "initialize"}) + encode({"seq": 2}))
    assert (await read_message(r))["command"] == "initialize"
    assert (await read_message(r))["seq"] == 2
    assert await read_message(r) is None


@pytest.mark.parametrize(
    "data",
    [
        b"Content-Length: x\r\n\r\n{}",
        b"Content-Length: 2\r\n\r\n[]",
        b"Content-Length: 3\r\n\r\n{{{",
        b"Content-Length: -1\r\n\r\n",
    ],
)
async def test_garbage_is_a_framing_error(data):
    with pytest.raises(FramingError):
        await read_message(feed(data))
