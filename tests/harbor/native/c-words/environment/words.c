#include <stdio.h>

int main(void) {
    int c, words = 0, previous = ' ';
    while ((c = getchar()) != EOF) {
        if (c == ' ' && previous != ' ')
            words++;
        previous = c;
    }
    printf("%d\n", words);
    return 0;
}
