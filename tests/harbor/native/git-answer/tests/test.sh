#!/bin/bash
git config --global --add safe.directory '*'
expected=$(cat /var/lib/grader/expected)
subject=$(git -C /app/repo log -1 --format=%s)
answer=$(git -C /app/repo show HEAD:answer.txt 2>/dev/null | tr -d '[:space:]')
echo "subject: $subject; answer: $answer"
if [ -n "$expected" ] && [ "$subject" = "answer" ] && [ "$answer" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
