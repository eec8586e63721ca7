import socket
import subprocess
import time

import pytest

PORT = 7071


@pytest.fixture()
def server():
    process = subprocess.Popen(["python3", "/app/server.py", str(PORT)])
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", PORT), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    yield process
    process.kill()
    process.wait()


def ask(lines):
    with socket.create_connection(("127.0.0.1", PORT), timeout=5) as connection:
        connection.sendall("".join(line + "\n" for line in lines).encode())
        reader = connection.makefile("r")
        return [reader.readline().rstrip("\n") for _ in lines]


def test_one_line(server):
    assert ask(["hello"]) == ["HELLO"]


def test_several_lines(server):
    assert ask(["a b", "MiXeD", "123"]) == ["A B", "MIXED", "123"]
