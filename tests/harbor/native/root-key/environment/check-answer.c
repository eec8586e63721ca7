/* The answer check: setuid root, the one way to the key, which only root may read. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (geteuid() != 0) {
        fprintf(stderr, "check-answer: must run as root (setuid), not euid %d\n", (int)geteuid());
        return 2;
    }
    FILE *key = fopen("/var/lib/grader/key", "r");
    long expected;
    if (key == NULL || fscanf(key, "%ld", &expected) != 1) {
        perror("check-answer: /var/lib/grader/key");
        return 2;
    }
    if (argc != 2 || atol(argv[1]) != expected) {
        printf("check-answer: wrong\n");
        return 1;
    }
    printf("check-answer: right\n");
    return 0;
}
