"""The agent's client, against the environment's service."""

import sys

sys.path.insert(0, "/app")
import client  # noqa: E402

assert client.quote(1) == "SIMPLE IS BETTER THAN COMPLEX", client.quote(1)
assert client.quote(2) == "ERRORS SHOULD NEVER PASS SILENTLY", client.quote(2)
print("the client works")
