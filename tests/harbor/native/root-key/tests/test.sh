#!/bin/bash
# Run as root: a user of the tests' own checks the answer through the setuid helper.
reward=0
if [ "$(id -u)" = 0 ] && useradd --create-home checker \
    && cp /app/answer.txt /home/checker/answer.txt && chown checker: /home/checker/answer.txt \
    && su checker -c '/usr/local/bin/check-answer "$(cat ~/answer.txt)"'; then
  reward=1
fi
echo "$reward" > /logs/verifier/reward.txt
