#!/bin/bash
# Two keys: accuracy (the answer) and style (the notes: 1 for two lines or more, 0.5 for one).
accuracy=0
style=0
if [ "$(tr -d '[:space:]' < /app/answer.txt 2>/dev/null)" = 42 ]; then accuracy=1; fi
lines=$(grep -c . /app/notes.md 2>/dev/null || true)
if [ "${lines:-0}" -ge 2 ]; then style=1; elif [ "${lines:-0}" -eq 1 ]; then style=0.5; fi
mkdir -p /logs/verifier
echo "{\"accuracy\": $accuracy, \"style\": $style}" > /logs/verifier/reward.json
