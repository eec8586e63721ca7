#!/bin/sh
# The environment's entrypoint: the quote service on loopback, under its own name.
echo "127.0.0.1 quotes.internal" >> /etc/hosts
python3 /usr/local/lib/quotes.py 127.0.0.1 7080 &
exec "$@"
