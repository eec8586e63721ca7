#!/bin/bash
cat > /app/words.c <<'C'
#include <ctype.h>
#include <stdio.h>

int main(void) {
    int c, words = 0, inside = 0;
    while ((c = getchar()) != EOF) {
        if (isspace(c))
            inside = 0;
        else if (!inside) {
            inside = 1;
            words++;
        }
    }
    printf("%d\n", words);
    return 0;
}
C
